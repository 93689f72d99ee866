import PushBackend
import Logging
import Synchronization
import PushConfig
import PushScheduler
import PushState
import PushSystem
import ServiceLifecycle

/// Hands a large start to the scheduler in runs (SPEC §6 still holds: each run is written
/// before it is submitted), booking the plans past the first run as it takes them: booked and
/// submitted at once, 100,000 subscriptions held their first request back and filled the
/// scheduler's queue. Ends once the start is all fed, or when stopping begins.
struct StartFeeder<C: Clock>: Service where C.Duration == Duration {
    let core: AgentCore<C>

    /// The most submissions the feeder writes and submits at once, as a multiple of the first
    /// run (4,000 for the default 1,000): a run's records wait in the recorder, and its batch is
    /// copied to be written, at the moment the start holds the most; unbounded doubling made that
    /// burst the peak of a large `run --once` (docs/performance.md, fifth round). A multiple, so
    /// that every run is one of the batch sizes too (100 for Journeys, 20 for FCM): a run that
    /// ended inside a batch would send it in two requests.
    static var largestStartRunFactor: Int { 4 }

    func run() async {
        await cancelWhenGracefulShutdown { await feedTheStart() }
        // A service of a group ends when it is told to (one that ends on its own while the
        // group stops is an error to it).
        try? await gracefulShutdown()
    }

    /// Hands the start's runs after the first to the scheduler a run at a time, as the book
    /// gives them (``AgentBook/takeStartRun(_:)``, which books the plans of each run as it is
    /// taken): each run's records as they stand now are written first, then what is still the
    /// start's job is submitted (a reload or a stopped service may have moved some on
    /// meanwhile; ``AgentBook/submitStartRun(_:)``).
    ///
    /// Booked as they are taken, not all while the first run was sent: the entries then fill as
    /// the requests and removals the plans hold are sent and written, instead of on top of all of
    /// them. And each run's garbage goes back to the system once it is submitted: kept in glibc's
    /// heaps, what booking, writing and settling free grew the resident memory of `run --once`
    /// with 100,000 richer accounts to 185 MB while it sent, where the heap held 130 MB. Both
    /// together: 185–190 → 152–153 MB at its peak (which is now loading's), for 26 calls of
    /// `malloc_trim` (docs/performance.md, third round of issue 35).
    func feedTheStart() async {
        guard core.state.withLock({ $0.book.hasStartToFeed }) else { return }
        // Done, or given up: what was not fed awaits the feeder no more.
        defer { core.state.withLock { $0.book.endFeed() } }
        // Each run twice the one before, up to `largestStartRunFactor` first runs: the scheduler
        // has the earlier runs to send meanwhile, and the rest of 100,000 subscriptions takes 26
        // transactions instead of 99.
        var size = core.startRunSize
        while true {
            if Task.isCancelled || core.isStopping { return }
            let run = core.state.withLock { state -> [AgentBook.Unsent] in
                let (writes, run) = state.book.takeStartRun(size)
                core.write(writes)
                return run
            }
            if run.isEmpty {
                // Plans that submit nothing: more may follow them.
                if core.state.withLock({ $0.book.hasStartToFeed }) { continue }
                core.changed()
                break
            }
            size = min(size * 2, core.startRunSize * Self.largestStartRunFactor)
            guard await core.flushUntilWritten(), await roomToSubmit(run.count) else { return }
            core.state.withLock { state in core.apply(state.book.submitStartRun(run), in: &state) }
            Allocator.returnFreePages()
        }
        // The start's runs, their records and their writes are freed: give that back now, not
        // only once every first attempt is answered.
        Allocator.releaseFreedMemory()
    }

    /// Waits until no more than `count` reports wait in the scheduler for their first attempt,
    /// so that its queue holds about two runs of the start, not all of it: fed as fast as they
    /// were written, 100,000 submissions waited there (27 MB), the peak of `run --once` once
    /// planning let the accounts go. The next run is written before this wait, so the queue does
    /// not run dry meanwhile. Each wait lasts `feedWait` at most: reports that do not begin (a
    /// host that holds them back) slow the feeding to a run per `feedWait`, and never stop it.
    /// False once the agent stops or the task is cancelled.
    private func roomToSubmit(_ count: Int) async -> Bool {
        // Real time, not the agent's clock (a test's may stand still): this only paces.
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: core.feedWait)
        while core.scheduler.firstAttemptsWaiting > count && clock.now < end {
            do { try await clock.sleep(for: .milliseconds(5)) } catch { return false }
            if core.isStopping { return false }
        }
        return !Task.isCancelled
    }
}
