import PushBackend
import PushState

/// Cleanup texts the state holds (issue 35): a removal request is rendered with each delivery
/// and written before it is sent (SPEC §6), and the book kept its text for every subscription
/// for as long as the agent ran, 27 MB of the idle agent's 126 at 100,000 accounts. Once its
/// record is written, the book keeps a digest instead (``SubscriptionRecord/cleanupInState``),
/// which tells a reload whether the cleanup changed. The text is needed again only when the
/// delivery is replaced or leaves: a reload reads those back from the state first
/// (``beginReadingBack(for:)``, ``restoreCleanups(_:asked:)``, ``endReadingBack(isPending:)``).
///
/// The text is always in one of three places: the entry, the recorder's pending changes (which
/// carry it over a later write of the same record without it), or the state. From the moment a
/// reload asks which texts to read back until it is applied, none is let go (the book holds
/// them, ``holdsCleanupTexts``): the state is read between the two, and what was let go
/// meanwhile would be missing.
extension AgentBook {
    /// Whether `entry`'s cleanup text may be let go, once the state holds it (with
    /// ``cleanupTextsInStateOnly``): not while its cleanup is sent or held, nor before the feeder
    /// writes its record. (Writing the records of the later runs as they were booked, to let
    /// their texts go sooner, raised `run --once` 100k's peak with the richer accounts from
    /// 190-194 MB to 205-224 MB: the recorder held them all.)
    static func mayLetGoOfCleanupText(_ entry: Entry) -> Bool {
        entry.record.cleanup != nil && entry.job != .cleanup && !entry.awaitsFeed && entry.record.state != .held
            && !entry.record.isRemoving
    }

    /// Lets go of `entry`'s cleanup text, whose record the state holds as it is, where it may
    /// be: now, or once the reload under way is applied.
    mutating func letGoOfCleanupText(_ entry: inout Entry) {
        guard cleanupTextsInStateOnly, Self.mayLetGoOfCleanupText(entry) else { return }
        if holdsCleanupTexts {
            cleanupTextsToLetGo.append(entry.record.key)
        } else {
            entry.record.keepCleanupInStateOnly()
        }
    }

    /// The records of `keys` are written: their cleanup texts are let go where they may be
    /// (once the reload under way is applied, if there is one).
    mutating func letGoOfWrittenCleanups(_ keys: [SubscriptionKey]) {
        guard cleanupTextsInStateOnly else { return }
        guard !holdsCleanupTexts else {
            cleanupTextsToLetGo += keys
            return
        }
        for key in keys {
            _ = entries.update(key) { entry in
                if Self.mayLetGoOfCleanupText(entry) { entry.record.keepCleanupInStateOnly() }
            }
        }
    }

    /// The keys whose cleanup text a reload to `plans` may need and the book let go: those it
    /// replaces (another fingerprint) and those leaving, to read from the state before the
    /// reload. Until ``endReadingBack(isPending:)``, after the reload, no text is let go.
    mutating func beginReadingBack(for plans: [SubscriptionPlan]) -> [SubscriptionKey] {
        holdsCleanupTexts = true
        return cleanupsToReadBack(for: plans)
    }

    /// The reload is applied: the texts held meanwhile are let go, those of records not
    /// recorded again since (`isPending`: a change of it waits to be written).
    mutating func endReadingBack(isPending: (SubscriptionKey) -> Bool) {
        holdsCleanupTexts = false
        let keys = cleanupTextsToLetGo
        cleanupTextsToLetGo = []
        letGoOfWrittenCleanups(keys.filter { !isPending($0) })
    }

    /// ``beginReadingBack(for:)``'s keys.
    private func cleanupsToReadBack(for plans: [SubscriptionPlan]) -> [SubscriptionKey] {
        let inState = entries.compactMapBorrowing { _, entry in entry.pointee.record.cleanupInState == nil ? nil : () }.count
        guard inState > 0 else { return [] }
        var keys: [SubscriptionKey] = []
        var planned = 0
        for plan in plans {
            guard let replaced = entries.read(plan.key, { entry -> Bool? in
                guard entry.pointee.record.cleanupInState != nil else { return nil }
                return entry.pointee.record.fingerprint != plan.fingerprint
            }), let replaced else { continue }
            planned += 1
            if replaced { keys.append(plan.key) }
        }
        // Every entry whose text is in the state has its plan: none of them leaves.
        guard planned < inState else { return keys }
        let plannedKeys = Set(plans.lazy.map(\.key))
        keys += entries.compactMapBorrowing { key, entry in
            entry.pointee.record.cleanupInState != nil && !plannedKeys.contains(key) ? key : nil
        }
        return keys
    }

    /// Puts back the cleanup texts read from the state; returns the keys asked for that it did
    /// not find (their state lost them).
    mutating func restoreCleanups(_ texts: [SubscriptionKey: String], asked keys: [SubscriptionKey]) -> [SubscriptionKey] {
        var missing: [SubscriptionKey] = []
        for key in keys {
            _ = entries.update(key) { entry in
                guard entry.record.cleanupInState != nil else { return }
                if let text = texts[key] {
                    entry.record.setCleanup(text)
                } else {
                    missing.append(key)
                    entry.record.setCleanup(nil)
                }
            }
        }
        return missing
    }
}
