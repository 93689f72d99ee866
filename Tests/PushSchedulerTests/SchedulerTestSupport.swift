import PushScheduler
import PushTestSupport
import Synchronization

/// Races `body` against a real-time timeout; true if `body` finished first.
///
/// `body` must return when its task is cancelled (every wait in these helpers does).
func finishes(within timeout: Duration = Polling.generous, _ body: @escaping @Sendable () async -> Void) async -> Bool {
    await withTaskGroup(of: Bool.self) { group in
        group.addTask {
            await body()
            return !Task.isCancelled
        }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return false
        }
        let first = await group.next() ?? false
        group.cancelAll()
        return first
    }
}

/// The events a scheduler sent, in order, with a way to wait until they say something.
final class EventLog: Sendable {
    private struct Waiter {
        var id: Int
        var predicate: @Sendable ([SchedulerEvent<String>]) -> Bool
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var events: [SchedulerEvent<String>] = []
        var waiters: [Waiter] = []
        var lastID = 0
    }

    private let state = Mutex(State())

    var events: [SchedulerEvent<String>] { state.withLock { $0.events } }

    func record(_ event: SchedulerEvent<String>) {
        let satisfied = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.events.append(event)
            let events = state.events
            let ready = state.waiters.filter { $0.predicate(events) }
            state.waiters.removeAll { $0.predicate(events) }
            return ready.map(\.continuation)
        }
        for continuation in satisfied { continuation.resume() }
    }

    /// Waits until `predicate` holds for the events so far; false after `timeout` (real time).
    func waitUntil(
        timeout: Duration = Polling.generous,
        _ predicate: @escaping @Sendable ([SchedulerEvent<String>]) -> Bool
    ) async -> Bool {
        let id = state.withLock { state in
            state.lastID += 1
            return state.lastID
        }
        let met = await finishes(within: timeout) {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let now = self.state.withLock { state in
                        if predicate(state.events) || Task.isCancelled { return true }
                        state.waiters.append(Waiter(id: id, predicate: predicate, continuation: continuation))
                        return false
                    }
                    if now { continuation.resume() }
                }
            } onCancel: {
                let waiter = self.state.withLock { state -> Waiter? in
                    guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return state.waiters.remove(at: index)
                }
                waiter?.continuation.resume()
            }
        }
        return met && predicate(events)
    }

    /// The keys of the `started` events, in order.
    var started: [String] {
        events.compactMap { if case .started(let key, _) = $0 { key } else { nil } }
    }

    /// The keys of the `delivered` events, in order.
    var delivered: [String] {
        events.compactMap { if case .delivered(let key, _) = $0 { key } else { nil } }
    }
}

extension [SchedulerEvent<String>] {
    func count(started key: String? = nil) -> Int {
        count { if case .started(let k, _) = $0 { key == nil || k == key } else { false } }
    }

    func count(delivered key: String? = nil) -> Int {
        count { if case .delivered(let k, _) = $0 { key == nil || k == key } else { false } }
    }

    func count(failed key: String? = nil) -> Int {
        count { if case .failed(let k, _, _, _) = $0 { key == nil || k == key } else { false } }
    }
}

/// Gates that `perform` closures wait on, opened by the test; a wait also ends on cancellation.
final class Gates: Sendable {
    private struct State {
        var open: Set<String> = []
        var allOpen = false
        var waiting: [String: [(id: Int, continuation: CheckedContinuation<Bool, Never>)]] = [:]
        var lastID = 0
    }

    private let state = Mutex(State())

