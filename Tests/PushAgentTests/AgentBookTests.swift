@testable import PushAgent
@testable import PushAcrobits
import PushBackend
import PushConfig
import PushConfig
import PushState
import Testing

/// The agent's decisions, driven synchronously: no tasks, no clock, no server.
@Suite struct AgentBookTests {
    static func plan(_ id: String, token: String, removal: Bool = true) -> AccountPlan {
        let report = RenderedRequest(account: id, reporter: "pushTokenReporter", method: "GET",
                                     url: "https://push.example.com/r/\(id)?t=\(token)", headers: [], body: nil,
                                     fingerprint: "\(id)-\(token)")
        let removalRequest = RenderedRequest(account: id, reporter: "accountRemovalReporter", method: "DELETE",
                                             url: "https://gone.example.com/\(id)?t=\(token)", headers: [], body: nil)
        return AccountPlan(report: PlannedReport(report, defaultTimeout: .seconds(30)),
                           removal: removal ? StoredRequest(removalRequest).text : nil)
    }

    static func submitted(_ actions: [AgentBook.Action]) -> [String] {
        actions.compactMap {
            if case .submit(let id, let host, _) = $0 { return "\(id)@\(host)" }
            return nil
        }
    }

    static func saved(_ actions: [AgentBook.Action]) -> [AccountRecord] {
        actions.compactMap { if case .save(let record) = $0 { record } else { nil } }
    }

    /// Reloads and, as the agent does once the state is written, releases what it held.
    static func reload(_ book: inout AgentBook, _ plans: [AccountPlan], reportInterval: Duration?, now: Int64)
        -> ([AgentBook.Action], AgentBook.ReloadSummary) {
        let result = book.reload(plans: plans, reportInterval: reportInterval, now: now)
        book.releaseHeld()
        return result
    }

    /// Starts every submitted job, as the scheduler would.
    static func send(_ book: inout AgentBook, _ actions: [AgentBook.Action]) {
        for case .submit(let id, _, _) in actions { _ = book.beginAttempt(id) }
    }

