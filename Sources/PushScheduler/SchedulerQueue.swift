import HeapModule

/// The bookkeeping of ``ReportScheduler``: which reports wait, which are in flight, and which may start now.
///
/// Pure and synchronous (the shell holds it under a lock and feeds it the time). Every report
/// waiting for its due time is in `ready`, a heap ordered by due time then submission order. A
/// due report that may not start yet moves to a heap of its own kind, so it never holds back
/// the others: to its host's heap while the host is at `perHostConcurrency`, to its label's heap
/// while the label is held. A batched report is also in its group's heap (one per batching and
/// label), from which the due reports of its group join a batch that starts.
///
/// Replaced, cancelled and started reports leave heap entries behind (a batched report that
/// starts from one heap leaves its entry in the other): an entry is live only while its key's
/// pending record carries the same token and is queued. Stale entries are dropped when they
/// surface and swept out when they outnumber the live reports.
struct SchedulerQueue<Key: Hashable & Sendable, Instant: InstantProtocol> where Instant.Duration == Duration {
    /// A request to start now: one report, or the reports of one batch in the order they go out.
    struct Request {
        struct Item {
            var key: Key
            var attempt: Int
            var token: UInt64
        }

        var id: UInt64
        /// The host the request counts against: its first report's.
        var host: String
        var items: [Item]
    }

    typealias Entry = SchedulerQueueEntry

    /// What a submission says about where and how its report goes; kept across its retries.
    struct Submission {
        var host: String
        /// Nil unless it batches (a limit above 1).
        var batch: Batching?
        var hold: String?

        init(host: String, batch: Batching? = nil, hold: String? = nil) {
            self.host = host
            self.batch = batch?.isBatched == true ? batch : nil
            self.hold = hold
        }

        /// How many heap entries a queued report of this submission has: its own and its group's.
        var entriesWhenQueued: Int { batch == nil ? 1 : 2 }
    }

    /// What the queue keeps of a report's ``ReportAttempts``: its failures so far and whether it
    /// is in the slow lane. The policy is the queue's; keeping a copy of it (and the last failure,
    /// which the queue never reads) in each report made every pending report twice the size, and
    /// the pending dictionary is the queue's largest part when a hundred thousand reports wait.
    struct Retries {
        var failures: Int32 = 0
        var isSlowLane = false

        var nextAttempt: Int { Int(failures) + 1 }

        /// Records a failed attempt with `policy` and returns how long to wait before the next one.
        mutating func attemptFailed(_ failure: AttemptFailure, policy: BackoffPolicy, nowEpochSeconds: Int64,
                                    using generator: inout some RandomNumberGenerator) -> Duration {
            var attempts = ReportAttempts(policy: policy, failures: Int(failures), isSlowLane: isSlowLane)
            let delay = attempts.attemptFailed(failure, nowEpochSeconds: nowEpochSeconds, using: &generator)
            failures = Int32(clamping: attempts.failures)
            isSlowLane = attempts.isSlowLane
            return delay
        }
    }

    /// A report that is not in flight.
    struct Pending {
        var submission: Submission
        var due: Instant
        var sequence: UInt64
        var token: UInt64
        var attempts: Retries
        /// False while it waits for an in-flight attempt of the same key to finish.
        var isQueued: Bool
        /// The key's place in `keys`, which its heap entries name.
        var slot: Int32
    }

    /// A report whose attempt is running.
    struct InFlight {
        var submission: Submission
        var token: UInt64
        var attempts: Retries
        /// Set when the key was re-submitted or cancelled meanwhile: the result is ignored.
        var isDiscarded: Bool
        /// The key's place in `keys`.
        var slot: Int32
    }

    /// A paused label: until `end`, or until released when `end` is nil.
    struct Hold {
        var end: Instant?
    }

    /// The result of a request whose `perform` returned too few.
    static var missingResult: AttemptResult {
        .failed(AttemptFailure(status: nil, reason: "no result"))
    }

    let policy: BackoffPolicy
    let concurrency: Int
    let perHostConcurrency: Int

