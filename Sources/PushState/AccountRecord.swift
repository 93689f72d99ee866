/// What the state directory remembers about one account (SPEC §6).
///
/// Times are Unix time in milliseconds. The agent keeps these in memory and writes the changed
/// ones in batches; ``StateStore`` only stores and loads them.
public struct AccountRecord: Sendable, Equatable {
    /// Where the account stands, derived from the record.
    public enum Phase: String, Sendable {
        /// The current report was delivered.
        case delivered
        /// The current report failed at least once and is being retried.
        case retrying
        /// The current report has not been attempted yet.
        case pending
        /// The account left the configuration; its removal report is owed.
        case removing
    }

    /// The account's `id`.
    public var id: String
    /// Fingerprint of the account's current report request (empty while removing).
    public var fingerprint: String
    /// Fingerprint of the last report that was delivered; nil if none ever was.
    public var deliveredFingerprint: String?
    /// Finished attempts of the current report or removal (0 once delivered or replaced).
    public var attempts: Int
    /// When the last attempt finished.
    public var lastAttemptAt: Int64?
    /// `delivered`, or the reason the last attempt failed (never a secret).
    public var lastOutcome: String?
    /// When the next attempt is due; nil when nothing is scheduled.
    public var nextDueAt: Int64?
    /// When a report of this account was last delivered.
    public var lastSuccessAt: Int64?
    /// The removal request rendered from the same values as the account's current report
    /// (opaque text written by the agent, stored before that report is sent); nil when the
    /// account has no `accountRemovalReporterUrl`.
    public var removal: String?
    /// The removal requests of earlier reports of the account that may have reached a server
    /// (the last delivered one, and any attempted since), oldest first; emptied when a report is
    /// delivered. When the account leaves, these are sent before ``removal``.
    public var pastRemovals: [String]
    /// True when the account left the configuration and its removal is owed.
    public var isRemoving: Bool

    public init(id: String, fingerprint: String = "", deliveredFingerprint: String? = nil, attempts: Int = 0,
                lastAttemptAt: Int64? = nil, lastOutcome: String? = nil, nextDueAt: Int64? = nil,
                lastSuccessAt: Int64? = nil, removal: String? = nil, pastRemovals: [String] = [],
                isRemoving: Bool = false) {
        self.id = id
        self.fingerprint = fingerprint
        self.deliveredFingerprint = deliveredFingerprint
        self.attempts = attempts
        self.lastAttemptAt = lastAttemptAt
        self.lastOutcome = lastOutcome
        self.nextDueAt = nextDueAt
        self.lastSuccessAt = lastSuccessAt
        self.removal = removal
        self.pastRemovals = pastRemovals
        self.isRemoving = isRemoving
    }

    /// Where the account stands.
    public var phase: Phase {
        if isRemoving { return .removing }
        if !fingerprint.isEmpty && deliveredFingerprint == fingerprint && attempts == 0 { return .delivered }
        return attempts > 0 ? .retrying : .pending
    }
}
