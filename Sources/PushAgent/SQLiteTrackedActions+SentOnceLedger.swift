import PushBackend
import PushState

/// The state database remembers what backends send once (SPEC §9.4's tracking actions), for
/// `track --state-dir` and the agent's tracking spool.
extension SQLiteTrackedActions: SentOnceLedger {
    public var location: String { path }

    public func wasSent(_ key: String) throws -> Bool {
        try contains(key)
    }

    public func recordSent(_ entry: SentOnceEntry) throws {
        try record(TrackedAction(key: entry.key, service: entry.service, messageId: entry.messageId,
                                 deliveryId: entry.deliveryId, action: entry.action, sentAt: entry.sentAt))
    }
}
