import PushState

/// The book's entries by subscription: the entries side by side in one array, and an index of
/// where each is.
///
/// A `Dictionary` of entries keeps each entry (320 bytes: the record, what the book keeps of
/// the plan) inline in its buckets, and a dictionary leaves 25 to 62 % of them empty: 140 MB
/// for 100,000 subscriptions, most of the idle agent. Here the entries take what they use, and
/// the index holds only positions (4 bytes a slot): each key is read from its entry. (A
/// `[SubscriptionKey: Int]` index, with the keys in an array beside it, and the accounts counted
/// in a `[String: Int]`, were 20 MB for 100,000 subscriptions: 100,000 is just above what
/// 131,072 buckets hold, so each had 262,144.)
///
/// Removing swaps the last entry into the hole, so the order of iteration is not kept (as a
/// dictionary does not keep it either).
struct EntryTable: Sequence {
    typealias Entry = AgentBook.Entry
    typealias Element = (key: SubscriptionKey, value: Entry)

    /// Open addressing with linear probing: each slot holds the position of an entry in
    /// `values`, or -1. Its size is a power of two, at least twice the entries.
    private var slots: [Int32] = []
    private(set) var values: [Entry] = []
    /// How many entries have a job owed (``AgentBook/Entry/isOwed``: not an interval's repeat),
    /// by service: whether the book is settled is asked after every outcome, and walking
    /// 100,000 entries each time made sending quadratic.
    private(set) var jobsByService: [String: Int] = [:]
    /// How many entries have a job owed.
    var jobCount: Int { jobsByService.values.reduce(0, +) }
    /// How many entries have a job not attempted yet, or in its first attempt (a delivery still
    /// pending): the agent gives memory back once none is left, retries or not.
    private(set) var firstAttemptsDue = 0
    /// How many entries stand in each state (and, below, how many accounts they are of):
    /// `STATUS=` and the log ask after changes, and counting 100,000 entries each time cost a
    /// reload 0.23 s.
    private(set) var stateCounts: [SubscriptionState: Int] = [:]
    /// The same by service, for `/metrics` (a scrape must not walk the entries).
    private(set) var stateCountsByService: [String: [SubscriptionState: Int]] = [:]
    /// How many entries each service has: the services an account may have other entries of.
    private var entriesByService: [String: Int] = [:]
    /// The entries less the accounts they are of: an entry that comes while its account has
    /// another adds one, and one that goes while its account keeps another takes one away.
    private var sharingAnAccount = 0

    /// How many accounts the entries are of.
    var accountCount: Int { values.count - sharingAnAccount }

    init() {}

    var count: Int { values.count }
    var isEmpty: Bool { values.isEmpty }

    subscript(key: SubscriptionKey) -> Entry? {
        get { position(of: key).map { values[$0] } }
        set {
            if let newValue { set(newValue, for: key) } else { remove(key) }
        }
    }

    /// Sets `key`'s entry, moving `entry` in: an entry is some twenty references, each copy
    /// retains them all (a start sets 100,000).
    mutating func set(_ entry: consuming Entry, for key: SubscriptionKey) {
        assert(entry.record.key == key, "an entry is kept under its own key")
        let (slot, found) = find(key)
        if let position = found {
            recount(key, from: standing(at: position), to: Standing(entry))
            values[position] = entry
            return
        }
        recount(key, from: nil, to: Standing(entry))
        if (values.count + 1) * 2 > slots.count {
            values.append(entry)
            rebuildIndex(capacity: values.count)
        } else {
            slots[slot] = Int32(values.count)
            values.append(entry)
        }
    }

    /// The slot where `key` is, or where it would go, and its entry's position when it is there.
    private func find(_ key: SubscriptionKey) -> (slot: Int, position: Int?) {
        guard !slots.isEmpty else { return (0, nil) }
        let mask = slots.count - 1
        return values.withUnsafeBufferPointer { values in
            slots.withUnsafeBufferPointer { slots in
                var slot = key.hashValue & mask
                while true {
                    let position = Int(slots[slot])
                    if position < 0 { return (slot, nil) }
                    if values[position].record.key == key { return (slot, position) }
                    slot = (slot + 1) & mask
                }
            }
        }
    }

    private func position(of key: SubscriptionKey) -> Int? {
        find(key).position
    }

    /// Makes the index again, with room for `capacity` entries at most half full.
    private mutating func rebuildIndex(capacity: Int) {
        var size = 8
        while size < capacity * 2 { size *= 2 }
        precondition(size <= Int(Int32.max), "too many subscriptions for the book's index")
        var slots = [Int32](repeating: -1, count: size)
        let mask = size - 1
        values.withUnsafeBufferPointer { values in
            for position in values.indices {
                var slot = values[position].record.key.hashValue & mask
                while slots[slot] >= 0 { slot = (slot + 1) & mask }
                slots[slot] = Int32(position)
            }
        }
        self.slots = slots
    }

    private mutating func remove(_ key: SubscriptionKey) {
        let (slot, found) = find(key)
        guard let position = found else { return }
        recount(key, from: standing(at: position), to: nil)
        emptySlot(slot)
        let last = values.count - 1
        if position != last {
            // The last entry moves into the hole: its slot follows.
            let moved = find(values[last].record.key).slot
            slots[moved] = Int32(position)
            values.swapAt(position, last)
        }
        values.removeLast()
    }

