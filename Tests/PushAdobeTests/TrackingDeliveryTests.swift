import Logging
import PushAdobe
import PushBackend
import PushScheduler
import PushTestSupport
import PushTransport
import Synchronization
import Testing
import PushTestThreads

/// `track`'s delivery, in process, on a manual clock.
@Suite(.ownThreads) struct TrackingDeliveryTests {
    static let quiet = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    static func open() -> TrackingDelivery<ManualClock>.Payload {
        .init(label: "p", requests: TrackingEvent.open.actions.map { action in
            TrackingRequest(service: "adobe", trackingServer: "https://t.example", timeout: .seconds(5), action: action,
                            messageId: "m", deliveryId: "d", ecid: ("e", "e"))
        })
    }

    static func delivery(_ transport: ScriptedTransport, ledger: (any TrackingLedger)? = nil,
                         clock: ManualClock) -> TrackingDelivery<ManualClock> {
        TrackingDelivery(policy: BackoffPolicy(initial: .seconds(10), multiplier: 2, maximum: .seconds(10)), concurrency: 4,
                         perHostConcurrency: 4, transport: transport, ledger: ledger, logger: quiet, clock: clock, wallClock: { 0 })
    }

    @Test func aFailureWaitsItsBackoffOnTheClockAndTheOpenWaitsForItsClick() async {
        let clock = ManualClock()
        let transport = ScriptedTransport(numbered: { $0 == 0 ? 503 : 200 })
        let delivery = Self.delivery(transport, clock: clock)
        let task = Task(executorPreference: TestThreads.shared) { await delivery.deliver([Self.open()], deadline: .seconds(60)) }
        // The deadline and the retry of the click.
        await clock.waitForSleepers(2)
        #expect(transport.urls == ["https://t.example/r/?id=m,d,2&mcId=e"])
        clock.advance(by: .seconds(10))
        let results = await task.value
        #expect(results == [[.delivered(attempts: 2), .delivered(attempts: 1)]])
        #expect(transport.urls == ["https://t.example/r/?id=m,d,2&mcId=e", "https://t.example/r/?id=m,d,2&mcId=e",
                                   "https://t.example/r/?id=m,d,1&mcId=e"])
    }

    @Test func whatIsOwedAtTheDeadlineIsUndelivered() async {
        let clock = ManualClock()
        let transport = ScriptedTransport(numbered: { _ in 500 })
        let delivery = Self.delivery(transport, clock: clock)
        let task = Task(executorPreference: TestThreads.shared) { await delivery.deliver([Self.open()], deadline: .seconds(30)) }
        await clock.waitForSleepers(2)
        clock.advance(by: .seconds(30))
        #expect(await task.value == [[.undelivered("HTTP 500"), .undelivered(nil)]])
    }

    @Test func aRejectedClickStillLetsItsOpenGoAndTheLedgerSkipsWhatWasSent() async {
        let clock = ManualClock()
        let rejecting = ScriptedTransport(numbered: { $0 == 0 ? 404 : 200 })
        #expect(await Self.delivery(rejecting, clock: clock).deliver([Self.open()], deadline: .seconds(60))
            == [[.rejected("HTTP 404"), .delivered(attempts: 1)]])

        let payload = Self.open()
        let sent = MemorySentOnceLedger([payload.requests[0].key])
        let ledger = SentOnceTrackingLedger(sent)
        let transport = ScriptedTransport(numbered: { _ in 200 })
        #expect(await Self.delivery(transport, ledger: ledger, clock: clock).deliver([payload], deadline: .seconds(60))
            == [[.alreadySent, .delivered(attempts: 1)]])
        #expect(transport.urls == [payload.requests[1].url])
        #expect(sent.keys == Set(payload.requests.map(\.key)))
    }
}
