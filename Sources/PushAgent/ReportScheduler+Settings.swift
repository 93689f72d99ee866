import PushBackend
import PushConfig
import PushScheduler

extension ReportScheduler {
    /// A scheduler with the backoff and concurrency caps of `settings` (SPEC §5), as the agent uses it.
    /// - Parameter wallClock: Unix time in milliseconds (the unit of the state's times), for
    ///   `Retry-After` dates.
    convenience init(settings: AgentSettings, clock: C, wallClock: @escaping @Sendable () -> Int64,
                     performBatch: @escaping @Sendable ([BatchItem<Key>]) async -> [AttemptResult],
                     launcher: Launcher? = nil,
                     onEvent: @escaping @Sendable (SchedulerEvent<Key>, ReportScheduler) -> Void) {
        self.init(policy: BackoffPolicy(settings.retry), concurrency: settings.concurrency,
                  perHostConcurrency: settings.perHostConcurrency, clock: clock, random: SystemRandomNumberGenerator(),
                  wallClock: { wallClock() / 1000 }, performBatch: performBatch, launcher: launcher, onEvent: onEvent)
    }
}