    /// Waits until `key`'s gate is open (true) or the task is cancelled (false).
    func wait(_ key: String) async -> Bool {
        let id = state.withLock { state in
            state.lastID += 1
            return state.lastID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let result = state.withLock { state -> Bool? in
                    if state.allOpen || state.open.contains(key) { return true }
                    if Task.isCancelled { return false }
                    state.waiting[key, default: []].append((id, continuation))
                    return nil
                }
                if let result { continuation.resume(returning: result) }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                guard let index = state.waiting[key]?.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiting[key]!.remove(at: index).continuation
            }
            continuation?.resume(returning: false)
        }
    }

    /// Opens `key`'s gate for the current and every later wait.
    func open(_ key: String) {
        let waiting = state.withLock { state in
            state.open.insert(key)
            return state.waiting.removeValue(forKey: key) ?? []
        }
        for waiter in waiting { waiter.continuation.resume(returning: true) }
    }

    /// Opens every gate, now and later.
    func openAll() {
        let waiting = state.withLock { state in
            state.allOpen = true
            defer { state.waiting = [:] }
            return state.waiting.values.flatMap { $0 }
        }
        for waiter in waiting { waiter.continuation.resume(returning: true) }
    }
}

/// Counts the `perform` calls running at once: in total, per host and per key.
final class InFlightTracker: Sendable {
    private struct State {
        var current: [String: Int] = [:]
        var maximum: [String: Int] = [:]
    }

    private let state = Mutex(State())

    func enter(_ labels: String...) {
        state.withLock { state in
            for label in labels + ["*"] {
                state.current[label, default: 0] += 1
                state.maximum[label] = Swift.max(state.maximum[label] ?? 0, state.current[label]!)
            }
        }
    }

    func leave(_ labels: String...) {
        state.withLock { state in
            for label in labels + ["*"] { state.current[label, default: 0] -= 1 }
        }
    }

    /// The most calls for `label` ("*" for all) that ran at once.
    func maximum(_ label: String = "*") -> Int {
        state.withLock { $0.maximum[label] ?? 0 }
    }
}

/// A failure for a perform that was cancelled.
let cancelledFailure = AttemptFailure(status: nil, reason: "cancelled")

/// Builds a scheduler on a manual clock whose events go to a log.
func makeScheduler(
    policy: BackoffPolicy = BackoffPolicy(),
    concurrency: Int = 8,
    perHostConcurrency: Int = 8,
    seed: UInt64 = 1,
    wallClock: @escaping @Sendable () -> Int64 = { 1_750_000_000 },
    perform: @escaping @Sendable (String, Int) async -> AttemptResult
) -> (ReportScheduler<String, ManualClock>, EventLog, ManualClock) {
    let clock = ManualClock()
    let log = EventLog()
    let scheduler = ReportScheduler<String, ManualClock>(
        policy: policy,
        concurrency: concurrency,
        perHostConcurrency: perHostConcurrency,
        clock: clock,
        random: SeededGenerator(seed: seed),
        wallClock: wallClock,
        perform: perform,
        onEvent: { event, _ in log.record(event) }
    )
    return (scheduler, log, clock)
}

/// Builds a scheduler on a manual clock that hands each request to `performBatch`, its events to a log.
func makeBatchScheduler(
    concurrency: Int = 8,
    perHostConcurrency: Int = 8,
    performBatch: @escaping @Sendable ([BatchItem<String>]) async -> [AttemptResult]
) -> (ReportScheduler<String, ManualClock>, EventLog, ManualClock) {
    let clock = ManualClock()
    let log = EventLog()
    let scheduler = ReportScheduler<String, ManualClock>(
        policy: BackoffPolicy(), concurrency: concurrency, perHostConcurrency: perHostConcurrency, clock: clock,
        random: SeededGenerator(seed: 1), wallClock: { 1_750_000_000 }, performBatch: performBatch,
        onEvent: { event, _ in log.record(event) }
    )
    return (scheduler, log, clock)
}

/// Runs `body` while `scheduler.run()` runs in a child task, then cancels it and waits for it.
func whileRunning<T: Sendable>(
    _ scheduler: ReportScheduler<String, ManualClock>,
    _ body: () async throws -> T
) async rethrows -> T {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await scheduler.run() }
        let result = try await body()
        group.cancelAll()
        return result
    }
}

/// A value shared between a test and its closures.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) {
        mutex = Mutex(value)
    }

    var value: Value { mutex.withLock { $0 } }

    func withLock<Result: Sendable>(_ body: (inout Value) -> Result) -> Result {
        mutex.withLock { body(&$0) }
    }
}
