import PushBackend
import Synchronization

/// A ``SentOnceLedger`` in memory: what the state database's `tracked_actions` keeps, without
/// the database.
public final class MemorySentOnceLedger: SentOnceLedger {
    private let sent: Mutex<Set<String>>

    /// - Parameter keys: what counts as sent before the test begins.
    public init(_ keys: Set<String> = []) { sent = Mutex(keys) }

    /// Every key recorded as sent, those given at the start included.
    public var keys: Set<String> { sent.withLock { $0 } }

    public var location: String { "memory" }
    public func wasSent(_ key: String) throws -> Bool { sent.withLock { $0.contains(key) } }
    public func recordSent(_ entry: SentOnceEntry) throws { _ = sent.withLock { $0.insert(entry.key) } }
}
