import PushSystem
import PushScheduler
import Synchronization
import Logging
import PushBackend
import PushConfig
import PushState
import ServiceLifecycle

/// Asks each service whose receiver confirms later (Journeys) about its accepted subscriptions,
/// every `interval` of its poller, for as long as the agent runs (SPEC §9.2). A question in
/// flight when stopping begins gets the grace period to be answered; none starts after.
struct ConfirmationPolling<C: Clock>: Service where C.Duration == Duration {
    let core: AgentCore<C>

    func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await pollForConfirmations() }
            group.addTask { await core.waitOutTheGracePeriod() }
            // Polling ends once stopping begins and no question is in flight, or the grace
            // period ends first; the group also ends when its task is cancelled.
            await group.next()
            group.cancelAll()
        }
        // Done once stopping began: it ends when the group tells it to.
        try? await gracefulShutdown()
    }

    /// Asks each service about its accepted subscriptions every `interval`, until stopping.
    private func pollForConfirmations() async {
        var changes = core.pollerChanges.stream.makeAsyncIterator()
        while !Task.isCancelled && !core.isStopping {
            let now = core.clock.now
            let due = core.state.withLock { state in
                state.pollers.values.filter { poller in poller.lastPoll.map { $0.advanced(by: poller.poller.interval) <= now } ?? true }
                    .map(\.poller)
            }
            for poller in due where !core.isStopping {
                core.state.withLock { state in
                    state.pollers[poller.service]?.lastPoll = now
                    // A query in flight finishes when the agent stops (within its grace period).
                    state.pollInFlight = true
                }
                await poll(poller)
                core.state.withLock { $0.pollInFlight = false }
            }
            if core.state.withLock({ $0.pollers.isEmpty }) || core.isStopping {
                // No service asks: an idle agent does not wake each second for nothing.
                guard !core.isStopping, await changes.next() != nil else { return }
                continue
            }
            // Each service is asked at its own interval; a second is the finest any is asked at.
            try? await core.clock.sleep(for: .seconds(1))
        }
    }

    /// Asks once about what awaits confirmation, each service with time left before `end`.
    func pollOnce(before end: C.Instant) async {
        for poller in core.state.withLock({ $0.pollers.values.map(\.poller) }) where core.clock.now < end {
            await poll(poller)
        }
    }

    private func poll(_ poller: any ConfirmationPoller) async {
        let (waiting, timeout) = core.state.withLock { state -> ([(key: SubscriptionKey, data: String, acceptedAt: Int64)], Duration) in
            guard state.book.stoppedServices[poller.service] == nil else { return ([], state.defaultTimeout) }
            return (state.book.awaitingConfirmation(service: poller.service), state.defaultTimeout)
        }
        guard !waiting.isEmpty else { return }
        let now = core.wallClock()
        let patience = poller.timeout.milliseconds
        var asked: [(key: SubscriptionKey, data: String)] = []
        for item in waiting {
            if now - item.acceptedAt >= patience {
                let reason = "accepted, but not confirmed within \(DurationText(poller.timeout)); not sent again until it changes"
                core.state.withLock { state in core.apply(state.book.unconfirmed(item.key, reason: reason), in: &state) }
                core.logger.warning("\(item.key.description.displayEscaped): \(reason)")
            } else {
                asked.append((item.key, item.data))
            }
        }
        guard !asked.isEmpty else { return core.changed() }
        let answers = await poller.poll(asked.map(\.data), transport: core.transport, defaultTimeout: timeout)
        let answeredAt = core.wallClock()
        for (item, answer) in zip(asked, answers) {
            guard let answer else { continue }
            let settled = core.state.withLock { state -> (AgentBook.Settlement?, SubscriptionRequest?)? in
                guard let (actions, settlement) = state.book.confirmed(item.key, data: item.data, answer, now: answeredAt) else { return nil }
                core.apply(actions, in: &state)
                if case .stopped? = settlement { core.noteStopped(&state) }
                return (settlement, state.book.entries[item.key]?.plan?.delivery)
            }
            guard let (settlement, request) = settled else { continue }
            if let settlement, let request {
                core.logger.settled(request, key: item.key, as: settlement == .accepted ? .delivered : settlement, attempts: 1)
            } else if case .retry(let failure) = answer {
                core.logger.warning("\(item.key.description.displayEscaped): \(failure.reason); registering again")
            }
        }
        core.changed()
    }
}
