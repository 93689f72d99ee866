@testable import PushAgent
import PushBackend
import PushRegistry
import PushConfig
import PushState
import PushTestSupport
import Testing
import PushTestThreads

/// The agent plans a large configuration's accounts in runs on every processor when every
/// backend allows it: the plans and diagnostics must be those of one account after another.
@Suite(.blockingThreads) struct PlanningInRunsTests {
    /// Accounts with and without problems, removals, a shared receiver and disabled ones,
    /// spread so that runs split them.
    static func configuration(services: String = "", count: Int = 600) -> String {
        var text = """
            services:
              shared: {type: acrobits, pushTokenReporterUrl: "https://shared.example/%account[id]%?t=%pushTokenOther%"}
            \(services)
            defaults:
              pushTokenReporterUrl: https://h.example/r?s=%selector%&t=%pushTokenOther%
            accounts:

            """
        for index in 0..<count {
            text += "  - id: a\(index)\n    selector: S\(index)\n    pushTokenOther: t\(index)\n"
            switch index % 7 {
            case 0: text += "    accountRemovalReporterUrl: https://gone.example/\(index)\n"
            case 1: text += "    enabled: false\n"
            case 2: text += "    pushTokenReporterUrl: https://h.example/%nosuch%/\(index)\n"
            case 3: text += "    services: {shared: {}}\n"
            case 4: text += "    pushTokenReporterUrl: https://h.example/?n=%account[note]%\n"
            case 5: text += "    note: n\(index)\n    pushTokenReporterUrl: https://h.example/?n=%account[note]%\n"
            default: break
            }
        }
        return text
    }

    static func planned(_ path: String, runs: Int) -> (plans: [String], diagnostics: [String]) {
        let result = ConfigurationLoader(environment: LoaderEnvironment(variables: [:], templateSearchPath: [])).load(paths: [path])
        var diagnostics = result.diagnostics
        let context = BackendContext(configuration: result.configuration, sources: result.sources, installID: "i", hostname: "h")
        let plans = Backends.standard.plans(context, runs: runs, diagnostics: &diagnostics)
        return (plans.map { "\($0.key) \($0.fingerprint) \($0.delivery?.host ?? "-") \($0.cleanup ?? "-") \($0.refusal ?? "-")" },
                diagnostics.all.map(\.formatted))
    }

    /// `planned`, letting each account go once planned: also the ids `note` picked, and the
    /// context's accounts and left-out count after.
    static func plannedLettingGo(_ path: String, runs: Int, note: @escaping @Sendable (Account) -> Bool = { _ in false })
        -> (plans: [String], diagnostics: [String], noted: [String], kept: Int, leftOut: Int) {
        var result = ConfigurationLoader(environment: LoaderEnvironment(variables: [:], templateSearchPath: [])).load(paths: [path])
        var diagnostics = result.diagnostics
        var context = BackendContext(configuration: result.configuration, sources: result.sources, installID: "i", hostname: "h")
        // The context's copy only, as AgentSetup leaves it: the accounts are taken in place.
        result.configuration.accounts = []
        let (plans, noted) = Backends.standard.plans(lettingGoOf: &context, runs: runs, noting: note, diagnostics: &diagnostics)
        return (plans.map { "\($0.key) \($0.fingerprint) \($0.delivery?.host ?? "-") \($0.cleanup ?? "-") \($0.refusal ?? "-")" },
                diagnostics.all.map(\.formatted), noted, context.configuration.accounts.count, context.configuration.accountsLeftOut.count)
    }

    @Test("the start counts the accounts of its plans, of one service and of several")
    func accountCount() {
        func plan(_ account: String, _ service: String) -> SubscriptionPlan {
            SubscriptionPlan(account: account, service: service, fingerprint: account + service, delivery: nil, cleanup: nil)
        }
        typealias Counting = AgentCore<ContinuousClock>
        #expect(Counting.accountCount([]) == 0)
        #expect(Counting.accountCount((0..<5).map { plan("a\($0)", SubscriptionKey.acrobits) }) == 5)
        // An account with a service besides its Acrobits subscription counts once; one with
        // only the service counts too.
        let mixed = (0..<5).map { plan("a\($0)", SubscriptionKey.acrobits) } + [plan("a1", "journeys"), plan("a3", "journeys"), plan("b", "journeys")]
        #expect(Counting.accountCount(mixed) == 6)
        #expect(Counting.accountCount([plan("a", "journeys"), plan("a", "fcm")]) == 1)
    }

