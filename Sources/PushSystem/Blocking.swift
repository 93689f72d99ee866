#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Runs calls that can block (a file that may be a FIFO or sit on a hung disk, SQLite, libpq,
/// DNS) on threads of their own, outside Swift's cooperative pool: that pool has one thread per
/// processor (two on a two-core machine), so two stuck reads on it stopped every report, the
/// watchdog and the answer to SIGTERM.
///
/// A call gets a free thread of the pool, or a new one when none is free (up to `limit`, then
/// it waits for one), so a call that never returns holds one thread and nothing else. Threads
/// left idle for `idleTimeout` end.
package final class BlockingPool: Sendable {
    /// The pool every blocking call of the process shares.
    package static let shared = BlockingPool(limit: 64)

    /// The most threads at once: past it, calls wait for a thread to come free.
    package let limit: Int
    private let idleTimeout: Duration
    private let state: ConditionLock<State>

    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var nextJob = 0
        var threads = 0
        /// Threads waiting for a job.
        var idle = 0
        var waitingJobs: Int { jobs.count - nextJob }

        mutating func takeJob() -> (@Sendable () -> Void)? {
            guard nextJob < jobs.count else { return nil }
            let job = jobs[nextJob]
            nextJob += 1
            if nextJob == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                nextJob = 0
            }
            return job
        }
    }

    package init(limit: Int, idleTimeout: Duration = .seconds(30)) {
        self.limit = max(1, limit)
        self.idleTimeout = idleTimeout
        state = ConditionLock(State())
    }

    /// How many threads the pool has now (for tests).
    package var threadCount: Int { state.read { $0.threads } }

    /// Runs `job` on a thread of the pool.
    package func submit(_ job: @escaping @Sendable () -> Void) {
        let spawn = state.change { state -> Bool in
            state.jobs.append(job)
            // Every idle thread may already be on its way to an earlier job: a new thread unless
            // there is one idle for each job waiting.
            guard state.waitingJobs > state.idle, state.threads < limit else { return false }
            state.threads += 1
            return true
        }
        guard spawn else { return }
        if OwnThread(named: "pushrep-block", detached: true, { [self] in work() }) == nil {
            // No thread can start now: the job waits for one that comes free.
            state.change { $0.threads -= 1 }
        }
    }

    private func work() {
        while true {
            let job = state.wait(until: { !$0.jobs.isEmpty }, timeout: idleTimeout, whileWaiting: { $0.idle += $1 ? 1 : -1 }) { state in
                state.takeJob()
            } ?? nil
            guard let job else {
                // Idle for `idleTimeout`, unless a job came at the last moment.
                let leaves = state.change { state -> Bool in
                    guard state.waitingJobs == 0 else { return false }
                    state.threads -= 1
                    return true
                }
                if leaves { return }
                continue
            }
            job()
        }
    }

    /// Runs `body` on a thread of the pool and waits for it without holding a thread of the
    /// cooperative pool. When the calling task is cancelled before `body` returns, throws
    /// `CancellationError` at once: `body` goes on on its thread, and its result is dropped.
    package func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async throws(CancellationError) -> T {
        let handoff = Handoff<T>()
        let result: T? = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
                guard handoff.wait(with: continuation) else { return }
                submit { handoff.finish(body()) }
            }
        } onCancel: {
            handoff.finish(nil)
        }
        guard let result else { throw CancellationError() }
        return result
    }

    /// ``run(_:)`` for a body that throws a typed error.
    package func run<T: Sendable, E: Error>(throwing body: @escaping @Sendable () throws(E) -> T) async throws -> T {
        let result: Result<T, E> = try await run {
            do throws(E) { return .success(try body()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Runs `body` on a thread of the pool and waits for it, cancelled or not: for what must
    /// finish (the last write of the state).
    package func runToEnd<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            submit { continuation.resume(returning: body()) }
        }
    }

    /// The continuation of ``run(_:)``, resumed once: by the result, or by cancellation first.
    private final class Handoff<T: Sendable>: Sendable {
        private struct State {
            var continuation: CheckedContinuation<T?, Never>?
            var finished = false
            var value: T?
        }

        private let state = Mutex(State())

        /// Keeps `continuation` until ``finish(_:)``; false when finished already (cancelled
        /// before it waited: resumed here).
        func wait(with continuation: CheckedContinuation<T?, Never>) -> Bool {
            let finished = state.withLock { state -> Bool in
                if state.finished { return true }
                state.continuation = continuation
                return false
            }
            if finished { continuation.resume(returning: nil) }
            return !finished
        }

        func finish(_ value: T?) {
            let continuation = state.withLock { state -> CheckedContinuation<T?, Never>? in
                guard !state.finished else { return nil }
                state.finished = true
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume(returning: value)
        }
    }
}
