#if canImport(Glibc)
import Glibc
#endif

/// SPEC §6's promise under test: an agent killed with SIGKILL at any moment loses nothing. The
/// kill tests run an agent, let it work for a moment picked from a seeded generator (the same
/// moments at every run of the test), kill it, and start the next one on the same state.
public struct KillHarness {
    private var random: SeededGenerator

    public init(seed: UInt64) { random = SeededGenerator(seed: seed) }

    /// Waits a moment picked within `window` (microseconds), without killing anything: a reload
    /// given time to begin, say.
    public mutating func pause(within window: ClosedRange<UInt32>) {
        usleep(UInt32.random(in: window, using: &random))
    }

    /// Waits a moment picked within `window` (microseconds), kills `agent` with SIGKILL and waits
    /// for it to end: true when it ended of that signal (not before it, of something else).
    public mutating func kill(_ agent: RunningProcess, within window: ClosedRange<UInt32>) -> Bool {
        pause(within: window)
        agent.signal(SIGKILL)
        return agent.waitForExit() == 128 + SIGKILL
    }
}
