import PushBackend
import PushConfig
import PushScheduler
import PushState

/// The cleanups a subscription owes when it leaves or replaces what it delivered.
extension AgentBook {
    /// The cleanups a stored record owes, in the order they are sent (those of earlier
    /// deliveries first), and how many of its stored cleanups could not be read (they are dropped).
    func cleanups(of record: SubscriptionRecord) -> (owed: [OwedCleanup], unreadable: Int) {
        var texts: [String] = []
        for text in record.pastCleanups + [record.cleanup].compactMap({ $0 }) where !texts.contains(text) {
            texts.append(text)
        }
        return owedCleanups(record.key, texts: texts)
    }

    func owedCleanups(_ key: SubscriptionKey, texts: [String]) -> (owed: [OwedCleanup], unreadable: Int) {
        var owed: [OwedCleanup] = []
        var unreadable = 0
        for text in texts {
            if let request = decodeCleanup(key, text) {
                owed.append(OwedCleanup(text: text, request: request))
            } else {
                unreadable += 1
            }
        }
        return (owed, unreadable)
    }

    /// Starts the cleanup of a stored subscription that left the configuration, or forgets it
    /// when it has no cleanup to send.
    mutating func beginCleanup(_ stored: SubscriptionRecord, actions: inout [Action]) {
        guard let entry = cleanupEntry(of: stored) else {
            actions.append(.forget(stored.key))
            return
        }
        if entry.record != stored { actions.append(.save(entry.record)) }
        schedule(entry, actions: &actions)
    }

    /// The entry of a stored subscription that left, sending its owed cleanups; nil when it owes
    /// none (it is forgotten, and no longer this agent's).
    mutating func cleanupEntry(of stored: SubscriptionRecord) -> Entry? {
        let (owed, unreadable) = cleanups(of: stored)
        if unreadable > 0 { unreadableCleanups.append(stored.key) }
        guard !owed.isEmpty else {
            owned?.remove(stored.key)
            return nil
        }
        var record = stored
        if !record.isRemoving { record.attempts = 0 }
        record.state = .removing
        record.fingerprint = ""
        record.nextDueAt = nil
        record.backendData = nil
        return Entry(record: record, plan: nil, job: .cleanup, cleanups: owed)
    }

    /// Takes the list of unreadable cleanups, for the log.
    mutating func takeUnreadableCleanups() -> [SubscriptionKey] {
        defer { unreadableCleanups = [] }
        return unreadableCleanups
    }
}
