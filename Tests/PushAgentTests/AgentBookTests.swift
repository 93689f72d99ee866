import Foundation
@testable import PushAgent
import PushRegistry
@testable import PushAcrobits
import PushBackend
import PushConfig
import PushConfig
import PushState
import PushTransport
import Testing
import PushTestThreads

/// The agent's decisions, driven synchronously: no tasks, no clock, no server.
@Suite(.blockingThreads) struct AgentBookTests {
    static func plan(_ id: String, token: String, removal: Bool = true) -> SubscriptionPlan {
        let report = RenderedRequest(account: id, reporter: "pushTokenReporter", method: "GET",
                                     url: "https://push.example.com/r/\(id)?t=\(token)", headers: [], body: nil,
                                     fingerprint: "\(id)-\(token)")
        let removalRequest = RenderedRequest(account: id, reporter: "accountRemovalReporter", method: "DELETE",
                                             url: "https://gone.example.com/\(id)?t=\(token)", headers: [], body: nil)
        return SubscriptionPlan(account: id, service: SubscriptionKey.acrobits, fingerprint: report.fingerprint,
                                delivery: AcrobitsBackend.request(report, service: SubscriptionKey.acrobits, purpose: .delivery),
                                cleanup: removal ? StoredRequest(removalRequest).text : nil)
    }

    /// The key of an account's own Acrobits subscription.
    /// Every key a start submits, in its first run and in the later ones.
    static func submitted(keysOf start: AgentBook.Start) -> [SubscriptionKey] {
        start.actions.compactMap { action in
            if case .submit(let submission) = action { submission.key } else { nil }
        } + start.later.map(\.key)
    }

    static func k(_ account: String) -> SubscriptionKey { SubscriptionKey(account: account, service: SubscriptionKey.acrobits) }

    static func book(reportInterval: Duration? = nil) -> AgentBook {
        AgentBook(reportInterval: reportInterval) { key, text in
            AcrobitsBackend().cleanupRequest(account: key.account, service: key.service, stored: text)
        }
    }

    static func submit(_ account: String, host: String, after: Duration) -> AgentBook.Action {
        .submit(.init(key: k(account), host: host, batch: nil, pauseLabel: nil, after: after))
    }

    static func submitted(_ actions: [AgentBook.Action]) -> [String] {
        actions.compactMap {
            if case .submit(let submission) = $0 { return "\(submission.key.account)@\(submission.host)" }
            return nil
        }
    }

    static func saved(_ actions: [AgentBook.Action]) -> [SubscriptionRecord] {
        actions.compactMap { if case .save(let record) = $0 { record } else { nil } }
    }

    /// Reloads and, as the agent does once the state is written, releases what it held.
    static func reload(_ book: inout AgentBook, _ plans: [SubscriptionPlan], reportInterval: Duration?, now: Int64)
        -> ([AgentBook.Action], AgentBook.ReloadSummary) {
        let (actions, summary) = book.reload(plans: plans, reportInterval: reportInterval, now: now)
        return (actions + book.releaseHeld(through: book.reloads), summary)
    }

    /// Starts every submitted job, as the scheduler would.
    static func send(_ book: inout AgentBook, _ actions: [AgentBook.Action]) {
        for case .submit(let submission) in actions { _ = book.beginAttempt(submission.key) }
    }

    /// Where a text's bytes are: texts longer than 15 bytes have storage of their own.
    static func storage(_ text: String?) -> UnsafeRawPointer? {
        guard var text else { return nil }
        return text.withUTF8 { UnsafeRawPointer($0.baseAddress) }
    }

    /// A text equal to `text`, in storage of its own (as read from the state).
    static func copied(_ text: String) -> String { String(decoding: Array(text.utf8), as: UTF8.self) }

    @Test func anUnchangedSubscriptionHoldsOneCopyOfItsTextsAfterARestartAndReloads() throws {
        // Each call makes the plan's texts again, as loading the configuration does.
        func plan() -> SubscriptionPlan { Self.plan("alice", token: String(repeating: "7", count: 40)) }
        var book = Self.book()
        func expectShared(with plan: SubscriptionPlan, _ when: Comment) throws {
            let entry = try #require(book.entries[Self.k("alice")])
            #expect(Self.storage(entry.record.fingerprint) == Self.storage(plan.fingerprint), when)
            #expect(Self.storage(entry.record.deliveredFingerprint) == Self.storage(plan.fingerprint), when)
            #expect(Self.storage(entry.record.cleanup) == Self.storage(plan.cleanup), when)
        }
        let first = plan()
        let cleanup = try #require(first.cleanup)
        // Delivered before the restart: its texts as read from the state, in storage of their own.
        let stored = SubscriptionRecord(key: Self.k("alice"), fingerprint: Self.copied(first.fingerprint),
                                        deliveredFingerprint: Self.copied(first.fingerprint), state: .delivered,
                                        cleanup: Self.copied(cleanup))
        let actions = book.start(plans: [first], records: [stored])
        try expectShared(with: first, "after a restart, before the delivery is made again")
        Self.send(&book, actions)
        #expect(book.settle(Self.k("alice"), .delivered, attempt: 1, now: 1_000) != nil)
        try expectShared(with: first, "after the restart's delivery")

        // A reload's plan has texts of its own; the entry keeps none of the plan's texts, so the
        // record keeps the one copy it has, and the reload's copies go with the reload.
        let again = plan()
        #expect(Self.storage(again.fingerprint) != Self.storage(first.fingerprint), "the reload's plan has texts of its own")
        let (_, summary) = Self.reload(&book, [again], reportInterval: nil, now: 2_000)
        #expect(summary.unchanged == 1)
        try expectShared(with: first, "after a reload")
        // A reload that sets a report interval takes the other path for an unchanged subscription.
        let third = plan()
        let (_, withInterval) = Self.reload(&book, [third], reportInterval: .seconds(3_600), now: 3_000)
        #expect(withInterval.unchanged == 1)
        try expectShared(with: first, "after a reload that sets a report interval")
    }

    @Test func aDeliveryThatReportIntervalRepeatsLaterLeavesTheBookSettled() throws {
        // What "all … reported" waits for: with a report interval, a delivered subscription has
        // its next delivery scheduled, which is not owed until then.
        var book = Self.book(reportInterval: .seconds(3_600))
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        #expect(!book.isSettled, "the first delivery is owed")
        Self.send(&book, start)
        let settled = book.settle(Self.k("alice"), .delivered, attempt: 1, now: 1_000)
        #expect(Self.submitted(settled?.actions ?? []) == ["alice@push.example.com:443"], "the repeat is scheduled")
        #expect(book.entries[Self.k("alice")]?.job == .delivery)
        #expect(book.isSettled, "a repeat due in an hour is not owed")
        // The repeat fails: owed again until it gets through.
        _ = book.beginAttempt(Self.k("alice"))
        #expect(book.failed(Self.k("alice"), attempt: 1, reason: "HTTP 503", retryIn: .seconds(1), now: 3_601_000) != nil)
        #expect(!book.isSettled, "a repeat that failed is owed")
        _ = book.beginAttempt(Self.k("alice"))
        #expect(book.settle(Self.k("alice"), .delivered, attempt: 2, now: 3_602_000) != nil)
        #expect(book.isSettled)
        // A restart's delivery of a subscription delivered before is owed, though it stays delivered.
        var restarted = Self.book(reportInterval: .seconds(3_600))
        let record = try #require(book.entries[Self.k("alice")]?.record)
        _ = restarted.start(plans: [Self.plan("alice", token: "1")], records: [record])
        #expect(restarted.entries[Self.k("alice")]?.record.state == .delivered)
        #expect(!restarted.isSettled)
        // A reload that changes it makes it owed too.
        _ = Self.reload(&book, [Self.plan("alice", token: "2")], reportInterval: .seconds(3_600), now: 3_700_000)
        #expect(!book.isSettled)
    }

