import HeapModule

/// The bookkeeping of ``ReportScheduler``: which reports wait, which are in flight, and which may start now.
///
/// Pure and synchronous (the shell holds it under a lock and feeds it the time). Every report
/// waiting for its due time is in `ready`, a heap ordered by due time then submission order; a
/// due report whose host is at `perHostConcurrency` moves to that host's own heap, so it never
/// holds back reports for other hosts. Replaced and cancelled reports leave their heap entries
/// behind; an entry is live only while its key's pending record carries the same token, stale
/// ones are dropped when they surface and swept out when they outnumber the live ones.
struct SchedulerQueue<Key: Hashable & Sendable, Instant: InstantProtocol> where Instant.Duration == Duration {
    /// A report to start now.
    struct Start {
        var key: Key
        var attempt: Int
        var token: UInt64
    }

    /// A heap entry: a report's place in the due order.
    struct Entry: Comparable {
        var due: Instant
        var sequence: UInt64
        var key: Key
        var token: UInt64

        static func < (lhs: Entry, rhs: Entry) -> Bool {
            lhs.due != rhs.due ? lhs.due < rhs.due : lhs.sequence < rhs.sequence
        }

        static func == (lhs: Entry, rhs: Entry) -> Bool {
            lhs.due == rhs.due && lhs.sequence == rhs.sequence
        }
    }

    /// A report that is not in flight.
    struct Pending {
        var host: String
        var due: Instant
        var sequence: UInt64
        var token: UInt64
        var attempts: ReportAttempts
        /// False while it waits for an in-flight attempt of the same key to finish.
        var isQueued: Bool
    }

    /// A report whose attempt is running.
    struct InFlight {
        var host: String
        var token: UInt64
        var attempts: ReportAttempts
        /// Set when the key was re-submitted or cancelled meanwhile: the result is ignored.
        var isDiscarded: Bool
    }

    let policy: BackoffPolicy
    let concurrency: Int
    let perHostConcurrency: Int

    private(set) var pending: [Key: Pending] = [:]
    private(set) var inFlight: [Key: InFlight] = [:]
    private var ready = Heap<Entry>()
    private var hostQueues: [String: Heap<Entry>] = [:]
    private var inFlightPerHost: [String: Int] = [:]
    private var lastSequence: UInt64 = 0
    private var lastToken: UInt64 = 0
    private var staleEntries = 0

    init(policy: BackoffPolicy, concurrency: Int, perHostConcurrency: Int) {
        self.policy = policy
        self.concurrency = concurrency
        self.perHostConcurrency = perHostConcurrency
    }

    var pendingCount: Int { pending.count }
    var inFlightCount: Int { inFlight.count }

    /// Schedules `key` at `due` with a fresh attempt count, replacing whatever was pending for it.
    mutating func submit(_ key: Key, host: String, due: Instant) {
        if pending[key]?.isQueued == true { staleEntries += 1 }
        lastSequence += 1
        lastToken += 1
        var record = Pending(
            host: host, due: due, sequence: lastSequence, token: lastToken,
            attempts: ReportAttempts(policy: policy), isQueued: false
        )
        if inFlight[key] != nil {
            inFlight[key]!.isDiscarded = true
            pending[key] = record
        } else {
            record.isQueued = true
            pending[key] = record
            ready.insert(Entry(due: due, sequence: record.sequence, key: key, token: record.token))
        }
        sweepIfNeeded()
    }

    /// Forgets `key`: its pending record goes, and the result of an attempt in flight is ignored.
    mutating func cancel(_ key: Key) {
        if let removed = pending.removeValue(forKey: key), removed.isQueued { staleEntries += 1 }
        inFlight[key]?.isDiscarded = true
        sweepIfNeeded()
        releaseRoomIfDrained()
    }

    /// Moves every report that may start at `now` to in flight, earliest due first.
    mutating func takeStartable(now: Instant) -> [Start] {
        var starts: [Start] = []
        while inFlight.count < concurrency {
            staleEntries -= Self.dropStaleHead(of: &ready, pending: pending)
            var waiting: (entry: Entry, host: String)?
            for host in Array(hostQueues.keys) where (inFlightPerHost[host] ?? 0) < perHostConcurrency {
                staleEntries -= Self.dropStaleHead(of: &hostQueues[host]!, pending: pending)
                guard let head = hostQueues[host]!.min else {
                    hostQueues[host] = nil
                    continue
                }
                if waiting == nil || head < waiting!.entry { waiting = (head, host) }
            }
            if let head = ready.min, head.due <= now, waiting == nil || head < waiting!.entry {
                ready.removeMin()
                let host = pending[head.key]!.host
                if (inFlightPerHost[host] ?? 0) >= perHostConcurrency {
                    hostQueues[host, default: Heap()].insert(head)
                } else {
                    starts.append(start(head))
                }
            } else if let (entry, host) = waiting {
                hostQueues[host]!.removeMin()
                if hostQueues[host]!.isEmpty { hostQueues[host] = nil }
                starts.append(start(entry))
            } else {
                break
            }
        }
        releaseRoomIfDrained()
        return starts
    }

