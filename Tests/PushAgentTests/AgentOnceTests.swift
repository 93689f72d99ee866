import Logging
@testable import PushAgent
import PushRegistry
@testable import PushAcrobits
import PushBackend
import PushConfig
import PushConfig
import PushScheduler
import PushState
import PushTestSupport
@testable import PushTransport
import Synchronization
import Testing
import PushTestThreads

/// `run --once`: the agent's one round, in process, on a manual clock with a scripted transport.
@Suite(.ownThreads) struct AgentOnceTests {
    static func plan(_ account: String, url: String) -> SubscriptionPlan {
        let rendered = RenderedRequest(account: account, reporter: "pushTokenReporter", method: "GET", url: url,
                                       headers: [("User-Agent", "pushreporter/0.1.0")], body: nil, fingerprint: "f-\(account)")
        return SubscriptionPlan(account: account, service: SubscriptionKey.acrobits, fingerprint: rendered.fingerprint,
                                delivery: AcrobitsBackend.request(rendered, service: SubscriptionKey.acrobits, purpose: .delivery),
                                cleanup: nil)
    }

    static func settings() -> AgentSettings {
        var settings = AgentSettings()
        settings.retry.initial = .seconds(10)
        settings.retry.max = .seconds(40)
        settings.timeout = .seconds(5)
        return settings
    }

    static let quiet = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    static func agent(_ plans: [SubscriptionPlan], records: [SubscriptionRecord] = [], transport: ScriptedTransport,
                      store: MemoryStateStore = MemoryStateStore(), clock: ManualClock, logger: Logger = quiet) -> Agent<ManualClock> {
        Agent(start: .configuration(plans: plans, records: records, pollers: []), settings: settings(), backends: .standard, transport: transport,
              recorder: StateRecorder(store: store, logger: quiet, clock: clock), logger: logger, clock: clock, wallClock: { 0 })
    }

    @Test func theSummaryCountsRefusedAndRejectedOnceAndTheDeliveredAsDelivered() async throws {
        // a0, a1 delivered; a2 rejected (a request that cannot be sent, not retried); a3 refused
        // by the configuration (never sent); a4 waits for a value (not a job, not counted).
        let transport = ScriptedTransport { request, _ in
            if request.url.hasSuffix("/2") { throw TransportError(.badURL, "not a URL libcurl takes") }
            return TransportResponse(status: 204)
        }
        var plans = (0..<3).map { Self.plan("a\($0)", url: "http://h.example/\($0)") }
        var refused = Self.plan("a3", url: "http://h.example/3")
        refused.delivery = nil
        refused.refusal = "a secret bound for plain http"
        plans.append(refused)
        plans.append(SubscriptionPlan(account: "a4", service: SubscriptionKey.acrobits, fingerprint: "f-a4", delivery: nil,
                                      waiting: "no device token yet", cleanup: nil))
        let outcome = await Self.agent(plans, transport: transport, clock: ManualClock()).runOnce(deadline: .seconds(60))
        #expect(outcome.total == 4)
        #expect(outcome.delivered == 2)
        #expect(outcome.undelivered.map(\.key.account) == ["a2", "a3"])
        #expect(outcome.undelivered.map(\.reason) == ["not a URL libcurl takes", "a secret bound for plain http"])
        #expect(!outcome.succeeded)
        #expect(transport.requests.count == 3)
    }

    @Test func everyReportIsSentOnceWhenAllSucceed() async throws {
        let transport = ScriptedTransport { _, _ in TransportResponse(status: 204) }
        let plans = (0..<5).map { Self.plan("a\($0)", url: "http://h\($0 % 2).example/\($0)") }
        let store = MemoryStateStore()
        let outcome = await Self.agent(plans, transport: transport, store: store, clock: ManualClock()).runOnce(deadline: .seconds(60))
        #expect(outcome.delivered == 5)
        #expect(outcome.undelivered.isEmpty)
        #expect(outcome.succeeded)
        #expect(Set(transport.requests.map(\.url)) == Set((0..<5).map { "http://h\($0 % 2).example/\($0)" }))
        #expect(transport.requests.count == 5)
        #expect(try store.records().map(\.state) == Array(repeating: .delivered, count: 5))
    }

