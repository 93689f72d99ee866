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
    private(set) var jobCount = 0
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
            let position = positions[key]
            let hadJob = position.map { values[$0].job != nil } ?? false
            let hasJob = newValue?.job != nil
            if hadJob != hasJob {
                let change = hasJob ? 1 : -1
                jobCount += change
                jobsByService[key.service, default: 0] += change
            }
            let oldState = position.map { values[$0].record.state }
            let newState = newValue?.record.state
            if oldState != newState {
                if let oldState { stateCounts[oldState, default: 0] -= 1 }
                if let newState { stateCounts[newState, default: 0] += 1 }
            }
            if position == nil, newValue != nil {
                subscriptionsByAccount[key.account, default: 0] += 1
            } else if position != nil, newValue == nil {
                if subscriptionsByAccount[key.account] == 1 {
                    subscriptionsByAccount[key.account] = nil
                } else {
                    subscriptionsByAccount[key.account, default: 0] -= 1
                }
            }
            if let newValue {
                if let position = positions[key] {
                    values[position] = newValue
                } else {
                    positions[key] = values.count
                    keys.append(key)
                    values.append(newValue)
                }
            } else if let position = positions.removeValue(forKey: key) {
                let last = values.count - 1
                if position != last {
                    values.swapAt(position, last)
                    keys.swapAt(position, last)
                    positions[keys[position]] = position
                }
                values.removeLast()
                keys.removeLast()
            }
        }
    }

    /// Changes the entry of `key` where it lies, without copying it out and back (a reload does
    /// this for each of 100,000 unchanged subscriptions); nil when there is none.
    mutating func update<Result>(_ key: SubscriptionKey, _ body: (inout Entry) -> Result) -> Result? {
        guard let position = positions[key] else { return nil }
        let hadJob = values[position].job != nil
        let oldState = values[position].record.state
        let result = body(&values[position])
        let hasJob = values[position].job != nil
        if hadJob != hasJob {
            let change = hasJob ? 1 : -1
            jobCount += change
            jobsByService[key.service, default: 0] += change
        }
        let newState = values[position].record.state
        if oldState != newState {
            stateCounts[oldState, default: 0] -= 1
            stateCounts[newState, default: 0] += 1
        }
        return result
    }

    mutating func reserveCapacity(_ count: Int) {
        positions.reserveCapacity(count)
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
