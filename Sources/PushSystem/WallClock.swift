#if canImport(Glibc)
import Glibc
#endif

/// The wall clock, for log timestamps and `Retry-After` dates only; scheduling uses a `Clock`.
public enum WallClock {
    public struct Time: Sendable {
        public var seconds: Int64
        public var milliseconds: Int

        public init(seconds: Int64, milliseconds: Int) {
            self.seconds = seconds
            self.milliseconds = milliseconds
        }

        /// `2026-11-21T18:20:01.123Z`.
        public var iso8601: String {
            var time = time_t(seconds)
            var parts = tm()
            gmtime_r(&time, &parts)
            func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
            let millis = milliseconds < 10 ? "00\(milliseconds)" : milliseconds < 100 ? "0\(milliseconds)" : "\(milliseconds)"
            return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
                + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(millis)Z"
        }
    }

    public static func now() -> Time {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Time(seconds: Int64(spec.tv_sec), milliseconds: Int(spec.tv_nsec / 1_000_000))
    }

    /// Milliseconds since 1970, for the state's times.
    @Sendable public static func epochMilliseconds() -> Int64 {
        let time = now()
        return time.seconds * 1000 + Int64(time.milliseconds)
    }
}
