import PushSystem
import PushBackend
import Logging
import PushConfig
import PushScheduler
import PushState
import ServiceLifecycle
import Synchronization

/// With state shared by several agents (SPEC §11): keeps this agent's leases and takes its
/// share of the subscriptions, for as long as the agent runs and through a graceful stop's
/// grace period (listed before the ``SenderService``, it is stopped after it, so that what is in
/// flight finishes under a live lease); then writes what is left and hands every lease back, so
/// that the other agents take this one's subscriptions at once rather than after they expire.
struct LeaseKeeper<C: Clock>: Service where C.Duration == Duration {
    let core: AgentCore<C>

    func run() async {
        await cancelWhenGracefulShutdown { await keepLeases(claiming: core.claims) }
        await handBackLeases()
    }

    /// Until cancelled: renews this agent's leases every third of `leaseTimeout`, claims
    /// subscriptions up to its share (again as soon as the work in hand runs low while there
    /// are more to claim), hands back idle ones beyond it, and gives up what it lost. A database
    /// that cannot be reached is tried again with backoff; meanwhile nothing new is sent once the
    /// leases may have expired, and `STATUS=` and the log say so. With `claiming` false
    /// (`remove`) it only keeps this agent alive.
    func keepLeases(claiming: Bool) async {
        guard let shared = core.shared else { return }
        let (logger, clock, scheduler) = (core.logger, core.clock, core.scheduler)
        let timeout = core.settings.leaseTimeout
        let renewEvery = timeout / 3
        // An attempt may take `agent.timeout`: it starts only while the lease holds that long.
        let margin = min(core.settings.timeout, timeout / 2)
        var failures = 0
        // Leases this agent gave up in its book but not yet in the database (it was away).
        var toRelease = Set<SubscriptionKey>()
        while !Task.isCancelled {
            let started = clock.now
            var wait = renewEvery
            var moreToClaim = false
            let stopping = core.isStopping
            do {
                try await core.publishConfiguration()
                try await releaseWritten(&toRelease)
                let excluding = Array(core.state.withLock { $0.disagreed })
                let maxClaim = claiming && !stopping ? Self.claimChunk : 0
                let round = try await sharedStateCall(patience: renewEvery, failures: failures) { () throws(StateError) in
                    try shared.renewAndClaim(leaseTimeout: timeout, maxClaim: maxClaim, excluding: excluding)
                }
                core.state.withLock { $0.book.sharedHeld = round.heldRemovals }
                let now = core.wallClock()
                let idleUntil = now + timeout.milliseconds
                let (lost, disagreeing, handedBack) = core.state.withLock { state -> (Int, [SubscriptionKey], [SubscriptionKey]) in
                    // Found expired by another agent: what it held is the others' business now.
                    let lost = round.expelled ? Array(state.book.owned ?? []) : []
                    core.apply(state.book.relinquish(lost), in: &state)
                    // Valid from here: what it lost cannot start any more, and what it claims
                    // may start at once.
                    state.leasesValidUntil = started.advanced(by: timeout - margin)
                    let (actions, disagreeing) = state.book.acquire(round.claimed, now: now)
                    core.apply(actions, in: &state)
                    state.claimedJobs.subtract(lost)
                    for case .submit(let submission) in actions { state.claimedJobs.insert(submission.key) }
                    // More than its share, and some of it idle: handed back to the others, the
                    // book first, so that nothing of it starts once its records are written.
                    let excess = (state.book.owned?.count ?? 0) - round.share - max(1, round.share / 20)
                    let idle = excess > 0 && !stopping ? Array(state.book.idleOwned(until: idleUntil).prefix(excess)) : []
                    core.apply(state.book.relinquish(idle), in: &state)
                    return (lost.count, disagreeing, idle)
                }
                if lost > 0 {
                    logger.warning("another agent found this one's leases expired and took its \(lost) \(lost == 1 ? "subscription" : "subscriptions") (the database was out of reach, or the agent stalled, for \(DurationText(timeout)))")
                }
                if !disagreeing.isEmpty {
                    let first = core.state.withLock { state in defer { state.disagreed.formUnion(disagreeing) }; return state.disagreed.isEmpty }
                    if first {
                        logger.warning("\(disagreeing.count) shared \(disagreeing.count == 1 ? "subscription disagrees" : "subscriptions disagree") with this agent's configuration (such as \(disagreeing[0].description.displayEscaped)): another agent loaded other files last; this one leaves them to the others until it is reloaded with the same files")
                    }
                }
                // Their last records are written first: a delivery the database did not show yet
                // would be sent again by the agent that claims the subscription next.
                toRelease.formUnion(disagreeing)
                toRelease.formUnion(handedBack)
                try await releaseWritten(&toRelease)
                if !handedBack.isEmpty {
                    logger.info("handed \(handedBack.count) \(handedBack.count == 1 ? "subscription" : "subscriptions") to the group's other agents (a share is now \(round.share))")
                }
                // Claims after the first ones take over what an agent left (it stopped, or its
                // leases expired) or what another agent's configuration added: said, and
                // "all … reported" is said again once they are done.
                let tookOver = core.state.withLock { state -> Bool in
                    let tookOver = state.claimedAll && !round.claimed.isEmpty
                    if tookOver {
                        state.announceWhenSettled = true
                        state.releaseWhenAnswered = true
                    }
                    state.claimedAll = !claiming || round.claimed.count < round.wanted || round.wanted == 0
                    return tookOver
                }
                if tookOver {
                    logger.info("took over \(round.claimed.count) \(round.claimed.count == 1 ? "subscription" : "subscriptions") no live agent held")
                }
                moreToClaim = round.wanted > 0 && round.claimed.count == round.wanted
                if moreToClaim { wait = .seconds(1) }
                let wasSilent = core.state.withLock { state in defer { state.sharedStateSilent = false }; return state.sharedStateSilent }
                if failures > 0 || wasSilent {
                    logger.notice("the state database \(shared.location) is back; leases renewed")
                    core.state.withLock { $0.statusNote = nil }
                    failures = 0
                }
                core.changed()
            } catch {
                failures += 1
                if failures == 1 {
                    logger.error("\(error.description); the agent keeps running and tries again (nothing new is sent once its leases may have expired)")
                }
                core.state.withLock { $0.statusNote = "state database unreachable, retrying: \(error.description)" }
                core.changed()
                wait = min(renewEvery, .milliseconds(500) * (1 << min(failures, 6)))
            }
            if moreToClaim {
                // Claim again as soon as the work in hand runs low (or after `wait`): a fixed pause
                // between claims would hold a fast agent back while it waits for work.
                let end = started.advanced(by: wait)
                while clock.now < end && !Task.isCancelled && scheduler.pendingCount + scheduler.inFlightCount >= Self.claimChunk / 2 {
                    try? await clock.sleep(for: .milliseconds(50), tolerance: nil)
                }
            } else {
                try? await clock.sleep(until: started.advanced(by: wait), tolerance: nil)
            }
        }
    }