    @Test func aLargeStartGoesOutInRunsEachWrittenBeforeItIsSent() async throws {
        // 25 subscriptions in runs of 4: each request may leave only once its record, with the
        // cleanup it carries, is in the state (SPEC §6).
        let store = MemoryStateStore()
        let sentBeforeWritten = Mutex<[String]>([])
        let transport = ScriptedTransport { request, _ in
            let account = String(request.url.split(separator: "/").last!)
            let stored = (try? store.records())?.first { $0.key.account == account }
            if stored?.cleanup != "cleanup-\(account)" { sentBeforeWritten.withLock { $0.append(account) } }
            return TransportResponse(status: 204)
        }
        let plans = (0..<25).map { index in
            var plan = Self.plan("a\(index)", url: "http://h.example/a\(index)")
            plan.cleanup = "cleanup-a\(index)"
            return plan
        }
        let agent = Agent(start: .configuration(plans: plans, records: [], pollers: []), settings: Self.settings(),
                          backends: .standard, transport: transport, recorder: StateRecorder(store: store, logger: Self.quiet, clock: ManualClock()),
                          logger: Self.quiet, clock: ManualClock(), wallClock: { 0 }, startRunSize: 4)
        let outcome = await agent.runOnce(deadline: .seconds(60))
        #expect(outcome.delivered == 25 && outcome.undelivered.isEmpty)
        #expect(transport.requests.count == 25, "each once")
        #expect(Set(transport.requests.map(\.url)) == Set((0..<25).map { "http://h.example/a\($0)" }))
        #expect(sentBeforeWritten.withLock { $0 }.isEmpty, "sent before their record was written: \(sentBeforeWritten.withLock { $0 })")
        let records = try store.records()
        #expect(records.count == 25 && records.allSatisfy { $0.state == .delivered && $0.cleanup == "cleanup-\($0.key.account)" })
    }

    /// Runs `agent`'s round with a deadline its standing `clock` never reaches: the round's
    /// outcome once it ends of itself (nil, and an issue recorded, when it does not within the
    /// usual bound); then the clock passes the deadline, so that the round ends either way.
    static func roundEndsBeforeItsDeadline(_ agent: Agent<ManualClock>, clock: ManualClock,
                                           sourceLocation: SourceLocation = #_sourceLocation) async -> OnceOutcome? {
        let ended = Mutex<OnceOutcome?>(nil)
        let round = Task(executorPreference: TestThreads.shared) {
            let outcome = await agent.runOnce(deadline: .seconds(600))
            ended.withLock { $0 = outcome }
        }
        #expect(await Polling.until { ended.withLock { $0 != nil } }, "the round waited for its deadline", sourceLocation: sourceLocation)
        clock.advance(by: .seconds(600))
        await round.value
        return ended.withLock { $0 }
    }

    @Test func aLargeRemovalGoesOutInRunsEveryCleanupOnce() async throws {
        // `remove` of 11 subscriptions in runs of 2: the cleanups past the first run are fed.
        let store = MemoryStateStore()
        let records = (0..<11).map { index in
            SubscriptionRecord(key: AgentBookTests.k("gone\(index)"), fingerprint: "g\(index)", deliveredFingerprint: "g\(index)",
                               state: .delivered, cleanup: AgentBookTests.plan("gone\(index)", token: "1").cleanup)
        }
        try store.save(records, deleting: [])
        let transport = ScriptedTransport { _, _ in TransportResponse(status: 204) }
        let clock = ManualClock()
        let agent = Agent(start: .removal(records: records), settings: Self.settings(), backends: .standard, transport: transport,
                          recorder: StateRecorder(store: store, logger: Self.quiet, clock: clock),
                          logger: Self.quiet, clock: clock, wallClock: { 0 }, startRunSize: 2)
        let outcome = try #require(await Self.roundEndsBeforeItsDeadline(agent, clock: clock))
        #expect(outcome.delivered == 11 && outcome.undelivered.isEmpty)
        #expect(transport.requests.map(\.url).sorted() == (0..<11).map { "https://gone.example.com/gone\($0)?t=1" }.sorted())
        #expect(try store.records().isEmpty, "each forgotten once cleaned up")
    }

