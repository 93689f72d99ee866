/// The value of an HTTP `Retry-After` response field (RFC 9110 §10.2.3): a number of seconds or a date.
///
/// Parse the field with ``parse(_:nowEpochSeconds:)``; turn it into a wait with
/// ``delay(nowEpochSeconds:)``. Capping by `maxRetryAfter` is ``ReportAttempts``'s job.
public enum RetryAfter: Sendable, Hashable {
    /// `Retry-After: 120` — wait this many seconds from the response.
    case seconds(Int64)
    /// `Retry-After: Sun, 06 Nov 1994 08:49:37 GMT` — wait until this moment, in Unix epoch seconds.
    case date(epochSeconds: Int64)

    /// Parses a `Retry-After` field value; nil when it is neither delta-seconds nor an HTTP-date.
    ///
    /// Accepts, after trimming spaces and tabs at either end:
    /// - delta-seconds, `1*DIGIT` (a value too large for `Int64` saturates);
    /// - the three HTTP-date forms of RFC 9110 §5.6.7: IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`,
    ///   the obsolete RFC 850 form `Sunday, 06-Nov-94 08:49:37 GMT` and asctime
    ///   `Sun Nov  6 08:49:37 1994` (which is in GMT, too).
    ///
    /// Day and month names are matched without regard to case; the day name is not checked
    /// against the date. A date that does not exist (`31 Feb`, hour 24) is rejected.
    ///
    /// - Parameter nowEpochSeconds: the current time, used only for the two-digit year of the
    ///   RFC 850 form: as RFC 9110 says, a year that would be more than 50 years in the future
    ///   is taken from the previous century. Without it, `00`–`69` mean 2000–2069 and `70`–`99`
    ///   mean 1970–1999.
    public static func parse(_ headerValue: String, nowEpochSeconds: Int64? = nil) -> RetryAfter? {
        var bytes = Array(headerValue.utf8)
        while let last = bytes.last, last == ASCII.space || last == ASCII.tab { bytes.removeLast() }
        let start = bytes.firstIndex { $0 != ASCII.space && $0 != ASCII.tab } ?? bytes.endIndex
        let value = bytes[start...]
        guard !value.isEmpty else { return nil }
        if value.allSatisfy({ $0 >= ASCII.digit0 && $0 <= ASCII.digit9 }) {
            var seconds: Int64 = 0
            for digit in value {
                let (times10, overflow1) = seconds.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times10.addingReportingOverflow(Int64(digit - ASCII.digit0))
                if overflow1 || overflow2 { return .seconds(.max) }
                seconds = sum
            }
            return .seconds(seconds)
        }
        guard let epoch = HTTPDate.parse(value, nowEpochSeconds: nowEpochSeconds) else { return nil }
        return .date(epochSeconds: epoch)
    }

    /// How long to wait from `nowEpochSeconds` (Unix time): never negative, so a date in the past is zero.
    public func delay(nowEpochSeconds: Int64) -> Duration {
        switch self {
        case .seconds(let seconds):
            return .seconds(Swift.max(seconds, 0))
        case .date(let epochSeconds):
            let (difference, overflow) = epochSeconds.subtractingReportingOverflow(nowEpochSeconds)
            if overflow { return epochSeconds > nowEpochSeconds ? .seconds(Int64.max) : .zero }
            return .seconds(Swift.max(difference, 0))
        }
    }
}
