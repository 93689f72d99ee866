import PushSystem
import Logging
import Synchronization
import PushBackend
import PushConfig
import PushScheduler
import PushState

/// One round (`run --once`, `remove`): the agent's parts without the long-running ones, until
/// everything is settled, the deadline passes or the round is stopped; then the state is
/// written and the outcome summed up (``OnceOutcome``).
struct RunOnce<C: Clock>: Sendable where C.Duration == Duration {
    let core: AgentCore<C>

    /// Sends every due delivery and cleanup: sends every due delivery and cleanup, retries until
    /// each is settled or `deadline` passes, asks once more about accepted subscriptions if time
    /// allows, then writes the state. `output` draws a progress line on a terminal.
    ///
    /// `stop` (SIGTERM or SIGINT) ends the round early, as SPEC §8 stops the agent: no new
    /// request starts from the moment it is requested, those in flight (a confirmation query
    /// too) get the grace period to finish, and the state is written. Cancelling the task ends
    /// it at once, with the state written too.
    func run(deadline: Duration, output: LogOutput? = nil, stop: RoundStop? = nil) async -> OnceOutcome {
        let (clock, scheduler) = (core.clock, core.scheduler)
        let start = clock.now
        // At once, on the signal's thread: a stop that waited for a task of the round could let
        // a first run of requests leave after it (one that came while the start was booked).
        stop?.whenRequested { [core] in core.beginStopping() }
        // One round: nothing is scheduled for later (`reportInterval` is the agent's business).
        core.state.withLock { $0.book.reportInterval = nil }
        let beginning = await core.begin()
        let jobs = beginning.jobs
        guard beginning.written else {
            let (counts, byService) = core.state.withLock { ($0.book.counts, $0.book.countsByService) }
            return OnceOutcome(total: jobs, delivered: 0, undelivered: [], counts: counts, countsByService: byService,
                               elapsed: .zero, deadline: deadline, stateWritten: false)
        }
        let (settled, settledContinuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        core.state.withLock { $0.progress = settledContinuation }
        settledContinuation.yield()
        let end = start.advanced(by: deadline)
        core.state.withLock { $0.onceEnd = end }
        await withTaskGroup(of: Ending.self) { group in
            group.addTask {
                await scheduler.run()
                return .schedulerEnded
            }
            group.addTask {
                await StartFeeder(core: core).feedTheStart()
                return .other
            }
            group.addTask {
                await core.recorder.writeInBatches()
                return .other
            }
            group.addTask {
                for await _ in settled where roundIsOver() && !core.isStopping
                    && (core.shared == nil || core.state.withLock { $0.claimedAll }) {
                    // Everything sent: one more question about what awaits confirmation. A
                    // delivery accepted while it was asked (one the answers sent again, say) is
                    // asked about too: the next turn, which its acceptance signalled.
                    let accepted = core.state.withLock { state in
                        state.pollInFlight = true
                        return state.book.acceptances
                    }
                    await ConfirmationPolling(core: core).pollOnce(before: end)
                    core.state.withLock { $0.pollInFlight = false }
                    // Stopped meanwhile: the question was the last thing the round waited for.
                    if core.isStopping { break }
                    if roundIsOver(), core.state.withLock({ $0.book.acceptances == accepted }) {
                        scheduler.shutdown()
                        break
                    }
                }
                return .pollerEnded
            }
            group.addTask {
                do {
                    try await clock.sleep(until: end, tolerance: nil)
                    return .deadline
                } catch {
                    return .other
                }
            }
            if let stop {
                group.addTask {
                    for await _ in stop.requests {
                        // The round ends once what is in flight has finished, or here.
                        await core.waitOutTheGracePeriod(saying: true)
                        return Task.isCancelled ? .other : .graceExpired
                    }
                    return .other
                }
            }
            if let output, output.isTerminal {
                group.addTask {
                    await showProgress(jobs: jobs, output: output)
                    return .other
                }
            }
            if core.shared != nil {
                group.addTask {
                    await LeaseKeeper(core: core).keepLeases(claiming: core.claims)
                    return .other
                }
            }
            // Over at the deadline, at the end of the grace period, or once the scheduler has
            // finished and no confirmation query is in flight (one gets the grace period too).
            var finished: Set<Ending> = []
            for await ending in group where ending != .other {
                finished.insert(ending)
                if ending == .schedulerEnded && core.state.withLock({ $0.pollInFlight }) { continue }
                if ending == .pollerEnded && !finished.contains(.schedulerEnded) { continue }
                group.cancelAll()
                break
            }
        }
        core.state.withLock { $0.progress = nil }
        output?.clearProgress()
        // What the round did not reach is in the outcome too: the start's plans the feeder did
        // not book (stopped, or past the deadline) are booked now, as not delivered.
        let endOfRun = core.state.withLock { state in
            core.bookWholeStart(&state)
            return state.book.endOfRun()
        }
        for record in endOfRun { core.recorder.save(record) }
        let recorder = core.recorder
        let stateWritten = await offPool { recorder.flush() }
        await LeaseKeeper(core: core).handBackLeases()
        return outcome(elapsed: start.duration(to: clock.now), deadline: deadline, stateWritten: stateWritten)
    }

    /// Whether nothing is left to send before the deadline: every job done, or every one left
    /// waiting for a retry that comes after it.
    private func roundIsOver() -> Bool {
        core.state.withLock { state in
            let waiting = state.outOfTime.count
            return state.book.isSettled || (waiting > 0 && state.book.startIsBooked && state.book.entries.jobCount <= waiting)
        }
    }

    /// The round's outcome: the start's jobs, which the book flags (a list of their keys was
    /// held to the end for this, 3 MB at 100,000), and `claimed`, those taken from other agents
    /// since (shared state only).
    private func outcome(elapsed: Duration, deadline: Duration, stateWritten: Bool) -> OnceOutcome {
        core.state.withLock { state in
            let claimed = state.claimedJobs
            // Read in place (an entry copied out for each of 100,000 took a tenth of a second).
            // One gone from the book was cleaned up and forgotten: it counts, and did not fail.
            var failed = state.book.entries.compactMapBorrowing { key, entry in
                entry.pointee.isStartJob && AgentBook.Entry.isUndelivered(at: entry) ? key : nil
            }
            let claimedOnly = claimed.filter { key in state.book.entries.read(key) { !$0.pointee.isStartJob } ?? true }
            failed += claimedOnly.filter { key in state.book.entries.read(key, AgentBook.Entry.isUndelivered(at:)) == true }
            // What the configuration itself refuses to send (SPEC §12): rejected without a job,
            // and not one of the jobs (which a receiver may have rejected).
            var refused = state.book.entries.compactMapBorrowing { key, entry in
                !entry.pointee.isStartJob && entry.pointee.job == nil && entry.pointee.record.state == .rejected ? key : nil
            }
            if !claimedOnly.isEmpty { refused.removeAll { claimedOnly.contains($0) } }
            failed += refused
            let undelivered = failed.sorted().compactMap { key -> OnceOutcome.Undelivered? in
                guard let entry = state.book.entries[key] else { return nil }
                let request = state.book.currentRequest(key) ?? entry.plan?.delivery
                return .init(key: key, label: request.map { "\(key.account.displayEscaped): \($0.label.displayEscaped)" } ?? key.description.displayEscaped,
                             host: request?.host ?? "", state: entry.record.state, attempts: entry.record.attempts,
                             reason: entry.record.lastOutcome ?? OnceOutcome.noResponse)
            }
            let total = state.book.startJobs + claimedOnly.count + refused.count
            return OnceOutcome(total: total, delivered: total - undelivered.count, undelivered: undelivered,
                               counts: state.book.counts, countsByService: state.book.countsByService,
                               elapsed: elapsed, deadline: deadline, stateWritten: stateWritten)
        }
    }

    private func showProgress(jobs started: Int, output: LogOutput) async {
        // Real time, not the scheduler's clock: this only paints the terminal.
        let painter = ContinuousClock()
        while !Task.isCancelled {
            // Only agents that share their state claim jobs, and they start with none.
            let (claimed, counts, pending, stopping) = core.state.withLock { state in
                (state.claimedJobs.count, state.book.counts, state.book.entries.jobCount, state.isStopping)
            }
            let jobs = started + claimed
            // Once stopped, only what is in flight is waited for.
            let doing = stopping ? "Stopping" : "Reporting"
            output.progress("\(doing): \(jobs - pending)/\(jobs) done, \(counts[.retrying]) retrying, \(core.scheduler.inFlightCount) in flight")
            try? await painter.sleep(for: .milliseconds(200))
        }
    }

    /// Why a task of the round ended.
    private enum Ending { case schedulerEnded, pollerEnded, graceExpired, deadline, other }
}