    @Test func aReloadThatChangesTheIntervalLeavesAnOwedReportOwed() throws {
        // After a restart every account is reported again: owed now, though its state stays
        // delivered. A reload that changes the interval, or turns it off, leaves that report.
        let delivered = SubscriptionRecord(key: Self.k("alice"), fingerprint: "alice-1", deliveredFingerprint: "alice-1",
                                           state: .delivered, lastSuccessAt: 1_000)
        for newInterval: Duration? in [.seconds(43_200), nil] {
            var book = Self.book(reportInterval: .seconds(86_400))
            _ = book.start(plans: [Self.plan("alice", token: "1")], records: [delivered])
            #expect(!book.isSettled, "the start's report is owed")
            let (actions, _) = Self.reload(&book, [Self.plan("alice", token: "1")], reportInterval: newInterval, now: 2_000)
            #expect(Self.submitted(actions).isEmpty && !actions.contains { if case .cancel = $0 { true } else { false } },
                    "\(String(describing: newInterval)): the owed report keeps its place")
            #expect(book.entries[Self.k("alice")]?.job == .delivery)
            #expect(!book.isSettled, "\(String(describing: newInterval)): still owed")
        }
        // A reload that sets an interval already past for a delivered account: owed now.
        var book = Self.book()
        Self.send(&book, book.start(plans: [Self.plan("alice", token: "1")], records: []))
        #expect(book.settle(Self.k("alice"), .delivered, attempt: 1, now: 1_000) != nil)
        #expect(book.isSettled)
        let (actions, _) = Self.reload(&book, [Self.plan("alice", token: "1")], reportInterval: .seconds(3_600), now: 7_201_000)
        #expect(actions.contains { if case .submit(let submission) = $0 { submission.after == .zero } else { false } })
        #expect(!book.isSettled, "overdue: owed now, not a repeat for later")
        // One not yet due is a repeat for later.
        var later = Self.book()
        Self.send(&later, later.start(plans: [Self.plan("alice", token: "1")], records: []))
        _ = later.settle(Self.k("alice"), .delivered, attempt: 1, now: 1_000)
        _ = Self.reload(&later, [Self.plan("alice", token: "1")], reportInterval: .seconds(3_600), now: 2_000)
        #expect(later.entries[Self.k("alice")]?.job == .delivery)
        #expect(later.isSettled)
    }

    @Test func aDeliveredRequestIsLetGoOfWhenNothingReadsItBeforeTheNextPlan() throws {
        func plan(_ token: String, unread: Bool = true) -> SubscriptionPlan {
            var plan = Self.plan("alice", token: token)
            plan.deliveryUnreadOnceDelivered = unread
            return plan
        }
        func payload(_ book: AgentBook) throws -> any Sendable {
            try #require(book.entries[Self.k("alice")]?.plan?.delivery).payload
        }
        func deliver(_ book: inout AgentBook, now: Int64) throws {
            let attempt = book.beginAttempt(Self.k("alice"))
            let request = try #require(attempt)
            #expect(request.payload is AcrobitsPayload, "what is sent is the request itself")
            #expect(book.settle(Self.k("alice"), .delivered, attempt: 1, now: now) != nil)
        }
        var book = Self.book()
        _ = book.start(plans: [plan("1")], records: [])
        #expect(try payload(book) is AcrobitsPayload, "kept until it is delivered")
        try deliver(&book, now: 1_000)
        #expect(try payload(book) is AgentBook.RequestLetGo)

        // Unchanged by a reload: the reload's request is let go of too.
        _ = Self.reload(&book, [plan("1")], reportInterval: nil, now: 2_000)
        #expect(try payload(book) is AgentBook.RequestLetGo)
        // Changed: the new request is sent, then let go of.
        let (changed, _) = Self.reload(&book, [plan("2")], reportInterval: nil, now: 3_000)
        #expect(Self.submitted(changed) == ["alice@push.example.com:443"])
        try deliver(&book, now: 3_500)
        #expect(try payload(book) is AgentBook.RequestLetGo)
        // A report interval set by a reload sends it again: the reload's request is kept.
        let (again, _) = Self.reload(&book, [plan("2")], reportInterval: .seconds(3_600), now: 4_000)
        #expect(Self.submitted(again) == ["alice@push.example.com:443"])
        #expect(try payload(book) is AcrobitsPayload)
        try deliver(&book, now: 4_000 + 3_600_000)
        #expect(try payload(book) is AcrobitsPayload, "sent again an hour later")

        // Rejected by the receiver: not sent again until it changes either.
        var rejected = Self.book()
        _ = rejected.start(plans: [plan("1")], records: [])
        _ = rejected.beginAttempt(Self.k("alice"))
        #expect(rejected.settle(Self.k("alice"), .rejected("HTTP 403"), attempt: 1, now: 1_000) != nil)
        #expect(try payload(rejected) is AgentBook.RequestLetGo)

        // A backend whose request is read once delivered (a webhook checks calls against it).
        var kept = Self.book()
        _ = kept.start(plans: [plan("1", unread: false)], records: [])
        try deliver(&kept, now: 1_000)
        #expect(try payload(kept) is AcrobitsPayload)
        _ = Self.reload(&kept, [plan("1", unread: false)], reportInterval: nil, now: 2_000)
        #expect(try payload(kept) is AcrobitsPayload)
    }

    @Test func aRetryingRequestMovesToMemoryOfItsOwnAndStillSendsTheSame() throws {
        // Planned together, packed into one block, as the Acrobits planner does.
        var shapes = ShapeCache()
        var packer = RequestPacker()
        func plan(_ id: String) -> SubscriptionPlan {
            let report = RenderedRequest(account: id, reporter: "pushTokenReporter", method: "POST",
                                         url: "https://push.example.com/r/\(id)", headers: [(name: "X-Id", value: id)],
                                         body: "id=\(id)", fingerprint: "\(id)-1")
            var plan = SubscriptionPlan(account: id, service: SubscriptionKey.acrobits, fingerprint: report.fingerprint,
                                        delivery: AcrobitsBackend.request(report, service: SubscriptionKey.acrobits, purpose: .delivery,
                                                                          shapes: &shapes, packer: &packer),
                                        cleanup: nil)
            plan.deliveryUnreadOnceDelivered = true
            return plan
        }
        let plans = ["alice", "bob"].map(plan)
        let sent = try plans.map { try #require($0.delivery).rendered }
        func payload(_ id: String) throws -> AcrobitsPayload {
            try #require(book.entries[Self.k(id)]?.plan?.delivery?.payload as? AcrobitsPayload)
        }
        var book = Self.book()
        Self.send(&book, book.start(plans: plans, records: []))
        #expect(try !payload("alice").isAlone && !payload("bob").isAlone, "planned beside each other")
        #expect(book.settle(Self.k("alice"), .delivered, attempt: 1, now: 1_000) != nil)
        #expect(book.failed(Self.k("bob"), attempt: 1, reason: "timed out", retryIn: .seconds(5), now: 1_000) != nil)
        #expect(try payload("bob").isAlone, "bob no longer holds alice's block")
        let attempt = book.beginAttempt(Self.k("bob"))
        let again = try #require(attempt)
        #expect(PackedRequestSame.same(again.rendered, sent[1]))
        #expect(book.failed(Self.k("bob"), attempt: 2, reason: "timed out", retryIn: .seconds(10), now: 2_000) != nil)
        // A reload plans both again, beside each other: bob, unchanged and still retrying, is
        // moved again, alice's new request let go of.
        let (_, summary) = Self.reload(&book, ["alice", "bob"].map(plan), reportInterval: nil, now: 3_000)
        #expect(summary.unchanged == 2)
        #expect(try payload("bob").isAlone)
        #expect(book.entries[Self.k("alice")]?.plan?.delivery?.payload is AgentBook.RequestLetGo)
    }

    @Test func theFirstAttemptsAreAnsweredThoughSomeRetry() {
        var book = Self.book()
        #expect(book.firstAttemptsAnswered, "nothing to send")
        var waiting = Self.plan("carol", token: "")
        waiting.delivery = nil
        waiting.waiting = "no device token yet"
        Self.send(&book, book.start(plans: [Self.plan("alice", token: "1"), Self.plan("bob", token: "1"), waiting], records: []))
        #expect(!book.firstAttemptsAnswered)
        #expect(book.settle(Self.k("alice"), .delivered, attempt: 1, now: 1_000) != nil)
        #expect(!book.firstAttemptsAnswered, "bob's is in flight")
        #expect(book.failed(Self.k("bob"), attempt: 1, reason: "timed out", retryIn: .seconds(5), now: 1_000) != nil)
        #expect(book.firstAttemptsAnswered, "bob retries; carol waits for a token, with nothing to send")
        #expect(!book.isSettled)
        let (_, summary) = Self.reload(&book, [Self.plan("alice", token: "2"), Self.plan("bob", token: "1"), waiting],
                                       reportInterval: nil, now: 2_000)
        #expect(summary.changed == 1)
        #expect(!book.firstAttemptsAnswered, "alice's new token is to be sent")
        _ = book.beginAttempt(Self.k("alice"))
        #expect(book.settle(Self.k("alice"), .rejected("HTTP 403"), attempt: 1, now: 3_000) != nil)
        #expect(book.firstAttemptsAnswered)
    }

    @Test func aRecordKeepsItsOwnBytesOfATextOnlyCanonicallyEqualToThePlans() throws {
        var written = Self.plan("alice", token: "1")
        written.cleanup = "https://gone.example.com/cafe\u{301}"
        var book = Self.book()
        Self.send(&book, book.start(plans: [written], records: []))
        #expect(book.settle(Self.k("alice"), .delivered, attempt: 1, now: 1_000) != nil)
        var reloaded = Self.plan("alice", token: "1")
        reloaded.cleanup = "https://gone.example.com/caf\u{E9}"
        #expect(reloaded.cleanup == written.cleanup, "equal as Swift compares texts")
        let (actions, summary) = Self.reload(&book, [reloaded], reportInterval: nil, now: 2_000)
        #expect(summary.unchanged == 1 && actions.isEmpty)
        let cleanup = try #require(book.entries[Self.k("alice")]?.record.cleanup)
        #expect(Array(cleanup.utf8).suffix(3) == [0x65, 0xCC, 0x81], "the bytes the state has")
    }

    @Test func startReportsEveryAccountAndOwesRemovalsOfTheOnesThatLeft() throws {
        var book = Self.book(reportInterval: nil)
        let gone = SubscriptionRecord(key: Self.k("gone"), fingerprint: "gone-1", deliveredFingerprint: "gone-1",
                                      state: .delivered, cleanup: Self.plan("gone", token: "1").cleanup)
        let goneWithoutRemoval = SubscriptionRecord(key: Self.k("bare"), fingerprint: "bare-1", deliveredFingerprint: "bare-1",
                                                    state: .delivered)
        var kept = SubscriptionRecord(key: Self.k("alice"), deliveredFingerprint: "alice-1")
        Self.plan("alice", token: "1").apply(to: &kept)
        let actions = book.start(plans: [Self.plan("alice", token: "1"), Self.plan("bob", token: "1")],
                                 records: [gone, goneWithoutRemoval, kept])
        #expect(Set(Self.submitted(actions)) == ["alice@push.example.com:443", "bob@push.example.com:443",
                                                 "gone@gone.example.com:443"])
        #expect(actions.contains(.forget(Self.k("bare"))))
        // alice's stored record is unchanged, so it is not written again.
        #expect(!Self.saved(actions).contains { $0.key.account == "alice" })
        let attempt = book.beginAttempt(Self.k("gone"))
        let removal = try #require(attempt)
        #expect(removal.rendered.method == "DELETE")
        #expect(removal.rendered.url == "https://gone.example.com/gone?t=1")
        #expect(book.counts.statusText == "3 accounts: 1 reported, 0 retrying, 1 waiting, 1 removal pending")
    }

    /// Two removals owed, one forgotten, six plans of which one waits for a token.
    static func startRecords() -> [SubscriptionRecord] {
        ["gone1", "gone2"].map { id in
            SubscriptionRecord(key: Self.k(id), fingerprint: "\(id)-1", deliveredFingerprint: "\(id)-1",
                               state: .delivered, cleanup: Self.plan(id, token: "1").cleanup)
        } + [SubscriptionRecord(key: Self.k("bare"), fingerprint: "bare-1", state: .delivered)]
    }

    static func startPlans() -> [SubscriptionPlan] {
        var waiting = Self.plan("waits", token: "1")
        waiting.delivery = nil
        waiting.waiting = "no device token yet"
        return ["a", "b", "c"].map { Self.plan($0, token: "1") } + [waiting] + ["d", "e"].map { Self.plan($0, token: "1") }
    }

    @Test func aStartInRunsBooksWhatAWholeStartDoesAndWritesTheLaterRunsWhenFed() throws {
        // The first run takes three submissions (the removals first); the rest is booked as
        // the feeder takes it, its runs without their writes.
        var whole = Self.book(reportInterval: nil)
        let all = whole.start(plans: Self.startPlans(), records: Self.startRecords())
        var inRuns = Self.book(reportInterval: nil)
        let started = inRuns.start(plans: Self.startPlans(), records: Self.startRecords(), firstRun: 3)

        #expect(Self.submitted(started.actions) == ["gone1@gone.example.com:443", "gone2@gone.example.com:443",
                                                    "a@push.example.com:443"])
        #expect(started.later.isEmpty, "the rest is the book's to book: \(started.later)")
        #expect(!inRuns.startIsBooked && inRuns.hasStartToFeed && !inRuns.isSettled)
        #expect(inRuns.startJobs == 3 && inRuns.startJobsToCome == whole.startJobs && whole.startJobs == 7)
        // The first run writes its own records, and what leaves or is forgotten.
        #expect(Self.saved(started.actions).map(\.key.account) == ["gone1", "gone2", "a"])
        #expect(started.actions.contains(.forget(Self.k("bare"))))
        let lastSave = try #require(started.actions.lastIndex { if case .save = $0 { true } else { false } })
        let firstSubmit = try #require(started.actions.firstIndex { if case .submit = $0 { true } else { false } })
        #expect(lastSave < firstSubmit)

        // The feeder takes runs of two plans: the one that waits for a token submits nothing,
        // and is written when booked.
        let second = inRuns.nextStartRun(2)
        #expect(second.run.map(\.key.account) == ["b", "c"] && second.actions.isEmpty)
        let third = inRuns.nextStartRun(2)
        #expect(third.run.map(\.key.account) == ["d"])
        #expect(Self.saved(third.actions).map(\.key.account) == ["waits"])
        let fourth = inRuns.nextStartRun(2)
        #expect(fourth.run.map(\.key.account) == ["e"] && fourth.actions.isEmpty)
        #expect(inRuns.nextStartRun(2).run.isEmpty && inRuns.startIsBooked && !inRuns.hasStartToFeed)
        let later = second.run + third.run + fourth.run

        // Once booked, the book has every entry, as a whole start's, and the later runs' records
        // as it would write them.
        #expect(inRuns.counts.statusText == whole.counts.statusText)
        #expect(inRuns.startJobs == whole.startJobs)
        let wholeSaves = Dictionary(uniqueKeysWithValues: Self.saved(all).map { ($0.key, $0) })
        #expect(Self.saved(third.actions) == [wholeSaves[Self.k("waits")]])
        let wholeSubmissions = Dictionary(uniqueKeysWithValues: all.compactMap { action in
            if case .submit(let submission) = action { (submission.key, submission) } else { nil }
        })
        let submittedKeys = Self.submitted(keysOf: started) + later.map(\.key)
        #expect(submittedKeys.map(\.account) == ["gone1", "gone2", "a", "b", "c", "d", "e"])
        #expect(all.compactMap { if case .submit(let submission) = $0 { submission.key } else { nil } } == submittedKeys)
        for item in later {
            let (record, submission) = try #require(inRuns.unsent(item.key, generation: item.generation))
            #expect(record == wholeSaves[item.key])
            // The submission comes back as the start made it.
            #expect(submission == wholeSubmissions[item.key])
        }
        // The later runs' keys await the feeder until they are handed over, by it or by
        // anything else that submits them; the first run's never do.
        #expect(later.allSatisfy { inRuns.awaitsFeed($0.key) })
        #expect(!inRuns.awaitsFeed(Self.k("a")) && !inRuns.awaitsFeed(Self.k("waits")))
        #expect(inRuns.awaitingFeed == 4)
        inRuns.handedOver(Self.k("c"))
        #expect(!inRuns.awaitsFeed(Self.k("c")) && inRuns.awaitsFeed(Self.k("b")) && inRuns.awaitingFeed == 3)
        // Once its attempt began, a later submission is no longer the start's to feed.
        let first = try #require(later.first)
        _ = inRuns.beginAttempt(first.key)
        #expect(inRuns.unsent(first.key, generation: first.generation) == nil)
        // The feeder done (or given up): nothing awaits it.
        inRuns.endFeed()
        #expect(inRuns.awaitingFeed == 0 && !later.contains { inRuns.awaitsFeed($0.key) })

        // No more than a run after the first one: it all goes at once, written as a whole start's.
        var small = Self.book(reportInterval: nil)
        let once = small.start(plans: Self.startPlans(), records: Self.startRecords(), firstRun: 4)
        #expect(once.later.isEmpty && small.startIsBooked && !small.hasStartToFeed)
        #expect(small.awaitingFeed == 0, "a rest that goes in the first run awaits no feeder")
        #expect(Self.submitted(once.actions) == Self.submitted(all))
        #expect(Set(Self.saved(once.actions).map(\.key)) == Set(Self.saved(all).map(\.key)))
        let lastSmallSave = try #require(once.actions.lastIndex { if case .save = $0 { true } else { false } })
        let firstSmallSubmit = try #require(once.actions.firstIndex { if case .submit = $0 { true } else { false } })
        #expect(lastSmallSave < firstSmallSubmit)
    }

    @Test func removalsPastTheFirstRunGoToTheFeederBeforeThePlans() throws {
        // Five removals owed and a first run of two: the other three are the feeder's, first,
        // then the plans booked after them.
        let records = (0..<5).map { index in
            SubscriptionRecord(key: Self.k("gone\(index)"), fingerprint: "g\(index)", deliveredFingerprint: "g\(index)",
                               state: .delivered, cleanup: Self.plan("gone\(index)", token: "1").cleanup)
        }
        var book = Self.book()
        let started = book.start(plans: (0..<4).map { Self.plan("p\($0)", token: "1") }, records: records, firstRun: 2)
        #expect(Self.submitted(started.actions).map { $0.split(separator: "@")[0] } == ["gone0", "gone1"])
        #expect(started.later.isEmpty && book.hasStartToFeed)
        var fed: [String] = []
        while book.hasStartToFeed { fed += book.nextStartRun(2).run.map(\.key.account) }
        #expect(fed == ["gone2", "gone3", "gone4", "p0", "p1", "p2", "p3"])
        #expect(book.startIsBooked && book.awaitingFeed == 7)
    }

    @Test func whatNeedsTheWholeBookBooksTheRestOfTheStartFirst() throws {
        // A reload while the start is still being booked compares with every plan: those it
        // leaves as they are are still the feeder's to submit, after what was booked before.
        var book = Self.book(reportInterval: nil)
        let started = book.start(plans: Self.startPlans(), records: Self.startRecords(), firstRun: 3)
        #expect(Self.submitted(started.actions).count == 3 && !book.startIsBooked)
        let second = book.nextStartRun(2)
        #expect(second.run.map(\.key.account) == ["b", "c"])
        var changed = Self.startPlans()
        changed[5] = Self.plan("e", token: "2")
        let (actions, summary) = Self.reload(&book, changed, reportInterval: nil, now: 1_000)
        #expect(book.startIsBooked)
        #expect(summary.added == 0 && summary.removed == 0 && summary.changed == 1 && summary.unchanged == 5, "\(summary)")
        // The reload writes the plan that waits (booked for it), and submits the changed one.
        #expect(Self.saved(actions).map(\.key.account).contains("waits"))
        #expect(Self.submitted(actions) == ["e@push.example.com:443"])
        // As the agent does with every key it submits.
        for action in actions { if case .submit(let submission) = action { book.handedOver(submission.key) } }
        // The feeder then takes what the reload booked, and submits what it left: d (e is the
        // reload's now).
        let rest = book.nextStartRun(10)
        #expect(rest.run.map(\.key.account) == ["d", "e"] && rest.actions.isEmpty)
        #expect(book.awaitsFeed(Self.k("d")) && !book.awaitsFeed(Self.k("e")))
        #expect(book.nextStartRun(10).run.isEmpty && !book.hasStartToFeed)

        // Booked ahead of the feeder: it takes what is booked first, then books the rest itself.
        var ahead = Self.book(reportInterval: nil)
        _ = ahead.start(plans: Self.startPlans(), records: Self.startRecords(), firstRun: 3)
        #expect(ahead.bookRestOfStart(upTo: 1).isEmpty && !ahead.startIsBooked)
        #expect(ahead.nextStartRun(5).run.map(\.key.account) == ["b"])
        let booked = ahead.nextStartRun(5)
        #expect(booked.run.map(\.key.account) == ["c", "d", "e"] && Self.saved(booked.actions).map(\.key.account) == ["waits"])
        #expect(ahead.startIsBooked && !ahead.hasStartToFeed && ahead.nextStartRun(5).run.isEmpty)

        // The round's outcome books what the feeder never took, as jobs not done.
        var stopped = Self.book(reportInterval: nil)
        _ = stopped.start(plans: Self.startPlans(), records: Self.startRecords(), firstRun: 3)
        #expect(!stopped.isSettled)
        let writes = stopped.bookRestOfStart()
        #expect(Self.saved(writes).map(\.key.account) == ["waits"])
        #expect(stopped.startIsBooked && stopped.startJobs == 7 && stopped.entries.jobCount == 7)
    }

    @Test("the plans past the start's first run wait in runs of 1,024, each let go once the feeder has booked it, in order")
    func restOfStartInRuns() {
        let count = 100 + 2 * AgentBook.PlanRuns.runSize + 452
        let plans = (0..<count).map { Self.plan(String(format: "a%05d", $0), token: "t", removal: false) }
        var book = Self.book()
        let start = book.start(plans: plans, records: [], firstRun: 100)
        #expect(Self.submitted(keysOf: start).map(\.account) == plans[..<100].map(\.account))
        #expect(book.restOfStart?.plans.runsLeft == 3 && !book.startIsBooked)
        var fed: [String] = []
        var runsLeft: [Int] = []
        while book.hasStartToFeed {
            fed += book.nextStartRun(1_000).run.map(\.key.account)
            runsLeft.append(book.restOfStart?.plans.runsLeft ?? 0)
        }
        #expect(fed == plans[100...].map(\.account))
        // 1,000 of the first run's 1,024, then its last 24 and 976 of the second, …
        #expect(runsLeft == [3, 2, 0])
        #expect(book.startIsBooked && book.startJobs == count)
    }

    @Test func aServiceStoppedInTheFirstRunStopsThePlansBookedAfterIt() throws {
        // Credentials refused by the first run's answer: the plans booked after it wait as
        // stopped, as a whole start's do, and the reload that resumes the service sends them all.
        let plans = (0..<10).map { Self.plan("p\($0)", token: "1") }
        var whole = Self.book()
        let wholeActions = whole.start(plans: plans, records: [])
        Self.send(&whole, wholeActions)
        _ = whole.settle(Self.k("p0"), .stopped("credentials refused"), attempt: 1, now: 1)
        var inRuns = Self.book()
        let started = inRuns.start(plans: plans, records: [], firstRun: 2)
        #expect(!inRuns.startIsBooked)
        Self.send(&inRuns, started.actions)
        _ = inRuns.settle(Self.k("p0"), .stopped("credentials refused"), attempt: 1, now: 1)
        var fed: [AgentBook.Unsent] = []
        var written: [SubscriptionRecord] = []
        while inRuns.hasStartToFeed {
            let taken = inRuns.nextStartRun(4)
            fed += taken.run
            written += Self.saved(taken.actions)
        }
        #expect(fed.isEmpty, "nothing of a stopped service is submitted: \(fed.map(\.key.account))")
        #expect(written.map(\.key.account) == (2..<10).map { "p\($0)" } && written.allSatisfy { $0.state == .stopped })
        #expect(written.allSatisfy { $0.lastOutcome == "credentials refused" })
        let states = { (book: AgentBook) in book.entries.values.map { "\($0.record.key.account):\($0.record.state)" }.sorted() }
        #expect(states(inRuns) == states(whole))
        #expect(inRuns.counts.statusText == whole.counts.statusText && inRuns.startJobs == 10)
        #expect(inRuns.isSettled, "every job waits on the stopped service")
        // The credentials mended: a reload with the same plans sends every one again.
        #expect(Self.submitted(Self.reload(&whole, plans, reportInterval: nil, now: 2).0).count == 10)
        #expect(Self.submitted(Self.reload(&inRuns, plans, reportInterval: nil, now: 2).0).count == 10)
    }

    @Test func theRemovalIsSavedBeforeAnyRequestIsSubmitted() throws {
        var book = Self.book(reportInterval: nil)
        let actions = book.start(plans: [Self.plan("alice", token: "1"), Self.plan("bob", token: "1")], records: [])
        #expect(Set(Self.saved(actions).map(\.key.account)) == ["alice", "bob"])
        #expect(Self.saved(actions).first { $0.key.account == "alice" }?.cleanup == Self.plan("alice", token: "1").cleanup)
        let lastSave = try #require(actions.lastIndex { if case .save = $0 { true } else { false } })
        let firstSubmit = try #require(actions.firstIndex { if case .submit = $0 { true } else { false } })
        #expect(lastSave < firstSubmit)

        let (reload, _) = Self.reload(&book, [Self.plan("alice", token: "2"), Self.plan("carol", token: "1")], reportInterval: book.reportInterval, now: 0)
        let lastReloadSave = try #require(reload.lastIndex { if case .save = $0 { true } else { false } })
        let firstReloadSubmit = try #require(reload.firstIndex { if case .submit = $0 { true } else { false } })
        #expect(lastReloadSave < firstReloadSubmit)
    }

    @Test func reloadReportsNewAndChangedKeepsUnchangedAndRemovesTheRest() throws {
        var book = Self.book(reportInterval: nil)
        let start = book.start(plans: ["alice", "bob", "carol"].map { Self.plan($0, token: "1") }, records: [])
        Self.send(&book, start)
        for id in ["alice", "bob", "carol"] { #expect(book.settle(Self.k(id), .delivered, attempt: 1, now: 1_000) != nil) }

        let (actions, summary) = Self.reload(&book, [Self.plan("alice", token: "1"), Self.plan("bob", token: "2"),
                                                     Self.plan("dave", token: "1")], reportInterval: nil, now: 2_000)
        // Named too, for the log at debug.
        #expect(summary == .init(added: 1, changed: 1, unchanged: 1, removed: 1,
                                 named: [.added: [Self.k("dave")], .changed: [Self.k("bob")], .removed: [Self.k("carol")]]))
        #expect(Set(Self.submitted(actions)) == ["bob@push.example.com:443", "dave@push.example.com:443",
                                                 "carol@gone.example.com:443"])
        #expect(book.currentRequest(Self.k("bob"))?.rendered.url == "https://push.example.com/r/bob?t=2")
        #expect(book.currentRequest(Self.k("alice")) == nil)

        // The removal, once delivered, forgets the account.
        _ = book.beginAttempt(Self.k("carol"))
        #expect(book.settle(Self.k("carol"), .delivered, attempt: 1, now: 2_000)?.actions == [.forget(Self.k("carol"))])
        #expect(book.entries[Self.k("carol")] == nil)
    }

    @Test func aLateResultOfAReplacedJobCountsForNothing() throws {
        var book = Self.book(reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)    // the T1 report is in flight…
        let (actions, _) = Self.reload(&book, [Self.plan("alice", token: "2")], reportInterval: book.reportInterval, now: 0)
        #expect(actions.first == .cancel(Self.k("alice")))
        // …and its result arrives before the T2 report started: it is not T2's delivery.
        #expect(book.settle(Self.k("alice"), .delivered, attempt: 1, now: 1_000) == nil)
        #expect(book.failed(Self.k("alice"), attempt: 1, reason: "HTTP 500", retryIn: .seconds(1), now: 1_000) == nil)
        #expect(book.entries[Self.k("alice")]?.record.deliveredFingerprint == nil)
        // Once T2 is sent, its outcome counts.
        #expect(book.beginAttempt(Self.k("alice"))?.rendered.url == "https://push.example.com/r/alice?t=2")
        #expect(book.settle(Self.k("alice"), .delivered, attempt: 1, now: 2_000) != nil)
        #expect(book.entries[Self.k("alice")]?.record.deliveredFingerprint == "alice-2")
    }

    @Test func noAttemptStartsForAReloadedAccountUntilItsStateIsWritten() throws {
        var book = Self.book(reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)
        _ = book.settle(Self.k("alice"), .delivered, attempt: 1, now: 1_000)
        _ = book.reload(plans: [Self.plan("alice", token: "2"), Self.plan("bob", token: "1")], reportInterval: nil, now: 2_000)
        // An attempt the scheduler had started before the reload finds nothing to send…
        #expect(book.beginAttempt(Self.k("alice")) == nil)
        #expect(book.beginAttempt(Self.k("bob")) == nil)
        // …until the agent has written the state and releases the accounts.
        #expect(Self.submitted(book.releaseHeld(through: book.reloads)) == ["alice@push.example.com:443", "bob@push.example.com:443"])
        #expect(book.beginAttempt(Self.k("alice"))?.rendered.url == "https://push.example.com/r/alice?t=2")
        #expect(book.beginAttempt(Self.k("bob")) != nil)
    }

    @Test func aReleaseLetsGoOnlyWhatTheReloadsWrittenHeld() throws {
        // Reload 1 changes alice; the state is being written when reload 2 changes bob and
        // alice again: that write covers reload 1 only, so only its subscriptions may go.
        var book = Self.book(reportInterval: nil)
        Self.send(&book, book.start(plans: [Self.plan("alice", token: "1"), Self.plan("bob", token: "1")], records: []))
        for account in ["alice", "bob"] { _ = book.settle(Self.k(account), .delivered, attempt: 1, now: 1_000) }
        _ = book.reload(plans: [Self.plan("alice", token: "2"), Self.plan("bob", token: "1")], reportInterval: nil, now: 2_000)
        let first = book.reloads
        _ = book.reload(plans: [Self.plan("alice", token: "3"), Self.plan("bob", token: "2")], reportInterval: nil, now: 3_000)
        #expect(book.releaseHeld(through: first).isEmpty, "alice is held by the second reload too, whose state is not written")
        #expect(book.beginAttempt(Self.k("alice")) == nil && book.beginAttempt(Self.k("bob")) == nil)
        // The second reload's state written: each key once, with what the latest reload made.
        #expect(Self.submitted(book.releaseHeld(through: book.reloads)) == ["alice@push.example.com:443", "bob@push.example.com:443"])
        #expect(book.beginAttempt(Self.k("alice"))?.rendered.url == "https://push.example.com/r/alice?t=3")
        #expect(book.releaseHeld(through: book.reloads).isEmpty, "released once")
    }

    @Test func theRemovalOfAnAttemptedReportStaysOwedWhenItIsReplaced() throws {
        var book = Self.book(reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)   // T1 may reach the server; its outcome never comes back
        _ = Self.reload(&book, [Self.plan("alice", token: "2")], reportInterval: nil, now: 0)
        let record = try #require(book.entries[Self.k("alice")]?.record)
        #expect(record.pastCleanups == [Self.plan("alice", token: "1").cleanup!])
        #expect(record.cleanup == Self.plan("alice", token: "2").cleanup)
        _ = Self.reload(&book, [], reportInterval: nil, now: 0)
        #expect(book.beginAttempt(Self.k("alice"))?.rendered.url == "https://gone.example.com/alice?t=1")
    }

    /// A cleanup written differently (a fixed removal URL) with the same report: a retry pending
    /// then must not send before the new cleanup is written (SPEC §6).
    @Test func aPendingRetryWaitsForAChangedCleanupToBeWritten() throws {
        var book = Self.book(reportInterval: nil)
        Self.send(&book, book.start(plans: [Self.plan("alice", token: "1")], records: []))
        #expect(book.failed(Self.k("alice"), attempt: 1, reason: "HTTP 503", retryIn: .seconds(30), now: 1_000) != nil)
        var fixed = Self.plan("alice", token: "1")
        fixed.cleanup = StoredRequest(RenderedRequest(account: "alice", reporter: "accountRemovalReporter", method: "DELETE",
                                                      url: "https://fixed.example.com/alice", headers: [], body: nil)).text
        let (actions, summary) = book.reload(plans: [fixed], reportInterval: nil, now: 11_000)
        #expect(summary.unchanged == 1)
        #expect(Self.saved(actions).map(\.cleanup) == [fixed.cleanup])
        #expect(actions.contains(.cancel(Self.k("alice"))))
        #expect(Self.submitted(actions).isEmpty, "what a reload submits waits for its state to be written")
        // Held until the agent has written the state, as every job a reload submits.
        #expect(book.beginAttempt(Self.k("alice")) == nil)
        #expect(book.releaseHeld(through: book.reloads) == [Self.submit("alice", host: "push.example.com:443", after: .seconds(20))])
        #expect(book.beginAttempt(Self.k("alice"))?.rendered.url == "https://push.example.com/r/alice?t=1")
        // With the report interval changed in the same reload, the job it had is held too.
        var periodic = Self.book(reportInterval: .seconds(3600))
        Self.send(&periodic, periodic.start(plans: [Self.plan("alice", token: "1")], records: []))
        #expect(periodic.settle(Self.k("alice"), .delivered, attempt: 1, now: 1_000) != nil)
        let (both, _) = periodic.reload(plans: [fixed], reportInterval: .seconds(7200), now: 2_000)
        #expect(both.contains(.cancel(Self.k("alice"))))
        #expect(periodic.beginAttempt(Self.k("alice")) == nil)
        #expect(Self.submitted(periodic.releaseHeld(through: periodic.reloads)) == ["alice@push.example.com:443"])
        // A cleanup unchanged leaves the pending retry where it is.
        #expect(!Self.reload(&book, [fixed], reportInterval: nil, now: 12_000).0.contains(.cancel(Self.k("alice"))))
    }

    @Test func aChangeReplacesAPendingRetry() throws {
        var book = Self.book(reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)
        let failure = book.failed(Self.k("alice"), attempt: 3, reason: "HTTP 503", retryIn: .seconds(20), now: 10_000)
        let record = try #require(Self.saved(failure.map(\.actions) ?? []).first)
        #expect(record.attempts == 3)
        #expect(record.lastOutcome == "HTTP 503")
        #expect(record.nextDueAt == 30_000)
        #expect(record.state == .retrying)

        let (actions, _) = Self.reload(&book, [Self.plan("alice", token: "2")], reportInterval: book.reportInterval, now: 11_000)
        #expect(actions.contains(.cancel(Self.k("alice"))))
        #expect(Self.submitted(actions) == ["alice@push.example.com:443"])
        #expect(book.entries[Self.k("alice")]?.record.attempts == 0)
    }

    @Test func anUnchangedAccountKeepsItsSchedule() throws {
        var book = Self.book(reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)
        _ = book.failed(Self.k("alice"), attempt: 1, reason: "HTTP 503", retryIn: .seconds(5), now: 0)
        let (actions, summary) = Self.reload(&book, [Self.plan("alice", token: "1")], reportInterval: book.reportInterval, now: 1_000)
        #expect(actions.isEmpty)
        #expect(summary.unchanged == 1)
        #expect(book.currentRequest(Self.k("alice")) != nil)
    }

    @Test func reportIntervalSubmitsADeliveredReportAgain() throws {
        var book = Self.book(reportInterval: .seconds(3600))
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)
        let delivery = book.settle(Self.k("alice"), .delivered, attempt: 1, now: 5_000)
        let actions = try #require(delivery).actions
        #expect(actions.contains(Self.submit("alice", host: "push.example.com:443", after: .seconds(3600))))
        let record = try #require(Self.saved(actions).first)
        #expect(record.state == .delivered)
        #expect(record.lastSuccessAt == 5_000)
        #expect(record.nextDueAt == 3_605_000)
    }

    @Test func aReportIntervalTurnedOnByReloadSchedulesDeliveredAccounts() throws {
        var book = Self.book(reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)
        _ = book.settle(Self.k("alice"), .delivered, attempt: 1, now: 1_000)
        let (actions, _) = Self.reload(&book, [Self.plan("alice", token: "1")], reportInterval: .seconds(60), now: 21_000)
        #expect(actions.contains(Self.submit("alice", host: "push.example.com:443", after: .seconds(40))))
    }

    @Test func anAccountThatComesBackDuringItsRemovalIsReportedAgain() throws {
        var book = Self.book(reportInterval: nil)
        _ = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        _ = Self.reload(&book, [], reportInterval: book.reportInterval, now: 0)
        #expect(book.currentRequest(Self.k("alice"))?.rendered.method == "DELETE")
        let (back, summary) = Self.reload(&book, [Self.plan("alice", token: "1")], reportInterval: book.reportInterval, now: 0)
        #expect(summary.added == 1)
        #expect(back.contains(.cancel(Self.k("alice"))))
        #expect(Self.submitted(back) == ["alice@push.example.com:443"])
        #expect(book.entries[Self.k("alice")]?.record.isRemoving == false)
    }

    @Test func aRemovalUndoesTheDeliveredReportAndTheNewerOneNotDelivered() throws {
        var book = Self.book(reportInterval: nil)
        let start = book.start(plans: [Self.plan("alice", token: "1")], records: [])
        Self.send(&book, start)
        _ = book.settle(Self.k("alice"), .delivered, attempt: 1, now: 1_000)
        let (change, _) = Self.reload(&book, [Self.plan("alice", token: "2")], reportInterval: book.reportInterval, now: 2_000)
        Self.send(&book, change)
        _ = book.failed(Self.k("alice"), attempt: 1, reason: "HTTP 500", retryIn: .seconds(5), now: 3_000)

        _ = Self.reload(&book, [], reportInterval: book.reportInterval, now: 4_000)
        #expect(book.beginAttempt(Self.k("alice"))?.rendered.url == "https://gone.example.com/alice?t=1")
        let delivery = book.settle(Self.k("alice"), .delivered, attempt: 1, now: 5_000)
        let first = try #require(delivery)
        #expect(Self.submitted(first.actions) == ["alice@gone.example.com:443"])
        #expect(Self.saved(first.actions).first?.pastCleanups == [])
        #expect(book.beginAttempt(Self.k("alice"))?.rendered.url == "https://gone.example.com/alice?t=2")
        #expect(book.settle(Self.k("alice"), .delivered, attempt: 1, now: 6_000)?.actions == [.forget(Self.k("alice"))])
    }

    @Test func anUnreadableStoredRemovalIsForgottenAndSaidSo() {
        var book = Self.book(reportInterval: nil)
        let actions = book.start(plans: [], records: [SubscriptionRecord(key: Self.k("old"), fingerprint: "x", cleanup: "not json")])
        #expect(actions == [.forget(Self.k("old"))])
        #expect(book.unreadableCleanups == [Self.k("old")])
    }
}


