import Logging
@testable import PushAgent
@testable import PushAcrobits
import PushBackend
import PushConfig
import PushConfig
import PushScheduler
import PushTestSupport
import PushTransport
import Synchronization
import Testing

/// A transport that answers from a script and records what it was asked. The script gets the
/// request and how many times its URL was asked before (0 the first time).
final class ScriptedTransport: HTTPTransport {
    typealias Answer = @Sendable (TransportRequest, Int) throws -> TransportResponse
    private let answer: Answer
    private let log = Mutex<[TransportRequest]>([])

    init(_ answer: @escaping Answer) { self.answer = answer }

    var requests: [TransportRequest] { log.withLock { $0 } }

    /// Waits (without blocking a thread) until `count` requests came, or `limit` of real time passed.
    func waitForRequests(_ count: Int, within limit: Duration = .seconds(10)) async -> Bool {
        let end = ContinuousClock.now + limit
        while requests.count < count {
            if ContinuousClock.now > end { return false }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return true
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let earlier = log.withLock { requests in
            defer { requests.append(request) }
            return requests.count { $0.url == request.url }
        }
        return try answer(request, earlier)
    }
}

@Suite struct OnceRunnerTests {
    static func report(_ account: String, url: String) -> PlannedReport {
        PlannedReport(RenderedRequest(account: account, reporter: "pushTokenReporter", method: "GET", url: url,
                                      headers: [("User-Agent", "pushreporter/0.1.0")], body: nil),
                      defaultTimeout: .seconds(5))
    }

    static func settings() -> AgentSettings {
        var settings = AgentSettings()
        settings.retry.initial = .seconds(10)
        settings.retry.max = .seconds(40)
        return settings
    }

    @Test func everyReportIsSentOnceWhenAllSucceed() async {
        let transport = ScriptedTransport { _, _ in TransportResponse(status: 204) }
        let reports = (0..<5).map { Self.report("a\($0)", url: "http://h\($0 % 2).example/\($0)") }
        let runner = OnceRunner(reports: reports, settings: Self.settings(), transport: transport,
                                logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, clock: ManualClock())
        let outcome = await runner.run(deadline: .seconds(60))
        #expect(outcome.delivered == 5)
        #expect(outcome.undelivered.isEmpty)
        #expect(Set(transport.requests.map(\.url)) == Set(reports.map(\.request.url)))
        #expect(transport.requests.count == 5)
    }

    @Test func failuresAreRetriedAfterTheBackoffAndReportedAtTheDeadline() async {
        // b always fails; a fails once.
        let transport = ScriptedTransport { request, earlier in
            if request.url.hasSuffix("/b") { return TransportResponse(status: 503) }
            return TransportResponse(status: earlier == 0 ? 500 : 204)
        }
        let clock = ManualClock()
        let runner = OnceRunner(reports: [Self.report("a", url: "http://x.example/a"), Self.report("b", url: "http://y.example/b")],
                                settings: Self.settings(), transport: transport,
                                logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, clock: clock,
                                wallClock: { 0 })
        let run = Task { await runner.run(deadline: .seconds(30)) }
        // Both first attempts fail; the run sleeps on the retries and the deadline.
        await clock.waitForSleepers(2)
        #expect(await transport.waitForRequests(2))
        // The first retry comes between 5 s and 10 s (initial 10 s, jittered to [5, 10]).
        clock.advance(by: .seconds(4.9))
        #expect(await transport.waitForRequests(3, within: .milliseconds(100)) == false)
        clock.advance(by: .seconds(5.2))
        #expect(await transport.waitForRequests(4))
        clock.advance(by: .seconds(30))
        let outcome = await run.value
        #expect(outcome.delivered == 1)
        #expect(outcome.undelivered.map(\.account) == ["b"])
        #expect(outcome.undelivered.first?.reason == "HTTP 503")
        #expect(outcome.summary.hasPrefix("Delivered 1 of 2 reports; 1 not delivered within the deadline (30s):\n  b: pushTokenReporter to y.example:80: HTTP 503 ("))
    }

    @Test func anAttemptCutShortByTheDeadlineKeepsTheLastRealReason() async {
        // The first attempt gets a 503; later ones end as the deadline's cancellation does.
        let transport = ScriptedTransport { _, earlier in
            if earlier == 0 { return TransportResponse(status: 503) }
            throw TransportError.cancelled
        }
        let clock = ManualClock()
        let runner = OnceRunner(reports: [Self.report("a", url: "http://x.example/a")], settings: Self.settings(),
                                transport: transport, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
                                clock: clock, wallClock: { 0 })
        let run = Task { await runner.run(deadline: .seconds(30)) }
        await clock.waitForSleepers(2)
        clock.advance(by: .seconds(10))
        #expect(await transport.waitForRequests(2))
        clock.advance(by: .seconds(30))
        let outcome = await run.value
        #expect(outcome.undelivered.first?.reason == "HTTP 503")
        #expect(outcome.undelivered.first?.attempts == 1)
    }
}