    /// Empties `slot`, moving back the entries after it that it kept from their own slot
    /// (linear probing leaves no gap in a run of slots).
    private mutating func emptySlot(_ slot: Int) {
        let mask = slots.count - 1
        var hole = slot
        var next = (slot + 1) & mask
        while slots[next] >= 0 {
            let home = values[Int(slots[next])].record.key.hashValue & mask
            // Whether `home` lies cyclically in (hole, next]: then the entry stays where it is.
            let stays = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next)
            if !stays {
                slots[hole] = slots[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        slots[hole] = -1
    }

    /// Reads the entry of `key` where it lies; nil when there is none. The subscript's getter
    /// copies the entry out, retaining its twenty-odd references and releasing them after: the
    /// agent reads entries several times per request.
    ///
    /// `body` gets a pointer, not the entry: an entry in the buffer handed to a closure as a
    /// `borrowing` argument is copied for the call all the same (the compiler cannot tell that
    /// nothing writes the buffer meanwhile). Read what is needed through `pointee`; a field
    /// read that way is not copied, but handing `pointee` whole to a function copies it.
    func read<Result>(_ key: SubscriptionKey, _ body: (UnsafePointer<Entry>) -> Result) -> Result? {
        guard let position = position(of: key) else { return nil }
        return values.withUnsafeBufferPointer { body($0.baseAddress! + position) }
    }

    /// What `transform` gives of each entry, read where it lies (iterating the table as a
    /// sequence copies each entry out; `transform` gets a pointer, as in ``read(_:_:)``).
    func compactMapBorrowing<Result>(_ transform: (SubscriptionKey, UnsafePointer<Entry>) -> Result?) -> [Result] {
        var results: [Result] = []
        values.withUnsafeBufferPointer { values in
            guard let base = values.baseAddress else { return }
            for position in values.indices {
                if let result = transform(values[position].record.key, base + position) { results.append(result) }
            }
        }
        return results
    }

    /// Changes the entry of `key` where it lies, without copying it out and back (a reload does
    /// this for each of 100,000 unchanged subscriptions); nil when there is none.
    mutating func update<Result>(_ key: SubscriptionKey, _ body: (inout Entry) -> Result) -> Result? {
        guard let position = position(of: key) else { return nil }
        let before = standing(at: position)
        let result = body(&values[position])
        recount(key, from: before, to: standing(at: position))
        return result
    }

    /// What the counts know of the entry at `position`, read where it lies.
    private func standing(at position: Int) -> Standing {
        values.withUnsafeBufferPointer { Standing(at: $0.baseAddress! + position) }
    }

    /// What the counts know of an entry.
    private struct Standing: Equatable {
        var isOwed: Bool
        var state: SubscriptionState

        init(_ entry: borrowing Entry) {
            isOwed = entry.isOwed
            state = entry.record.state
        }

        /// Of an entry in the table, read field by field (see ``EntryTable/read(_:_:)``).
        init(at entry: UnsafePointer<Entry>) {
            isOwed = Entry.isOwed(job: entry.pointee.job, repeatsOnInterval: entry.pointee.repeatsOnInterval,
                                  state: entry.pointee.record.state)
            state = entry.pointee.record.state
        }

        var awaitsFirstAttempt: Bool { isOwed && state == .pending }
    }

    /// Moves `key` in the counts from `old` to `new` (nil: not in the table).
    private mutating func recount(_ key: SubscriptionKey, from old: Standing?, to new: Standing?) {
        guard old != new else { return }
        let jobChange = (new?.isOwed == true ? 1 : 0) - (old?.isOwed == true ? 1 : 0)
        if jobChange != 0 { jobsByService[key.service, default: 0] += jobChange }
        firstAttemptsDue += (new?.awaitsFirstAttempt == true ? 1 : 0) - (old?.awaitsFirstAttempt == true ? 1 : 0)
        if old?.state != new?.state {
            if let state = old?.state {
                stateCounts[state, default: 0] -= 1
                stateCountsByService[key.service, default: [:]][state, default: 0] -= 1
            }
            if let state = new?.state {
                stateCounts[state, default: 0] += 1
                stateCountsByService[key.service, default: [:]][state, default: 0] += 1
            }
        }
        if old == nil {
            if sharesAccount(key) { sharingAnAccount += 1 }
            entriesByService[key.service, default: 0] += 1
        } else if new == nil {
            if sharesAccount(key) { sharingAnAccount -= 1 }
            entriesByService[key.service, default: 0] -= 1
            if entriesByService[key.service] == 0 {
                entriesByService[key.service] = nil
                stateCountsByService[key.service] = nil
            }
        }
    }

    /// Whether another entry is of `key`'s account (one lookup per other service).
    private func sharesAccount(_ key: SubscriptionKey) -> Bool {
        entriesByService.keys.contains { service in
            service != key.service && position(of: SubscriptionKey(account: key.account, service: service)) != nil
        }
    }

    mutating func reserveCapacity(_ count: Int) {
        values.reserveCapacity(count)
        if count * 2 > slots.count { rebuildIndex(capacity: count) }
    }

    struct Iterator: IteratorProtocol {
        fileprivate var values: IndexingIterator<[Entry]>

        mutating func next() -> Element? {
            values.next().map { ($0.record.key, $0) }
        }
    }

    func makeIterator() -> Iterator {
        Iterator(values: values.makeIterator())
    }

    var underestimatedCount: Int { values.count }
}
