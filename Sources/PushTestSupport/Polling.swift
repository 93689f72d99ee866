import Foundation

/// Waiting for something a test cannot be told of directly (a log line, a request, a process's
/// state in `/proc`): the condition is checked every few milliseconds until it holds or a
/// generous real-time bound passes. A test waits for the event it depends on, never for a
/// fixed time that a slow machine would overrun.
public enum Polling {
    /// The bound a wait gets unless it says otherwise: far longer than anything a test waits for
    /// takes even on a loaded machine, so that reaching it means the event never came.
    public static let generous: Duration = .seconds(60)

    /// Checks `condition` until it holds (true) or `timeout` passes (false).
    public static func until(timeout: Duration = generous, _ condition: () -> Bool) -> Bool {
        let end = ContinuousClock.now + timeout
        while true {
            if condition() { return true }
            if ContinuousClock.now >= end { return false }
            usleep(5_000)
        }
    }

    /// As ``until(timeout:_:)``, for async tests: sleeps between checks rather than block one
    /// of the few threads that async tests share.
    public static func until(timeout: Duration = generous, _ condition: () -> Bool) async -> Bool {
        let end = ContinuousClock.now + timeout
        while true {
            if condition() { return true }
            if ContinuousClock.now >= end { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }
}