    private(set) var pending: [Key: Pending] = [:]
    private(set) var inFlight: [Key: InFlight] = [:]
    private(set) var holds: [String: Hold] = [:]
    private var requests: [UInt64: Request] = [:]
    private var ready = Heap<Entry>()
    private var hostQueues: [String: Heap<Entry>] = [:]
    private var holdQueues: [String: Heap<Entry>] = [:]
    /// The queued reports of each batching, by their hold label (nil: none).
    private var groupQueues: [Batching: [String?: Heap<Entry>]] = [:]
    private var inFlightPerHost: [String: Int] = [:]
    private var lastSequence: UInt64 = 0
    private var lastToken: UInt64 = 0
    private var lastRequestID: UInt64 = 0
    /// How many heap entries are stale (the sweep's trigger).
    private(set) var staleEntries = 0
    /// The keys pending or in flight, at the slots their heap entries name; nil where free.
    /// A slot is the key's from its submission until it leaves the queue, then given to another
    /// key: an entry left behind then finds a record with another token, so it is stale.
    private var keys: [Key?] = []
    private var freeSlots: [Int32] = []
    /// The instant heap entries count their due times from (the first one the queue saw).
    private var origin: Instant?

    init(policy: BackoffPolicy, concurrency: Int, perHostConcurrency: Int) {
        self.policy = policy
        self.concurrency = concurrency
        self.perHostConcurrency = perHostConcurrency
    }

    var pendingCount: Int { pending.count }
    /// Pending reports that have not failed yet: submitted, and waiting for their first attempt
    /// (a re-submission starts its count afresh). Kept as they come and go.
    private(set) var firstAttemptsWaiting = 0
    /// Reports in flight.
    var inFlightCount: Int { inFlight.count }
    /// Requests in flight: a batch counts once.
    var inFlightRequests: Int { requests.count }

    /// How many entries the heaps hold, live and stale (for tests of the sweeping).
    var heapEntryCount: Int {
        ready.count + hostQueues.values.reduce(0) { $0 + $1.count } + holdQueues.values.reduce(0) { $0 + $1.count }
            + groupQueues.values.reduce(0) { $0 + $1.values.reduce(0) { $0 + $1.count } }
    }

    /// Schedules `key` at `due` with a fresh attempt count, replacing whatever was pending for it.
    mutating func submit(_ key: Key, host: String, due: Instant, batch: Batching? = nil, hold: String? = nil) {
        let slot = pending[key]?.slot ?? inFlight[key]?.slot ?? takeSlot(for: key)
        dropPending(key)
        lastSequence += 1
        lastToken += 1
        let record = Pending(
            submission: Submission(host: host, batch: batch, hold: hold), due: due, sequence: lastSequence,
            token: lastToken, attempts: Retries(), isQueued: false, slot: slot
        )
        firstAttemptsWaiting += 1
        if inFlight[key] != nil {
            inFlight[key]!.isDiscarded = true
            pending[key] = record
        } else {
            enqueue(key, record)
        }
        sweepIfNeeded()
    }

    /// Makes room for `count` more pending reports at once, so that a burst of submissions (every
    /// account on start) does not grow the dictionary step by step, each step holding the old
    /// table and the new one at the same time.
    mutating func reserveCapacity(forAdding count: Int) {
        pending.reserveCapacity(pending.count + count)
    }

    /// Forgets `key`: its pending record goes, and the result of an attempt in flight is ignored.
    mutating func cancel(_ key: Key) {
        if let slot = pending[key]?.slot, inFlight[key] == nil { freeSlot(slot) }
        dropPending(key)
        inFlight[key]?.isDiscarded = true
        sweepIfNeeded()
        releaseRoomIfDrained()
    }

    /// Holds `label` until `end` (nil: until released); a hold already in place that ends later stays.
    mutating func hold(_ label: String, until end: Instant?) {
        guard let current = holds[label] else {
            holds[label] = Hold(end: end)
            return
        }
        guard let currentEnd = current.end, let end else {
            holds[label] = Hold(end: nil)
            return
        }
        holds[label] = Hold(end: Swift.max(currentEnd, end))
    }

    /// Ends the hold of `label` now: its reports waiting on it queue again in their due order.
    mutating func release(_ label: String) {
        guard holds.removeValue(forKey: label) != nil else { return }
        guard let parked = holdQueues.removeValue(forKey: label) else { return }
        for entry in parked.unordered {
            if Self.isLive(entry, in: pending, keys: keys) {
                ready.insert(entry)
            } else {
                staleEntries -= 1
            }
        }
    }

