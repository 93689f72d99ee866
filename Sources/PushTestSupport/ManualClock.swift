import Synchronization

/// A clock that moves only when a test calls ``advance(by:)``, for testing code that waits.
///
/// The pattern: start the code under test, ``waitForSleepers(_:)`` until it is asleep on the
/// clock, ``advance(by:)``, then wait for what it does (an event, a result). `waitForSleepers`
/// suspends on a continuation rather than yielding in a loop, so the test is deterministic
/// however the tasks are scheduled. Sleeping until a deadline that has passed returns at once;
/// a sleeper whose task is cancelled is removed and throws `CancellationError`.
public final class ManualClock: Clock, Sendable {
    /// A point in the manual clock's time: how far it is from the clock's origin.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// The time since the clock's origin.
        public var offset: Duration

        /// The instant `offset` after the origin.
        public init(offset: Duration) {
            self.offset = offset
        }

        /// The instant `duration` later.
        public func advanced(by duration: Duration) -> Instant {
            Instant(offset: offset + duration)
        }

        /// The time from this instant to `other` (negative if `other` is earlier).
        public func duration(to other: Instant) -> Duration {
            other.offset - offset
        }

        /// Whether `lhs` comes before `rhs`.
        public static func < (lhs: Instant, rhs: Instant) -> Bool {
            lhs.offset < rhs.offset
        }

        /// The offset from the origin, e.g. `+20.0 seconds`.
        public var description: String { "+\(offset)" }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct SleeperWaiter {
        var id: UInt64
        var count: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now: Instant
        var sleepers: [UInt64: Sleeper] = [:]
        var lastSleeperID: UInt64 = 0
        var waiters: [SleeperWaiter] = []

        /// Removes and returns the waiters whose count of sleepers is reached.
        mutating func satisfiedWaiters() -> [CheckedContinuation<Void, Never>] {
            let count = sleepers.count
            let satisfied = waiters.filter { $0.count <= count }.map(\.continuation)
            waiters.removeAll { $0.count <= count }
            return satisfied
        }
    }

    private let state: Mutex<State>

    /// A clock whose time starts at `now` (the origin by default).
    public init(now: Instant = Instant(offset: .zero)) {
        state = Mutex(State(now: now))
    }

    /// The current time; it changes only through ``advance(by:)`` and ``advance(to:)``.
    public var now: Instant {
        state.withLock { $0.now }
    }

    /// One nanosecond.
    public var minimumResolution: Duration { .nanoseconds(1) }

    /// How many tasks are suspended in ``sleep(until:tolerance:)``.
    public var sleeperCount: Int {
        state.withLock { $0.sleepers.count }
    }

    /// The deadlines of the suspended sleepers, earliest first.
    public var sleeperDeadlines: [Instant] {
        state.withLock { $0.sleepers.values.map(\.deadline).sorted() }
    }

    /// Suspends until the clock has been advanced to `deadline`; the tolerance is ignored.
    ///
    /// - Throws: `CancellationError` if the task is cancelled before then.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state in
            state.lastSleeperID += 1
            return state.lastSleeperID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case due, cancelled, sleeping([CheckedContinuation<Void, Never>]) }
                let outcome = state.withLock { state -> Outcome in
                    if deadline <= state.now { return .due }
                    if Task.isCancelled { return .cancelled }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return .sleeping(state.satisfiedWaiters())
                }
                switch outcome {
                case .due: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .sleeping(let waiters): for waiter in waiters { waiter.resume() }
                }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward by `duration` and resumes every sleeper whose deadline is reached,
    /// earliest deadline first. It does not wait for them to run.
    public func advance(by duration: Duration) {
        advance(to: now.advanced(by: duration))
    }

    /// Moves time forward to `instant` (never backward) and resumes every sleeper that is due.
    public func advance(to instant: Instant) {
        let due = state.withLock { state -> [Sleeper] in
            if instant > state.now { state.now = instant }
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Returns once at least `count` tasks are suspended in ``sleep(until:tolerance:)``.
    ///
    /// Counts sleepers at the moment they start to sleep, so call it when the code under test
    /// has no other reason to wake; it suspends on a continuation, without polling. It also
    /// returns when its task is cancelled (so a test's timeout can end it).
    public func waitForSleepers(_ count: Int = 1) async {
        let id = state.withLock { state in
            state.lastSleeperID += 1
            return state.lastSleeperID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state in
                    if state.sleepers.count >= count || Task.isCancelled { return true }
                    state.waiters.append(SleeperWaiter(id: id, count: count, continuation: continuation))
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> SleeperWaiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume()
        }
    }
}
