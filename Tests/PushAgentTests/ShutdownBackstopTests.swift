import Logging
@testable import PushAgent
import PushTestSupport
import ServiceLifecycle
import Synchronization
import Testing
import PushTestThreads

/// Once asked to stop, the process ends within its limit, whatever is stuck.
@Suite(.ownThreads) struct ShutdownBackstopTests {
    /// A service that never returns: it ignores graceful shutdown and cancellation alike.
    final class Stuck: Service, Sendable {
        let started = Mutex(false)

        func run() async {
            started.withLock { $0 = true }
            await withCheckedContinuation { (_: CheckedContinuation<Void, Never>) in }
        }
    }

    @Test func aStopThatDoesNotComeEndsTheProcessAtTheLimit() async throws {
        let exited = Mutex(false)
        let told = Mutex(false)
        let backstop = ShutdownBackstop(limit: .milliseconds(50), logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
                                        whenStopping: { told.withLock { $0 = true } }, exit: { exited.withLock { $0 = true } })
        let stuck = Stuck()
        let group = ServiceGroup(configuration: .init(services: [.init(service: stuck),
                                                                 .init(service: backstop, successTerminationBehavior: .ignore)],
                                                      logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }))
        // Never awaited: the stuck service keeps the group running for the rest of the process.
        _ = Task(executorPreference: TestThreads.shared) { try? await group.run() }
        // Shut down once the group runs (one asked for before is handled another way).
        #expect(await Polling.until { stuck.started.withLock { $0 } })
        #expect(!exited.withLock { $0 })
        await group.triggerGracefulShutdown()
        #expect(await Polling.until { told.withLock { $0 } }, "the backstop is told of the shutdown")
        #expect(await Polling.until { exited.withLock { $0 } }, "the backstop ended the process")
    }

    @Test func withoutAStopNothingEnds() async throws {
        let exited = Mutex(false)
        let backstop = ShutdownBackstop(limit: .milliseconds(1), logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
                                        exit: { exited.withLock { $0 = true } })
        let running = Task(executorPreference: TestThreads.shared) { await backstop.run() }
        // Cancelled (the group ended another way) before any shutdown: it returns and never fires.
        running.cancel()
        await running.value
        try await Task.sleep(for: .milliseconds(20))
        #expect(!exited.withLock { $0 })
    }
}
