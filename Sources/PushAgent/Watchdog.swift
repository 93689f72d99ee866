import ServiceLifecycle

/// Sends `WATCHDOG=1` at half of `WATCHDOG_USEC` until graceful shutdown (SPEC §8).
///
/// It runs on the same cooperative pool as the agent's work, so a pool that stops making
/// progress stops the pings too and systemd restarts the agent.
public struct Watchdog<C: Clock>: Service where C.Duration == Duration {
    let notifier: any ServiceManagerNotifier
    let interval: Duration
    let clock: C

    /// - Parameter interval: the time between pings (half of `WATCHDOG_USEC`).
    public init(notifier: any ServiceManagerNotifier, interval: Duration, clock: C) {
        self.notifier = notifier
        self.interval = interval
        self.clock = clock
    }

    public func run() async {
        do {
            try await cancelWhenGracefulShutdown {
                while true {
                    notifier.notify("WATCHDOG=1")
                    try await clock.sleep(for: interval)
                }
            }
        } catch {
            // Cancelled at shutdown: nothing more to send.
        }
    }
}
