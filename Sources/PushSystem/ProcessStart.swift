#if canImport(Glibc)
import Glibc
#endif

/// When this process started, as Unix time in seconds (`process_start_time_seconds`): its start
/// in clock ticks after boot (`/proc/self/stat`, field 22), against the time since boot now.
/// Only the process's own `/proc` entry is read: the shipped unit's `ProcSubset=pid` hides
/// `/proc/stat` and its boot time.
package enum ProcessStart {
    package static let unixSeconds: Double? = {
        guard case .success(let stat) = FileSystem.read("/proc/self/stat", limit: 4096),
              let ticks = startTicks(selfStat: String(decoding: stat, as: UTF8.self)) else { return nil }
        var boot = timespec(), wall = timespec()
        guard clock_gettime(CLOCK_BOOTTIME, &boot) == 0, clock_gettime(CLOCK_REALTIME, &wall) == 0 else { return nil }
        let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        guard ticksPerSecond > 0 else { return nil }
        let sinceBoot = Double(boot.tv_sec) + Double(boot.tv_nsec) / 1e9
        let now = Double(wall.tv_sec) + Double(wall.tv_nsec) / 1e9
        return now - sinceBoot + ticks / ticksPerSecond
    }()

    /// Field 22 of a `/proc/PID/stat` line: when the process started, in clock ticks after boot.
    package static func startTicks(selfStat: String) -> Double? {
        // The command name (field 2) is in parentheses and may hold spaces and parentheses:
        // the fields after it start after the last ')'.
        guard let close = selfStat.lastIndex(of: ")") else { return nil }
        let fields = selfStat[selfStat.index(after: close)...].split(separator: " ")
        // Field 3 (the state) is the first after the name; field 22 is 19 further on.
        guard fields.count > 19 else { return nil }
        return Double(fields[19])
    }
}