    @Test("letting each account go once planned gives the same plans and diagnostics", arguments: [1, 2, 7, 64])
    func lettingGo(runs: Int) {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", Self.configuration())
        let one = Self.planned(path, runs: 1)
        // Every seventh account is disabled (index % 7 == 1): those are never noted.
        let picked = Self.plannedLettingGo(path, runs: runs) { $0.id.hasSuffix("1") }
        #expect(picked.plans == one.plans)
        // "the account has no key 'note'" is a warning because other accounts have the key: the
        // accounts let go still count for that wording.
        #expect(picked.diagnostics == one.diagnostics)
        // Noted: the enabled accounts picked that no backend plans anything for.
        let planned = Set(one.plans.map { String($0.prefix { $0 != " " && $0 != "/" }) })
        let expected = (0..<600).filter { $0 % 10 == 1 && $0 % 7 != 1 }.map { "a\($0)" }.filter { !planned.contains($0) }
        #expect(!expected.isEmpty && expected.count < 50, "some picked accounts have plans, some have none")
        #expect(picked.noted == expected)
        #expect(picked.kept == 0 && picked.leftOut == 600)
    }

    @Test("plans and diagnostics, in order, whatever the number of runs", arguments: [2, 7, 64])
    func sameAsOneRun(runs: Int) {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", Self.configuration())
        let one = Self.planned(path, runs: 1)
        #expect(one.plans.count > 500)
        #expect(one.plans.contains { $0.hasPrefix("a3/shared ") })
        #expect(one.plans.contains { $0.contains("gone.example/0") })
        #expect(one.diagnostics.contains { $0.contains("'nosuch'") })
        #expect(one.diagnostics.contains { $0.contains("the account has no key 'note'") })
        let many = Self.planned(path, runs: runs)
        #expect(many.plans == one.plans)
        #expect(many.diagnostics == one.diagnostics)
    }

    static func planners(_ file: String) -> [any SubscriptionPlanner] {
        let result = ConfigurationLoader(environment: LoaderEnvironment(variables: [:], templateSearchPath: [])).load(paths: [file])
        let context = BackendContext(configuration: result.configuration, sources: result.sources, installID: "i", hostname: "h")
        var ignored = DiagnosticList()
        return Backends.standard.planners(context, diagnostics: &ignored)
    }

    @Test("Journeys registrations, each an account's own, are planned in runs as in one")
    func journeysInRuns() {
        let journeys = """
              journeys:
                type: customer-insights-journeys
                publicEndpoint: https://public-eur.mkt.dynamics.com
                orgId: 0a1b2c3d-0000-0000-0000-000000000000
                mobileAppId: 00000000-0000-0000-0000-000000000000
                apiToken: secret-token
            """
        // Some accounts render a registration, some lack a key it needs, some wait for a token.
        let text = Self.configuration(services: journeys)
            .replacingOccurrences(of: "services: {shared: {}}", with: "services: {shared: {}, journeys: {userId: u, platform: ios}}")
            .replacingOccurrences(of: "    enabled: false\n", with: "    services: {journeys: {userId: '%selector%'}}\n")
            .replacingOccurrences(of: "    note: n", with: "    services: {journeys: {userId: u, platform: android, deviceToken: ''}}\n    note: n")
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", text)
        let one = Self.planned(path, runs: 1)
        #expect(one.plans.contains { $0.hasPrefix("a3/journeys ") })
        #expect(one.plans.contains { $0.hasPrefix("a5/journeys ") && $0.hasSuffix(" - - -") }, "waiting for its token")
        #expect(one.diagnostics.contains { $0.contains("needs 'platform'") })
        let planners = Self.planners(path)
        #expect(planners.count == 2 && planners.compactMap(\.forRuns).count == planners.count)
        for runs in [2, 7, 64] {
            #expect(Self.planned(path, runs: runs) == one, "in \(runs) runs")
        }
    }

    @Test("a backend whose plans depend on other accounts (FCM device groups) is planned in one run")
    func fcmInOneRun() {
        let fcm = """
              fcm:
                type: fcm-device-group
                endpoint: "https://fcm.example.com/fcm/notification/"
                projectId: p-1
                serverKey: key
            """
        let text = Self.configuration(services: fcm)
            .replacingOccurrences(of: "services: {shared: {}}", with: "services: {shared: {}, fcm: {group: g}}")
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", text)
        let one = Self.planned(path, runs: 1)
        #expect(one.plans.contains { $0.hasPrefix("a3/fcm ") })
        #expect(Self.planned(path, runs: 7) == one)
        // Its planner reads every account when it is made: they are kept, and planned as they are.
        let kept = Self.plannedLettingGo(path, runs: 7)
        #expect(kept.plans == one.plans && kept.diagnostics == one.diagnostics)
        #expect(kept.kept == 600 && kept.leftOut == 0)
        // The FCM planner with a service says no to runs; without one, every planner says yes.
        for (file, runnable) in [(path, false), (directory.write("plain.yaml", Self.configuration()), true)] {
            let planners = Self.planners(file)
            #expect((planners.compactMap(\.forRuns).count == planners.count) == runnable)
        }
    }
}
