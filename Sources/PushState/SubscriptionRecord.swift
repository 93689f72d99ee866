/// One subscription's identity: an account and a service (SPEC §9.0). An account's own
/// Acrobits web services are its service ``acrobits``.
public struct SubscriptionKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The service name of an account's own Acrobits web services (`pushTokenReporterUrl`).
    public static let acrobits = "acrobits"

    public var account: String
    public var service: String

    public init(account: String, service: String) {
        self.account = account
        self.service = service
    }

    public static func < (lhs: SubscriptionKey, rhs: SubscriptionKey) -> Bool {
        (lhs.account, lhs.service) < (rhs.account, rhs.service)
    }

    /// `alice` for an account's own Acrobits web services, else `alice/journeys`.
    public var description: String { service == Self.acrobits ? account : account + "/" + service }
}

/// Where a subscription stands (SPEC §9.0), as `status` shows it.
public enum SubscriptionState: String, Sendable, CaseIterable {
    /// Not attempted yet (or waiting for a value it needs, such as a device token).
    case pending
    /// Sent and accepted; the backend's confirmation is awaited.
    case accepted
    /// The current values were delivered.
    case delivered
    /// The last attempt failed; it is tried again.
    case retrying
    /// The backend says these values can never succeed: not sent again until they change.
    case rejected
    /// Accepted, but still not confirmed when the backend's confirmation time ran out.
    case unconfirmed
    /// The service refused its credentials: nothing of it is sent until a reload or restart.
    case stopped
    /// The subscription left the configuration; its cleanup is owed.
    case removing
    /// It left the configuration in a start or reload that removed more accounts than
    /// `agent.removalGuard` allows (SPEC §14): its cleanup is held, not sent, until it is
    /// released (`remove --held`, or the guard off and a reload) or its account comes back.
    case held
}

/// What the state remembers about one subscription (SPEC §6).
///
/// Times are Unix time in milliseconds. The agent keeps these in memory and writes the changed
/// ones in batches; a ``StateStore`` only stores and loads them.
public struct SubscriptionRecord: Sendable, Equatable {
    public var key: SubscriptionKey
    /// Fingerprint of what the subscription currently sends (empty while removing).
    public var fingerprint: String
    /// Fingerprint of what was last delivered; nil if nothing ever was.
    public var deliveredFingerprint: String?
    public var state: SubscriptionState
    /// Finished attempts of the current delivery or cleanup (0 once delivered or replaced).
    public var attempts: Int
    /// When the last attempt finished.
    public var lastAttemptAt: Int64?
    /// The last outcome as a sentence: `delivered`, or why it failed (never a secret).
    public var lastOutcome: String?
    /// When the next attempt is due; nil when nothing is scheduled.
    public var nextDueAt: Int64?
    /// When the subscription was last delivered (or confirmed).
    public var lastSuccessAt: Int64?
    /// What the backend must remember (a registration request id, a notification key): opaque
    /// text the backend wrote.
    public var backendData: String?
    /// The cleanup rendered from the same values as the current delivery (opaque text, stored
    /// before that delivery is sent); nil when the backend has none.
    public var cleanup: String?
    /// Cleanups of earlier deliveries that may have reached the receiver, oldest first.
    public var pastCleanups: [String]
    /// Set only on a record being written as just delivered: what the state keeps of that
    /// delivery's parts, for `plan` to name what changed (PushBackend's `DeliveredParts`). A
    /// store keeps the last one written; nil writes leave it as it is, and ``records()`` does
    /// not read it back (``StateStore/deliveredParts()`` does), so the agent holds none.
    public var deliveredParts: String? = nil
    /// Set when the agent let go of the cleanup's text once it was written: its
    /// ``cleanupDigest(_:)``, and ``cleanup`` is nil. A store writing such a record leaves the
    /// stored cleanup as it is. Never read from a store; an agent keeps 200 bytes or more of
    /// removal request per subscription otherwise (a quarter of its memory, idle).
    public var cleanupInState: Int? = nil