    @Test func aStartWhoseFirstRequestsHangStillHasEveryRunWrittenAndHandedOver() async throws {
        // The feeder hands the scheduler its next run once the one before has begun; requests
        // that do not begin (here: one at a time, the first hanging) must not keep the rest of
        // the start from being written and submitted: it waits `feedWait` at most.
        final class HangsUntilReleased: HTTPTransport {
            let released = Mutex(false)
            let received = Mutex(0)
            func send(_ request: TransportRequest) async throws -> TransportResponse {
                received.withLock { $0 += 1 }
                _ = await Polling.until { self.released.withLock { $0 } }
                return TransportResponse(status: 204)
            }
        }
        let store = MemoryStateStore()
        let transport = HangsUntilReleased()
        var settings = Self.settings()
        settings.concurrency = 1
        let plans = (0..<20).map { Self.plan("a\($0)", url: "http://h.example/a\($0)") }
        let agent = Agent(start: .configuration(plans: plans, records: [], pollers: []), settings: settings,
                          backends: .standard, transport: transport, recorder: StateRecorder(store: store, logger: Self.quiet, clock: ManualClock()),
                          logger: Self.quiet, clock: ManualClock(), wallClock: { 0 }, startRunSize: 2, feedWait: .milliseconds(20))
        let round = Task(executorPreference: TestThreads.shared) { await agent.runOnce(deadline: .seconds(60)) }
        // Runs of 2 (the first), 4, 8 and 6: the last waits for room, which never comes.
        #expect(await Polling.until { (try? store.records().count) == 20 }, "every run written while the first request hangs")
        #expect(await Polling.until { transport.received.withLock { $0 } == 1 })
        transport.released.withLock { $0 = true }
        let outcome = await round.value
        #expect(outcome.delivered == 20 && outcome.undelivered.isEmpty)
        #expect(transport.received.withLock { $0 } == 20)
    }

    @Test func outcomesAreWrittenWhileTheRestIsSentNotOnlyAtTheEnd() async throws {
        // Batches of one: b is answered once a's delivery is in the state. Were outcomes written
        // only after the last answer, b would wait out its bound (and the expectation below would fail).
        final class WaitsForTheFirstOutcome: HTTPTransport {
            let store: MemoryStateStore
            let sawItWritten = Mutex<Bool?>(nil)
            init(store: MemoryStateStore) { self.store = store }

            func send(_ request: TransportRequest) async throws -> TransportResponse {
                if request.url.hasSuffix("/b") {
                    let written = await Polling.until(timeout: .seconds(20)) {
                        (try? self.store.records())?.contains { $0.key.account == "a" && $0.state == .delivered } == true
                    }
                    sawItWritten.withLock { $0 = written }
                }
                return TransportResponse(status: 204)
            }
        }
        let store = MemoryStateStore()
        let transport = WaitsForTheFirstOutcome(store: store)
        let plans = [Self.plan("a", url: "http://h.example/a"), Self.plan("b", url: "http://h.example/b")]
        let agent = Agent(start: .configuration(plans: plans, records: [], pollers: []), settings: Self.settings(),
                          backends: .standard, transport: transport, recorder: StateRecorder(store: store, logger: Self.quiet, clock: ManualClock(), batchSize: 1),
                          logger: Self.quiet, clock: ManualClock(), wallClock: { 0 })
        let outcome = await agent.runOnce(deadline: .seconds(60))
        #expect(transport.sawItWritten.withLock { $0 } == true, "a's delivery was not in the state while b was being sent")
        #expect(outcome.delivered == 2 && outcome.succeeded)
        #expect(try store.records().map(\.state) == [.delivered, .delivered])
    }

    @Test func aBatchThatCouldNotBeWrittenIsTriedAgainAndLaterBatchesStillGo() async throws {
        let store = MemoryStateStore()
        store.failsWrites = true
        let recorder = StateRecorder(store: store, logger: Self.quiet, clock: ManualClock(), batchSize: 2)
        let writer = Task(executorPreference: TestThreads.shared) { await recorder.writeInBatches() }
        defer { writer.cancel() }
        func record(_ account: String) -> SubscriptionRecord {
            SubscriptionRecord(key: SubscriptionKey(account: account, service: SubscriptionKey.acrobits), state: .delivered)
        }
        recorder.save(record("a"))
        recorder.save(record("b"))
        #expect(await Polling.until { store.failedSaveCount >= 1 }, "a full batch is written at once")
        store.failsWrites = false
        // Tried again without another change.
        #expect(await Polling.until { (try? store.records())?.count == 2 })
        // And batch writing goes on after the failure.
        recorder.save(record("c"))
        recorder.save(record("d"))
        #expect(await Polling.until { (try? store.records())?.count == 4 })
        #expect(try store.records().map(\.key.account) == ["a", "b", "c", "d"])
    }

