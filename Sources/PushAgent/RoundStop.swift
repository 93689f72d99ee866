import Synchronization

/// Stops a round of ``Agent/runOnce(deadline:output:stop:)`` from outside it (SIGTERM or SIGINT
/// for `run --once`): what the round does on a stop runs at once, on the caller's thread, and
/// the round then waits out the grace period in a task of its own.
public final class RoundStop: Sendable {
    private struct State {
        var requested = false
        var action: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())
    /// One element once a stop is requested.
    let requests: AsyncStream<Void>
    private let requested: AsyncStream<Void>.Continuation

    public init() {
        (requests, requested) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Stops the round; a second call does nothing.
    public func request() {
        let action = state.withLock { state -> (@Sendable () -> Void)?? in
            guard !state.requested else { return nil }
            state.requested = true
            return .some(state.action)
        }
        guard let action else { return }
        action?()
        requested.yield()
    }

    /// Runs `action` once, when a stop is requested: now if one already was.
    func whenRequested(_ action: @escaping @Sendable () -> Void) {
        let already = state.withLock { state in
            state.action = action
            return state.requested
        }
        if already { action() }
    }
}