    /// Moves every report that may start at `now` to in flight, earliest due first, in requests.
    mutating func takeStartable(now: Instant) -> [Request] {
        endHolds(now: now)
        let nowOffset = dueOffset(now)
        var started: [Request] = []
        while requests.count < concurrency {
            staleEntries -= Self.dropStaleHead(of: &ready, pending: pending, keys: keys)
            var waiting: (entry: Entry, host: String)?
            for host in Array(hostQueues.keys) where (inFlightPerHost[host] ?? 0) < perHostConcurrency {
                staleEntries -= Self.dropStaleHead(of: &hostQueues[host]!, pending: pending, keys: keys)
                guard let head = hostQueues[host]!.min else {
                    hostQueues[host] = nil
                    continue
                }
                if waiting == nil || head < waiting!.entry { waiting = (head, host) }
            }
            let entry: Entry
            if let head = ready.min, head.due <= nowOffset, waiting == nil || head < waiting!.entry {
                entry = ready.removeMin()
            } else if let (head, host) = waiting {
                hostQueues[host]!.removeMin()
                if hostQueues[host]!.isEmpty { hostQueues[host] = nil }
                entry = head
            } else {
                break
            }
            let submission = pending[keys[Int(entry.slot)]!]!.submission
            if let label = submission.hold, holds[label] != nil {
                holdQueues[label, default: Heap()].insert(entry)
            } else if (inFlightPerHost[submission.host] ?? 0) >= perHostConcurrency {
                hostQueues[submission.host, default: Heap()].insert(entry)
            } else {
                started.append(startRequest(entry, now: now))
            }
        }
        sweepIfNeeded()
        releaseRoomIfDrained()
        return started
    }

    /// When something waiting on time may start, if waiting for that time could start something.
    ///
    /// The earlier of the next due time and the end of a timed hold that due reports wait on.
    /// Nil when nothing waits on time: every due report is held by a cap (to be released by a
    /// finishing attempt) or by a hold without end, or nothing is pending at all.
    mutating func nextDeadline(now: Instant) -> Instant? {
        endHolds(now: now)
        staleEntries -= Self.dropStaleHead(of: &ready, pending: pending, keys: keys)
        if let head = ready.min, head.due <= dueOffset(now) { return nil }
        // The head is live (stale ones were just dropped): its record has the exact instant.
        var deadline = ready.min.map { pending[keys[Int($0.slot)]!]!.due }
        for (label, hold) in holds {
            guard let end = hold.end, deadline == nil || end < deadline! else { continue }
            guard holdQueues[label] != nil else { continue }
            staleEntries -= Self.dropStaleHead(of: &holdQueues[label]!, pending: pending, keys: keys)
            if holdQueues[label]!.isEmpty {
                holdQueues[label] = nil
            } else {
                deadline = end
            }
        }
        return deadline
    }

    /// Records the results of the request `id`, in the order of its items, and returns the
    /// events to report; an item without a result failed with ``missingResult``.
    ///
    /// A failed report is queued again after the delay its ``ReportAttempts`` decides; a
    /// delivered one is forgotten. A discarded attempt (re-submitted or cancelled meanwhile)
    /// reports nothing and releases the replacement submission, if there is one. A report with a
    /// hold label that fails with 429 or 503 holds its label for its retry delay.
    mutating func finish(
        request id: UInt64,
        results: [AttemptResult],
        now: Instant,
        nowEpochSeconds: Int64,
        using generator: inout some RandomNumberGenerator
    ) -> [SchedulerEvent<Key>] {
        guard let request = requests.removeValue(forKey: id) else { return [] }
        let remaining = inFlightPerHost[request.host, default: 1] - 1
        inFlightPerHost[request.host] = remaining > 0 ? remaining : nil
        var events: [SchedulerEvent<Key>] = []
        for (index, item) in request.items.enumerated() {
            let result = index < results.count ? results[index] : Self.missingResult
            if let event = finish(item.key, token: item.token, result: result, now: now, nowEpochSeconds: nowEpochSeconds, using: &generator) {
                events.append(event)
            }
        }
        return events
    }

    private mutating func finish(
        _ key: Key,
        token: UInt64,
        result: AttemptResult,
        now: Instant,
        nowEpochSeconds: Int64,
        using generator: inout some RandomNumberGenerator
    ) -> SchedulerEvent<Key>? {
        guard let record = inFlight[key], record.token == token else { return nil }
        inFlight[key] = nil

        if record.isDiscarded {
            if let replacement = pending[key] {
                if !replacement.isQueued { enqueue(key, replacement) }
            } else {
                freeSlot(record.slot)
            }
            return nil
        }
        var attempts = record.attempts
        let attempt = attempts.nextAttempt
        switch result {
        case .delivered:
            freeSlot(record.slot)
            return .delivered(key, attempts: attempt)
        case .failed(let failure) where failure.notSentRetry != nil:
            // Nothing was sent: the same attempt comes again later, its count and backoff unchanged.
            let delay = max(failure.notSentRetry!, .zero)
            lastSequence += 1
            lastToken += 1
            if attempts.failures == 0 { firstAttemptsWaiting += 1 }
            enqueue(key, Pending(
                submission: record.submission, due: now.advanced(by: delay), sequence: lastSequence, token: lastToken,
                attempts: attempts, isQueued: false, slot: record.slot
            ))
            return .failed(key, attempt: attempt, failure: failure, retryIn: delay)
        case .failed(let failure):
            let delay = attempts.attemptFailed(failure, policy: policy, nowEpochSeconds: nowEpochSeconds, using: &generator)
            let due = now.advanced(by: delay)
            if let label = record.submission.hold, failure.status == 429 || failure.status == 503 {
                hold(label, until: due)
            }
            lastSequence += 1
            // A fresh token: a batched report's entries from its last wait may still be in a heap.
            lastToken += 1
            enqueue(key, Pending(
                submission: record.submission, due: due, sequence: lastSequence, token: lastToken,
                attempts: attempts, isQueued: false, slot: record.slot
            ))
            return .failed(key, attempt: attempt, failure: failure, retryIn: delay)
        }
    }