    public init(key: SubscriptionKey, fingerprint: String = "", deliveredFingerprint: String? = nil,
                state: SubscriptionState = .pending, attempts: Int = 0, lastAttemptAt: Int64? = nil,
                lastOutcome: String? = nil, nextDueAt: Int64? = nil, lastSuccessAt: Int64? = nil,
                backendData: String? = nil, cleanup: String? = nil, pastCleanups: [String] = []) {
        self.key = key
        self.fingerprint = fingerprint
        self.deliveredFingerprint = deliveredFingerprint
        self.state = state
        self.attempts = attempts
        self.lastAttemptAt = lastAttemptAt
        self.lastOutcome = lastOutcome
        self.nextDueAt = nextDueAt
        self.lastSuccessAt = lastSuccessAt
        self.backendData = backendData
        self.cleanup = cleanup
        self.pastCleanups = pastCleanups
    }

    public var isRemoving: Bool { state == .removing }

    /// What the record keeps of a cleanup text whose text is let go: a digest of its bytes
    /// (`Hasher`: this process only, never stored).
    public static func cleanupDigest(_ text: String) -> Int {
        var text = text
        return text.withUTF8 { bytes in
            var hasher = Hasher()
            hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
            return hasher.finalize()
        }
    }

    /// Whether the record's cleanup is `text` (nil: it has none): equal as Swift compares texts
    /// while the record holds it, byte for byte when the state holds it.
    public func hasCleanup(_ text: String?) -> Bool {
        guard let cleanupInState else { return cleanup == text }
        guard let text else { return false }
        return Self.cleanupDigest(text) == cleanupInState
    }

    /// Lets go of the cleanup's text, which the state holds (``cleanupInState``).
    public mutating func keepCleanupInStateOnly() {
        guard let cleanup else { return }
        cleanupInState = Self.cleanupDigest(cleanup)
        self.cleanup = nil
    }

    /// Sets the cleanup's text (nil: none), held here again.
    public mutating func setCleanup(_ text: String?) {
        cleanup = text
        cleanupInState = nil
    }
}

/// Where the agent keeps its subscriptions (SPEC §6, §11): SQLite in a state directory, or a
/// shared database. Every store passes the same conformance tests.
///
/// A store only stores and loads; what to write, and batching the writes, is the agent's job.
/// Texts hold no NUL (PostgreSQL's text cannot; nothing the agent stores has one).
/// ``save(_:deleting:)`` writes in one transaction: a `kill -9` leaves all of a batch or none.
public protocol StateStore: Sendable {
    /// Where the state is, for messages (a file path, a database URI without its password).
    var location: String { get }
    /// Every stored record, ordered by key.
    func records() throws(StateError) -> [SubscriptionRecord]
    /// Writes `records` (inserted or replaced by key) and deletes `keys`, in one transaction.
    func save(_ records: [SubscriptionRecord], deleting keys: [SubscriptionKey]) throws(StateError)
    /// Gives back memory the store holds for speed; an idle agent calls it.
    func releaseMemory()
    /// What the state keeps of each subscription's last delivery's parts (for `plan`), by key;
    /// empty for a store, or a layout, that keeps none.
    func deliveredParts() throws(StateError) -> [SubscriptionKey: String]
    /// The stored cleanup texts of `keys`, by key (those without one left out): what an agent
    /// that let go of them reads back when a reload replaces or removes their delivery.
    func cleanups(of keys: [SubscriptionKey]) throws(StateError) -> [SubscriptionKey: String]
    /// Leaves the store's files as small as they can be once nothing more is written (a
    /// round's end, the agent's): SQLite's write-ahead log folded in and truncated.
    func compactOnClose()
}

extension StateStore {
    public func compactOnClose() {}
    public func deliveredParts() throws(StateError) -> [SubscriptionKey: String] { [:] }

    public func cleanups(of keys: [SubscriptionKey]) throws(StateError) -> [SubscriptionKey: String] {
        guard !keys.isEmpty else { return [:] }
        let wanted = Set(keys)
        var texts: [SubscriptionKey: String] = [:]
        for record in try records() where wanted.contains(record.key) { texts[record.key] = record.cleanup }
        return texts
    }
}
