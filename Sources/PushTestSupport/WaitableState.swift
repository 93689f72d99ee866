import Foundation

/// A fake's state behind one lock, with waits for it to change: what a fake server records
/// and is scripted with, read and changed from the connection threads and from the test.
final class WaitableState<State>: @unchecked Sendable {
    private let condition = NSCondition()
    private var state: State
    private var stopped = false

    init(_ state: State) {
        self.state = state
    }

    func read<T>(_ body: (State) -> T) -> T {
        condition.withLock { body(state) }
    }

    /// Changes the state and wakes every waiter.
    func update<T, E: Error>(_ body: (inout State) throws(E) -> T) throws(E) -> T {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        return try body(&state)
    }

    /// Ends every wait, now and later, with `false` (the fake stopped).
    func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
        }
    }

    /// Whether `satisfied` held within `timeout`; `false` at once when stopped.
    func wait(timeout: Duration, until satisfied: (State) -> Bool) -> Bool {
        condition.withLock {
            condition.wait(timeout: timeout) { satisfied(state) ? true : stopped ? false : nil }
        }
    }
}
