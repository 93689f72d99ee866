import PushScheduler
import PushTestSupport
import Testing
import PushTestThreads

@Suite("The scheduler's async shell, on a manual clock", .ownThreads)
struct ReportSchedulerTests {
    typealias Instant = ManualClock.Instant

    @Test("Never more than `concurrency` attempts in flight, all hosts together")
    func concurrencyCap() async {
        let gates = Gates()
        let tracker = InFlightTracker()
        let (scheduler, log, _) = makeScheduler(concurrency: 3, perHostConcurrency: 100) { key, _ in
            tracker.enter()
            defer { tracker.leave() }
            return await gates.wait(key) ? .delivered : .failed(cancelledFailure)
        }
        let keys = (0..<10).map { "r\($0)" }
        for key in keys { scheduler.submit(key, host: "host-\(key)") }
        await whileRunning(scheduler) {
            #expect(await log.waitUntil { $0.count(started: nil) == 3 })
            #expect(scheduler.inFlightCount == 3)
            #expect(scheduler.pendingCount == 7)
            #expect(log.started == ["r0", "r1", "r2"])
            gates.open("r1")
            #expect(await log.waitUntil { $0.count(started: nil) == 4 })
            #expect(log.started.last == "r3")
            gates.openAll()
            #expect(await log.waitUntil { $0.count(delivered: nil) == 10 })
        }
        #expect(log.started == keys)
        #expect(tracker.maximum() == 3)
        #expect(scheduler.pendingCount == 0 && scheduler.inFlightCount == 0)
    }

    @Test("Never more than `perHostConcurrency` attempts in flight to one host")
    func perHostCap() async {
        let gates = Gates()
        let tracker = InFlightTracker()
        let (scheduler, log, _) = makeScheduler(concurrency: 10, perHostConcurrency: 2) { key, _ in
            let host = String(key.prefix(1))
            tracker.enter(host)
            defer { tracker.leave(host) }
            return await gates.wait(key) ? .delivered : .failed(cancelledFailure)
        }
        for key in ["a0", "a1", "b0", "a2", "a3", "b1", "a4", "b2"] {
            scheduler.submit(key, host: String(key.prefix(1)))
        }
        await whileRunning(scheduler) {
            #expect(await log.waitUntil { $0.count(started: nil) == 4 })
            #expect(Set(log.started) == ["a0", "a1", "b0", "b1"])
            #expect(scheduler.inFlightCount == 4)
            gates.open("a0")
            // The freed slot of host a goes to a's next report in due order, not to b.
            #expect(await log.waitUntil { $0.count(started: nil) == 5 })
            #expect(log.started.last == "a2")
            gates.openAll()
            #expect(await log.waitUntil { $0.count(delivered: nil) == 8 })
        }
        #expect(tracker.maximum("a") == 2)
        #expect(tracker.maximum("b") == 2)
        #expect(Set(log.started).count == 8)
    }

    @Test("A host that hangs holds only its own slots: the other host's reports are all delivered")
    func hostIsolation() async {
        let (scheduler, log, _) = makeScheduler(concurrency: 4, perHostConcurrency: 2) { key, _ in
            if key.hasPrefix("dead") {
                // Hangs until the scheduler's task is cancelled.
                let gate = Gates()
                _ = await gate.wait(key)
                return .failed(cancelledFailure)
            }
            return .delivered
        }
        for index in 0..<4 { scheduler.submit("dead\(index)", host: "dead.example") }
        for index in 0..<6 { scheduler.submit("live\(index)", host: "live.example") }
        await whileRunning(scheduler) {
            #expect(await log.waitUntil { $0.count(delivered: nil) == 6 })
            // Two at a time, so two answers may come in either order; they start in due order.
            #expect(log.delivered.sorted() == (0..<6).map { "live\($0)" })
            #expect(log.started.filter { $0.hasPrefix("live") } == (0..<6).map { "live\($0)" })
            #expect(log.started.filter { $0.hasPrefix("dead") } == ["dead0", "dead1"])
            #expect(scheduler.inFlightCount == 2)
            #expect(scheduler.pendingCount == 2)
        }
        // Cancelling run() cancelled the hung attempts; they were rescheduled, not lost.
        #expect(scheduler.inFlightCount == 0)
        #expect(scheduler.pendingCount == 4)
        #expect(log.events.count(failed: nil) == 2)
    }

