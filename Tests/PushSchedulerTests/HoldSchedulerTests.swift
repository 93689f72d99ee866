import PushScheduler
import PushTestSupport
import Testing
import PushTestThreads

@Suite("Holds through the scheduler's async shell, on a manual clock", .ownThreads)
struct HoldSchedulerTests {
    typealias Instant = ManualClock.Instant

    @Test("A 429 of a labelled report pauses its label for the retry delay; unlabelled reports go on")
    func automaticHold() async {
        let (scheduler, log, clock) = makeScheduler(concurrency: 1) { key, attempt in
            key == "s1" && attempt == 1 ? .failed(.http(429, retryAfter: .seconds(60))) : .delivered
        }
        scheduler.submit("s1", host: "h", hold: "svc")
        scheduler.submit("s2", host: "h", hold: "svc")
        scheduler.submit("u", host: "h")
        await whileRunning(scheduler) {
            #expect(await log.waitUntil { $0.count(delivered: "u") == 1 })
            #expect(await finishes { await clock.waitForSleepers(1) })
            #expect(clock.sleeperDeadlines == [Instant(offset: .seconds(60))])
            #expect(log.started == ["s1", "u"])
            clock.advance(by: .seconds(60) - .nanoseconds(1))
            #expect(clock.sleeperCount == 1)
            #expect(log.started == ["s1", "u"])
            clock.advance(by: .nanoseconds(1))
            #expect(await log.waitUntil { $0.count(delivered: nil) == 3 })
        }
        // s2 was due first; the hold ended when s1's retry fell due.
        #expect(log.started == ["s1", "u", "s2", "s1"])
    }

    @Test("hold(_:for:) pauses a label until its end, which wakes the loop; release(_:) ends a hold at once")
    func holdAndRelease() async {
        let (scheduler, log, clock) = makeScheduler { _, _ in .delivered }
        scheduler.hold("timed", for: .seconds(30))
        scheduler.hold("open", for: nil)
        scheduler.submit("t", host: "h", hold: "timed")
        scheduler.submit("o", host: "h", hold: "open")
        scheduler.submit("u", host: "h")
        scheduler.submit("marker", host: "h", after: .seconds(100))
        await whileRunning(scheduler) {
            #expect(await log.waitUntil { $0.count(delivered: "u") == 1 })
            #expect(await finishes { await clock.waitForSleepers(1) })
            // The timed hold's end is the next deadline; the hold without end sets none.
            #expect(clock.sleeperDeadlines == [Instant(offset: .seconds(30))])
            clock.advance(by: .seconds(30))
            #expect(await log.waitUntil { $0.count(delivered: "t") == 1 })
            #expect(await finishes { await clock.waitForSleepers(1) })
            #expect(clock.sleeperDeadlines == [Instant(offset: .seconds(100))])
            scheduler.release("open")
            #expect(await log.waitUntil { $0.count(delivered: "o") == 1 })
            #expect(clock.now == Instant(offset: .seconds(30)))
        }
        #expect(log.delivered == ["u", "t", "o"])
        #expect(scheduler.pendingCount == 1)
    }
}