extension SubscriptionRequest {
    /// What the Acrobits request it carries sends.
    var rendered: TransportRequest { (payload as! AcrobitsPayload).request }
}
@Suite(.blockingThreads) struct StatusReportTests {
    static let records = [
        SubscriptionRecord(key: SubscriptionKey(account: "alice", service: "acrobits"), fingerprint: "a", deliveredFingerprint: "a",
                           state: .delivered, attempts: 0, lastAttemptAt: 1_763_750_000_000, lastOutcome: "delivered",
                           lastSuccessAt: 1_763_750_000_000),
        SubscriptionRecord(key: SubscriptionKey(account: "bo\"b", service: "acrobits"), fingerprint: "b", state: .retrying,
                           attempts: 4, lastAttemptAt: 1_763_750_001_500, lastOutcome: "HTTP 503", nextDueAt: 1_763_750_041_250),
    ]

    @Test func textIsASummaryAndATable() {
        #expect(StatusReport(records: Self.records, backends: .standard).text == """
            2 accounts: 1 reported, 1 retrying

            ACCOUNT  SERVICE   STATE      ATTEMPTS  LAST ATTEMPT          NEXT ATTEMPT          LAST SUCCESS          DETAIL
            alice    acrobits  delivered  -         2025-11-21T18:33:20Z  -                     2025-11-21T18:33:20Z  delivered
            bo"b     acrobits  retrying   4         2025-11-21T18:33:21Z  2025-11-21T18:34:01Z  -                     HTTP 503
            """)
    }

    @Test func aSecondServiceIsCountedAsASubscription() {
        var journeys = Self.records[0]
        journeys.key.service = "journeys"
        journeys.state = .accepted
        let text = StatusReport(records: Self.records + [journeys], backends: .standard).text
        #expect(text.hasPrefix("2 accounts, 3 subscriptions: 1 reported, 1 retrying, 1 awaiting confirmation\n"))
        #expect(text.contains("alice    journeys  accepted "))
    }

    @Test func prometheusFollowsTheTextExpositionFormat() {
        let text = StatusReport(records: Self.records, backends: .standard).prometheus
        #expect(text.hasPrefix("""
            # HELP pushreporter_subscriptions Subscriptions by service and by where their delivery stands.
            # TYPE pushreporter_subscriptions gauge
            pushreporter_subscriptions{service="acrobits",state="pending"} 0
            pushreporter_subscriptions{service="acrobits",state="accepted"} 0
            pushreporter_subscriptions{service="acrobits",state="delivered"} 1
            pushreporter_subscriptions{service="acrobits",state="retrying"} 1

            """))
        #expect(text.hasSuffix("""
            # HELP pushreporter_report_attempts Finished attempts of the subscription's current delivery or cleanup.
            # TYPE pushreporter_report_attempts gauge
            pushreporter_report_attempts{account="alice",service="acrobits"} 0
            pushreporter_report_attempts{account="bo\\"b",service="acrobits"} 4
            # HELP pushreporter_last_success_timestamp_seconds When the subscription was last delivered.
            # TYPE pushreporter_last_success_timestamp_seconds gauge
            pushreporter_last_success_timestamp_seconds{account="alice",service="acrobits"} 1763750000
            # HELP pushreporter_next_attempt_timestamp_seconds When the subscription's next attempt is due.
            # TYPE pushreporter_next_attempt_timestamp_seconds gauge
            pushreporter_next_attempt_timestamp_seconds{account="bo\\"b",service="acrobits"} 1763750041.250

            """))
    }

    @Test func jsonHasOneObjectPerSubscription() {
        let json = StatusReport(records: Self.records, backends: .standard).json
        #expect(json.hasPrefix("[\n  {\n    \"account\": \"alice\",\n    \"service\": \"acrobits\",\n    \"state\": \"delivered\","))
        #expect(json.contains(#""account": "bo\"b""#))
        #expect(json.contains(#""nextAttempt": "2025-11-21T18:34:01Z""#))
        #expect(json.contains(#""lastSuccess": null"#))
        #expect(json.contains(#""detail": "HTTP 503""#))
    }
}

@Suite(.blockingThreads) struct StoredRequestTests {
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

    /// The text is made in a string of its exact length when nothing needs escaping: the agent
    /// keeps one per subscription.
    @Test func theTextIsReservedAtItsLength() {
        let full = StoredRequest(RenderedRequest(account: "a", reporter: "accountRemovalReporter", method: "POST",
                                                 url: "https://gone.example.com/a?t=1", headers: [("X-Sig", "abc"), ("Accept", "*/*")],
                                                 body: "plain", credentials: .init(username: "u", password: "pw"),
                                                 timeout: .milliseconds(1500)))
        let bare = StoredRequest(RenderedRequest(account: "b", reporter: "accountRemovalReporter", method: "GET",
                                                 url: "http://127.0.0.1/x", headers: [], body: nil))
        let one = StoredRequest(RenderedRequest(account: "c", reporter: "accountRemovalReporter", method: "GET",
                                                url: "http://127.0.0.1/x", headers: [("User-Agent", "pushreporter/0.1.0")], body: nil))
        for stored in [full, bare, one] {
            #expect(stored.text.utf8.count == stored.unescapedLength, "\(stored.text)")
        }
    }

    /// Written by hand now, the text is byte for byte what JSONEncoder wrote (sorted keys,
    /// slashes unescaped) for what removals carry: a state written by an earlier version reads
    /// as unchanged, and a reload after an upgrade rewrites none of its cleanups.
    @Test func theTextIsWhatJSONEncoderWrote() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        for rendered in [
            RenderedRequest(account: "alice", reporter: "accountRemovalReporter", method: "DELETE",
                            url: "https://gone.example.com/a?t=1/2&s=%C3%A9", headers: [("X-Sig", "a\"b\\c"), ("Accept", "*/*")],
                            body: "{\"é\":\"x\"}", credentials: .init(username: "u", password: "p&w"), timeout: .milliseconds(1500)),
            RenderedRequest(account: "b", reporter: "accountRemovalReporter", method: "GET",
                            url: "http://127.0.0.1:8080/token/remove/?username=b&selector=AB:CD", headers: [], body: nil),
        ] {
            let stored = StoredRequest(rendered)
            #expect(stored.text == String(decoding: try encoder.encode(stored), as: UTF8.self))
        }
    }
}

/// The states SPEC §9.0 adds for backends that confirm later, refuse values or credentials,
/// and clean up what a changed delivery replaced.
@Suite(.blockingThreads) struct AgentBookBackendTests {
    /// A subscription of a Journeys-like service: its cleanup is sent when its token changes.
    static func plan(_ account: String, token: String, service: String = "journeys") -> SubscriptionPlan {
        let delivery = RenderedRequest(account: account, service: service, reporter: service, method: "POST",
                                       url: "https://j.example.com/register", headers: [], body: "{\"t\":\"\(token)\"}",
                                       fingerprint: "\(account)-\(token)")
        let cleanup = RenderedRequest(account: account, service: service, reporter: "accountRemovalReporter", method: "POST",
                                      url: "https://j.example.com/cleanup?t=\(token)", headers: [], body: nil)
        return SubscriptionPlan(account: account, service: service, fingerprint: delivery.fingerprint,
                                delivery: AcrobitsBackend.request(delivery, service: service, purpose: .delivery),
                                cleanup: StoredRequest(cleanup).text, cleansUpReplaced: true)
    }

    static func key(_ account: String, _ service: String = "journeys") -> SubscriptionKey {
        SubscriptionKey(account: account, service: service)
    }

    static func started(_ plans: [SubscriptionPlan], reportInterval: Duration? = nil) -> AgentBook {
        var book = AgentBookTests.book(reportInterval: reportInterval)
        AgentBookTests.send(&book, book.start(plans: plans, records: []))
        return book
    }

    @Test func anAcceptedSubscriptionIsDeliveredOnceConfirmed() throws {
        var book = Self.started([Self.plan("alice", token: "1")])
        let settledResult = book.settle(Self.key("alice"), .accepted("r-1"), attempt: 1, now: 1_000)
        let settled = try #require(settledResult)
        #expect(settled.settlement == .accepted)
        #expect(AgentBookTests.saved(settled.actions).first?.state == .accepted)
        #expect(AgentBookTests.saved(settled.actions).first?.backendData == "r-1")
        #expect(book.awaitingConfirmation(service: "journeys").map(\.data) == ["r-1"])
        #expect(book.isSettled)
        // An answer about another registration counts for nothing.
        #expect(book.confirmed(Self.key("alice"), data: "r-0", .delivered, now: 2_000) == nil)
        let confirmedResult = book.confirmed(Self.key("alice"), data: "r-1", .delivered, now: 2_000)
        let confirmed = try #require(confirmedResult)
        let record = try #require(AgentBookTests.saved(confirmed.actions).first)
        #expect(record.state == .delivered && record.deliveredFingerprint == "alice-1" && record.lastSuccessAt == 2_000)
        #expect(record.backendData == nil)
        #expect(book.awaitingConfirmation(service: "journeys").isEmpty)
    }

    @Test func whatADeliveryKeepsStaysWhileItIsMadeAgainUnchangedAndGoesWhenItChanges() throws {
        var book = Self.started([Self.plan("alice", token: "1")])
        let settledResult = book.settle(Self.key("alice"), .deliveredKeeping("key-1"), attempt: 1, now: 1_000)
        let settled = try #require(settledResult)
        #expect(settled.settlement == .delivered)
        let record = try #require(AgentBookTests.saved(settled.actions).first)
        #expect(record.state == .delivered && record.backendData == "key-1")
        #expect(book.awaitingConfirmation(service: "journeys").isEmpty, "kept data is no confirmation awaited")

        // A restart delivers it again: what it keeps stays meanwhile (status shows it, a restart
        // finds it), and a delivery that keeps nothing clears it.
        var restarted = AgentBookTests.book()
        AgentBookTests.send(&restarted, restarted.start(plans: [Self.plan("alice", token: "1")], records: [record]))
        #expect(restarted.entries[Self.key("alice")]?.record.backendData == "key-1")
        _ = restarted.settle(Self.key("alice"), .delivered, attempt: 1, now: 2_000)
        #expect(restarted.entries[Self.key("alice")]?.record.backendData == nil)

        // A changed delivery is not the one that kept it.
        var changed = AgentBookTests.book()
        _ = changed.start(plans: [Self.plan("alice", token: "2")], records: [record])
        #expect(changed.entries[Self.key("alice")]?.record.backendData == nil)
    }

    @Test func aRegistrationTheReceiverCouldNotStoreIsSentAgain() throws {
        var book = Self.started([Self.plan("alice", token: "1")])
        _ = book.settle(Self.key("alice"), .accepted("r-1"), attempt: 1, now: 1_000)
        let againResult = book.confirmed(Self.key("alice"), data: "r-1", .retry(.init(status: nil, reason: "FailedToStoreDevice")), now: 2_000)
        let again = try #require(againResult)
        #expect(AgentBookTests.submitted(again.actions) == ["alice@j.example.com:443"])
        #expect(book.entries[Self.key("alice")]?.record.state == .retrying)
        #expect(!book.isSettled)
    }

    @Test func aRejectedSubscriptionIsNotSentAgainUntilItChanges() throws {
        var book = Self.started([Self.plan("alice", token: "1")])
        let rejectedResult = book.settle(Self.key("alice"), .rejected("HTTP 400"), attempt: 1, now: 1_000)
        let rejected = try #require(rejectedResult)
        #expect(rejected.settlement == .rejected("HTTP 400"))
        #expect(book.entries[Self.key("alice")]?.record.state == .rejected)
        let (same, summary) = AgentBookTests.reload(&book, [Self.plan("alice", token: "1")], reportInterval: nil, now: 2_000)
        #expect(AgentBookTests.submitted(same).isEmpty)
        #expect(summary.unchanged == 1)
        let (changed, _) = AgentBookTests.reload(&book, [Self.plan("alice", token: "2")], reportInterval: nil, now: 3_000)
        #expect(AgentBookTests.submitted(changed) == ["alice@j.example.com:443"])
    }

    @Test func aStoppedServiceWaitsForAReloadAndOthersGoOn() throws {
        var book = Self.started([Self.plan("alice", token: "1"), Self.plan("bob", token: "1"),
                                 Self.plan("carol", token: "1", service: "other")])
        let stoppedResult = book.settle(Self.key("alice"), .stopped("HTTP 401"), attempt: 1, now: 1_000)
        let stopped = try #require(stoppedResult)
        #expect(stopped.settlement == .stopped("HTTP 401"))
        #expect(stopped.actions.contains(.cancel(Self.key("bob"))))
        #expect(!stopped.actions.contains(.cancel(Self.key("carol", "other"))))
        #expect(book.beginAttempt(Self.key("bob")) == nil)
        #expect(book.entries[Self.key("bob")]?.record.state == .stopped)
        // bob's attempt was in flight: its failure does not bring it back.
        let lateResult = book.failed(Self.key("bob"), attempt: 1, reason: "HTTP 503", retryIn: .seconds(5), now: 1_500)
        let late = try #require(lateResult)
        #expect(late.actions.contains(.cancel(Self.key("bob"))))
        #expect(book.counts[.stopped] == 2)
        let (reload, _) = AgentBookTests.reload(&book, [Self.plan("alice", token: "1"), Self.plan("bob", token: "1"),
                                                        Self.plan("carol", token: "1", service: "other")], reportInterval: nil, now: 2_000)
        #expect(Set(AgentBookTests.submitted(reload)) == ["alice@j.example.com:443", "bob@j.example.com:443"])
        #expect(book.stoppedServices.isEmpty)
    }

    /// A removal held back by a stopped service is sent once a reload resumes the service,
    /// and until then the book is settled; after it, it is not, until the removal is done.
    @Test func aRemovalHeldBackByAStoppedServiceIsSentOnceAReloadResumesIt() {
        var book = Self.started([Self.plan("alice", token: "1"), Self.plan("bob", token: "1")])
        for id in ["alice", "bob"] { #expect(book.settle(Self.key(id), .delivered, attempt: 1, now: 1_000) != nil) }
        // bob leaves the configuration: its cleanup is owed, and refused with the service's credentials.
        let (leave, _) = AgentBookTests.reload(&book, [Self.plan("alice", token: "1")], reportInterval: nil, now: 2_000)
        #expect(AgentBookTests.submitted(leave) == ["bob@j.example.com:443"])
        #expect(book.beginAttempt(Self.key("bob")) != nil)
        let stoppedResult = book.settle(Self.key("bob"), .stopped("HTTP 401"), attempt: 1, now: 2_500)
        #expect(stoppedResult?.settlement == .stopped("HTTP 401"))
        #expect(book.entries[Self.key("bob")]?.record.state == .removing)
        #expect(book.isSettled)
        // The credentials are fixed and the configuration reloaded: the removal goes out again.
        let (resume, _) = AgentBookTests.reload(&book, [Self.plan("alice", token: "1")], reportInterval: nil, now: 3_000)
        #expect(AgentBookTests.submitted(resume) == ["bob@j.example.com:443"])
        #expect(!book.isSettled)
        let attempt = book.beginAttempt(Self.key("bob"))
        #expect(attempt?.purpose == .cleanup)
        let done = book.settle(Self.key("bob"), .delivered, attempt: 1, now: 3_500)
        #expect(done?.settlement == .cleanedUp(forgotten: true))
        #expect(book.isSettled)
        #expect(book.entries[Self.key("bob")] == nil)
    }

    /// A subscription of a stopped service that leaves in the reload that resumes the service
    /// gets its cleanup submitted once.
    @Test func aSubscriptionLeavingAsItsServiceResumesIsCleanedUpOnce() {
        var book = Self.started([Self.plan("alice", token: "1"), Self.plan("bob", token: "1")])
        #expect(book.settle(Self.key("alice"), .delivered, attempt: 1, now: 1_000) != nil)
        #expect(book.settle(Self.key("bob"), .stopped("HTTP 401"), attempt: 1, now: 1_000)?.settlement == .stopped("HTTP 401"))
        let (reload, _) = AgentBookTests.reload(&book, [Self.plan("alice", token: "1")], reportInterval: nil, now: 2_000)
        #expect(AgentBookTests.submitted(reload) == ["bob@j.example.com:443"])
        #expect(book.entries[Self.key("bob")]?.record.state == .removing)
    }

    @Test func aChangedTokenCleansUpTheOldOneOnceTheNewOneIsDelivered() throws {
        var book = Self.started([Self.plan("alice", token: "1")])
        _ = book.settle(Self.key("alice"), .delivered, attempt: 1, now: 1_000)
        let (change, _) = AgentBookTests.reload(&book, [Self.plan("alice", token: "2")], reportInterval: nil, now: 2_000)
        AgentBookTests.send(&book, change)
        let deliveredResult = book.settle(Self.key("alice"), .delivered, attempt: 1, now: 3_000)
        let delivered = try #require(deliveredResult)
        #expect(AgentBookTests.submitted(delivered.actions) == ["alice@j.example.com:443"])
        let cleanupResult = book.beginAttempt(Self.key("alice"))
        let cleanup = try #require(cleanupResult)
        #expect(cleanup.purpose == .cleanup)
        #expect(cleanup.rendered.url == "https://j.example.com/cleanup?t=1")
        #expect(book.entries[Self.key("alice")]?.record.state == .delivered)
        let doneResult = book.settle(Self.key("alice"), .delivered, attempt: 1, now: 4_000)
        let done = try #require(doneResult)
        #expect(done.settlement == .cleanedUp(forgotten: false))
        let record = try #require(book.entries[Self.key("alice")]?.record)
        #expect(record.pastCleanups.isEmpty && record.cleanup?.contains("t=2") == true && record.state == .delivered)
        #expect(book.isSettled)
    }

    @Test func aCleanupTheReceiverRefusesIsGivenUp() throws {
        var book = Self.started([Self.plan("alice", token: "1")])
        _ = book.settle(Self.key("alice"), .delivered, attempt: 1, now: 1_000)
        let (leave, _) = AgentBookTests.reload(&book, [], reportInterval: nil, now: 2_000)
        AgentBookTests.send(&book, leave)
        let refusedResult = book.settle(Self.key("alice"), .rejected("HTTP 400"), attempt: 1, now: 3_000)
        let refused = try #require(refusedResult)
        #expect(refused.settlement == .cleanupRefused("HTTP 400"))
        #expect(refused.actions == [.forget(Self.key("alice"))])
    }

    @Test func aSubscriptionWithoutItsTokenWaits() throws {
        var waiting = Self.plan("alice", token: "")
        waiting.delivery = nil
        waiting.waiting = "no device token yet"
        var book = AgentBookTests.book()
        let actions = book.start(plans: [waiting], records: [])
        #expect(AgentBookTests.submitted(actions).isEmpty)
        #expect(AgentBookTests.saved(actions).first?.lastOutcome == "no device token yet")
        #expect(book.counts[.pending] == 1 && book.isSettled)
        let (arrived, summary) = AgentBookTests.reload(&book, [Self.plan("alice", token: "1")], reportInterval: nil, now: 1_000)
        #expect(summary.changed == 1)
        #expect(AgentBookTests.submitted(arrived) == ["alice@j.example.com:443"])
    }
}

/// SPEC §11: an agent sharing its state sends only what it holds the lease of.
@Suite(.blockingThreads) struct AgentBookSharedTests {
    typealias Claimed = ClaimedSubscription

    static func shared(_ plans: [SubscriptionPlan], reportInterval: Duration? = nil) -> AgentBook {
        var book = AgentBookTests.book(reportInterval: reportInterval)
        book.startShared(plans: plans)
        return book
    }

    /// `account`'s record as the shared state has it: rendered with `token`, delivered or not.
    static func stored(_ account: String, token: String, delivered: Bool) -> SubscriptionRecord {
        var record = SubscriptionRecord(key: AgentBookTests.k(account))
        AgentBookTests.plan(account, token: token).apply(to: &record)
        if delivered {
            record.state = .delivered
            record.deliveredFingerprint = record.fingerprint
            record.lastSuccessAt = 20_000
            record.lastAttemptAt = 20_000
        }
        return record
    }

    @Test func nothingIsSentBeforeItIsClaimed() {
        var book = Self.shared([AgentBookTests.plan("alice", token: "1"), AgentBookTests.plan("bob", token: "1")])
        #expect(book.beginAttempt(AgentBookTests.k("alice")) == nil)
        #expect(book.counts.subscriptions == 0)
        #expect(book.isSettled)
    }

    @Test func whatTheRunningGroupDeliveredIsNotSentAgain() {
        var book = Self.shared([AgentBookTests.plan("alice", token: "1"), AgentBookTests.plan("bob", token: "1"),
                                AgentBookTests.plan("carol", token: "2")])
        let (actions, disagreed) = book.acquire([
            Claimed(record: Self.stored("alice", token: "1", delivered: true), writtenThisGroup: true, leaving: false),   // done
            Claimed(record: Self.stored("bob", token: "1", delivered: true), writtenThisGroup: false, leaving: false),    // an earlier group: again
            Claimed(record: Self.stored("carol", token: "1", delivered: true), writtenThisGroup: true, leaving: false),   // other values: again
        ], now: 30_000)
        #expect(disagreed.isEmpty)
        #expect(Set(AgentBookTests.submitted(actions)) == ["bob@push.example.com:443", "carol@push.example.com:443"])
        #expect(book.entries[AgentBookTests.k("alice")]?.record.state == .delivered)
        #expect(book.counts.subscriptions == 3)
        #expect(book.idleOwned(until: 30_000) == [AgentBookTests.k("alice")])
    }

    @Test func aClaimedSubscriptionTheConfigurationDroppedIsCleanedUp() {
        var book = Self.shared([AgentBookTests.plan("alice", token: "1")])
        var gone = SubscriptionRecord(key: AgentBookTests.k("gone"), fingerprint: "gone-1", deliveredFingerprint: "gone-1",
                                      state: .delivered, cleanup: AgentBookTests.plan("gone", token: "1").cleanup)
        gone.lastSuccessAt = 20_000
        let (actions, disagreed) = book.acquire([Claimed(record: gone, writtenThisGroup: true, leaving: true)], now: 30_000)
        #expect(disagreed.isEmpty)
        #expect(AgentBookTests.submitted(actions) == ["gone@gone.example.com:443"])
        #expect(book.beginAttempt(AgentBookTests.k("gone"))?.purpose == .cleanup)
    }

    @Test func whatTheConfigurationDisagreesWithIsNotTaken() {
        // Another agent loaded files with "newer" in them last; this one still has "stale",
        // which those files dropped.
        var book = Self.shared([AgentBookTests.plan("stale", token: "1")])
        let (actions, disagreed) = book.acquire([
            Claimed(record: Self.stored("newer", token: "1", delivered: false), writtenThisGroup: false, leaving: false),
            Claimed(record: Self.stored("stale", token: "1", delivered: true), writtenThisGroup: true, leaving: true),
        ], now: 30_000)
        #expect(disagreed == [AgentBookTests.k("newer"), AgentBookTests.k("stale")])
        #expect(actions.isEmpty, "neither sent nor cleaned up nor forgotten")
        #expect(book.counts.subscriptions == 0)
        #expect(book.beginAttempt(AgentBookTests.k("stale")) == nil)
    }

    @Test func aDeliveryRepeatedByTheReportIntervalCountsAsIdle() {
        var book = Self.shared([AgentBookTests.plan("alice", token: "1"), AgentBookTests.plan("bob", token: "1")],
                               reportInterval: .seconds(3600))
        let (actions, _) = book.acquire([
            Claimed(record: Self.stored("alice", token: "1", delivered: true), writtenThisGroup: true, leaving: false),
            Claimed(record: Self.stored("bob", token: "1", delivered: false), writtenThisGroup: true, leaving: false),
        ], now: 30_000)
        #expect(AgentBookTests.submitted(actions).sorted() == ["alice@push.example.com:443", "bob@push.example.com:443"],
                "alice again in an hour, bob now")
        #expect(book.idleOwned(until: 60_000) == [AgentBookTests.k("alice")])
        #expect(book.idleOwned(until: 30_000 + 3_600_000).isEmpty, "alice is due by then")
    }

    @Test func aLostLeaseCancelsItsJobAndAReloadLeavesOthersAlone() {
        var book = Self.shared([AgentBookTests.plan("alice", token: "1"), AgentBookTests.plan("bob", token: "1")])
        _ = book.acquire([Claimed(record: SubscriptionRecord(key: AgentBookTests.k("alice")), writtenThisGroup: false, leaving: false)],
                         now: 30_000)
        #expect(book.beginAttempt(AgentBookTests.k("alice")) != nil)
        #expect(book.relinquish([AgentBookTests.k("alice")]) == [.cancel(AgentBookTests.k("alice"))])
        #expect(book.beginAttempt(AgentBookTests.k("alice")) == nil)
        // A reload changes bob, which this agent does not hold: its holder sends it.
        let (actions, _) = AgentBookTests.reload(&book, [AgentBookTests.plan("alice", token: "1"), AgentBookTests.plan("bob", token: "2")],
                                                 reportInterval: nil, now: 40_000)
        #expect(AgentBookTests.submitted(actions).isEmpty)
        #expect(!actions.contains { if case .save = $0 { true } else { false } }, "nothing held, nothing written")
    }

    @Test func aLeaseTakenBackAppliesThePlanBookedAgainWaitingRefusedOrSent() throws {
        var waiting = AgentBookTests.plan("wait", token: "1")
        waiting.delivery = nil
        waiting.waiting = "no device token yet"
        var refused = AgentBookTests.plan("refused", token: "1")
        refused.delivery = nil
        refused.refusal = "a secret bound for plain http"
        let sent = AgentBookTests.plan("alice", token: "1")
        var book = Self.shared([waiting, refused, sent])
        let keys = ["wait", "refused", "alice"].map(AgentBookTests.k)
        func claims(_ when: Int64) -> [Claimed] {
            keys.map { Claimed(record: SubscriptionRecord(key: $0, lastAttemptAt: when), writtenThisGroup: false, leaving: false) }
        }
        // Held, sent and failed once, then lost, then taken back from the state as another agent left it.
        for round in 1...2 {
            let (actions, _) = book.acquire(claims(Int64(round) * 10_000), now: Int64(round) * 10_000)
            #expect(AgentBookTests.submitted(actions) == ["alice@push.example.com:443"], "round \(round)")
            let wait = try #require(book.entries[keys[0]]?.record)
            #expect(wait.state == .pending && wait.lastOutcome == "no device token yet", "round \(round)")
            let refusal = try #require(book.entries[keys[1]]?.record)
            #expect(refusal.state == .rejected && refusal.lastOutcome == "a secret bound for plain http", "round \(round)")
            let alice = try #require(book.entries[keys[2]]?.record)
            #expect(alice.fingerprint == sent.fingerprint && alice.cleanup == sent.cleanup, "round \(round)")
            #expect(book.beginAttempt(keys[2]) != nil)
            _ = book.failed(keys[2], attempt: 1, reason: "timed out", retryIn: .seconds(5), now: Int64(round) * 10_000 + 1)
            _ = book.relinquish(keys)
        }
    }

    @Test func aDeliveredRequestIsKeptWhereAnotherAgentMayHandTheLeaseBack() throws {
        var plan = AgentBookTests.plan("alice", token: "1")
        plan.deliveryUnreadOnceDelivered = true
        var book = Self.shared([plan])
        _ = book.acquire([Claimed(record: SubscriptionRecord(key: AgentBookTests.k("alice")), writtenThisGroup: false, leaving: false)],
                         now: 30_000)
        #expect(book.beginAttempt(AgentBookTests.k("alice")) != nil)
        #expect(book.settle(AgentBookTests.k("alice"), .delivered, attempt: 1, now: 31_000) != nil)
        #expect(try #require(book.entries[AgentBookTests.k("alice")]?.plan?.delivery).payload is AcrobitsPayload)
    }

    @Test func aSubscriptionHandedBackIsNoLongerConfirmedHere() {
        var book = Self.shared([AgentBookTests.plan("alice", token: "1")])
        var accepted = Self.stored("alice", token: "1", delivered: false)
        accepted.state = .accepted
        accepted.backendData = "request-1"
        _ = book.acquire([Claimed(record: accepted, writtenThisGroup: true, leaving: false)], now: 30_000)
        #expect(book.awaitingConfirmation(service: "acrobits").map(\.key) == [AgentBookTests.k("alice")])
        _ = book.relinquish([AgentBookTests.k("alice")])
        #expect(book.awaitingConfirmation(service: "acrobits").isEmpty, "its new holder asks")
        #expect(book.confirmed(AgentBookTests.k("alice"), data: "request-1", .delivered, now: 40_000) == nil)
        #expect(book.unconfirmed(AgentBookTests.k("alice"), reason: "too late").isEmpty)
    }
}

/// Whether two transport requests send the same.
enum PackedRequestSame {
    static func same(_ one: TransportRequest, _ other: TransportRequest) -> Bool {
        one.method == other.method && one.url == other.url && one.headers.map(\.name) == other.headers.map(\.name)
            && one.headers.map(\.value) == other.headers.map(\.value) && one.body == other.body
            && one.credentials == other.credentials && one.secretHeaders == other.secretHeaders
    }
}
