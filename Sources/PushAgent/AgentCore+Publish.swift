import PushConfig
import PushState
import Synchronization

extension AgentCore {
    /// With shared state: writes the configuration the last reload loaded, if not written yet,
    /// with the removal guard decided there for the group (SPEC §14); then gives up in the
    /// database the subscriptions the reload handed back for it, and says once what the guard
    /// held. A failure leaves both for the next call (the leases' next round).
    func publishConfiguration() async throws(StateError) {
        guard let shared else { return }
        guard let (keys, rule, handedBack) = state.withLock({ state -> ([SubscriptionKey], RemovalsHeld?, [SubscriptionKey])? in
            guard let keys = state.pendingPublish else { return nil }
            return (keys, Self.rule(state.book.removalGuard), state.book.releaseAfterPublish)
        }) else { return }
        let published = try await offPool { () throws(StateError) in try shared.publish(keys, holdingRemovals: rule) }
        state.withLock { state in
            if state.pendingPublish == keys { state.pendingPublish = nil }
            state.book.published(published, handedBack: handedBack)
        }
        if !handedBack.isEmpty {
            try await offPool { () throws(StateError) in try shared.release(handedBack) }
        }
        sayHeldRemovals()
        changed()
    }

    /// `removalGuard`'s rule, as the shared state applies it; nil when the guard is off.
    static func rule(_ removalGuard: RemovalGuard?) -> RemovalsHeld? {
        guard let removalGuard else { return nil }
        return { leaving, accounts in removalGuard.holds(removing: leaving, of: accounts) }
    }
}
