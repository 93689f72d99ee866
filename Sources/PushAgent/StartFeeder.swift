import PushBackend
import Logging
import Synchronization
import PushConfig
import PushScheduler
import PushState
import PushSystem
import ServiceLifecycle

/// Hands a large start to the scheduler in runs (SPEC §6 still holds: each run is written
/// before it is submitted), and books the plans past the first run while that run is sent:
/// booked and submitted at once, 100,000 subscriptions held their first request back and
/// filled the scheduler's queue. Ends once the start is all fed, or when stopping begins.
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

    /// Books the rest of the start and feeds it, when the start left any.
    func feedTheStart() async {
        guard core.state.withLock({ $0.book.hasStartToFeed }) else { return }
        await withTaskGroup(of: Void.self) { group in
            if !core.state.withLock({ $0.book.startIsBooked }) {
                group.addTask { await bookRestOfStart() }
            }
            group.addTask { await feed() }
        }
    }

    /// Books the start's plans after its first run while it is sent, a run of plans at a time
    /// (the book is held for one run at a time), ahead of the feeder: held until fed, the plans
    /// kept 20 MB more at 100,000 while the sending began, the peak of `run --once`.
    private func bookRestOfStart() async {
        let run = core.startRunSize * Self.largestStartRunFactor
        // Stopping, nothing more is sent: what is left is booked for the outcome (RunOnce).
        while !Task.isCancelled && !core.isStopping {
            let booked = core.state.withLock { state -> Bool in
                core.write(state.book.bookRestOfStart(upTo: run))
                return state.book.startIsBooked
            }
            if booked {
                // The book may be settled only now: what waits for that is told.
                core.changed()
                return
            }
            await Task.yield()
        }
    }

    /// Hands the start's runs after the first to the scheduler a run at a time, as the book
    /// gives them (``AgentBook/takeStartRun(_:)``): each run's records as they stand now are
    /// written first, then what is still the start's job is submitted (a reload or a stopped
    /// service may have moved some on meanwhile; ``AgentBook/submitStartRun(_:)``).
    private func feed() async {
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
