/// Why one attempt to deliver a report failed: what the scheduler needs to pick the next delay.
///
/// The transport (or the backend) builds it; the scheduler reads `status` and `retryAfter` and
/// passes `reason` on, unchanged, in ``SchedulerEvent/failed(_:attempt:failure:retryIn:)`` for the log.
public struct AttemptFailure: Sendable, Hashable {
    /// The HTTP status of the response, or nil when there was none (transport error, timeout).
    public var status: Int?
    /// The response's parsed `Retry-After` field, if it had one (see ``RetryAfter/parse(_:nowEpochSeconds:)``).
    ///
    /// It is honoured only with a 429 or 503 status (SPEC §5) and ignored otherwise.
    public var retryAfter: RetryAfter?
    /// A short human sentence for logs and status, e.g. "HTTP 503" or "timed out after 20s".
    public var reason: String
    /// True when the attempt was cut short (a deadline, a shutdown) rather than answered: the
    /// scheduler reschedules it like any failure, but it says nothing about the report, so
    /// consumers neither count it nor show it as the report's last reason.
    public var isCancellation: Bool

    /// Creates a failure from its parts.
    public init(status: Int?, retryAfter: RetryAfter? = nil, reason: String, isCancellation: Bool = false) {
        self.status = status
        self.retryAfter = retryAfter
        self.reason = reason
        self.isCancellation = isCancellation
    }

    /// Set when nothing was sent at all (the agent may not send now: its leases lapsed): the
    /// report is tried again this long later, and the attempt is not counted, so its attempt
    /// numbers and backoff are those of the requests really sent. Such a failure is also a
    /// cancellation (``isCancellation``).
    public var notSentRetry: Duration?

    /// An attempt cut short before it had an answer.
    public static let cancelled = AttemptFailure(status: nil, reason: "cancelled", isCancellation: true)

    /// Nothing was sent, for `reason`: tried again `delay` later, not counted as an attempt.
    public static func notSent(retryIn delay: Duration, reason: String) -> AttemptFailure {
        var failure = AttemptFailure(status: nil, reason: reason, isCancellation: true)
        failure.notSentRetry = delay
        return failure
    }

    /// A failure by HTTP status alone, with the reason "HTTP <status>".
    public static func http(_ status: Int, retryAfter: RetryAfter? = nil) -> AttemptFailure {
        AttemptFailure(status: status, retryAfter: retryAfter, reason: "HTTP \(status)")
    }

    /// Whether this failure goes straight to the maximum delay: a 4xx other than 408 and 429.
    ///
    /// Such a status says the request itself is wrong (bad credentials, unknown account), so
    /// retrying soon is pointless; it is still retried, as the Acrobits contract asks.
    public var isSlowLane: Bool {
        guard let status else { return false }
        return (400...499).contains(status) && status != 408 && status != 429
    }

    /// Whether `retryAfter` is honoured for this failure: a 429 or 503 that carries one.
    public var honoursRetryAfter: Bool {
        retryAfter != nil && (status == 429 || status == 503)
    }
}