    @Test("Reports start in due-time order, ties in submission order")
    func dueOrder() async {
        let (scheduler, log, clock) = makeScheduler(concurrency: 1) { _, _ in .delivered }
        scheduler.submit("c", host: "h", after: .seconds(30))
        scheduler.submit("a", host: "h", after: .seconds(10))
        scheduler.submit("b", host: "h", after: .seconds(20))
        scheduler.submit("d", host: "h", after: .seconds(20))
        scheduler.submit("e", host: "other", after: .seconds(20))
        await whileRunning(scheduler) {
            #expect(await finishes { await clock.waitForSleepers(1) })
            #expect(clock.sleeperDeadlines == [Instant(offset: .seconds(10))])
            #expect(log.events.isEmpty)
            clock.advance(by: .seconds(30))
            #expect(await log.waitUntil { $0.count(delivered: nil) == 5 })
        }
        #expect(log.started == ["a", "b", "d", "e", "c"])
    }

    @Test("Nothing starts before its due time, and it starts exactly then")
    func notBeforeDue() async {
        let (scheduler, log, clock) = makeScheduler { _, _ in .delivered }
        scheduler.submit("k", host: "h", after: .seconds(10))
        await whileRunning(scheduler) {
            #expect(await finishes { await clock.waitForSleepers(1) })
            clock.advance(by: .seconds(10) - .nanoseconds(1))
            #expect(clock.sleeperDeadlines == [Instant(offset: .seconds(10))])
            #expect(log.events.isEmpty)
            clock.advance(by: .nanoseconds(1))
            #expect(await log.waitUntil { $0 == [.started("k", attempt: 1), .delivered("k", attempts: 1)] })
        }
    }

    @Test("A failed attempt is retried exactly after the decided delay, not before")
    func retryAtComputedDelay() async {
        let startTimes = Locked<[Duration]>([])
        let clockBox = Locked<ManualClock?>(nil)
        let (scheduler, log, clock) = makeScheduler(seed: 77) { _, attempt in
            startTimes.withLock { $0.append(clockBox.value!.now.offset) }
            return attempt == 1 ? .failed(.http(500)) : .delivered
        }
        clockBox.withLock { $0 = clock }
        var twin = SeededGenerator(seed: 77)
        let expected = BackoffPolicy().delay(afterFailure: 1, using: &twin)
        scheduler.submit("k", host: "h")
        await whileRunning(scheduler) {
            #expect(await log.waitUntil { $0.count(failed: "k") == 1 })
            #expect(log.events == [.started("k", attempt: 1), .failed("k", attempt: 1, failure: .http(500), retryIn: expected)])
            #expect(await finishes { await clock.waitForSleepers(1) })
            #expect(clock.sleeperDeadlines == [Instant(offset: expected)])
            #expect(scheduler.pendingCount == 1)
            clock.advance(by: expected - .nanoseconds(1))
            #expect(clock.sleeperCount == 1)
            #expect(log.events.count(started: "k") == 1)
            clock.advance(by: .nanoseconds(1))
            #expect(await log.waitUntil { $0.count(delivered: "k") == 1 })
        }
        #expect(log.events.last == .delivered("k", attempts: 2))
        #expect(startTimes.value == [.zero, expected])
        #expect(scheduler.pendingCount == 0)
    }

