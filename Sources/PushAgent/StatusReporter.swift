import PushSystem
import PushBackend
import PushScheduler
import Synchronization
import Logging
import PushConfig
import PushState
import ServiceLifecycle

/// Keeps systemd and the log told (SPEC §8): `STATUS=` when the counts change, at most once
/// per `statusInterval`; "all … reported" once the work of a start or reload is done; the
/// memory the first burst freed given back; and the lines outsiders drive, summed up once a
/// minute (``LogSummary``). Until graceful shutdown.
struct StatusReporter<C: Clock>: Service where C.Duration == Duration {
    let core: AgentCore<C>

    func run() async {
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await reportStatus() }
                group.addTask { await core.outsiders.run() }
                await group.next()
                group.cancelAll()
            }
        }
    }

    /// Sends `STATUS=` when the counts change, at most once per `statusInterval`, and logs when
    /// every subscription has been reported.
    private func reportStatus() async {
        let (logger, shared) = (core.logger, core.shared)
        var last = ""
        // Whether the last "all … reported" said some await confirmation: once none does, that is
        // said too (at info, where the confirmations themselves are debug lines).
        var awaitingSaid = false
        for await _ in core.statusChanges.stream {
            // With shared state, settled means too that nothing is left to claim.
            let (counts, settled, answered) = core.state.withLock { state in
                (state.book.counts, state.book.isSettled && (shared == nil || state.claimedAll), state.book.firstAttemptsAnswered)
            }
            let text = core.statusText(counts)
            if text != last {
                core.notifier.notify("STATUS=\(text)")
                last = text
            }
            if settled && counts[.removing] == 0,
               case let forgotten = core.state.withLock({ state in defer { state.forgottenSinceSaid = 0 }; return state.forgottenSinceSaid }),
               forgotten > 0 {
                // Each removal is a debug line: a reload that removes 200 accounts says so here, once.
                logger.info("\(forgotten == 1 ? "1 subscription that left the configuration is" : "\(forgotten) subscriptions that left the configuration are") cleaned up and forgotten")
            }
            if settled && counts[.removing] == 0
                && core.state.withLock({ state in defer { state.announceWhenSettled = false }; return state.announceWhenSettled }) {
                awaitingSaid = counts[.accepted] > 0 && counts.accounts > 0
                let awaiting = counts[.accepted] > 0 ? " (\(counts[.accepted]) awaiting the backend's confirmation)" : ""
                // Some are not sent at all (waiting for a value, rejected, …): "all … reported"
                // would contradict `status`, so the counts say what is where.
                let unsent = counts[.pending] + counts[.rejected] + counts[.unconfirmed] + counts[.stopped]
                if unsent > 0 && counts.accounts > 0 {
                    logger.info("nothing more to send for now (\(text))")
                } else if shared == nil {
                    // With nothing to report (the warning at start said so), no "all 0 accounts".
                    if counts.accounts > 0 {
                        logger.info("\(counts.accounts == 1 ? "the 1 account is" : "all \(counts.accounts) accounts are") reported\(awaiting)")
                    }
                } else if counts.accounts == 0 {
                    logger.info("holds no account now: the group's other agents hold them all")
                } else {
                    logger.info("\(counts.accounts == 1 ? "the 1 account this agent holds is" : "all \(counts.accounts) accounts this agent holds are") reported\(awaiting)")
                }
            } else if awaitingSaid && settled && counts[.accepted] == 0 {
                awaitingSaid = false
                logger.info("no registration awaits the backend's confirmation any more (\(text))")
            }
            if answered && core.state.withLock({ state in defer { state.releaseWhenAnswered = false }; return state.releaseWhenAnswered }) {
                // Loading, rendering and the first burst of requests are over: give the memory
                // they freed back to the system, so an idle agent stays small. Not only once all
                // are reported: one receiver down kept it all (idle 200 MB, then 25 MB more at each
                // reload, with 1 % of 100,000 accounts retrying).
                core.recorder.releaseMemoryOnceWritten()
            }
            try? await core.clock.sleep(for: core.statusInterval)
        }
    }
}
