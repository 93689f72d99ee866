#if canImport(Glibc)
import Glibc
#endif

/// Hands the items of one top-level sequence (`accounts:`) from the thread parsing a file to the
/// thread loading it while the file is still being parsed, so that reading accounts overlaps
/// parsing them.
///
/// The parser streams only a sequence that is the value of `key` in the root mapping, without a
/// tag or an anchor, with no `<<` merge in the root before it; it then calls `begin` with the
/// root entries before the sequence, `add` for each item, and `end` (always, also when it did not
/// stream or failed). The items are kept in the tree as well: the loader checks the finished
/// tree against what it read before it relies on it.
final class SequenceStream: @unchecked Sendable {
    /// How the file starts, as far as the loader needs to know.
    enum Start {
        /// The sequence's items are coming; these are the root entries before it.
        case streaming(before: [(key: YAMLScalar, value: YAMLNode)])
        /// Nothing is streamed: take the finished file.
        case notStreaming
    }

    let key: String
    /// Guarded by `lock`.
    private var before: [(key: YAMLScalar, value: YAMLNode)]?
    private var ready: [YAMLNode] = []
    private var ended = false
    /// The parser's batch, not yet handed over (parser thread only).
    private var batch: [YAMLNode] = []
    private static let batchSize = 256
    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let changed = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init(key: String) {
        self.key = key
        pthread_mutex_init(lock, nil)
        pthread_cond_init(changed, nil)
    }

    deinit {
        pthread_cond_destroy(changed)
        pthread_mutex_destroy(lock)
        changed.deallocate()
        lock.deallocate()
    }

    private func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(lock)
        defer {
            pthread_cond_broadcast(changed)
            pthread_mutex_unlock(lock)
        }
        return body()
    }

    // MARK: The parser's side

    var hasBegun: Bool { locked { before != nil } }

    func begin(before entries: [(key: YAMLScalar, value: YAMLNode)]) {
        locked { before = entries }
    }

    func add(_ item: YAMLNode) {
        batch.append(item)
        if batch.count >= Self.batchSize { flush() }
    }

    /// No more items (idempotent).
    func end() {
        let rest = batch
        batch = []
        locked {
            ready += rest
            ended = true
        }
    }

    private func flush() {
        let items = batch
        batch = []
        batch.reserveCapacity(Self.batchSize)
        locked { ready += items }
    }

    // MARK: The loader's side

    /// Waits until the sequence begins or the parser is done without streaming it.
    func start() -> Start {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        while before == nil && !ended { pthread_cond_wait(changed, lock) }
        if let before { return .streaming(before: before) }
        return .notStreaming
    }

    /// The items handed over since the last call, waiting for some; `isLast` when the parser is
    /// done (then these are all that remain).
    func next() -> (items: [YAMLNode], isLast: Bool) {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        while ready.isEmpty && !ended { pthread_cond_wait(changed, lock) }
        let items = ready
        ready = []
        return (items, ended)
    }
}