    @Test func startReportsEveryAccountAndOwesRemovalsOfTheOnesThatLeft() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let gone = AccountRecord(id: "gone", fingerprint: "gone-1", deliveredFingerprint: "gone-1",
                                 removal: Self.plan("gone", token: "1").removal)
        let goneWithoutRemoval = AccountRecord(id: "bare", fingerprint: "bare-1", deliveredFingerprint: "bare-1")
        var kept = AccountRecord(id: "alice", deliveredFingerprint: "alice-1")
        Self.plan("alice", token: "1").apply(to: &kept)
        let actions = book.start(plans: [Self.plan("alice", token: "1"), Self.plan("bob", token: "1")],
                                 records: [gone, goneWithoutRemoval, kept])
        #expect(Set(Self.submitted(actions)) == ["alice@push.example.com:443", "bob@push.example.com:443",
                                                 "gone@gone.example.com:443"])
        #expect(actions.contains(.forget("bare")))
        // alice's stored record is unchanged, so it is not written again.
        #expect(!Self.saved(actions).contains { $0.id == "alice" })
        let attempt = book.beginAttempt("gone")
        let removal = try #require(attempt)
        #expect(removal.request.method == "DELETE")
        #expect(removal.request.url == "https://gone.example.com/gone?t=1")
        #expect(book.counts.statusText == "3 accounts: 1 reported, 0 retrying, 1 waiting, 1 removal pending")
    }

    @Test func theRemovalIsSavedBeforeAnyRequestIsSubmitted() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let actions = book.start(plans: [Self.plan("alice", token: "1"), Self.plan("bob", token: "1")], records: [])
        #expect(Set(Self.saved(actions).map(\.id)) == ["alice", "bob"])
        #expect(Self.saved(actions).first { $0.id == "alice" }?.removal == Self.plan("alice", token: "1").removal)
        let lastSave = try #require(actions.lastIndex { if case .save = $0 { true } else { false } })
        let firstSubmit = try #require(actions.firstIndex { if case .submit = $0 { true } else { false } })
        #expect(lastSave < firstSubmit)

        let (reload, _) = Self.reload(&book, [Self.plan("alice", token: "2"), Self.plan("carol", token: "1")], reportInterval: book.reportInterval, now: 0)
        let lastReloadSave = try #require(reload.lastIndex { if case .save = $0 { true } else { false } })
        let firstReloadSubmit = try #require(reload.firstIndex { if case .submit = $0 { true } else { false } })
        #expect(lastReloadSave < firstReloadSubmit)
    }

    @Test func reloadReportsNewAndChangedKeepsUnchangedAndRemovesTheRest() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let start = book.start(plans: ["alice", "bob", "carol"].map { Self.plan($0, token: "1") }, records: [])
        Self.send(&book, start)
        for id in ["alice", "bob", "carol"] { #expect(book.delivered(id, now: 1_000) != nil) }

        let (actions, summary) = Self.reload(&book, [Self.plan("alice", token: "1"), Self.plan("bob", token: "2"),
                                                     Self.plan("dave", token: "1")], reportInterval: nil, now: 2_000)
        #expect(summary == .init(added: 1, changed: 1, unchanged: 1, removed: 1))
        #expect(Set(Self.submitted(actions)) == ["bob@push.example.com:443", "dave@push.example.com:443",
                                                 "carol@gone.example.com:443"])
        #expect(book.currentRequest("bob")?.request.url == "https://push.example.com/r/bob?t=2")
        #expect(book.currentRequest("alice") == nil)

        // The removal, once delivered, forgets the account.
        _ = book.beginAttempt("carol")
        #expect(book.delivered("carol", now: 2_000)?.actions == [.forget("carol")])
        #expect(book.entries["carol"] == nil)
    }

    @Test func aLateResultOfAReplacedJobCountsForNothing() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)    // the T1 report is in flight…
        let (actions, _) = Self.reload(&book, [Self.plan("alice", token: "2")], reportInterval: book.reportInterval, now: 0)
        #expect(actions.first == .cancel("alice"))
        // …and its result arrives before the T2 report started: it is not T2's delivery.
        #expect(book.delivered("alice", now: 1_000) == nil)
        #expect(book.failed("alice", attempt: 1, reason: "HTTP 500", retryIn: .seconds(1), now: 1_000) == nil)
        #expect(book.entries["alice"]?.record.deliveredFingerprint == nil)
        // Once T2 is sent, its outcome counts.
        #expect(book.beginAttempt("alice")?.request.url == "https://push.example.com/r/alice?t=2")
        #expect(book.delivered("alice", now: 2_000) != nil)
        #expect(book.entries["alice"]?.record.deliveredFingerprint == "alice-2")
    }

    @Test func noAttemptStartsForAReloadedAccountUntilItsStateIsWritten() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)
        _ = book.delivered("alice", now: 1_000)
        _ = book.reload(plans: [Self.plan("alice", token: "2"), Self.plan("bob", token: "1")], reportInterval: nil, now: 2_000)
        // An attempt the scheduler had started before the reload finds nothing to send…
        #expect(book.beginAttempt("alice") == nil)
        #expect(book.beginAttempt("bob") == nil)
        // …until the agent has written the state and releases the accounts.
        book.releaseHeld()
        #expect(book.beginAttempt("alice")?.request.url == "https://push.example.com/r/alice?t=2")
        #expect(book.beginAttempt("bob") != nil)
    }

    @Test func theRemovalOfAnAttemptedReportStaysOwedWhenItIsReplaced() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)   // T1 may reach the server; its outcome never comes back
        _ = Self.reload(&book, [Self.plan("alice", token: "2")], reportInterval: nil, now: 0)
        let record = try #require(book.entries["alice"]?.record)
        #expect(record.pastRemovals == [Self.plan("alice", token: "1").removal!])
        #expect(record.removal == Self.plan("alice", token: "2").removal)
        _ = Self.reload(&book, [], reportInterval: nil, now: 0)
        #expect(book.beginAttempt("alice")?.request.url == "https://gone.example.com/alice?t=1")
    }

    @Test func aChangeReplacesAPendingRetry() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)
        let failure = book.failed("alice", attempt: 3, reason: "HTTP 503", retryIn: .seconds(20), now: 10_000)
        let record = try #require(Self.saved(failure.map(\.actions) ?? []).first)
        #expect(record.attempts == 3)
        #expect(record.lastOutcome == "HTTP 503")
        #expect(record.nextDueAt == 30_000)
        #expect(record.phase == .retrying)

        let (actions, _) = Self.reload(&book, [Self.plan("alice", token: "2")], reportInterval: book.reportInterval, now: 11_000)
        #expect(actions.contains(.cancel("alice")))
        #expect(Self.submitted(actions) == ["alice@push.example.com:443"])
        #expect(book.entries["alice"]?.record.attempts == 0)
    }

    @Test func anUnchangedAccountKeepsItsSchedule() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)
        _ = book.failed("alice", attempt: 1, reason: "HTTP 503", retryIn: .seconds(5), now: 0)
        let (actions, summary) = Self.reload(&book, [Self.plan("alice", token: "1")], reportInterval: book.reportInterval, now: 1_000)
        #expect(actions.isEmpty)
        #expect(summary.unchanged == 1)
        #expect(book.currentRequest("alice") != nil)
    }

    @Test func reportIntervalSubmitsADeliveredReportAgain() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: .seconds(3600))
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)
        let delivery = book.delivered("alice", now: 5_000)
        let actions = try #require(delivery).actions
        #expect(actions.contains(.submit("alice", host: "push.example.com:443", after: .seconds(3600))))
        let record = try #require(Self.saved(actions).first)
        #expect(record.phase == .delivered)
        #expect(record.lastSuccessAt == 5_000)
        #expect(record.nextDueAt == 3_605_000)
    }

    @Test func aReportIntervalTurnedOnByReloadSchedulesDeliveredAccounts() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)
        _ = book.delivered("alice", now: 1_000)
        let (actions, _) = Self.reload(&book, [Self.plan("alice", token: "1")], reportInterval: .seconds(60), now: 21_000)
        #expect(actions.contains(.submit("alice", host: "push.example.com:443", after: .seconds(40))))
    }

    @Test func anAccountThatComesBackDuringItsRemovalIsReportedAgain() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        _ = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        _ = Self.reload(&book, [], reportInterval: book.reportInterval, now: 0)
        #expect(book.currentRequest("alice")?.request.method == "DELETE")
        let (back, summary) = Self.reload(&book, [Self.plan("alice", token: "1")], reportInterval: book.reportInterval, now: 0)
        #expect(summary.added == 1)
        #expect(back.contains(.cancel("alice")))
        #expect(Self.submitted(back) == ["alice@push.example.com:443"])
        #expect(book.entries["alice"]?.record.isRemoving == false)
    }

    @Test func aRemovalUndoesTheDeliveredReportAndTheNewerOneNotDelivered() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)
        _ = book.delivered("alice", now: 1_000)
        let (change, _) = Self.reload(&book, [Self.plan("alice", token: "2")], reportInterval: book.reportInterval, now: 2_000)
        Self.send(&book, change)
        _ = book.failed("alice", attempt: 1, reason: "HTTP 500", retryIn: .seconds(5), now: 3_000)

        _ = Self.reload(&book, [], reportInterval: book.reportInterval, now: 4_000)
        #expect(book.beginAttempt("alice")?.request.url == "https://gone.example.com/alice?t=1")
        let delivery = book.delivered("alice", now: 5_000)
        let first = try #require(delivery)
        #expect(Self.submitted(first.actions) == ["alice@gone.example.com:443"])
        #expect(Self.saved(first.actions).first?.pastRemovals == [])
        #expect(book.beginAttempt("alice")?.request.url == "https://gone.example.com/alice?t=2")
        #expect(book.delivered("alice", now: 6_000)?.actions == [.forget("alice")])
    }

    @Test func anUnreadableStoredRemovalIsForgottenAndSaidSo() {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let actions = book.start(plans: [], records: [AccountRecord(id: "old", fingerprint: "x", removal: "not json")])
        #expect(actions == [.forget("old")])
        #expect(book.unreadableRemovals == ["old"])
    }
}

