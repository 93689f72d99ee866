import PushConfig
import PushScheduler

extension BackoffPolicy {
    /// The scheduler's policy for `agent.retry`.
    init(_ retry: RetryPolicy) {
        self.init(initial: retry.initial, multiplier: retry.multiplier, maximum: retry.max, maxRetryAfter: retry.maxRetryAfter)
    }
}
