@testable import PushScheduler
import PushTestSupport
import Testing
import PushTestThreads

/// The scheduler's bookkeeping, driven synchronously: no tasks, no clock, only instants.
@Suite("The scheduler's queue: batches and holds", .blockingThreads)
struct SchedulerQueueTests {
    typealias Queue = SchedulerQueue<String, ManualClock.Instant>
    typealias Instant = ManualClock.Instant

    static func at(_ seconds: Int) -> Instant { Instant(offset: .seconds(seconds)) }

    static func makeQueue(concurrency: Int = 100, perHostConcurrency: Int = 100) -> Queue {
        Queue(policy: BackoffPolicy(), concurrency: concurrency, perHostConcurrency: perHostConcurrency)
    }

    /// The keys of each request, in order.
    static func keys(_ requests: [Queue.Request]) -> [[String]] {
        requests.map { $0.items.map(\.key) }
    }

    /// Takes what may start at `now`, requiring exactly `expected` (the keys of each request, in order).
    @discardableResult
    static func take(
        _ queue: inout Queue, now: Instant, expecting expected: [[String]], sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> [Queue.Request] {
        let requests = queue.takeStartable(now: now)
        try #require(keys(requests) == expected, sourceLocation: sourceLocation)
        return requests
    }

    /// Finishes `request` at `now` with `results` (each report delivered when nil).
    static func finish(
        _ queue: inout Queue, _ request: Queue.Request, _ results: [AttemptResult]? = nil, now: Instant = at(0),
        generator: inout SeededGenerator
    ) -> [SchedulerEvent<String>] {
        let results = results ?? Array(repeating: .delivered, count: request.items.count)
        return queue.finish(request: request.id, results: results, now: now, nowEpochSeconds: 1_750_000_000, using: &generator)
    }

    /// Every live report has its entries in the heaps, and the stale count is exact.
    static func expectConsistent(_ queue: Queue, sourceLocation: SourceLocation = #_sourceLocation) {
        let live = queue.pending.values.filter(\.isQueued).reduce(0) { $0 + $1.submission.entriesWhenQueued }
        #expect(queue.heapEntryCount - queue.staleEntries == live, sourceLocation: sourceLocation)
    }

    let group = Batching(group: "svc", limit: 3)

    /// `firstAttemptsWaiting` counted afresh from the pending reports.
    static func expectFirstAttemptsCounted(_ queue: Queue, _ expected: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(queue.firstAttemptsWaiting == expected, sourceLocation: sourceLocation)
        #expect(queue.pending.values.count { $0.attempts.failures == 0 } == expected, sourceLocation: sourceLocation)
    }

    @Test("The reports waiting for their first attempt are counted as they start, fail, go and come back")
    func firstAttemptsWaiting() throws {
        var generator = SeededGenerator(seed: 1)
        var queue = Self.makeQueue(concurrency: 1)
        for key in ["a", "b", "c", "d"] { queue.submit(key, host: "h", due: Self.at(0)) }
        Self.expectFirstAttemptsCounted(queue, 4)
        // a starts: it no longer waits for a first attempt, and its failure does not make it wait for one.
        let a = try Self.take(&queue, now: Self.at(0), expecting: [["a"]])
        Self.expectFirstAttemptsCounted(queue, 3)
        _ = Self.finish(&queue, a[0], [.failed(AttemptFailure(status: 500, reason: "down"))], generator: &generator)
        Self.expectFirstAttemptsCounted(queue, 3)
        // Cancelled before it began (a stopped service, a removed account): no longer waiting.
        queue.cancel("b")
        Self.expectFirstAttemptsCounted(queue, 2)
        // A re-submission replaces what was pending and starts afresh: a's retry is a first attempt again.
        queue.submit("c", host: "h", due: Self.at(0))
        queue.submit("a", host: "h", due: Self.at(0))
        Self.expectFirstAttemptsCounted(queue, 3)
        // Re-submitted while its attempt is in flight: the new submission waits for its own.
        let d = try Self.take(&queue, now: Self.at(0), expecting: [["d"]])
        Self.expectFirstAttemptsCounted(queue, 2)
        queue.submit("d", host: "h", due: Self.at(0))
        Self.expectFirstAttemptsCounted(queue, 3)
        _ = Self.finish(&queue, d[0], generator: &generator)
        Self.expectFirstAttemptsCounted(queue, 3)
        Self.expectConsistent(queue)
    }

    // MARK: Batches

    @Test("A batch forms from the due keys of its group, up to the limit, in due order")
    func batchFormsUpToLimit() throws {
        var queue = Self.makeQueue()
        for key in ["a", "b"] { queue.submit(key, host: "h", due: Self.at(0), batch: group) }
        queue.submit("x", host: "h", due: Self.at(0))
        for key in ["c", "d", "e"] { queue.submit(key, host: "h", due: Self.at(0), batch: group) }
        queue.submit("f", host: "h", due: Self.at(10), batch: group)
        // f is of the group but not due: it is not taken, though the second batch has room.
        let requests = try Self.take(&queue, now: Self.at(0), expecting: [["a", "b", "c"], ["x"], ["d", "e"]])
        #expect(requests.allSatisfy { $0.items.allSatisfy { $0.attempt == 1 } })
        #expect(queue.inFlightCount == 6)
        #expect(queue.inFlightRequests == 3)
        #expect(queue.pendingCount == 1)
        #expect(queue.nextDeadline(now: Self.at(0)) == Self.at(10))
        try Self.take(&queue, now: Self.at(10), expecting: [["f"]])
        Self.expectConsistent(queue)
    }

    @Test("Members join earliest due first, ties in submission order; the first is the earliest due")
    func batchOrder() throws {
        var queue = Self.makeQueue()
        let pairs = Batching(group: "svc", limit: 2)
        queue.submit("late", host: "h", due: Self.at(5), batch: pairs)
        queue.submit("early", host: "h", due: Self.at(1), batch: pairs)
        queue.submit("mid", host: "h", due: Self.at(3), batch: pairs)
        queue.submit("mid2", host: "h", due: Self.at(3), batch: pairs)
        try Self.take(&queue, now: Self.at(5), expecting: [["early", "mid"], ["mid2", "late"]])
    }

    @Test("Different groups never mix, nor the same group with another limit; limit 1 is no batch")
    func groupsNeverMix() throws {
        var queue = Self.makeQueue()
        let other = Batching(group: "other", limit: 3)
        let smaller = Batching(group: "svc", limit: 2)
        let single = Batching(group: "svc", limit: 1)
        queue.submit("a1", host: "h", due: Self.at(0), batch: group)
        queue.submit("b1", host: "h", due: Self.at(0), batch: other)
        queue.submit("s1", host: "h", due: Self.at(0), batch: single)
        queue.submit("a2", host: "h", due: Self.at(0), batch: group)
        queue.submit("c1", host: "h", due: Self.at(0), batch: smaller)
        queue.submit("b2", host: "h", due: Self.at(0), batch: other)
        queue.submit("s2", host: "h", due: Self.at(0), batch: single)
        queue.submit("c2", host: "h", due: Self.at(0), batch: smaller)
        queue.submit("a3", host: "h", due: Self.at(0), batch: group)
        try Self.take(&queue, now: Self.at(0), expecting: [["a1", "a2", "a3"], ["b1", "b2"], ["s1"], ["c1", "c2"], ["s2"]])
        #expect(queue.inFlightRequests == 5)
        #expect(queue.heapEntryCount == 0)
    }

    @Test("A batch counts once against concurrency and once against its first key's host")
    func batchCountsOnce() throws {
        var queue = Self.makeQueue(concurrency: 2, perHostConcurrency: 1)
        var generator = SeededGenerator(seed: 1)
        for index in 1...6 { queue.submit("g\(index)", host: "h", due: Self.at(0), batch: group) }
        queue.submit("o", host: "h", due: Self.at(0))
        queue.submit("p", host: "q", due: Self.at(0))
        queue.submit("r", host: "r", due: Self.at(0))
        let first = try Self.take(&queue, now: Self.at(0), expecting: [["g1", "g2", "g3"], ["p"]])
        #expect(first.map(\.host) == ["h", "q"])
        #expect(queue.inFlightCount == 4)
        #expect(queue.inFlightRequests == 2)
        // Host h is at its cap: its next batch waits for the first to return, not r's slot.
        let pDone = Self.finish(&queue, first[1], generator: &generator)
        #expect(pDone == [.delivered("p", attempts: 1)])
        try Self.take(&queue, now: Self.at(0), expecting: [["r"]])
        let batchDone = Self.finish(&queue, first[0], generator: &generator)
        #expect(batchDone.count(delivered: nil) == 3)
        try Self.take(&queue, now: Self.at(0), expecting: [["g4", "g5", "g6"]])
        Self.expectConsistent(queue)
    }

    @Test("The members of a batch may come from another host's queue; the batch goes to the first's host")
    func membersFromAHostQueue() throws {
        var queue = Self.makeQueue(perHostConcurrency: 1)
        queue.submit("busy", host: "b", due: Self.at(0))
        queue.submit("m1", host: "b", due: Self.at(0), batch: group)
        queue.submit("first", host: "h", due: Self.at(1), batch: group)
        try Self.take(&queue, now: Self.at(0), expecting: [["busy"]])
        // m1 waits for host b; when "first" starts it joins it, though b is still at its cap.
        let batches = try Self.take(&queue, now: Self.at(1), expecting: [["first", "m1"]])
        #expect(batches.map(\.host) == ["h"])
        Self.expectConsistent(queue)
    }

    @Test("A batched key re-submitted or cancelled in flight: its result is dropped, the others' count")
    func resubmitAndCancelInFlight() throws {
        var queue = Self.makeQueue()
        var generator = SeededGenerator(seed: 1)
        for key in ["a", "b", "c"] { queue.submit(key, host: "h", due: Self.at(0), batch: group) }
        let batch = try Self.take(&queue, now: Self.at(0), expecting: [["a", "b", "c"]])
        queue.submit("b", host: "h", due: Self.at(0), batch: group)
        queue.cancel("c")
        #expect(queue.pendingCount == 1)
        // b's new submission waits for the batch, though it is due and there is room.
        try Self.take(&queue, now: Self.at(0), expecting: [])
        let events = Self.finish(&queue, batch[0], [.failed(.http(500)), .failed(.http(500)), .delivered], now: Self.at(1), generator: &generator)
        #expect(events.map(\.key) == ["a"])
        #expect(events.count(failed: "a") == 1)
        let next = try Self.take(&queue, now: Self.at(1), expecting: [["b"]])
        #expect(next[0].items[0].attempt == 1)
        #expect(queue.pendingCount == 1)
        Self.expectConsistent(queue)
    }

    @Test("A request with too few results fails the rest with \"no result\"; extra results are ignored")
    func wrongResultCount() throws {
        var queue = Self.makeQueue()
        var generator = SeededGenerator(seed: 1)
        for key in ["a", "b", "c", "d"] { queue.submit(key, host: "h", due: Self.at(0), batch: group) }
        let requests = try Self.take(&queue, now: Self.at(0), expecting: [["a", "b", "c"], ["d"]])
        let short = Self.finish(&queue, requests[0], [.delivered], generator: &generator)
        #expect(short.map(\.key) == ["a", "b", "c"])
        #expect(short.count(delivered: "a") == 1)
        for event in short.dropFirst() {
            guard case .failed(_, _, let failure, _) = event else {
                Issue.record("expected a failure, got \(event)")
                continue
            }
            #expect(failure == AttemptFailure(status: nil, reason: "no result"))
        }
        let long = Self.finish(&queue, requests[1], [.delivered, .failed(.http(500))], generator: &generator)
        #expect(long == [.delivered("d", attempts: 1)])
        let again = Self.finish(&queue, requests[1], generator: &generator)
        #expect(again.isEmpty)
        #expect(queue.inFlightRequests == 0)
    }

    @Test("A retried batched key batches again with its group, at its next attempt")
    func retryBatchesAgain() throws {
        var queue = Self.makeQueue()
        var generator = SeededGenerator(seed: 1)
        let instant = Batching(group: "svc", limit: 2)
        queue.submit("a", host: "h", due: Self.at(0), batch: instant)
        let first = try Self.take(&queue, now: Self.at(0), expecting: [["a"]])
        let events = Self.finish(&queue, first[0], [.failed(.http(500))], generator: &generator)
        guard case .failed(_, _, _, let retryIn) = events.first else {
            Issue.record("expected a failure")
            return
        }
        let due = Self.at(0).advanced(by: retryIn)
        queue.submit("b", host: "h", due: due, batch: instant)
        let second = try Self.take(&queue, now: due, expecting: [["a", "b"]])
        #expect(second[0].items.map(\.attempt) == [2, 1])
        Self.expectConsistent(queue)
    }

    @Test("A member's retry waits its delay, though its entry from before the batch is still in a heap")
    func memberRetryWaits() throws {
        var queue = Self.makeQueue(concurrency: 1)
        var generator = SeededGenerator(seed: 1)
        queue.submit("a", host: "h", due: Self.at(0), batch: group)
        queue.submit("b", host: "h", due: Self.at(0), batch: group)
        queue.submit("later", host: "h", due: Self.at(3600))
        // With the one slot taken, b's entry in the due order stays behind, stale.
        let batch = try Self.take(&queue, now: Self.at(0), expecting: [["a", "b"]])
        #expect(queue.staleEntries == 1)
        let events = Self.finish(&queue, batch[0], [.delivered, .failed(.http(500))], generator: &generator)
        #expect(events.count(failed: "b") == 1)
        try Self.take(&queue, now: Self.at(0), expecting: [])
        #expect(queue.nextDeadline(now: Self.at(0)) == queue.pending["b"]?.due)
        Self.expectConsistent(queue)
    }

    @Test("An entry left behind by a key that has gone never starts the key that took its place")
    func staleEntryOfAReusedSlot() throws {
        var queue = Self.makeQueue()
        var generator = SeededGenerator(seed: 1)
        // A report due much later keeps the queue from draining (which would drop every entry).
        queue.submit("later", host: "h", due: Self.at(3600))
        // a's first submission leaves an entry due at 10 when it is submitted again for now.
        queue.submit("a", host: "h", due: Self.at(10))
        queue.submit("a", host: "h", due: Self.at(0))
        let first = try Self.take(&queue, now: Self.at(0), expecting: [["a"]])
        _ = Self.finish(&queue, first[0], generator: &generator)
        // a has gone: b, due at 20, is kept where a was, under a's old entry due at 10.
        queue.submit("b", host: "h", due: Self.at(20))
        try Self.take(&queue, now: Self.at(10), expecting: [])
        #expect(queue.nextDeadline(now: Self.at(10)) == Self.at(20))
        try Self.take(&queue, now: Self.at(20), expecting: [["b"]])
        // A cancelled key gives its place back too; the next key is not confused with it.
        queue.submit("c", host: "h", due: Self.at(30))
        queue.cancel("c")
        queue.submit("d", host: "h", due: Self.at(40))
        try Self.take(&queue, now: Self.at(30), expecting: [])
        try Self.take(&queue, now: Self.at(40), expecting: [["d"]])
        Self.expectConsistent(queue)
    }

    @Test("Stale entries left by batches and replacements are swept")
    func staleEntriesSwept() throws {
        var queue = Self.makeQueue(concurrency: 10_000)
        let large = Batching(group: "svc", limit: 100)
        for index in 0..<5000 { queue.submit("k\(index)", host: "h", due: Self.at(0), batch: large) }
        for index in 0..<10 { queue.submit("later\(index)", host: "h", due: Self.at(60), batch: large) }
        #expect(queue.heapEntryCount == 2 * 5010)
        let requests = queue.takeStartable(now: Self.at(0))
        #expect(requests.count == 50)
        #expect(requests.allSatisfy { $0.items.count == 100 })
        // Every started key left its other entry behind; they were dropped as they surfaced.
        #expect(queue.heapEntryCount == 2 * 10)
        #expect(queue.staleEntries == 0)
        // Replacing keys not yet due leaves both their entries stale, below the heads, until
        // they outnumber the live ones: 600 replacements leave 1,200, and one sweep came.
        for _ in 0..<60 {
            for index in 0..<10 { queue.submit("later\(index)", host: "h", due: Self.at(60), batch: large) }
            Self.expectConsistent(queue)
        }
        #expect(queue.staleEntries > 0 && queue.staleEntries <= 1024)
        #expect(queue.heapEntryCount == 2 * 10 + queue.staleEntries)
        try Self.take(&queue, now: Self.at(60), expecting: [(0..<10).map { "later\($0)" }])
    }

    @Test("100,000 keys of one group start in 1,000 batches, in order")
    func largeGroup() throws {
        let count = 100_000
        var queue = Self.makeQueue(concurrency: 1000, perHostConcurrency: 1000)
        let large = Batching(group: "svc", limit: 100)
        for index in 0..<count { queue.submit("k\(index)", host: "h", due: Self.at(index / 1000), batch: large) }
        let requests = queue.takeStartable(now: Self.at(count))
        #expect(requests.count == 1000)
        let inOrder = requests.flatMap { $0.items.map(\.key) } == (0..<count).map { "k\($0)" }
        #expect(inOrder)
        #expect(queue.inFlightCount == count)
        #expect(queue.heapEntryCount == 0)
    }

    // MARK: Holds

    @Test("Keys of a held label wait without holding back other keys, hosts or labels")
    func holdParksKeys() throws {
        var queue = Self.makeQueue(concurrency: 1, perHostConcurrency: 1)
        var generator = SeededGenerator(seed: 1)
        queue.hold("svc", until: nil)
        queue.submit("s1", host: "h", due: Self.at(0), hold: "svc")
        queue.submit("p", host: "h", due: Self.at(0))
        queue.submit("s2", host: "h", due: Self.at(0), hold: "svc")
        queue.submit("q", host: "h", due: Self.at(0), hold: "other")
        let first = try Self.take(&queue, now: Self.at(0), expecting: [["p"]])
        _ = Self.finish(&queue, first[0], generator: &generator)
        let second = try Self.take(&queue, now: Self.at(0), expecting: [["q"]])
        _ = Self.finish(&queue, second[0], generator: &generator)
        try Self.take(&queue, now: Self.at(0), expecting: [])
        // A hold without end sets no deadline: only release(_:) ends it.
        #expect(queue.nextDeadline(now: Self.at(0)) == nil)
        #expect(queue.pendingCount == 2)
        queue.release("svc")
        #expect(queue.holds.isEmpty)
        let third = try Self.take(&queue, now: Self.at(0), expecting: [["s1"]])
        _ = Self.finish(&queue, third[0], generator: &generator)
        try Self.take(&queue, now: Self.at(0), expecting: [["s2"]])
        Self.expectConsistent(queue)
    }

    @Test("A timed hold ends on time, and the deadline accounts for it while keys wait on it")
    func timedHoldExpires() throws {
        var queue = Self.makeQueue()
        queue.hold("svc", until: Self.at(30))
        queue.hold("idle", until: Self.at(20))
        queue.submit("s1", host: "h", due: Self.at(0), hold: "svc")
        queue.submit("s2", host: "h", due: Self.at(50), hold: "svc")
        queue.submit("t", host: "h", due: Self.at(10))
        try Self.take(&queue, now: Self.at(0), expecting: [])
        #expect(queue.nextDeadline(now: Self.at(0)) == Self.at(10))
        try Self.take(&queue, now: Self.at(10), expecting: [["t"]])
        // Nothing waits on "idle", so its end wakes nobody.
        #expect(queue.nextDeadline(now: Self.at(10)) == Self.at(30))
        let justBefore = Self.at(30).advanced(by: .nanoseconds(-1))
        try Self.take(&queue, now: justBefore, expecting: [])
        #expect(queue.nextDeadline(now: justBefore) == Self.at(30))
        try Self.take(&queue, now: Self.at(30), expecting: [["s1"]])
        #expect(queue.holds.isEmpty)
        // s2 is due after the hold: it starts at its due time, not before.
        #expect(queue.nextDeadline(now: Self.at(30)) == Self.at(50))
        try Self.take(&queue, now: Self.at(50), expecting: [["s2"]])
    }

    @Test("A later hold keeps the later end; a hold without end beats any time; release ends it")
    func holdKeepsLaterEnd() throws {
        var queue = Self.makeQueue()
        queue.hold("svc", until: Self.at(30))
        queue.hold("svc", until: Self.at(20))
        #expect(queue.holds["svc"]?.end == Self.at(30))
        queue.hold("svc", until: Self.at(40))
        #expect(queue.holds["svc"]?.end == Self.at(40))
        queue.hold("svc", until: nil)
        queue.hold("svc", until: Self.at(50))
        #expect(queue.holds["svc"] != nil && queue.holds["svc"]?.end == nil)
        queue.submit("s", host: "h", due: Self.at(0), hold: "svc")
        try Self.take(&queue, now: Self.at(100), expecting: [])
        queue.release("svc")
        queue.release("unknown")
        try Self.take(&queue, now: Self.at(100), expecting: [["s"]])
    }

    @Test("A held key waiting in its host's queue does not block the host when the host frees up")
    func heldInHostQueue() throws {
        var queue = Self.makeQueue(perHostConcurrency: 1)
        var generator = SeededGenerator(seed: 1)
        queue.submit("a", host: "h", due: Self.at(0), hold: "svc")
        queue.submit("b", host: "h", due: Self.at(0), hold: "svc")
        let first = try Self.take(&queue, now: Self.at(0), expecting: [["a"]])
        queue.hold("svc", until: nil)
        queue.submit("c", host: "h", due: Self.at(1))
        // The hold leaves a's attempt alone.
        let aDone = Self.finish(&queue, first[0], generator: &generator)
        #expect(aDone == [.delivered("a", attempts: 1)])
        try Self.take(&queue, now: Self.at(1), expecting: [["c"]])
        queue.release("svc")
        try Self.take(&queue, now: Self.at(1), expecting: [])
        #expect(queue.inFlightRequests == 1)
        Self.expectConsistent(queue)
    }

    @Test("Held keys do not join a batch; their group's other keys do")
    func heldKeysStayOutOfBatches() throws {
        var queue = Self.makeQueue()
        let wide = Batching(group: "svc", limit: 5)
        queue.hold("b", until: nil)
        queue.submit("k1", host: "h", due: Self.at(0), batch: wide, hold: "a")
        queue.submit("k2", host: "h", due: Self.at(0), batch: wide, hold: "b")
        queue.submit("k3", host: "h", due: Self.at(0), batch: wide)
        queue.submit("k4", host: "h", due: Self.at(0), batch: wide, hold: "a")
        try Self.take(&queue, now: Self.at(0), expecting: [["k1", "k3", "k4"]])
        queue.release("b")
        try Self.take(&queue, now: Self.at(0), expecting: [["k2"]])
        #expect(queue.heapEntryCount == 0)
    }

    @Test("A 429 with Retry-After holds the key's label for its retry delay; other labels go on")
    func automaticHoldWithRetryAfter() throws {
        var queue = Self.makeQueue(concurrency: 1)
        var generator = SeededGenerator(seed: 1)
        queue.submit("s1", host: "h", due: Self.at(0), hold: "svc")
        queue.submit("s2", host: "h", due: Self.at(0), hold: "svc")
        queue.submit("u", host: "h", due: Self.at(0))
        let first = try Self.take(&queue, now: Self.at(0), expecting: [["s1"]])
        let events = Self.finish(&queue, first[0], [.failed(.http(429, retryAfter: .seconds(120)))], generator: &generator)
        #expect(events == [.failed("s1", attempt: 1, failure: .http(429, retryAfter: .seconds(120)), retryIn: .seconds(120))])
        #expect(queue.holds["svc"]?.end == Self.at(120))
        let second = try Self.take(&queue, now: Self.at(0), expecting: [["u"]])
        _ = Self.finish(&queue, second[0], generator: &generator)
        try Self.take(&queue, now: Self.at(0), expecting: [])
        #expect(queue.nextDeadline(now: Self.at(0)) == Self.at(120))
        try Self.take(&queue, now: Self.at(119), expecting: [])
        // s2 was due first, so it goes first once the hold ends.
        try Self.take(&queue, now: Self.at(120), expecting: [["s2"]])
    }

    @Test("A 503 without Retry-After holds the label for the key's backoff delay")
    func automaticHoldWithoutRetryAfter() throws {
        var queue = Self.makeQueue()
        var generator = SeededGenerator(seed: 9)
        var twin = SeededGenerator(seed: 9)
        let expected = BackoffPolicy().delay(afterFailure: 1, using: &twin)
        queue.submit("s1", host: "h", due: Self.at(0), batch: group, hold: "svc")
        queue.submit("s2", host: "h", due: Self.at(0), batch: group, hold: "svc")
        let batch = try Self.take(&queue, now: Self.at(0), expecting: [["s1", "s2"]])
        _ = Self.finish(&queue, batch[0], [.failed(.http(503)), .delivered], now: Self.at(5), generator: &generator)
        #expect(queue.holds["svc"]?.end == Self.at(5).advanced(by: expected))
        queue.submit("s3", host: "h", due: Self.at(5), hold: "svc")
        try Self.take(&queue, now: Self.at(5), expecting: [])
        #expect(queue.nextDeadline(now: Self.at(5)) == Self.at(5).advanced(by: expected))
    }

    @Test("No hold for a key without a label, nor for a failure other than 429 and 503")
    func noAutomaticHold() throws {
        var queue = Self.makeQueue()
        var generator = SeededGenerator(seed: 1)
        queue.submit("plain", host: "h", due: Self.at(0))
        let plain = try Self.take(&queue, now: Self.at(0), expecting: [["plain"]])
        _ = Self.finish(&queue, plain[0], [.failed(.http(429, retryAfter: .seconds(60)))], generator: &generator)
        for status in [500, 408, 404] {
            queue.submit("labelled", host: "h", due: Self.at(0), hold: "svc")
            let labelled = try Self.take(&queue, now: Self.at(0), expecting: [["labelled"]])
            let events = Self.finish(&queue, labelled[0], [.failed(.http(status))], generator: &generator)
            #expect(events.count(failed: "labelled") == 1)
        }
        #expect(queue.holds.isEmpty)
        queue.submit("other", host: "h", due: Self.at(0))
        queue.submit("labelled2", host: "h", due: Self.at(0), hold: "svc")
        try Self.take(&queue, now: Self.at(0), expecting: [["other"], ["labelled2"]])
    }

    @Test("A discarded attempt's 429 holds nothing")
    func discardedResultHoldsNothing() throws {
        var queue = Self.makeQueue()
        var generator = SeededGenerator(seed: 1)
        queue.submit("s", host: "h", due: Self.at(0), hold: "svc")
        let requests = try Self.take(&queue, now: Self.at(0), expecting: [["s"]])
        queue.cancel("s")
        let events = Self.finish(&queue, requests[0], [.failed(.http(429))], generator: &generator)
        #expect(events.isEmpty)
        #expect(queue.holds.isEmpty)
    }

    @Test("An attempt that sent nothing comes again at its delay and is not counted")
    func anAttemptThatSentNothingIsNotCounted() throws {
        var generator = SeededGenerator(seed: 1)
        var queue = Self.makeQueue()
        queue.submit("a", host: "h", due: Self.at(0))
        var now = Self.at(0)
        // Held back three times (the agent's leases lapsed), each for a second.
        for _ in 0..<3 {
            let request = try Self.take(&queue, now: now, expecting: [["a"]])
            #expect(request[0].items[0].attempt == 1, "still the first attempt")
            let events = Self.finish(&queue, request[0], [.failed(.notSent(retryIn: .seconds(1), reason: "leases"))], now: now,
                                     generator: &generator)
            guard case .failed(_, let attempt, _, let retryIn)? = events.first else {
                Issue.record("no failure event: \(events)")
                return
            }
            #expect(attempt == 1 && retryIn == .seconds(1), "its own delay, not the backoff's")
            Self.expectFirstAttemptsCounted(queue, 1)
            #expect(queue.takeStartable(now: now).isEmpty, "not before its delay")
            now = now.advanced(by: .seconds(1))
        }
        let request = try Self.take(&queue, now: now, expecting: [["a"]])
        let events = Self.finish(&queue, request[0], now: now, generator: &generator)
        guard case .delivered(_, let attempts)? = events.first else {
            Issue.record("not delivered: \(events)")
            return
        }
        #expect(attempts == 1, "delivered by the first request really sent")
        Self.expectConsistent(queue)
    }
}