    @Test func failuresAreRetriedAfterTheBackoffAndReportedAtTheDeadline() async throws {
        // b always fails; a fails once.
        let transport = ScriptedTransport { request, earlier in
            if request.url.hasSuffix("/b") { return TransportResponse(status: 503) }
            return TransportResponse(status: earlier == 0 ? 500 : 204)
        }
        let clock = ManualClock()
        let store = MemoryStateStore()
        let logged = Mutex("")
        let output = LogOutput(format: .text, environment: ["JOURNAL_STREAM": "1:1"], isTerminal: false) { text in
            logged.withLock { $0 += text }
        }
        let agent = Self.agent([Self.plan("a", url: "http://x.example/a"), Self.plan("b", url: "http://y.example/b")],
                               transport: transport, store: store, clock: clock,
                               logger: Logger(label: "test") { _ in AgentLogHandler(output: output) })
        let run = Task(executorPreference: TestThreads.shared) { await agent.runOnce(deadline: .seconds(30)) }
        // Both first attempts fail, and both failures are taken in (logged) before time moves:
        // a failure taken in after an advance would be retried later than this test expects.
        #expect(await transport.waitForRequests(2))
        #expect(await Polling.until { logged.withLock { $0.components(separatedBy: "(attempt 1)").count - 1 } == 2 })
        await clock.waitForSleepers(2)
        // The first retry comes between 5 s and 10 s (initial 10 s, jittered to [5, 10]).
        clock.advance(by: .seconds(4.9))
        #expect(await transport.waitForRequests(3, within: .milliseconds(100)) == false)
        clock.advance(by: .seconds(5.2))
        #expect(await transport.waitForRequests(4))
        clock.advance(by: .seconds(30))
        let outcome = await run.value
        #expect(outcome.delivered == 1)
        #expect(outcome.undelivered.map(\.key.account) == ["b"])
        #expect(outcome.undelivered.first?.reason == "HTTP 503")
        #expect(!outcome.succeeded)
        #expect(outcome.summary.hasPrefix("Delivered 1 of 2 reports; 1 not delivered within the deadline (30s):\n  b: pushTokenReporter to y.example:80: HTTP 503 ("))
        let records = try store.records()
        #expect(records.map(\.state) == [.delivered, .retrying])
        #expect(records.allSatisfy { $0.nextDueAt == nil }, "no attempt is due once the run is over: `status` shows none")
        #expect(records.last?.lastOutcome == "HTTP 503")
    }

    @Test func aFailureWhoseRetryWouldComeAfterTheDeadlineSaysItWasTheLast() async {
        // A 503 at the start; the first retry comes 5 s to 10 s later (initial 10 s, jittered),
        // after a deadline of 4 s, and one of 60 s leaves room for it.
        for (deadline, expected) in [(4, "(attempt 1); no time is left for another before the deadline"), (60, "(attempt 1); next attempt in ")] {
            let transport = ScriptedTransport { _, earlier in TransportResponse(status: earlier == 0 ? 503 : 204) }
            let clock = ManualClock()
            let logged = Mutex("")
            let output = LogOutput(format: .text, environment: ["JOURNAL_STREAM": "1:1"], isTerminal: false) { text in
                logged.withLock { $0 += text }
            }
            let agent = Self.agent([Self.plan("a", url: "http://x.example/a")], transport: transport, clock: clock,
                                   logger: Logger(label: "test") { _ in AgentLogHandler(output: output) })
            let run = Task(executorPreference: TestThreads.shared) { await agent.runOnce(deadline: .seconds(deadline)) }
            #expect(await Polling.until { logged.withLock { $0.contains("(attempt 1)") } })
            clock.advance(by: .seconds(deadline))
            _ = await run.value
            let text = logged.withLock { $0 }
            #expect(text.contains("<4>a: pushTokenReporter to x.example:80 failed: HTTP 503 \(expected)"), "\(text)")
        }
    }

