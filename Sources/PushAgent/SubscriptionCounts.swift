import PushState

/// How many subscriptions stand where: for `STATUS=`, the log and `pushreporter status`.
public struct SubscriptionCounts: Sendable, Equatable {
    /// Distinct accounts among the subscriptions.
    public var accounts = 0
    public var subscriptions = 0
    /// Subscriptions by state.
    public var byState: [SubscriptionState: Int] = [:]

    /// Counts `records` (in any order).
    public init(_ records: some Sequence<SubscriptionRecord>) {
        var accountNames = Set<String>()
        for record in records {
            subscriptions += 1
            byState[record.state, default: 0] += 1
            accountNames.insert(record.key.account)
        }
        accounts = accountNames.count
    }

    /// Counts kept as they change (states with none are left out, as counting records does).
    public init(accounts: Int, subscriptions: Int, byState: [SubscriptionState: Int]) {
        self.accounts = accounts
        self.subscriptions = subscriptions
        self.byState = byState.filter { $0.value != 0 }
    }

    public subscript(_ state: SubscriptionState) -> Int { byState[state] ?? 0 }

    /// `12 accounts: 11 reported, 1 retrying`, then the other states that have any: what waits
    /// for a first attempt, what awaits confirmation, the removals owed, …. With more
    /// subscriptions than accounts (an account with several services) it says both.
    public var statusText: String {
        let what = subscriptions == accounts
            ? "\(accounts) \(accounts == 1 ? "account" : "accounts")"
            : "\(accounts) \(accounts == 1 ? "account" : "accounts"), \(subscriptions) subscriptions"
        var text = "\(what): \(self[.delivered]) reported, \(self[.retrying]) retrying"
        if self[.pending] > 0 { text += ", \(self[.pending]) waiting" }
        if self[.accepted] > 0 { text += ", \(self[.accepted]) awaiting confirmation" }
        if self[.rejected] > 0 { text += ", \(self[.rejected]) rejected" }
        if self[.unconfirmed] > 0 { text += ", \(self[.unconfirmed]) unconfirmed" }
        if self[.stopped] > 0 { text += ", \(self[.stopped]) stopped" }
        let removing = self[.removing]
        if removing > 0 { text += ", \(removing) \(removing == 1 ? "removal" : "removals") pending" }
        if self[.held] > 0 { text += ", \(self[.held]) \(self[.held] == 1 ? "removal" : "removals") held" }
        return text
    }
}