    /// A free slot in `keys`, now `key`'s.
    private mutating func takeSlot(for key: Key) -> Int32 {
        if let slot = freeSlots.popLast() {
            keys[Int(slot)] = key
            return slot
        }
        keys.append(key)
        return Int32(keys.count - 1)
    }

    /// Gives back the slot of a key that leaves the queue.
    private mutating func freeSlot(_ slot: Int32) {
        keys[Int(slot)] = nil
        freeSlots.append(slot)
    }

    /// `instant` as heap entries keep it: the time since `origin` (set by the first call).
    private mutating func dueOffset(_ instant: Instant) -> Duration {
        guard let origin else {
            origin = instant
            return .zero
        }
        return origin.duration(to: instant)
    }

    /// Records `record` as pending and queued, with its entries in `ready` and its group's heap.
    private mutating func enqueue(_ key: Key, _ record: Pending) {
        var record = record
        record.isQueued = true
        pending[key] = record
        let entry = Entry(due: dueOffset(record.due), sequence: record.sequence, token: record.token, slot: record.slot)
        ready.insert(entry)
        if let batch = record.submission.batch {
            groupQueues[batch, default: [:]][record.submission.hold, default: Heap()].insert(entry)
        }
    }

    /// Removes the pending record of `key`, counting the entries it leaves behind.
    private mutating func dropPending(_ key: Key) {
        guard let removed = pending.removeValue(forKey: key) else { return }
        if removed.attempts.failures == 0 { firstAttemptsWaiting -= 1 }
        guard removed.isQueued else { return }
        staleEntries += removed.submission.entriesWhenQueued
    }

    /// Ends the timed holds that are over at `now`.
    private mutating func endHolds(now: Instant) {
        for (label, hold) in holds {
            if let end = hold.end, end <= now { release(label) }
        }
    }

    /// Starts the report of `entry` (popped from one of its heaps), with the due reports of its
    /// group that may join it when it batches.
    private mutating func startRequest(_ entry: Entry, now: Instant) -> Request {
        let key = keys[Int(entry.slot)]!
        let submission = pending[key]!.submission
        var items = [moveToFlight(key)]
        // The group's heaps are taken out while its members are picked, so that the group (a
        // dictionary key hashed from its name) is looked up once per request, not several
        // times for each member.
        if let batch = submission.batch, var labels = groupQueues.removeValue(forKey: batch) {
            let now = dueOffset(now)
            while items.count < batch.limit, let key = takeDueMember(from: &labels, now: now) {
                items.append(moveToFlight(key))
            }
            if !labels.isEmpty { groupQueues[batch] = labels }
        }
        lastRequestID += 1
        let request = Request(id: lastRequestID, host: submission.host, items: items)
        requests[request.id] = request
        inFlightPerHost[submission.host, default: 0] += 1
        return request
    }

    /// Pops the earliest due report of a group, from its heaps by hold label (`labels`), whose
    /// label is not held, if any is due at `now` (counted from `origin`).
    ///
    /// Costs a look at each label's heap of the group (few: a group is usually one service).
    private mutating func takeDueMember(from labels: inout [String?: Heap<Entry>], now: Duration) -> Key? {
        if labels.count == 1, let label = labels.keys.first {
            // One label (the usual case): no list of labels to make for each member.
            guard label.map({ holds[$0] == nil }) ?? true else { return nil }
            staleEntries -= Self.dropStaleHead(of: &labels[label]!, pending: pending, keys: keys)
            guard let head = labels[label]!.min else {
                labels[label] = nil
                return nil
            }
            guard head.due <= now else { return nil }
            labels[label]!.removeMin()
            return keys[Int(head.slot)]!
        }
        var earliest: (entry: Entry, label: String?)?
        for label in Array(labels.keys) where label.map({ holds[$0] == nil }) ?? true {
            staleEntries -= Self.dropStaleHead(of: &labels[label]!, pending: pending, keys: keys)
            guard let head = labels[label]!.min else {
                labels[label] = nil
                continue
            }
            if head.due <= now, earliest == nil || head < earliest!.entry { earliest = (head, label) }
        }
        guard let (entry, label) = earliest else { return nil }
        labels[label]!.removeMin()
        return keys[Int(entry.slot)]!
    }

