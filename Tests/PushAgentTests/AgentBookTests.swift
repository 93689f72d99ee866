@testable import PushAgent
import PushConfig
import PushState
import Testing

/// The agent's decisions, driven synchronously: no tasks, no clock, no server.
@Suite struct AgentBookTests {
    static func plan(_ id: String, token: String, removal: Bool = true) -> AccountPlan {
        let report = RenderedRequest(account: id, reporter: .pushTokenReporter, method: "GET",
                                     url: "https://push.example.com/r/\(id)?t=\(token)", headers: [], body: nil,
                                     fingerprint: "\(id)-\(token)")
        let removalRequest = RenderedRequest(account: id, reporter: .accountRemovalReporter, method: "DELETE",
                                             url: "https://gone.example.com/\(id)?t=\(token)", headers: [], body: nil)
        return AccountPlan(report: PlannedReport(report, defaultTimeout: .seconds(30)),
                           removal: removal ? StoredRequest(removalRequest).text : nil)
    }

    static func submitted(_ actions: [AgentBook.Action]) -> [String] {
        actions.compactMap {
            if case .submit(let key, let host, _) = $0 { return "\(key.id)@\(host)" }
            return nil
        }
    }

    static func key(_ actions: [AgentBook.Action], _ id: String) -> JobKey? {
        for case .submit(let key, _, _) in actions where key.id == id { return key }
        return nil
    }

    @Test func startReportsEveryAccountAndOwesRemovalsOfTheOnesThatLeft() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let gone = AccountRecord(id: "gone", fingerprint: "gone-1", deliveredFingerprint: "gone-1",
                                 removal: Self.plan("gone", token: "1").removal)
        let goneWithoutRemoval = AccountRecord(id: "bare", fingerprint: "bare-1", deliveredFingerprint: "bare-1")
        let kept = AccountRecord(id: "alice", fingerprint: "alice-1", deliveredFingerprint: "alice-1",
                                 removal: Self.plan("alice", token: "1").removal)
        let actions = book.start(plans: [Self.plan("alice", token: "1"), Self.plan("bob", token: "1")],
                                 records: [gone, goneWithoutRemoval, kept])
        #expect(Set(Self.submitted(actions)) == ["alice@push.example.com:443", "bob@push.example.com:443",
                                                 "gone@gone.example.com:443"])
        #expect(actions.contains(.forget("bare")))
        // alice's stored record is unchanged, so it is not written again.
        #expect(!actions.contains { if case .save(let record) = $0 { record.id == "alice" } else { false } })
        let removalKey = try #require(Self.key(actions, "gone"))
        let removal = try #require(book.request(for: removalKey))
        #expect(removal.request.method == "DELETE")
        #expect(removal.request.url == "https://gone.example.com/gone?t=1")
        #expect(book.counts.statusText == "3 accounts: 1 reported, 0 retrying, 1 waiting, 1 removal pending")
    }

    @Test func theRemovalIsStoredBeforeTheReportIsSent() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let actions = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        let saved = actions.compactMap { if case .save(let record) = $0 { record } else { nil } }
        #expect(saved.map(\.id) == ["alice"])
        #expect(saved.first?.removal == Self.plan("alice", token: "1").removal)
        // The save comes before the submission.
        #expect(actions.firstIndex { if case .save = $0 { true } else { false } }!
                < actions.firstIndex { if case .submit = $0 { true } else { false } }!)
    }

    @Test func reloadReportsNewAndChangedKeepsUnchangedAndRemovesTheRest() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let start = book.start(plans: ["alice", "bob", "carol"].map { Self.plan($0, token: "1") }, records: [])
        for id in ["alice", "bob", "carol"] { _ = book.delivered(try #require(Self.key(start, id)), now: 1_000) }
        let bobBefore = try #require(Self.key(start, "bob"))

        let (actions, summary) = book.reload(plans: [Self.plan("alice", token: "1"), Self.plan("bob", token: "2"),
                                                     Self.plan("dave", token: "1")])
        #expect(summary == .init(added: 1, changed: 1, unchanged: 1, removed: 1))
        #expect(Set(Self.submitted(actions)) == ["bob@push.example.com:443", "dave@push.example.com:443",
                                                 "carol@gone.example.com:443"])
        // bob's job was done, so there was nothing to cancel; its new job has a new generation.
        let bobAfter = try #require(Self.key(actions, "bob"))
        #expect(bobAfter.generation != bobBefore.generation)
        #expect(book.request(for: bobBefore) == nil)
        #expect(book.request(for: bobAfter)?.request.url == "https://push.example.com/r/bob?t=2")

        // A late result of the replaced job changes nothing.
        #expect(book.delivered(bobBefore, now: 2_000).isEmpty)
        // The removal, once delivered, forgets the account.
        let carol = try #require(Self.key(actions, "carol"))
        #expect(book.delivered(carol, now: 2_000) == [.forget("carol")])
        #expect(book.entries["carol"] == nil)
    }

    @Test func aChangeReplacesAPendingRetry() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        let first = try #require(Self.key(start, "alice"))
        let failed = book.failed(first, attempt: 3, reason: "HTTP 503", retryIn: .seconds(20), now: 10_000)
        guard case .save(let record) = failed.first else { Issue.record("no save"); return }
        #expect(record.attempts == 3)
        #expect(record.lastOutcome == "HTTP 503")
        #expect(record.nextDueAt == 30_000)
        #expect(record.phase == .retrying)

        let (actions, _) = book.reload(plans: [Self.plan("alice", token: "2")])
        #expect(actions.contains(.cancel(first)))
        let second = try #require(Self.key(actions, "alice"))
        #expect(book.entries["alice"]?.record.attempts == 0)
        #expect(book.failed(first, attempt: 4, reason: "late", retryIn: .seconds(1), now: 11_000).isEmpty)
        #expect(!book.failed(second, attempt: 1, reason: "HTTP 500", retryIn: .seconds(1), now: 11_000).isEmpty)
    }

    @Test func anUnchangedAccountKeepsItsSchedule() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        let key = try #require(Self.key(start, "alice"))
        _ = book.failed(key, attempt: 1, reason: "HTTP 503", retryIn: .seconds(5), now: 0)
        let (actions, summary) = book.reload(plans: [Self.plan("alice", token: "1")])
        #expect(actions.isEmpty)
        #expect(summary.unchanged == 1)
        #expect(book.request(for: key) != nil)
    }

    @Test func reportIntervalSubmitsADeliveredReportAgain() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: .seconds(3600))
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        let key = try #require(Self.key(start, "alice"))
        let actions = book.delivered(key, now: 5_000)
        #expect(actions.contains(.submit(key, host: "push.example.com:443", after: .seconds(3600))))
        guard case .save(let record) = actions.first else { Issue.record("no save"); return }
        #expect(record.phase == .delivered)
        #expect(record.lastSuccessAt == 5_000)
        #expect(record.nextDueAt == 3_605_000)
    }

    @Test func anAccountThatComesBackDuringItsRemovalIsReportedAgain() throws {
        var book = AgentBook(defaultTimeout: .seconds(30), reportInterval: nil)
        _ = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        let (removing, _) = book.reload(plans: [])
        let removal = try #require(Self.key(removing, "alice"))
        let (back, summary) = book.reload(plans: [Self.plan("alice", token: "1")])
        #expect(summary.added == 1)
        #expect(back.contains(.cancel(removal)))
        #expect(Self.submitted(back) == ["alice@push.example.com:443"])
        #expect(book.entries["alice"]?.record.isRemoving == false)
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
