/// Hands the items of one top-level sequence (`accounts:`) from the thread parsing a file to the
/// thread loading it while the file is still being parsed, so that reading accounts overlaps
/// parsing them.
///
/// The parser streams only a sequence that is the value of `key` in the root mapping, without a
/// tag or an anchor, with no `<<` merge in the root before it; it then calls `begin` with the
/// root entries before the sequence, `add` for each item, and `end` when the sequence closes.
/// ``ParsedFile`` ends the stream too once the file is parsed, or could not be read, so a
/// loader waiting on it always wakes. The items are not kept in the tree, whose sequence stays
/// empty (``YAMLParseResult/streamedItemCount`` says how many went): the loader checks the
/// finished tree against what it read before it relies on it, and parses the file again when it
/// cannot.
final class SequenceStream: @unchecked Sendable {
    /// How the file starts, as far as the loader needs to know.
    enum Start {
        /// The sequence's items are coming; these are the root entries before it.
        case streaming(before: [(key: YAMLScalar, value: YAMLNode)])
        /// Nothing is streamed: take the finished file.
        case notStreaming
    }

    let key: String

    private struct Shared {
        /// The root entries before the sequence, once it begins.
        var before: [(key: YAMLScalar, value: YAMLNode)]?
        /// Items handed over and not yet taken.
        var ready: [YAMLNode] = []
        var ended = false
        /// Items the loader is done with, for the parser to free (see ``giveBack(_:)``).
        var spent: [[YAMLNode]] = []
    }

    private let shared = ConditionLock(Shared())
    /// The parser's batch, not yet handed over (parser thread only).
    private var batch: [YAMLNode] = []
    private static let batchSize = 256
    /// The most items that wait for the loader: without a bound, a loader slower than the
    /// parser (a slow disk for its templates, a busy machine) let the trees of a whole file
    /// pile up. 1,024 and 4,096 were as fast on the 100k bench; 1,024 peaked 6 MB lower.
    private static let readyLimit = 1_024

    init(key: String) {
        self.key = key
    }

    // MARK: The parser's side

    func begin(before entries: [(key: YAMLScalar, value: YAMLNode)]) {
        shared.change { $0.before = entries }
    }

    /// Hands `item` over; waits while `readyLimit` items are ready and not taken.
    func add(_ item: YAMLNode) {
        batch.append(item)
        guard batch.count >= Self.batchSize else { return }
        let items = batch
        batch = []
        batch.reserveCapacity(Self.batchSize)
        let spent = shared.wait(until: { $0.ready.count < Self.readyLimit }) { shared in
            shared.ready += items
            defer { shared.spent = [] }
            return shared.spent
        }
        // Freed here, on the parser's thread, once the lock is released.
        _ = consume spent
    }

    /// No more items (idempotent).
    func end() {
        let rest = batch
        batch = []
        let spent = shared.change { shared in
            shared.ready += rest
            shared.ended = true
            defer { shared.spent = [] }
            return shared.spent
        }
        // Freed here, on the parser's thread, once the lock is released.
        _ = consume spent
    }

    // MARK: The loader's side

    /// Hands back items the loader is done with, so that the parsing thread frees them.
    ///
    /// Their memory comes from the parsing thread's heap, whose lock every `malloc` there takes:
    /// freed from the loader's threads, 100,000 accounts' trees made the two threads wait on
    /// each other (glibc's arena lock, woken through futex calls).
    /// Once the parser is done with the file they are not kept (nothing would free them until
    /// the load ends): the loader frees them.
    func giveBack(_ items: [YAMLNode]) {
        shared.change { shared in
            if !shared.ended { shared.spent.append(items) }
        }
    }

    /// Waits until the sequence begins or the parser is done without streaming it.
    func start() -> Start {
        shared.wait(until: { $0.before != nil || $0.ended }) { shared in
            shared.before.map { .streaming(before: $0) } ?? .notStreaming
        }
    }

    /// The items handed over since the last call, waiting for some; `isLast` when the parser is
    /// done (then these are all that remain).
    func next() -> (items: [YAMLNode], isLast: Bool) {
        shared.wait(until: { !$0.ready.isEmpty || $0.ended }) { shared in
            defer { shared.ready = [] }
            return (shared.ready, shared.ended)
        }
    }
}
