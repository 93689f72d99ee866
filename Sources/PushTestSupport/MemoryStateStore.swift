import PushState
import Synchronization

/// A state store in memory, for in-process tests of the agent: it keeps what it is given, as a
/// database would, and can be told to fail its writes.
public final class MemoryStateStore: StateStore {
    private let stored = Mutex<[SubscriptionKey: SubscriptionRecord]>([:])
    private let failing = Mutex(false)
    private let saves = Mutex(0)
    private let refused = Mutex(0)

    public init(_ records: [SubscriptionRecord] = []) {
        stored.withLock { stored in for record in records { stored[record.key] = record } }
    }

    public var location: String { "memory" }

    /// While true, every `save` throws and changes nothing.
    public var failsWrites: Bool {
        get { failing.withLock { $0 } }
        set { failing.withLock { $0 = newValue } }
    }

    /// How many `save` calls wrote something.
    public var saveCount: Int { saves.withLock { $0 } }

    /// How many `save` calls failed because the store was told to fail.
    public var failedSaveCount: Int { refused.withLock { $0 } }

    public func records() throws(StateError) -> [SubscriptionRecord] {
        stored.withLock { $0.values.sorted { $0.key < $1.key } }
    }

    public func save(_ records: [SubscriptionRecord], deleting keys: [SubscriptionKey]) throws(StateError) {
        if failing.withLock({ $0 }) {
            refused.withLock { $0 += 1 }
            throw StateError.unavailable("the memory store is told to fail")
        }
        stored.withLock { stored in
            for record in records {
                var record = record
                // The agent let go of its cleanup's text: the stored one stays.
                if record.cleanupInState != nil { record.setCleanup(stored[record.key]?.cleanup) }
                stored[record.key] = record
            }
            for key in keys { stored[key] = nil }
        }
        saves.withLock { $0 += 1 }
    }

    public func releaseMemory() {}
}
