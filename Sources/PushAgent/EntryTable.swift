import PushState

/// The book's entries by subscription: the entries side by side in one array, and an index of
/// where each is.
///
/// A `Dictionary` of entries keeps each entry (about 500 bytes: the record, the plan and its
/// request) inline in its buckets, and a dictionary leaves 25 to 62 % of them empty: 140 MB
/// for 100,000 subscriptions, most of the idle agent. Here only the index (a key and a position,
/// 40 bytes a bucket) has empty buckets, and the entries take what they use.
///
/// Removing swaps the last entry into the hole, so the order of iteration is not kept (as a
/// dictionary does not keep it either).
struct EntryTable: Sequence {
    typealias Entry = AgentBook.Entry
    typealias Element = (key: SubscriptionKey, value: Entry)

    private var positions: [SubscriptionKey: Int] = [:]
    /// The keys of `values`, position for position.
    private(set) var keys: [SubscriptionKey] = []
    private(set) var values: [Entry] = []
    /// How many entries have a job, by service: whether the book is settled is asked after
    /// every outcome, and walking 100,000 entries each time made sending quadratic.
    private(set) var jobsByService: [String: Int] = [:]
    /// How many entries have a job.
    var jobCount: Int { jobsByService.values.reduce(0, +) }
    /// How many entries stand in each state, and how many subscriptions each account has:
    /// `STATUS=` and the log ask after changes, and counting 100,000 entries each time cost a
    /// reload 0.23 s.
    private(set) var stateCounts: [SubscriptionState: Int] = [:]
    private var subscriptionsByAccount: [String: Int] = [:]

    /// How many accounts the entries are of.
    var accountCount: Int { subscriptionsByAccount.count }

    init() {}

    var count: Int { values.count }
    var isEmpty: Bool { values.isEmpty }

    subscript(key: SubscriptionKey) -> Entry? {
        get { positions[key].map { values[$0] } }
        set {
            if let newValue { set(newValue, for: key) } else { remove(key) }
        }
    }

    /// Sets `key`'s entry, moving `entry` in: an entry is some twenty references, each copy
    /// retains them all (a start sets 100,000).
    mutating func set(_ entry: consuming Entry, for key: SubscriptionKey) {
        // One lookup that also makes room for a new key; every position taken is below `end`.
        let end = values.count
        let position = Self.read(&positions[key, default: end])
        let isNew = position == end
        recount(key, from: isNew ? nil : standing(at: position), to: Standing(entry))
        if isNew {
            keys.append(key)
            values.append(entry)
        } else {
            values[position] = entry
        }
    }

    /// Reads `value` through its modify accessor: `&dictionary[key, default: value]` inserts the
    /// default when the key is missing, in the same lookup.
    private static func read<Value>(_ value: inout Value) -> Value {
        value
    }

    private mutating func remove(_ key: SubscriptionKey) {
        guard let position = positions[key] else { return }
        recount(key, from: standing(at: position), to: nil)
        positions[key] = nil
        let last = values.count - 1
        if position != last {
            values.swapAt(position, last)
            keys.swapAt(position, last)
            positions[keys[position]] = position
        }
        values.removeLast()
        keys.removeLast()
    }

    /// Reads the entry of `key` where it lies; nil when there is none. The subscript's getter
    /// copies the entry out, retaining its twenty-odd references and releasing them after: the
    /// agent reads entries several times per request.
    func read<Result>(_ key: SubscriptionKey, _ body: (borrowing Entry) -> Result) -> Result? {
        guard let position = positions[key] else { return nil }
        // Through the buffer: an array's subscript returns a copy.
        return values.withUnsafeBufferPointer { body($0[position]) }
    }

    /// What `transform` gives of each entry, read where it lies (iterating the table as a
    /// sequence copies each entry out).
    func compactMapBorrowing<Result>(_ transform: (SubscriptionKey, borrowing Entry) -> Result?) -> [Result] {
        var results: [Result] = []
        values.withUnsafeBufferPointer { values in
            for position in values.indices {
                if let result = transform(keys[position], values[position]) { results.append(result) }
            }
        }
        return results
    }

    /// Changes the entry of `key` where it lies, without copying it out and back (a reload does
    /// this for each of 100,000 unchanged subscriptions); nil when there is none.
    mutating func update<Result>(_ key: SubscriptionKey, _ body: (inout Entry) -> Result) -> Result? {
        guard let position = positions[key] else { return nil }
        let before = standing(at: position)
        let result = body(&values[position])
        recount(key, from: before, to: standing(at: position))
        return result
    }

    /// What the counts know of the entry at `position`, read where it lies.
    private func standing(at position: Int) -> Standing {
        values.withUnsafeBufferPointer { Standing($0[position]) }
    }

    /// What the counts know of an entry.
    private struct Standing: Equatable {
        var hasJob: Bool
        var state: SubscriptionState

        init(_ entry: borrowing Entry) {
            hasJob = entry.job != nil
            state = entry.record.state
        }
    }

    /// Moves `key` in the counts from `old` to `new` (nil: not in the table).
    private mutating func recount(_ key: SubscriptionKey, from old: Standing?, to new: Standing?) {
        guard old != new else { return }
        let jobChange = (new?.hasJob == true ? 1 : 0) - (old?.hasJob == true ? 1 : 0)
        if jobChange != 0 { jobsByService[key.service, default: 0] += jobChange }
        if old?.state != new?.state {
            if let state = old?.state { stateCounts[state, default: 0] -= 1 }
            if let state = new?.state { stateCounts[state, default: 0] += 1 }
        }
        if old == nil {
            subscriptionsByAccount[key.account, default: 0] += 1
        } else if new == nil {
            if subscriptionsByAccount[key.account] == 1 {
                subscriptionsByAccount[key.account] = nil
            } else {
                subscriptionsByAccount[key.account, default: 0] -= 1
            }
        }
    }

    mutating func reserveCapacity(_ count: Int) {
        positions.reserveCapacity(count)
        subscriptionsByAccount.reserveCapacity(count)
        keys.reserveCapacity(count)
        values.reserveCapacity(count)
    }

    struct Iterator: IteratorProtocol {
        fileprivate var keys: IndexingIterator<[SubscriptionKey]>
        fileprivate var values: IndexingIterator<[Entry]>

        mutating func next() -> Element? {
            guard let key = keys.next(), let value = values.next() else { return nil }
            return (key, value)
        }
    }

    func makeIterator() -> Iterator {
        Iterator(keys: keys.makeIterator(), values: values.makeIterator())
    }

    var underestimatedCount: Int { values.count }
}