    /// Once nothing waits, lets go of the room a burst made: dictionaries and heaps keep their
    /// capacity when emptied, and an idle agent should not hold 10,000 accounts' worth of it.
    private mutating func releaseRoomIfDrained() {
        if pending.isEmpty && pending.capacity > 64 { pending = [:] }
        if ready.isEmpty { ready = Heap() }
    }

    /// When the next report falls due, if waiting for that time could start something.
    ///
    /// Nil when nothing waits on time: every due report is held by a cap, to be released by a
    /// finishing attempt, or nothing is pending at all.
    mutating func nextDeadline(now: Instant) -> Instant? {
        staleEntries -= Self.dropStaleHead(of: &ready, pending: pending)
        guard let head = ready.min, head.due > now else { return nil }
        return head.due
    }

    /// Records the result of the attempt `token` of `key` and returns the event to report, if any.
    ///
    /// A failed report is queued again after the delay its ``ReportAttempts`` decides; a delivered
    /// one is forgotten. A discarded attempt (re-submitted or cancelled meanwhile) reports nothing
    /// and releases the replacement submission, if there is one.
    mutating func finish(
        _ key: Key,
        token: UInt64,
        result: AttemptResult,
        now: Instant,
        nowEpochSeconds: Int64,
        using generator: inout some RandomNumberGenerator
    ) -> SchedulerEvent<Key>? {
        guard let record = inFlight[key], record.token == token else { return nil }
        inFlight[key] = nil
        let remaining = inFlightPerHost[record.host, default: 1] - 1
        inFlightPerHost[record.host] = remaining > 0 ? remaining : nil

        if record.isDiscarded {
            if let replacement = pending[key], !replacement.isQueued {
                pending[key]!.isQueued = true
                ready.insert(Entry(due: replacement.due, sequence: replacement.sequence, key: key, token: replacement.token))
            }
            return nil
        }
        var attempts = record.attempts
        let attempt = attempts.nextAttempt
        switch result {
        case .delivered:
            return .delivered(key, attempts: attempt)
        case .failed(let failure):
            let delay = attempts.attemptFailed(failure, nowEpochSeconds: nowEpochSeconds, using: &generator)
            lastSequence += 1
            let due = now.advanced(by: delay)
            pending[key] = Pending(
                host: record.host, due: due, sequence: lastSequence, token: record.token,
                attempts: attempts, isQueued: true
            )
            ready.insert(Entry(due: due, sequence: lastSequence, key: key, token: record.token))
            return .failed(key, attempt: attempt, failure: failure, retryIn: delay)
        }
    }

    private mutating func start(_ entry: Entry) -> Start {
        let record = pending.removeValue(forKey: entry.key)!
        inFlight[entry.key] = InFlight(host: record.host, token: record.token, attempts: record.attempts, isDiscarded: false)
        inFlightPerHost[record.host, default: 0] += 1
        return Start(key: entry.key, attempt: record.attempts.nextAttempt, token: record.token)
    }

    private static func isLive(_ entry: Entry, in pending: [Key: Pending]) -> Bool {
        guard let record = pending[entry.key] else { return false }
        return record.token == entry.token && record.isQueued
    }

    /// Pops stale entries off the top of `heap`; returns how many.
    private static func dropStaleHead(of heap: inout Heap<Entry>, pending: [Key: Pending]) -> Int {
        var dropped = 0
        while let head = heap.min, !isLive(head, in: pending) {
            heap.removeMin()
            dropped += 1
        }
        return dropped
    }

    /// Rebuilds the heaps without their stale entries once those outnumber the live ones.
    private mutating func sweepIfNeeded() {
        guard staleEntries > 1024, staleEntries > pending.count else { return }
        let pending = self.pending
        ready.removeAll { !Self.isLive($0, in: pending) }
        for host in Array(hostQueues.keys) {
            hostQueues[host]!.removeAll { !Self.isLive($0, in: pending) }
            if hostQueues[host]!.isEmpty { hostQueues[host] = nil }
        }
        staleEntries = 0
    }
}
