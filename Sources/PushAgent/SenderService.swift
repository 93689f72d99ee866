import PushSystem
import PushBackend
import PushState
import Logging
import Synchronization
import PushConfig
import PushScheduler
import ServiceLifecycle

/// Sends what the book submits: runs the scheduler, and tells systemd `READY=1` once it runs
/// (SPEC §8). On graceful shutdown no new request starts (``AgentCore/beginStopping()``), the
/// requests in flight get the grace period to finish, and those still in flight then are
/// cancelled.
struct SenderService<C: Clock>: Service where C.Duration == Duration {
    let core: AgentCore<C>

    func run() async {
        core.state.withLock { $0.serving = true }
        core.notifier.notify("READY=1\nSTATUS=\(core.statusText())")
        core.changed()
        defer { core.state.withLock { $0.serving = false } }
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Bool.self) { group in
                group.addTask {
                    await core.scheduler.run()
                    return true
                }
                group.addTask {
                    await core.waitOutTheGracePeriod(saying: true)
                    return false
                }
                // The scheduler ends once what was in flight at stopping has finished; or the
                // grace period ends first, and what is still in flight is cancelled.
                _ = await group.next()
                group.cancelAll()
            }
            // The scheduler ended as stopping began (before this service's turn to stop, told
            // first by the ShutdownBackstop): it ends when the group tells it to.
            try? await gracefulShutdown()
        } onGracefulShutdown: {
            core.beginStopping()
        }
    }
}
