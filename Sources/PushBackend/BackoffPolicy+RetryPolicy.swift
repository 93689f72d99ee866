import PushConfig
import PushScheduler

extension BackoffPolicy {
    /// The scheduler's policy for `agent.retry`: the agent's, and the tracking of every backend.
    public init(_ retry: RetryPolicy) {
        self.init(initial: retry.initial, multiplier: retry.multiplier, maximum: retry.max, maxRetryAfter: retry.maxRetryAfter)
    }
}