    @Test func aRoundWhoseRetriesAllComeAfterTheDeadlineEndsWithoutWaitingForIt() async {
        // a is delivered; b gets a 503, and its first retry (5 s to 10 s later) is after the
        // 4 s deadline: nothing is left to do, so the round ends at once, the clock unmoved.
        let transport = ScriptedTransport { request, _ in TransportResponse(status: request.url.hasSuffix("/b") ? 503 : 204) }
        let clock = ManualClock()
        let agent = Self.agent([Self.plan("a", url: "http://x.example/a"), Self.plan("b", url: "http://x.example/b")],
                               transport: transport, clock: clock)
        let ended = Mutex<OnceOutcome?>(nil)
        let run = Task(executorPreference: TestThreads.shared) {
            let outcome = await agent.runOnce(deadline: .seconds(4))
            ended.withLock { $0 = outcome }
        }
        #expect(await Polling.until { ended.withLock { $0 != nil } }, "the round waited for the deadline")
        let outcome = ended.withLock { $0 }
        #expect(outcome?.delivered == 1)
        #expect(outcome?.undelivered.map(\.key.account) == ["b"])
        #expect(outcome?.undelivered.first?.reason == "HTTP 503")
        // A round that did wait ends here.
        clock.advance(by: .seconds(4))
        await run.value
    }

    @Test func anAttemptCutShortByTheDeadlineKeepsTheLastRealReason() async {
        // The first attempt gets a 503; later ones end as the deadline's cancellation does.
        let transport = ScriptedTransport { _, earlier in
            if earlier == 0 { return TransportResponse(status: 503) }
            throw TransportError.cancelled
        }
        let clock = ManualClock()
        let agent = Self.agent([Self.plan("a", url: "http://x.example/a")], transport: transport, clock: clock)
        let run = Task(executorPreference: TestThreads.shared) { await agent.runOnce(deadline: .seconds(30)) }
        await clock.waitForSleepers(2)
        clock.advance(by: .seconds(10))
        #expect(await transport.waitForRequests(2))
        clock.advance(by: .seconds(30))
        let outcome = await run.value
        #expect(outcome.undelivered.first?.reason == "HTTP 503")
        #expect(outcome.undelivered.first?.attempts == 1)
    }

    /// What a round logged.
    final class LogText: Sendable {
        private let text = Mutex("")
        func append(_ more: String) { text.withLock { $0 += more } }
        var value: String { text.withLock { $0 } }
    }

    /// A round with one request at a time, a continuation to stop it, and its log lines.
    static func stoppableRound(_ transport: HoldingTransport, clock: ManualClock, logged: LogText, painted: LogText? = nil)
        -> (run: Task<OnceOutcome, Never>, stop: RoundStop) {
        var settings = Self.settings()
        settings.concurrency = 1
        let output = LogOutput(format: .text, environment: ["JOURNAL_STREAM": "1:1"], isTerminal: false) { logged.append($0) }
        let plans = [Self.plan("a0", url: "http://x.example/held"), Self.plan("a1", url: "http://x.example/1"),
                     Self.plan("a2", url: "http://x.example/2")]
        let agent = Agent(start: .configuration(plans: plans, records: [], pollers: []), settings: settings, backends: .standard, transport: transport,
                          recorder: StateRecorder(store: MemoryStateStore(), logger: quiet, clock: clock),
                          logger: Logger(label: "test") { _ in AgentLogHandler(output: output) }, clock: clock, wallClock: { 0 },
                          gracePeriod: Duration.seconds(7))
        let stop = RoundStop()
        // A terminal, for the progress line.
        let terminal = painted.map { painted in LogOutput(format: .text, environment: [:], isTerminal: true) { painted.append($0) } }
        let run = Task(executorPreference: TestThreads.shared) { await agent.runOnce(deadline: .seconds(60), output: terminal, stop: stop) }
        return (run, stop)
    }

