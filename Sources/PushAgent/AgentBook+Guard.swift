import PushConfig
import PushState

/// The removal guard (SPEC §14): a start or reload that would remove more accounts than
/// `agent.removalGuard` allows holds those removals. A held subscription keeps its record, in
/// state `held`, with no job: nothing is sent for it until it is released (``release(_:)``, a
/// reload with the guard off) or its account comes back (planned again: a delivery, as before).
extension AgentBook {
    /// Whether the subscriptions `leaving` (not configured any more) are held: more of their
    /// accounts than the guard's count, and than its share of the `accountsInState`.
    func holdsRemovals(_ leaving: [SubscriptionKey], accountsInState: Int) -> Bool {
        guard let removalGuard, !leaving.isEmpty else { return false }
        let accounts = Set(leaving.lazy.map(\.account)).count
        return removalGuard.holds(removing: accounts, of: accountsInState)
    }

    /// `record` held, with the reason `status` shows.
    func heldRecord(_ record: SubscriptionRecord, accounts: Int) -> SubscriptionRecord {
        var held = record
        held.state = .held
        held.nextDueAt = nil
        held.lastOutcome = "removal held: \(accounts) accounts left the configuration at once, more than agent.removalGuard allows ("
            + (removalGuard.map { "\($0.count) and \($0.shareText)" } ?? "off") + "); pushreporter remove --held sends it"
        return held
    }

    /// How many accounts of `leaving` were not held already (nil: none): the log says a hold
    /// once, not again at each reload that keeps it.
    static func newlyHeld(_ leaving: [SubscriptionRecord]) -> Int? {
        let accounts = Set(leaving.lazy.filter { $0.state != .held }.map(\.key.account)).count
        return accounts > 0 ? accounts : nil
    }

    /// How many accounts' removals the last start or reload newly held, once: the log says it once.
    mutating func takeHeldNotice() -> Int? {
        defer { heldThisTime = nil }
        return heldThisTime
    }

    /// How many subscriptions are held now (with shared state: in the whole group, as the
    /// database said last).
    var heldRemovals: Int { owned == nil ? entries.stateCounts[.held] ?? 0 : sharedHeld }

    /// With shared state, what publishing a configuration did: the held removals of the group,
    /// and the accounts it held newly, which the log says once. `handedBack` (of
    /// ``releaseAfterPublish``, taken before publishing) are given up in the database next.
    mutating func published(_ removals: PublishedRemovals, handedBack: [SubscriptionKey]) {
        sharedHeld = removals.held
        if removals.newlyHeldAccounts > 0 { heldThisTime = removals.newlyHeldAccounts }
        if !handedBack.isEmpty {
            let given = Set(handedBack)
            releaseAfterPublish.removeAll { given.contains($0) }
        }
    }
}
