import Foundation
import Testing

/// Threads of the tests' own, as a task executor: a test (or suite) with the ``Trait/ownThreads``
/// trait runs its body, and the child tasks it starts, here rather than on Swift's cooperative
/// pool. The pool has a thread per processor (two on the build machine), and the suites that
/// wait for a subprocess block one of them each while it runs; an in-process agent on the pool
/// then waited for a thread for as long as those tests lasted, and its test's bound ran out
/// under load. Only suites that never block a thread (they wait with `await`) take the trait,
/// so that these threads stay free for one another.
public final class TestThreads: TaskExecutor, @unchecked Sendable {
    /// The tests' threads: 4, so that a test blocking one of them (a `ProcessRunner` call inside
    /// an async test) still leaves others to its tasks.
    public static let shared = TestThreads(count: 4)

    /// The threads of the tests that block while they wait (for a subprocess, a server, a
    /// lock). On Swift's pool, each blocked one of its two threads for as long as it waited,
    /// and the pool also fires every `Task.sleep` and runs the actors (a `ServiceGroup`): an
    /// in-process agent's sleep of 5 ms took 20 s when both were held. 6, as they mostly wait:
    /// with 2, tests queued for a thread ran past their time limits; with 6 the whole run took
    /// 78 s instead of 130–150 s on the 2-core machine. A test's time limit counts the time it
    /// waits here for a thread: the suites that have one give it 10 minutes, a bound on a hang
    /// rather than on speed.
    public static let blocking = TestThreads(count: 6)

    private let condition = NSCondition()
    /// Jobs in the order they came, from `next` on (guarded by `condition`).
    private var jobs: [UnownedJob] = []
    private var next = 0

    init(count: Int) {
        for index in 0..<count {
            Thread { [unowned self] in
                // Set on the thread itself, so that the system (`top -H`, gdb) shows it too.
                Thread.current.name = "test-thread-\(index)"
                work()
            }.start()
        }
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while next == jobs.count { condition.wait() }
            let job = jobs[next]
            next += 1
            if next == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                next = 0
            }
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

/// Runs a test's body on one of the tests' own executors; on a suite, each of its tests. A test
/// that starts an unstructured task gives it the preference itself:
/// `Task(executorPreference: TestThreads.shared) { … }`.
public struct TestThreadsTrait: TestTrait, SuiteTrait, TestScoping {
    let threads: TestThreads

    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        try await withTaskExecutorPreference(threads) {
            try await function()
        }
    }
}

extension Trait where Self == TestThreadsTrait {
    /// Runs the test on the threads of the tests that never block (``TestThreads/shared``).
    public static var ownThreads: Self { TestThreadsTrait(threads: .shared) }

    /// Runs the test on the threads of the tests that block while they wait
    /// (``TestThreads/blocking``), so that Swift's pool stays free for the timers and actors
    /// of the tests that do not.
    public static var blockingThreads: Self { TestThreadsTrait(threads: .blocking) }
}
