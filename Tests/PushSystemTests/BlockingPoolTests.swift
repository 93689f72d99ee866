import PushSystem
import PushTestSupport
import Synchronization
import Testing
import PushTestThreads

/// Calls that block run on threads of their own, never on Swift's cooperative pool.
@Suite(.ownThreads) struct BlockingPoolTests {
    /// A gate a blocked call waits at until the test opens it.
    final class Gate: Sendable {
        private let open = ConditionLock(false)
        func wait() { open.wait(until: { $0 }) { _ in } }
        func release() { open.change { $0 = true } }
    }

    @Test func aCallThatNeverReturnsHoldsOneThreadAndNothingElse() async throws {
        let pool = BlockingPool(limit: 8)
        let gate = Gate()
        defer { gate.release() }
        // More stuck calls than the cooperative pool has threads: each has its own.
        let stuck = (0..<4).map { _ in Task(executorPreference: TestThreads.shared) { try? await pool.run { gate.wait() } } }
        #expect(await Polling.until { pool.threadCount >= 4 }, "each stuck call has a thread")
        let answer = try await pool.run { 42 }
        #expect(answer == 42, "a call after the stuck ones runs at once")
        gate.release()
        for task in stuck { await task.value }
    }

    @Test func aCancelledCallReturnsAtOnceWhileItsBodyGoesOn() async throws {
        let pool = BlockingPool(limit: 4)
        let gate = Gate()
        let finished = Mutex(false)
        let call = Task(executorPreference: TestThreads.shared) { () -> Bool in
            do {
                try await pool.run { gate.wait(); finished.withLock { $0 = true } }
                return false
            } catch {
                return true
            }
        }
        #expect(await Polling.until { pool.threadCount == 1 })
        call.cancel()
        #expect(await call.value, "cancelled: the caller goes on while the body is still blocked")
        #expect(finished.withLock { !$0 })
        gate.release()
        #expect(await Polling.until { finished.withLock { $0 } }, "the body ran to its end on its thread")
    }

    @Test func aCallCancelledBeforeItStartsNeverRuns() async {
        let pool = BlockingPool(limit: 1)
        let ran = Mutex(false)
        let call = Task(executorPreference: TestThreads.shared) {
            withUnsafeCurrentTask { $0?.cancel() }
            return try? await pool.run { ran.withLock { $0 = true } }
        }
        #expect(await call.value == nil, "cancelled first: the caller is told so, and waits for nothing")
        #expect(ran.withLock { !$0 }, "the body was never handed to a thread")
    }

    @Test func idleThreadsEnd() async throws {
        let pool = BlockingPool(limit: 4, idleTimeout: .milliseconds(50))
        _ = try await pool.run { 1 }
        #expect(await Polling.until { pool.threadCount == 0 }, "the idle thread ended")
        #expect(try await pool.run { 2 } == 2, "and a new call starts a thread again")
    }

    @Test func callsBeyondTheLimitWaitForAThread() async throws {
        let pool = BlockingPool(limit: 1)
        let gate = Gate()
        let first = Task(executorPreference: TestThreads.shared) { try? await pool.run { gate.wait(); return 1 } }
        #expect(await Polling.until { pool.threadCount == 1 })
        let second = Task(executorPreference: TestThreads.shared) { try? await pool.run { 2 } }
        gate.release()
        #expect(await first.value == 1)
        #expect(await second.value == 2)
        #expect(pool.threadCount <= 1)
    }
}