    @Test func aStoppedRoundStartsNoNewRequestAndLetsTheOneInFlightFinish() async {
        let transport = HoldingTransport()
        let logged = LogText()
        let painted = LogText()
        let (run, stop) = Self.stoppableRound(transport, clock: ManualClock(), logged: logged, painted: painted)
        #expect(await Polling.until { transport.urls == ["http://x.example/held"] })
        #expect(await Polling.until { painted.value.contains("Reporting: 0/3 done, 0 retrying, 1 in flight") }, "\(painted.value)")
        stop.request()
        #expect(await Polling.until { logged.value.contains("<6>stopping: no new requests; 1 in flight gets 7s to finish") },
                "\(logged.value)")
        // The progress line says what it waits for now.
        #expect(await Polling.until { painted.value.contains("Stopping: 0/3 done, 0 retrying, 1 in flight") }, "\(painted.value)")
        // Answered within the grace period (the clock has not moved): taken in, and the round ends.
        transport.release()
        let outcome = await run.value
        #expect(outcome.delivered == 1)
        #expect(outcome.undelivered.map { $0.key.account } == ["a1", "a2"])
        #expect(outcome.undelivered.map { $0.attempts } == [0, 0])
        #expect(transport.urls == ["http://x.example/held"])
        #expect(!logged.value.contains("after the grace period"))
    }

    @Test func aFailureInTheGracePeriodIsNotPromisedAnotherAttempt() async {
        let transport = HoldingTransport(heldStatus: 503)
        let logged = LogText()
        let (run, stop) = Self.stoppableRound(transport, clock: ManualClock(), logged: logged)
        #expect(await Polling.until { transport.urls == ["http://x.example/held"] })
        stop.request()
        transport.release()
        let outcome = await run.value
        #expect(outcome.undelivered.first?.reason == "HTTP 503")
        #expect(logged.value.contains("<4>a0: pushTokenReporter to x.example:80 failed: HTTP 503 (attempt 1); not tried again before stopping"),
                "\(logged.value)")
    }

    @Test func aRoundStoppedBeforeItSendsSendsNothing() async throws {
        // A SIGTERM while the start is booked: no request may leave after it.
        let transport = HoldingTransport()
        let store = MemoryStateStore()
        let agent = Agent(start: .configuration(plans: [Self.plan("a0", url: "http://x.example/0")], records: [], pollers: []),
                          settings: Self.settings(), backends: .standard, transport: transport,
                          recorder: StateRecorder(store: store, logger: Self.quiet, clock: ManualClock()),
                          logger: Self.quiet, clock: ManualClock(), wallClock: { 0 })
        let stop = RoundStop()
        stop.request()
        let outcome = await agent.runOnce(deadline: .seconds(60), stop: stop)
        #expect(transport.urls.isEmpty)
        #expect(outcome.delivered == 0 && outcome.undelivered.map { $0.key.account } == ["a0"])
        #expect(outcome.stateWritten)
        #expect(try store.records().map { $0.state } == [.pending])
    }

    @Test func aLargeRoundStoppedBeforeItSendsCountsEveryReportItDidNotSend() async throws {
        // Stopped before the first run left: the plans after it, which the book books as the
        // first run is sent, are in the summary as not delivered all the same, not left out.
        let transport = HoldingTransport()
        let store = MemoryStateStore()
        let plans = (0..<25).map { Self.plan("a\($0)", url: "http://x.example/\($0)") }
        let agent = Agent(start: .configuration(plans: plans, records: [], pollers: []),
                          settings: Self.settings(), backends: .standard, transport: transport,
                          recorder: StateRecorder(store: store, logger: Self.quiet, clock: ManualClock()),
                          logger: Self.quiet, clock: ManualClock(), wallClock: { 0 }, startRunSize: 4)
        let stop = RoundStop()
        stop.request()
        let outcome = await agent.runOnce(deadline: .seconds(60), stop: stop)
        #expect(transport.urls.isEmpty)
        #expect(outcome.total == 25 && outcome.delivered == 0)
        #expect(Set(outcome.undelivered.map { $0.key.account }) == Set(plans.map(\.account)))
        #expect(outcome.stateWritten)
        // Each record written is the start's pending one: nothing claims a delivery.
        #expect(try store.records().allSatisfy { $0.state == .pending })
    }

    @Test(arguments: [100, 5_000])
    func aServiceStoppedByTheFirstRunEndsTheRoundWithEveryReportStopped(count: Int) async throws {
        // The plans booked after the refusal are stopped too, and the round ends once they are
        // all booked, not at its deadline (its clock stands still).
        let store = MemoryStateStore()
        let clock = ManualClock()
        let plans = (0..<count).map { AgentOnceConfirmationTests.plan("a\($0)", service: "s") }
        let agent = Agent(start: .configuration(plans: plans, records: [], pollers: []), settings: Self.settings(),
                          backends: Backends([ScriptedBackend(type: "accepting", always: .stopped("credentials refused"))]), transport: ScriptedTransport { _, _ in TransportResponse(status: 204) },
                          recorder: StateRecorder(store: store, logger: Self.quiet, clock: clock),
                          logger: Self.quiet, clock: clock, wallClock: { 0 }, startRunSize: 4, feedWait: .milliseconds(5))
        let outcome = try #require(await Self.roundEndsBeforeItsDeadline(agent, clock: clock))
        #expect(outcome.total == count && outcome.delivered == 0)
        let reasons = Dictionary(grouping: outcome.undelivered, by: { "\($0.state): \($0.reason)" }).mapValues(\.count)
        #expect(reasons == ["stopped: credentials refused": count])
        let states = Dictionary(grouping: try store.records(), by: { "\($0.state)" }).mapValues(\.count)
        #expect(states == ["stopped": count])
    }

    @Test(arguments: [2_000, 20_000])
    func aRoundWhoseRestSubmitsNothingEndsOnceItIsBooked(waiting: Int) async throws {
        // Four deliveries, then plans that wait for a device token: once those are booked the
        // round is over, and nothing else would tell it (its clock stands still).
        let clock = ManualClock()
        let store = MemoryStateStore()
        let plans = (0..<4).map { Self.plan("a\($0)", url: "http://x.example/a\($0)") } + (0..<waiting).map { index in
            SubscriptionPlan(account: "w\(index)", service: SubscriptionKey.acrobits, fingerprint: "f-w\(index)", delivery: nil,
                             waiting: "no device token yet", cleanup: nil)
        }
        let agent = Agent(start: .configuration(plans: plans, records: [], pollers: []), settings: Self.settings(),
                          backends: .standard, transport: ScriptedTransport { _, _ in TransportResponse(status: 204) },
                          recorder: StateRecorder(store: store, logger: Self.quiet, clock: clock),
                          logger: Self.quiet, clock: clock, wallClock: { 0 }, startRunSize: 4)
        let outcome = try #require(await Self.roundEndsBeforeItsDeadline(agent, clock: clock))
        #expect(outcome.total == 4 && outcome.delivered == 4)
        #expect(try store.records().count == waiting + 4, "every waiting plan written")
    }

    @Test func aStoppedRoundCancelsWhatIsStillInFlightOnceTheGracePeriodIsOver() async {
        let transport = HoldingTransport()
        let logged = LogText()
        let clock = ManualClock()
        let (run, stop) = Self.stoppableRound(transport, clock: clock, logged: logged)
        #expect(await Polling.until { transport.urls == ["http://x.example/held"] })
        stop.request()
        #expect(await Polling.until { logged.value.contains("stopping: no new requests; 1 in flight gets 7s to finish") })
        // The deadline's sleep and the grace period's.
        await clock.waitForSleepers(2)
        clock.advance(by: .seconds(7))
        let outcome = await run.value
        #expect(outcome.delivered == 0)
        #expect(outcome.undelivered.map { $0.key.account } == ["a0", "a1", "a2"])
        #expect(transport.urls == ["http://x.example/held"])
        #expect(logged.value.contains("<4>1 request still in flight after the grace period is cancelled"), "\(logged.value)")
    }

    @Test func aStateThatCannotBeWrittenSendsNothing() async {
        let transport = ScriptedTransport { _, _ in TransportResponse(status: 204) }
        let store = MemoryStateStore()
        store.failsWrites = true
        let outcome = await Self.agent([Self.plan("a", url: "http://x.example/a")], transport: transport, store: store,
                                       clock: ManualClock()).runOnce(deadline: .seconds(30))
        #expect(!outcome.stateWritten)
        #expect(!outcome.succeeded)
        #expect(transport.requests.isEmpty)
    }
}
