import Logging
import PushConfig
import PushSystem
import ServiceLifecycle
#if canImport(Glibc)
import Glibc
#endif

/// The last guarantee of SPEC §8's stop: once graceful shutdown begins (SIGTERM), the process
/// ends within `limit` whatever is stuck. Every service stops on its own long before (what is in
/// flight gets the grace period, blocking calls run off Swift's pool and are let go when
/// cancelled); this is for a stop that still does not come, such as a state database write that
/// hangs. It waits on a thread of its own, not on Swift's pool, so that nothing the agent does
/// can hold it, says why in the log, and exits 1.
///
/// Run it in the service group with `successTerminationBehavior: .ignore`: it returns at once
/// once shutdown has begun.
public struct ShutdownBackstop: Service {
    let limit: Duration
    let logger: Logger
    let whenStopping: @Sendable () -> Void
    let exit: @Sendable () -> Void

    /// - Parameters:
    ///   - limit: how long after graceful shutdown begins the process may still run.
    ///   - whenStopping: called at once when graceful shutdown begins, before any other service
    ///     is told (a group tells them one after the other, the last listed first): what must
    ///     stop starting work from that moment (``Agent/beginStopping()``).
    ///   - exit: ends the process (tests give their own).
    public init(limit: Duration, logger: Logger, whenStopping: @escaping @Sendable () -> Void = {},
                exit: @escaping @Sendable () -> Void = exitProcess) {
        self.limit = limit
        self.logger = logger
        self.whenStopping = whenStopping
        self.exit = exit
    }

    /// Ends the process with status 1, what the log still holds written first (within a second).
    public static let exitProcess: @Sendable () -> Void = {
        LogOutput.drain(within: .seconds(1))
        _exit(1)
    }

    public func run() async {
        // Returns when graceful shutdown begins, or throws when the group is cancelled first.
        do { try await gracefulShutdown() } catch { return }
        whenStopping()
        let (limit, logger, exit) = (limit, logger, exit)
        let fire: @Sendable () -> Void = {
            logger.critical("the agent did not stop within \(DurationText(limit)) of being asked to; it exits now, and what was delivered since the state was last written is sent again at the next start")
            exit()
        }
        let started = OwnThread(named: "pushrep-stop", detached: true) {
            let (seconds, attoseconds) = limit.components
            var wait = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
            var left = timespec()
            while nanosleep(&wait, &left) != 0 && errno == EINTR { wait = left }
            fire()
        }
        if started == nil {
            // No thread to be had (the system's limit): Swift's pool then, which what is stuck
            // may hold, rather than no backstop at all.
            logger.warning("no thread could be started for the shutdown's time limit; it is kept on Swift's pool")
            Task.detached {
                try? await Task.sleep(for: limit)
                fire()
            }
        }
    }
}
