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
    /// Whether the scheduler runs and the agent is not stopping (`/health`).
    var isServing: Bool {
        state.withLock { $0.serving && !$0.isStopping }
    }

    /// Every subscription's record as the agent has it now (`/metrics`).
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
            // One not booked yet is known all the same (the start books its plans while its
            // first run is sent).
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
