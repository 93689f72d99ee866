import Synchronization
import ServiceLifecycle

/// Beats once a second on Swift's pool, where the agent's loops run, so that `/livez` can tell
/// a pool that stopped turning (a blocking call where none may be) from a quiet agent: it says
/// 503 once no beat came for ``AgentCore/livenessLimit`` (SPEC §9.5). Real time, whatever the
/// agent's clock: a probe waits in real time.
struct Heartbeat<C: Clock>: Service where C.Duration == Duration {
    let core: AgentCore<C>

    func run() async {
        let clock = ContinuousClock()
        do {
            try await cancelWhenGracefulShutdown {
                while true {
                    core.heartbeat.withLock { $0 = clock.now }
                    try await clock.sleep(for: .seconds(1))
                }
            }
        } catch {
            // Cancelled at shutdown.
        }
    }
}
