import PushBackend
import PushConfig
import PushScheduler
import PushState

extension Outcome {
    /// What the backend keeps in state for a delivered subscription (``Outcome/deliveredKeeping(_:)``).
    var kept: String? {
        if case .deliveredKeeping(let data) = self { data } else { nil }
    }
}

extension SubscriptionPlan {
    /// The subscription's key.
    var key: SubscriptionKey { SubscriptionKey(account: account, service: service) }

    /// Makes `record` describe this plan, not yet attempted, with its cleanup.
    func apply(to record: inout SubscriptionRecord) {
        // A replaced delivery's cleanup is read back from the state first
        // (``AgentBook/beginReadingBack(for:)``).
        assert(record.cleanupInState == nil || record.fingerprint == fingerprint, "the cleanup of a replaced delivery is not in memory")
        if record.fingerprint != fingerprint, let old = record.cleanup, old != cleanup, !record.pastCleanups.contains(old) {
            // The delivery it replaces may have reached the receiver: its cleanup stays owed.
            record.pastCleanups.append(old)
            record.pastCleanups.removeFirst(max(0, record.pastCleanups.count - AgentBook.pastCleanupLimit))
        }
        if let cleanup { record.pastCleanups.removeAll { $0 == cleanup } }
        let staysDelivered = refusal == nil && delivery != nil && record.deliveredFingerprint == fingerprint
        record.fingerprint = fingerprint
        record.attempts = 0
        // The plan's text (one copy, the plan's), unless the state holds this one already.
        if record.cleanupInState == nil || !record.hasCleanup(cleanup) { record.setCleanup(cleanup) }
        // What the backend keeps for a delivery made again unchanged (a group's key) stays
        // while it is made again: `status` shows it, and a restart finds it.
        if !staysDelivered || record.state != .delivered { record.backendData = nil }
        // The fingerprint and cleanup are the plan's own now; a restart read the delivered one
        // from the state.
        if SubscriptionRecord.sameBytes(record.deliveredFingerprint, fingerprint) { record.deliveredFingerprint = fingerprint }
        if let refusal {
            // Never sent as it stands: rejected until it changes.
            record.state = .rejected
            record.lastOutcome = refusal
            record.nextDueAt = nil
        } else if delivery == nil {
            // Waiting for a value it needs: nothing is sent until it comes.
            record.state = .pending
            record.lastOutcome = waiting
            record.nextDueAt = nil
        } else if record.deliveredFingerprint == fingerprint {
            // Delivered already: it stays so while this delivery is made again.
            record.state = .delivered
        } else {
            record.state = .pending
            record.nextDueAt = nil
        }
    }
}

extension SubscriptionRecord {
    /// Whether both texts are there, with the same bytes (`==` holds canonically equivalent
    /// texts equal, and a record keeps the bytes the state has).
    static func sameBytes(_ text: String?, _ other: String?) -> Bool {
        guard let text, let other else { return false }
        return text.utf8.elementsEqual(other.utf8)
    }
}
