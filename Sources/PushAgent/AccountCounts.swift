import PushState

/// How many accounts stand where: for `STATUS=`, the log and `pushreporter status`.
public struct AccountCounts: Sendable, Equatable {
    public var accounts = 0
    public var delivered = 0
    public var retrying = 0
    public var pending = 0
    public var removing = 0

    /// Counts the phases of `records`.
    public init(_ records: some Sequence<AccountRecord>) {
        for record in records {
            accounts += 1
            switch record.phase {
            case .delivered: delivered += 1
            case .retrying: retrying += 1
            case .pending: pending += 1
            case .removing: removing += 1
            }
        }
    }

    /// `12 accounts: 11 reported, 1 retrying`, then what waits for a first attempt and the
    /// removals owed, when there are any.
    public var statusText: String {
        var text = "\(accounts) \(accounts == 1 ? "account" : "accounts"): \(delivered) reported, \(retrying) retrying"
        if pending > 0 { text += ", \(pending) waiting" }
        if removing > 0 { text += ", \(removing) \(removing == 1 ? "removal" : "removals") pending" }
        return text
    }
}