    @Test("Retry-After from the response sets the retry, read against the wall clock")
    func retryAfterThroughTheShell() async {
        let wall: Int64 = 1_750_000_000
        let (scheduler, log, clock) = makeScheduler(wallClock: { wall }) { key, attempt in
            switch (key, attempt) {
            case ("seconds", 1): .failed(.http(503, retryAfter: .seconds(120)))
            case ("date", 1): .failed(.http(429, retryAfter: .date(epochSeconds: wall + 300)))
            default: .delivered
            }
        }
        scheduler.submit("seconds", host: "h")
        scheduler.submit("date", host: "h")
        await whileRunning(scheduler) {
            #expect(await log.waitUntil { $0.count(failed: nil) == 2 })
            let retries = log.events.compactMap { event -> Duration? in
                if case .failed(_, _, _, let retryIn) = event { retryIn } else { nil }
            }
            #expect(Set(retries) == [.seconds(120), .seconds(300)])
            #expect(await finishes { await clock.waitForSleepers(1) })
            #expect(clock.sleeperDeadlines == [Instant(offset: .seconds(120))])
            clock.advance(by: .seconds(120))
            #expect(await log.waitUntil { $0.count(delivered: nil) == 1 })
            #expect(log.delivered == ["seconds"])
            #expect(await finishes { await clock.waitForSleepers(1) })
            #expect(clock.sleeperDeadlines == [Instant(offset: .seconds(300))])
            clock.advance(by: .seconds(180))
            #expect(await log.waitUntil { $0.count(delivered: nil) == 2 })
        }
    }

