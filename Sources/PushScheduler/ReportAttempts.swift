/// The retry state of one report: counts its failed attempts and decides how long to wait after each.
///
/// Pure and synchronous — it never reads a clock or a global generator: the caller passes the
/// wall-clock time (for `Retry-After` dates) and a random number generator (for jitter), so a
/// test can replay any sequence exactly. The rules of SPEC §5, in order:
///
/// 1. The backoff delay after failure `n` is drawn from ``BackoffPolicy``'s curve (see the table there).
/// 2. A 4xx other than 408 and 429 (``AttemptFailure/isSlowLane``) puts the report in the slow
///    lane: its nominal delay is the policy's `maximum` (still jittered, `maximum/2 … maximum`),
///    and it stays there for every later failure of this submission, so a delay never shrinks
///    because the server changed its answer.
/// 3. A 429 or 503 with `Retry-After` waits at least that long: the delay is
///    `max(backoff delay, min(Retry-After, maxRetryAfter))`.
///
/// One value covers one submission of a report; a new submission starts from a fresh value.
public struct ReportAttempts: Sendable, Hashable {
    /// The policy the delays are drawn from.
    public let policy: BackoffPolicy
    /// How many attempts have failed so far.
    public private(set) var failures: Int = 0
    /// The most recent failure, or nil before the first one.
    public private(set) var lastFailure: AttemptFailure?
    /// Whether an attempt succeeded; after that there is nothing left to schedule.
    public private(set) var isDelivered: Bool = false
    /// Whether a slow-lane failure has been seen (rule 2).
    public private(set) var isSlowLane: Bool = false

    /// A report that has not been attempted yet.
    public init(policy: BackoffPolicy = BackoffPolicy()) {
        self.policy = policy
    }

    /// A report that has failed `failures` times so far, in the slow lane or not (what the
    /// scheduler's queue keeps of each report, so that it does not hold a policy for each).
    init(policy: BackoffPolicy, failures: Int, isSlowLane: Bool) {
        self.policy = policy
        self.failures = failures
        self.isSlowLane = isSlowLane
    }

    /// The number of the next attempt, counted from 1.
    public var nextAttempt: Int { failures + 1 }

    /// Records a failed attempt and returns how long to wait before the next one.
    ///
    /// - Parameters:
    ///   - failure: what went wrong.
    ///   - nowEpochSeconds: the wall-clock time in Unix seconds, to turn a `Retry-After` date into a wait.
    ///   - generator: the source of the jitter.
    public mutating func attemptFailed(
        _ failure: AttemptFailure,
        nowEpochSeconds: Int64,
        using generator: inout some RandomNumberGenerator
    ) -> Duration {
        failures += 1
        lastFailure = failure
        if failure.isSlowLane { isSlowLane = true }
        let nominal = isSlowLane ? Swift.max(policy.maximum, .zero) : policy.nominalDelay(afterFailure: failures)
        var delay = BackoffPolicy.jittered(nominal, using: &generator)
        if failure.honoursRetryAfter, let retryAfter = failure.retryAfter {
            let requested = retryAfter.delay(nowEpochSeconds: nowEpochSeconds)
            delay = Swift.max(delay, Swift.min(requested, Swift.max(policy.maxRetryAfter, .zero)))
        }
        return delay
    }

    /// Records a successful attempt: the report is delivered and needs no further attempt.
    public mutating func attemptSucceeded() {
        isDelivered = true
    }
}
