import PushScheduler
import PushTestSupport
import Testing
import PushTestThreads

@Suite("Batches through the scheduler's async shell, on a manual clock", .ownThreads)
struct BatchSchedulerTests {
    let batch = Batching(group: "svc", limit: 3)

    @Test("A batch is one performBatch call: its reports start together, count once, and report per key")
    func batchIsOneRequest() async {
        let gates = Gates()
        let calls = Locked<[[BatchItem<String>]]>([])
        let (scheduler, log, _) = makeBatchScheduler(concurrency: 1) { items in
            calls.withLock { $0.append(items) }
            guard await gates.wait(items[0].key) else { return items.map { _ in .failed(cancelledFailure) } }
            return items.map { $0.key == "k1" ? .failed(.http(500)) : .delivered }
        }
        for index in 0..<5 { scheduler.submit("k\(index)", host: "h", batch: batch) }
        await whileRunning(scheduler) {
            #expect(await log.waitUntil { $0.count(started: nil) == 3 })
            #expect(scheduler.inFlightCount == 3)
            #expect(scheduler.inFlightRequests == 1)
            #expect(scheduler.pendingCount == 2)
            gates.open("k0")
            #expect(await log.waitUntil { $0.count(started: nil) == 5 })
            #expect(scheduler.inFlightRequests == 1)
            gates.open("k3")
            #expect(await log.waitUntil { $0.count(delivered: nil) == 4 })
        }
        #expect(calls.value == [
            [BatchItem(key: "k0", attempt: 1), BatchItem(key: "k1", attempt: 1), BatchItem(key: "k2", attempt: 1)],
            [BatchItem(key: "k3", attempt: 1), BatchItem(key: "k4", attempt: 1)],
        ])
        let firstBatch = Array(log.events.prefix(6))
        #expect(firstBatch.map(\.key) == ["k0", "k1", "k2", "k0", "k1", "k2"])
        #expect(firstBatch.count(started: nil) == 3)
        #expect(firstBatch.count(failed: "k1") == 1)
        #expect(log.delivered == ["k0", "k2", "k3", "k4"])
    }

    @Test("Results missing from performBatch fail their reports with “no result”")
    func missingResults() async {
        let (scheduler, log, _) = makeBatchScheduler { items in
            items.count > 1 ? [.delivered] : items.map { _ in .delivered }
        }
        for key in ["a", "b"] { scheduler.submit(key, host: "h", batch: batch) }
        await whileRunning(scheduler) {
            #expect(await log.waitUntil { $0.count(failed: "b") == 1 })
        }
        let failures = log.events.compactMap { event -> AttemptFailure? in
            if case .failed(_, _, let failure, _) = event { failure } else { nil }
        }
        #expect(failures == [AttemptFailure(status: nil, reason: "no result")])
        #expect(log.delivered == ["a"])
    }

    @Test("With the per-key perform, a batch's reports are sent one after the other in one slot")
    func perKeyPerformInBatches() async {
        let tracker = InFlightTracker()
        let order = Locked<[String]>([])
        let (scheduler, log, _) = makeScheduler(concurrency: 4) { key, _ in
            tracker.enter()
            defer { tracker.leave() }
            order.withLock { $0.append(key) }
            return .delivered
        }
        for key in ["a", "b", "c"] { scheduler.submit(key, host: "h", batch: batch) }
        await whileRunning(scheduler) {
            #expect(await log.waitUntil { $0.count(delivered: nil) == 3 })
        }
        #expect(order.value == ["a", "b", "c"])
        #expect(tracker.maximum() == 1)
        #expect(log.events == [
            .started("a", attempt: 1), .started("b", attempt: 1), .started("c", attempt: 1),
            .delivered("a", attempts: 1), .delivered("b", attempts: 1), .delivered("c", attempts: 1),
        ])
    }

    @Test("A key re-submitted while its batch is in flight starts again after it; the others are unaffected")
    func resubmitDuringBatch() async {
        let gates = Gates()
        let calls = Locked(0)
        let (scheduler, log, _) = makeBatchScheduler { items in
            let call = calls.withLock { calls in
                calls += 1
                return calls
            }
            if call == 1 { _ = await gates.wait("first") }
            return items.map { _ in .delivered }
        }
        for key in ["a", "b", "c"] { scheduler.submit(key, host: "h", batch: batch) }
        await whileRunning(scheduler) {
            #expect(await log.waitUntil { $0.count(started: nil) == 3 })
            scheduler.submit("b", host: "h", batch: batch)
            scheduler.cancel("c")
            #expect(scheduler.pendingCount == 1)
            gates.open("first")
            #expect(await log.waitUntil { $0.count(delivered: "b") == 1 })
        }
        #expect(log.events == [
            .started("a", attempt: 1), .started("b", attempt: 1), .started("c", attempt: 1),
            .delivered("a", attempts: 1), .started("b", attempt: 1), .delivered("b", attempts: 1),
        ])
    }
}
