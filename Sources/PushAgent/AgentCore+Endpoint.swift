import PushSystem
import PushScheduler
import Synchronization
import Logging
import PushBackend
import PushConfig
import PushListener
import PushState

/// What the agent's HTTP endpoint asks of it (SPEC §9.5, ``AgentEndpoint``): short reads and
/// updates under the one lock, from the endpoint's threads.
extension AgentCore {
    /// How long the agent's loops may go without turning before `/livez` says they are stuck.
    static var livenessLimit: Duration { .seconds(10) }

    /// `/livez`: puts a task on Swift's pool, where the agent's loops run, unless one waits
    /// already; 503 when one has waited longer than ``livenessLimit`` (the pool has stopped
    /// turning: a blocking call where none may be), else 200. Nothing runs between probes: an
    /// idle agent spends no CPU for its liveness (a heartbeat once a second did), and a stuck pool
    /// is told by the first probe after the limit.
    func liveness(at now: ContinuousClock.Instant) -> HTTPEndpoint.Response {
        let waiting = livenessProbe.withLock { since -> Duration? in
            guard let since else {
                since = now
                return nil
            }
            return now - since
        }
        guard let waiting else {
            Task.detached { self.livenessProbe.withLock { $0 = nil } }
            return HTTPEndpoint.Response(status: 200, body: "ok\n")
        }
        guard waiting > Self.livenessLimit else { return HTTPEndpoint.Response(status: 200, body: "ok\n") }
        return HTTPEndpoint.Response(status: 503, body: "the agent's loops have not run a task for \(DurationText(waiting))\n")
    }

    /// `/readyz` (and `/health`): 200 when the scheduler runs, the agent is not stopping, the
    /// state store answers and, with shared state, the leases were renewed in time; else 503 with
    /// the first reason that is not so, in one line.
    func readiness() -> HTTPEndpoint.Response {
        let now = clock.now
        let reason: String? = state.withLock { state in
            if state.isStopping { return "the agent is stopping" }
            if !state.serving { return "the scheduler is not running" }
            if shared != nil {
                if state.sharedStateSilent { return "the state database does not answer" }
                guard let valid = state.leasesValidUntil, now < valid else {
                    return "the leases were not renewed within agent.leaseTimeout (\(DurationText(settings.leaseTimeout)))"
                }
            }
            return nil
        } ?? (recorder.lastWriteSucceeded ? nil : "the state cannot be written")
        guard let reason else { return HTTPEndpoint.Response(status: 200, body: "ok\n") }
        return HTTPEndpoint.Response(status: 503, body: reason + "\n")
    }

    /// `/metrics`: the agent's counters and gauges; each subscription's series too with
    /// `agent.metrics.perAccount: true`. Only counts are taken under the lock (a few per service
    /// and state), unless each subscription is asked for.
    func metricsText() -> [UInt8] {
        let (counts, leases, groupHeld, perAccount, silent) = state.withLock { state in
            bookWholeStart(&state)
            return (state.book.countsByService, shared != nil ? state.book.owned?.count ?? 0 : nil,
                    shared != nil ? state.book.sharedHeld : nil, state.metricsPerAccount, state.sharedStateSilent)
        }
        let stateUp = recorder.lastWriteSucceeded && !silent
        var text = metrics.text(AgentMetrics.Reading(subscriptions: counts, stateUp: stateUp, leasesHeld: leases,
                                                     groupRemovalsHeld: groupHeld))
        if perAccount {
            text += StatusReport(records: snapshot(), backends: backends).perSubscriptionPrometheus.utf8
        }
        return text
    }

    /// Every subscription's record as the agent has it now (`/metrics` with
    /// `agent.metrics.perAccount: true`).
    func snapshot() -> [SubscriptionRecord] {
        state.withLock { state in
            bookWholeStart(&state)
            return state.book.entries.values.filter { state.book.isOwned($0.record.key) }.map(\.record)
        }.sorted { $0.key < $1.key }
    }

    /// The backend that answers webhooks under `path`, if any.
    func webhookReceiver(_ path: String) -> (any WebhookReceiver)? {
        backends.all.lazy.compactMap { $0 as? any WebhookReceiver }.first { $0.webhookPath == path }
    }

    /// A webhook call about the subscription (`account`, `service`): settles it when it is
    /// accepted and the call is genuine; a genuine call about nothing pending is answered 202
    /// and changes nothing (it may have been settled by polling already).
    func webhook(_ receiver: any WebhookReceiver, service: String, account: String, body: [UInt8]) -> HTTPEndpoint.Response {
        let key = SubscriptionKey(account: account, service: service)
        guard let (delivery, data) = state.withLock({ state -> (SubscriptionRequest, String?)? in
            // One not booked yet is known all the same (the start books its plans as the
            // feeder takes them).
            bookWholeStart(&state)
            guard let entry = state.book.entries[key], let delivery = entry.plan?.delivery else { return nil }
            return (delivery, entry.record.state == .accepted ? entry.record.backendData : nil)
        }) else {
            return HTTPEndpoint.Response(status: 404, body: "no such subscription\n")
        }
        switch receiver.webhook(body: body, delivery: delivery) {
        case .refused(let status, let reason):
            outsiders.note("webhook refused", level: .warning, "\(key.description.displayEscaped): a webhook call was refused (\(reason))")
            return HTTPEndpoint.Response(status: status, body: reason + "\n")
        case .settled(nil):
            return HTTPEndpoint.Response(status: 202)
        case .settled(let outcome?):
            guard let data else { return HTTPEndpoint.Response(status: 202) }
            let now = wallClock()
            let settled = state.withLock { state -> AgentBook.Settlement?? in
                guard state.serving, let (actions, settlement) = state.book.confirmed(key, data: data, outcome, now: now) else { return nil }
                apply(actions, in: &state)
                if case .stopped? = settlement { noteStopped(&state) }
                return .some(settlement)
            }
            if case .some(.some(let settlement)) = settled {
                logger.settled(delivery, key: key, as: settlement == .accepted ? .delivered : settlement, attempts: 1)
            }
            changed()
            return HTTPEndpoint.Response(status: 202)
        }
    }
}