    /// Runs a call to the shared state off the pool. A database that freezes (a server stopped,
    /// a network that drops packets) holds the call without an error: one that has not answered
    /// within `patience` is said once, in the log and `STATUS=`, as an error would be (when
    /// `failures` says none was), until the database answers again.
    private func sharedStateCall<T: Sendable>(patience: Duration, failures: Int,
                                              _ body: @escaping @Sendable () throws(StateError) -> T) async throws(StateError) -> T {
        let result = await withTaskGroup(of: Result<T, StateError>?.self) { group -> Result<T, StateError> in
            group.addTask {
                await offPool { () -> Result<T, StateError> in
                    do throws(StateError) { return .success(try body()) } catch { return .failure(error) }
                }
            }
            group.addTask {
                guard (try? await core.clock.sleep(for: patience)) != nil, failures == 0, let shared = core.shared,
                      !core.state.withLock({ state in defer { state.sharedStateSilent = true }; return state.sharedStateSilent })
                else { return nil }
                let silence = "the state database \(shared.location) has not answered for \(DurationText(patience))"
                core.logger.error("\(silence); the agent keeps running and waits for it (nothing new is sent once its leases may have expired)")
                core.state.withLock { $0.statusNote = "state database not answering, waiting: \(silence)" }
                core.changed()
                return nil
            }
            var answer: Result<T, StateError>?
            for await value in group where value != nil {
                answer = value
                group.cancelAll()
                break
            }
            return answer!
        }
        return try result.get()
    }

    /// Gives up the leases of `keys` in the shared state once their records are written, and
    /// empties it; leaves it as it is when they cannot be written yet.
    private func releaseWritten(_ keys: inout Set<SubscriptionKey>) async throws(StateError) {
        guard let shared = core.shared, !keys.isEmpty else { return }
        let recorder = core.recorder
        guard await offPool({ recorder.flush() }) else { return }
        let released = Array(keys)
        try await offPool { () throws(StateError) in try shared.release(released) }
        keys = []
    }

    /// The most subscriptions an agent claims in one round of leases.
    static var claimChunk: Int { 5_000 }

    /// With shared state, once stopping: writes what is left, then gives every lease back, so
    /// the other agents take this one's subscriptions at once rather than after they expire.
    func handBackLeases() async {
        guard let shared = core.shared else { return }
        core.state.withLock { $0.leasesValidUntil = nil }
        let recorder = core.recorder
        guard await offPool({ recorder.flush() }) else { return }
        do {
            try await offPool { () throws(StateError) in try shared.release(nil) }
        } catch {
            core.logger.warning("\(error.description); this agent's leases expire on their own")
        }
    }
}