    @Test("Submitting a pending key again replaces it: new due time, attempts from 1")
    func replacePending() async {
        let retryingCalls = Locked(0)
        let (scheduler, log, clock) = makeScheduler { key, _ in
            guard key == "retrying" else { return .delivered }
            let call = retryingCalls.withLock { calls in
                calls += 1
                return calls
            }
            return call == 1 ? .failed(.http(500)) : .delivered
        }
        scheduler.submit("k", host: "h", after: .seconds(10))
        scheduler.submit("k", host: "h", after: .seconds(20))
        #expect(scheduler.pendingCount == 1)
        scheduler.submit("retrying", host: "h")
        await whileRunning(scheduler) {
            #expect(await log.waitUntil { $0.count(failed: "retrying") == 1 })
            // Re-submitted while its retry waits: it starts now, as attempt 1 again.
            scheduler.submit("retrying", host: "h")
            #expect(await log.waitUntil { $0.count(delivered: "retrying") == 1 })
            #expect(log.events.filter { $0.key == "retrying" }.map { event -> String in
                switch event {
                case .started(_, let attempt): "started \(attempt)"
                case .delivered(_, let attempts): "delivered \(attempts)"
                case .failed(_, let attempt, _, _): "failed \(attempt)"
                }
            } == ["started 1", "failed 1", "started 1", "delivered 1"])
            // Only k's replacement is left to wait for; the first k and the old retry are gone.
            #expect(await finishes { await clock.waitForSleepers(1) })
            #expect(clock.sleeperDeadlines == [Instant(offset: .seconds(20))])
            clock.advance(by: .seconds(20))
            #expect(await log.waitUntil { $0.count(delivered: "k") == 1 })
            #expect(clock.sleeperCount == 0)
        }
        #expect(log.events.filter { $0.key == "k" } == [.started("k", attempt: 1), .delivered("k", attempts: 1)])
        #expect(scheduler.pendingCount == 0)
    }

    @Test("Submitting a key in flight runs the new submission after it, never alongside; the old result is dropped")
    func replaceInFlight() async {
        let gates = Gates()
        let tracker = InFlightTracker()
        let calls = Locked(0)
        let (scheduler, log, _) = makeScheduler { key, _ in
            tracker.enter(key)
            defer { tracker.leave(key) }
            let call = calls.withLock { calls in
                calls += 1
                return calls
            }
            if call == 1 { _ = await gates.wait("first") }
            return .delivered
        }
        scheduler.submit("k", host: "h")
        await whileRunning(scheduler) {
            #expect(await log.waitUntil { $0.count(started: "k") == 1 })
            scheduler.submit("k", host: "h")
            #expect(scheduler.inFlightCount == 1)
            #expect(scheduler.pendingCount == 1)
            // Give a wrong scheduler the chance to start the second attempt alongside.
            #expect(await !log.waitUntil(timeout: .milliseconds(100)) { $0.count(started: "k") > 1 })
            gates.open("first")
            #expect(await log.waitUntil { $0.count(delivered: "k") == 1 })
        }
        #expect(log.events == [.started("k", attempt: 1), .started("k", attempt: 1), .delivered("k", attempts: 1)])
        #expect(tracker.maximum("k") == 1)
        #expect(calls.value == 2)
    }

    @Test("Cancel forgets a pending key, and ignores the result of one in flight")
    func cancel() async {
        let gates = Gates()
        let (scheduler, log, clock) = makeScheduler(concurrency: 1) { key, _ in
            if key == "busy" { _ = await gates.wait(key) }
            return .delivered
        }
        scheduler.submit("a", host: "h", after: .seconds(10))
        scheduler.submit("b", host: "h", after: .seconds(10))
        scheduler.cancel("a")
        scheduler.cancel("unknown")
        #expect(scheduler.pendingCount == 1)
        await whileRunning(scheduler) {
            #expect(await finishes { await clock.waitForSleepers(1) })
            clock.advance(by: .seconds(10))
            #expect(await log.waitUntil { $0.count(delivered: nil) == 1 })
            #expect(log.events == [.started("b", attempt: 1), .delivered("b", attempts: 1)])

            scheduler.submit("busy", host: "h")
            #expect(await log.waitUntil { $0.count(started: "busy") == 1 })
            scheduler.cancel("busy")
            #expect(scheduler.pendingCount == 0)
            // With one slot, "marker" can start only after busy's result has been accounted for.
            scheduler.submit("marker", host: "h")
            gates.open("busy")
            #expect(await log.waitUntil { $0.count(delivered: "marker") == 1 })
        }
        #expect(log.events == [
            .started("b", attempt: 1), .delivered("b", attempts: 1),
            .started("busy", attempt: 1), .started("marker", attempt: 1), .delivered("marker", attempts: 1),
        ])
    }

    @Test("shutdown() starts nothing new and returns once the attempts in flight have finished")
    func shutdownWaitsForInFlight() async {
        let gates = Gates()
        let (scheduler, log, _) = makeScheduler(concurrency: 2) { key, _ in
            await gates.wait(key) ? .delivered : .failed(cancelledFailure)
        }
        for key in ["a", "b", "c"] { scheduler.submit(key, host: "h") }
        let returned = Locked(false)
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await scheduler.run()
                returned.withLock { $0 = true }
            }
            #expect(await log.waitUntil { $0.count(started: nil) == 2 })
            scheduler.shutdown()
            gates.open("a")
            #expect(await log.waitUntil { $0.count(delivered: "a") == 1 })
            #expect(!returned.value)
            #expect(scheduler.inFlightCount == 1)
            gates.open("c")
            gates.open("b")
            await group.next()
            #expect(returned.value)
        }
        #expect(log.events == [
            .started("a", attempt: 1), .started("b", attempt: 1),
            .delivered("a", attempts: 1), .delivered("b", attempts: 1),
        ])
        #expect(scheduler.pendingCount == 1)
        #expect(scheduler.inFlightCount == 0)
        // Shutdown is final: a new run() has nothing in flight and returns at once.
        await scheduler.run()
        #expect(log.started == ["a", "b"])
    }

    @Test("Cancelling run()'s task cancels the attempts in flight and keeps them owed")
    func cancellation() async {
        let (scheduler, log, clock) = makeScheduler { _, _ in
            let gate = Gates()
            _ = await gate.wait("never")
            return .failed(cancelledFailure)
        }
        scheduler.submit("k", host: "h")
        scheduler.submit("later", host: "h", after: .seconds(60))
        await whileRunning(scheduler) {
            #expect(await log.waitUntil { $0.count(started: "k") == 1 })
            #expect(await finishes { await clock.waitForSleepers(1) })
        }
        #expect(log.events.count == 2)
        #expect(log.events.count(failed: "k") == 1)
        #expect(scheduler.inFlightCount == 0)
        #expect(scheduler.pendingCount == 2)
        #expect(clock.sleeperCount == 0)
    }
}