@Suite struct StatusReportTests {
    static let records = [
        AccountRecord(id: "alice", fingerprint: "a", deliveredFingerprint: "a", attempts: 0,
                      lastAttemptAt: 1_763_750_000_000, lastOutcome: "delivered", lastSuccessAt: 1_763_750_000_000),
        AccountRecord(id: "bo\"b", fingerprint: "b", attempts: 4, lastAttemptAt: 1_763_750_001_500,
                      lastOutcome: "HTTP 503", nextDueAt: 1_763_750_041_250),
    ]

    @Test func textIsASummaryAndATable() {
        #expect(StatusReport(records: Self.records).text == """
            2 accounts: 1 reported, 1 retrying

            ACCOUNT  STATE      ATTEMPTS  LAST ATTEMPT          NEXT ATTEMPT          LAST SUCCESS          LAST OUTCOME
            alice    delivered  0         2025-11-21T18:33:20Z  -                     2025-11-21T18:33:20Z  delivered
            bo"b     retrying   4         2025-11-21T18:33:21Z  2025-11-21T18:34:01Z  -                     HTTP 503
            """)
    }

    @Test func prometheusFollowsTheTextExpositionFormat() {
        #expect(StatusReport(records: Self.records).prometheus == """
            # HELP pushreporter_accounts Accounts by where their report stands.
            # TYPE pushreporter_accounts gauge
            pushreporter_accounts{state="delivered"} 1
            pushreporter_accounts{state="retrying"} 1
            pushreporter_accounts{state="pending"} 0
            pushreporter_accounts{state="removing"} 0
            # HELP pushreporter_report_attempts Finished attempts of the account's current report or removal.
            # TYPE pushreporter_report_attempts gauge
            pushreporter_report_attempts{account="alice"} 0
            pushreporter_report_attempts{account="bo\\"b"} 4
            # HELP pushreporter_last_success_timestamp_seconds When a report of the account was last delivered.
            # TYPE pushreporter_last_success_timestamp_seconds gauge
            pushreporter_last_success_timestamp_seconds{account="alice"} 1763750000
            # HELP pushreporter_next_attempt_timestamp_seconds When the account's next attempt is due.
            # TYPE pushreporter_next_attempt_timestamp_seconds gauge
            pushreporter_next_attempt_timestamp_seconds{account="bo\\"b"} 1763750041.250

            """)
    }

    @Test func jsonHasOneObjectPerAccount() {
        let json = StatusReport(records: Self.records).json
        #expect(json.hasPrefix("[\n  {\n    \"account\": \"alice\",\n    \"state\": \"delivered\","))
        #expect(json.contains(#""account": "bo\"b""#))
        #expect(json.contains(#""nextAttempt": "2025-11-21T18:34:01Z""#))
        #expect(json.contains(#""lastSuccess": null"#))
    }
}

@Suite struct StoredRequestTests {
    @Test func aStoredRequestReadsBackAsItWasWritten() throws {
        let rendered = RenderedRequest(account: "alice", reporter: "accountRemovalReporter", method: "DELETE",
                                       url: "https://gone.example.com/a?t=1/2", headers: [("X-Sig", "a\"b\\c\n"), ("Accept", "*/*")],
                                       body: "{\"é\":\"\u{1}\"}", credentials: .init(username: "u", password: "p&w"),
                                       timeout: .milliseconds(1500))
        let stored = StoredRequest(rendered)
        let text = stored.text
        #expect(text.hasPrefix(#"{"body":"#))
        #expect(!text.contains("\n"))
        let read = try #require(StoredRequest(text: text))
        #expect(read == stored)
        let back = read.rendered(account: "alice")
        #expect(back.url == rendered.url && back.body == rendered.body && back.credentials == rendered.credentials)
        #expect(back.headers.map { "\($0.name)=\($0.value)" } == ["X-Sig=a\"b\\c\n", "Accept=*/*"])
        #expect(back.timeout == .milliseconds(1500))
        // Optional parts left out read back as absent.
        let bare = StoredRequest(RenderedRequest(account: "b", reporter: "accountRemovalReporter", method: "GET",
                                                 url: "http://127.0.0.1/x", headers: [], body: nil))
        #expect(bare.text == #"{"headers":[],"method":"GET","url":"http://127.0.0.1/x"}"#)
        #expect(StoredRequest(text: bare.text) == bare)
    }
}
