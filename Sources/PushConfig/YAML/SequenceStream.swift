import PushSystem
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
///
/// When the parser splits the sequence (see ``SplitFeed``), `begin` also gives the stream the
/// second part's items come on, and `end(spliced:)` says whether they follow this stream's.
/// Whoever takes this stream must take that one too, or cancel it: its parser waits once a
/// thousand items are ready, and this stream's parser waits for that one at the split line.
final class SequenceStream: @unchecked Sendable {
    /// How the file starts, as far as the loader needs to know.
    enum Start {
        /// The sequence's items are coming; these are the root entries before it. With a
        /// `section`, the parser split the sequence (see ``SplitFeed``): the section's items
        /// come on it, from another thread, and follow this stream's items if, once this one
        /// ended, ``isSpliced`` says so; if not, cancel it (this stream then brings the items,
        /// or the parser parses the file again, which the loader notices by the item count).
        case streaming(before: [YAMLMapping.Entry], section: SequenceStream?)
        /// Nothing is streamed: take the finished file.
        case notStreaming
    }

    let key: String
    /// From how many bytes of text on the parser may split the sequence between two threads
    /// (see ``SplitFeed``); nil: never.
    let splitAbove: Int?

    private struct Shared {
        /// The root entries before the sequence, once it begins.
        var before: [YAMLMapping.Entry]?
        var section: SequenceStream?
        /// Whether the section's items follow this stream's.
        var spliced = false
        /// Items handed over and not yet taken.
        var ready: [YAMLNode] = []
        var ended = false
        /// Items the loader is done with, for the parser to free (see ``giveBack(_:)``).
        var spent: [[YAMLNode]] = []
        /// Whether the items are no longer wanted (see ``cancel()``).
        var cancelled = false
    }

    private let shared = ConditionLock(Shared())
    /// The parser's batch, not yet handed over (parser thread only).
    private var batch: [YAMLNode] = []
    private static let batchSize = 256
    /// The most items that wait for the loader: without a bound, a loader slower than the
    /// parser (a slow disk for its templates, a busy machine) let the trees of a whole file
    /// pile up. 1,024 and 4,096 were as fast on the 100k bench; 1,024 peaked 6 MB lower.
    private static let readyLimit = 1_024

    init(key: String, splitAbove: Int? = nil) {
        self.key = key
        self.splitAbove = splitAbove
    }

    // MARK: The parser's side

    func begin(before entries: [YAMLMapping.Entry], section: SequenceStream? = nil) {
        shared.change {
            $0.before = entries
            $0.section = section
        }
    }

    /// Hands `item` over; waits while `readyLimit` items are ready and not taken. Once the
    /// stream is cancelled, items are dropped.
    func add(_ item: YAMLNode) {
        batch.append(item)
        guard batch.count >= Self.batchSize else { return }
        let items = batch
        batch = []
        batch.reserveCapacity(Self.batchSize)
        let spent = shared.wait(until: { $0.ready.count < Self.readyLimit || $0.cancelled }) { shared in
            if !shared.cancelled { shared.ready += items }
            defer { shared.spent = [] }
            return shared.spent
        }
        // Freed here, on the parser's thread, once the lock is released.
        _ = consume spent
    }

    /// No more items (idempotent); `spliced`: the section's items follow.
    func end(spliced: Bool = false) {
        let rest = batch
        batch = []
        let spent = shared.change { shared in
            if !shared.cancelled { shared.ready += rest }
            if spliced { shared.spliced = true }
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

    /// Whether ``cancel()`` was called.
    var isCancelled: Bool {
        shared.read { $0.cancelled }
    }

    /// The items are no longer wanted, by either side: items waiting are dropped, the parser's
    /// `add` no longer waits, and the taker's `next` returns with `isLast` (idempotent).
    func cancel() {
        let dropped = shared.change { shared in
            shared.cancelled = true
            shared.ended = true
            defer { shared.ready = [] }
            return shared.ready
        }
        _ = consume dropped
    }

    /// Waits until the sequence begins or the parser is done without streaming it.
    func start() -> Start {
        shared.wait(until: { $0.before != nil || $0.ended }) { shared in
            shared.before.map { .streaming(before: $0, section: shared.section) } ?? .notStreaming
        }
    }

    /// Whether the section's items follow this stream's; known once it ended.
    var isSpliced: Bool {
        shared.read { $0.spliced }
    }

    /// Calls `body` with the items as they come (``next()``), each batch but the last handed
    /// back afterwards (``giveBack(_:)``).
    func forEachBatch(_ body: (_ items: [YAMLNode], _ isLast: Bool) -> Void) {
        while true {
            let (items, isLast) = next()
            body(items, isLast)
            if isLast { return }
            giveBack(items)
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