    /// Moves the queued report `key`, one of whose entries was just popped, to in flight.
    private mutating func moveToFlight(_ key: Key) -> Request.Item {
        let record = pending.removeValue(forKey: key)!
        if record.attempts.failures == 0 { firstAttemptsWaiting -= 1 }
        staleEntries += record.submission.entriesWhenQueued - 1
        inFlight[key] = InFlight(submission: record.submission, token: record.token, attempts: record.attempts, isDiscarded: false,
                                 slot: record.slot)
        return Request.Item(key: key, attempt: record.attempts.nextAttempt, token: record.token)
    }

    /// Once nothing waits, lets go of the room a burst made: dictionaries and heaps keep their
    /// capacity when emptied, and an idle agent should not hold 10,000 accounts' worth of it.
    /// With nothing pending every entry left is stale, so all the heaps go.
    private mutating func releaseRoomIfDrained() {
        guard pending.isEmpty else { return }
        if pending.capacity > 64 { pending = [:] }
        if inFlight.isEmpty {
            keys = []
            freeSlots = []
        }
        ready = Heap()
        hostQueues = [:]
        holdQueues = [:]
        groupQueues = [:]
        staleEntries = 0
    }

    private static func isLive(_ entry: Entry, in pending: [Key: Pending], keys: [Key?]) -> Bool {
        guard let key = keys[Int(entry.slot)], let record = pending[key] else { return false }
        return record.token == entry.token && record.isQueued
    }

    /// Pops stale entries off the top of `heap`; returns how many.
    private static func dropStaleHead(of heap: inout Heap<Entry>, pending: [Key: Pending], keys: [Key?]) -> Int {
        var dropped = 0
        while let head = heap.min, !isLive(head, in: pending, keys: keys) {
            heap.removeMin()
            dropped += 1
        }
        return dropped
    }

    /// Rebuilds the heaps without their stale entries once those outnumber the live reports.
    private mutating func sweepIfNeeded() {
        guard staleEntries > 1024, staleEntries > pending.count else { return }
        let pending = self.pending
        let keys = self.keys
        ready.removeAll { !Self.isLive($0, in: pending, keys: keys) }
        Self.sweep(&hostQueues, pending: pending, keys: keys)
        Self.sweep(&holdQueues, pending: pending, keys: keys)
        for batch in Array(groupQueues.keys) {
            Self.sweep(&groupQueues[batch]!, pending: pending, keys: keys)
            if groupQueues[batch]!.isEmpty { groupQueues[batch] = nil }
        }
        staleEntries = 0
    }

    /// Sweeps every heap of `queues`, dropping the ones left empty.
    private static func sweep<Label: Hashable>(_ queues: inout [Label: Heap<Entry>], pending: [Key: Pending], keys: [Key?]) {
        for label in Array(queues.keys) {
            queues[label]!.removeAll { !isLive($0, in: pending, keys: keys) }
            if queues[label]!.isEmpty { queues[label] = nil }
        }
    }
}

/// A heap entry of ``SchedulerQueue``: a report's place in the due order (due time, then
/// submission order), and what finds its record.
///
/// Not generic, and without references: the heaps' code is specialized for it where the generic
/// queue is not (the agent's queue of 100,000 reports spent 3 µs on each `removeMin` through
/// generic witnesses, copying the key's strings at each step), and moving one is a plain copy.
struct SchedulerQueueEntry: Comparable {
    /// The due time, counted from the queue's origin.
    var due: Duration
    var sequence: UInt64
    /// The token of the pending record it was queued for: live while the record has it.
    var token: UInt64
    /// Where the queue keeps the key.
    var slot: Int32

    static func < (lhs: SchedulerQueueEntry, rhs: SchedulerQueueEntry) -> Bool {
        lhs.due != rhs.due ? lhs.due < rhs.due : lhs.sequence < rhs.sequence
    }

    static func == (lhs: SchedulerQueueEntry, rhs: SchedulerQueueEntry) -> Bool {
        lhs.due == rhs.due && lhs.sequence == rhs.sequence
    }
}
