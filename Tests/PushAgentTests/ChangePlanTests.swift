import PushAgent
import PushBackend
import PushConfig
import PushState
import PushTestThreads
import Testing

/// `pushreporter plan`'s comparison (SPEC §14): the configuration's plans against the state's
/// records, as a reload compares them.
@Suite(.blockingThreads) struct ChangePlanTests {
    static func plan(_ account: String, _ service: String = "acrobits", fingerprint: String, sendable: Bool = true) -> SubscriptionPlan {
        let key = SubscriptionKey(account: account, service: service)
        let delivery = sendable ? AgentOnceTests.plan(account, url: "http://h.example/\(account)").delivery : nil
        return SubscriptionPlan(account: key.account, service: key.service, fingerprint: fingerprint, delivery: delivery,
                                waiting: sendable ? nil : "no device token yet", cleanup: nil)
    }

    static func record(_ account: String, _ service: String = "acrobits", delivered: String?, state: SubscriptionState = .delivered) -> SubscriptionRecord {
        SubscriptionRecord(key: SubscriptionKey(account: account, service: service), fingerprint: delivered ?? "f",
                           deliveredFingerprint: delivered, state: state)
    }

    @Test func eachSubscriptionIsNewChangedUnchangedOrRemoved() {
        let plan = ChangePlan(plans: [Self.plan("a", fingerprint: "1"), Self.plan("b", fingerprint: "2"), Self.plan("c", fingerprint: "3"),
                                      Self.plan("d", fingerprint: "4"), Self.plan("w", fingerprint: "5", sendable: false),
                                      Self.plan("h", "hook", fingerprint: "6")],
                              records: [Self.record("a", delivered: "1"), Self.record("b", delivered: "old"),
                                        Self.record("c", delivered: nil, state: .retrying),
                                        Self.record("d", delivered: "4", state: .removing), Self.record("gone", delivered: "9")])
        #expect(plan.items.map { "\($0.key.service)/\($0.key.account)/\($0.action.rawValue)" }
                == ["acrobits/b/changed", "acrobits/c/new", "acrobits/d/new", "acrobits/gone/removed", "hook/h/new"])
        #expect(plan.count(.unchanged, of: "acrobits") == 1)
        #expect(plan.notSendable == 1)
        #expect(plan.sendsSomething)
        #expect(plan.text().hasPrefix("acrobits: 2 new, 1 changed, 1 unchanged, 1 removed, 0 held\n"))

        let onlyHook = ChangePlan(plans: [Self.plan("a", fingerprint: "1"), Self.plan("h", "hook", fingerprint: "6")],
                                  records: [Self.record("h", "hook", delivered: "6"), Self.record("gone", delivered: "9")], services: ["hook"])
        #expect(!onlyHook.sendsSomething)
        #expect(onlyHook.text() == "hook: 0 new, 0 changed, 1 unchanged, 0 removed, 0 held")
    }

    @Test func theTextListsAFewOfEachAndCountsTheRest() {
        let plans = (0..<25).map { Self.plan("a\($0)", fingerprint: "\($0)") }
        let text = ChangePlan(plans: plans, records: []).text(shown: 20)
        #expect(text.split(separator: "\n").count { $0.hasPrefix("  new ") } == 21)
        #expect(text.contains("  new      … and 5 more (--format json lists every one)"), "\(text)")
    }

    @Test func removalsPastTheGuardAreHeldNotRemoved() {
        let records = (0..<150).map { Self.record("a\($0)", delivered: "\($0)") }
        let plans = [Self.plan("a0", fingerprint: "0")]
        let guarded = ChangePlan(plans: plans, records: records, removalGuard: RemovalGuard())
        #expect(guarded.count(.held, of: "acrobits") == 149)
        #expect(guarded.count(.removed, of: "acrobits") == 0)
        #expect(!guarded.sendsSomething, "a held removal sends nothing")
        let unguarded = ChangePlan(plans: plans, records: records, removalGuard: nil)
        #expect(unguarded.count(.removed, of: "acrobits") == 149)
        #expect(unguarded.sendsSomething)
        // Under the count (or the share) the guard lets them go.
        let few = ChangePlan(plans: plans, records: Array(records.prefix(50)), removalGuard: RemovalGuard())
        #expect(few.count(.removed, of: "acrobits") == 49)
    }
}
