import PushAcrobits
import PushAdobe
import PushBackend
import PushScheduler
import PushConfig
import PushFCM
import PushJourneys
import PushState

/// The backends this build knows (SPEC §9), and what the agent and the commands do with all of
/// them at once: check, plan, preview, send, read back a stored cleanup, poll.
public struct Backends: Sendable {
    public let all: [any Backend]

    public init(_ all: [any Backend]) {
        self.all = all
    }

    /// Every backend of this build.
    public static let standard = Backends([AcrobitsBackend(), JourneysBackend(), FCMBackend(wallClock: WallClock.epochMilliseconds),
                                           AdobeBackend()])

    /// The backend of `type:`, if this build has it.
    public func backend(type: String) -> (any Backend)? {
        all.first { $0.type == type }
    }

    /// Checks every service and subscription, as `validate` does (see ``Backend/check(_:skipping:diagnostics:)``).
    public func check(_ context: BackendContext, skipping passedEarly: [Bool]? = nil, diagnostics: inout DiagnosticList) {
        for backend in all { backend.check(context, skipping: passedEarly, diagnostics: &diagnostics) }
    }

    /// A planner of each backend that has something to plan, for rendering one account at a
    /// time: a backend with no service of its type in the configuration has none
    /// (``Backend/plansWithoutServices``), and is not asked about each account.
    public func planners(_ context: BackendContext, diagnostics: inout DiagnosticList) -> [any SubscriptionPlanner] {
        let types = Set(context.configuration.services.values.map(\.type))
        return all.filter { $0.plansWithoutServices || types.contains($0.type) }.map { $0.planner(context, diagnostics: &diagnostics) }
    }

    /// The subscriptions of every enabled account, rendered as sent; those that cannot be
    /// rendered add diagnostics and are left out.
    public func plans(_ context: BackendContext, diagnostics: inout DiagnosticList) -> [SubscriptionPlan] {
        plans(context, runs: Processors.runs(accounts: context.configuration.accounts.count), diagnostics: &diagnostics)
    }

    /// `plans` in `runs` runs of accounts on every processor when every planner allows it
    /// (``SubscriptionPlanner/forRuns``), else in one; the same plans and diagnostics, in the
    /// same order (tests compare other numbers of runs with 1).
    func plans(_ context: BackendContext, runs: Int, diagnostics: inout DiagnosticList) -> [SubscriptionPlan] {
        var planners = planners(context, diagnostics: &diagnostics)
        let accounts = context.configuration.accounts
        let forRuns = planners.compactMap(\.forRuns)
        guard runs > 1, accounts.count > 1, forRuns.count == planners.count else {
            return Self.plans(of: accounts[...], planners: &planners, diagnostics: &diagnostics)
        }
        var found = Processors.inRuns(count: accounts.count, runs: min(runs, accounts.count)) { range in
            var copies: [any SubscriptionPlanner] = forRuns
            var found = DiagnosticList()
            let plans = Self.plans(of: accounts[range], planners: &copies, diagnostics: &found)
            return (plans: plans, diagnostics: found)
        }
        var plans: [SubscriptionPlan] = []
        plans.reserveCapacity(found.reduce(0) { $0 + $1.plans.count })
        for index in found.indices {
            plans += found[index].plans
            // Let go run by run: the runs and the whole list are not all held at once.
            found[index].plans = []
            diagnostics.append(contentsOf: found[index].diagnostics.all)
        }
        return plans
    }

    /// The subscriptions of the enabled accounts of `accounts`, in order, from every planner.
    private static func plans(of accounts: ArraySlice<Account>, planners: inout [any SubscriptionPlanner],
                              diagnostics: inout DiagnosticList) -> [SubscriptionPlan] {
        var plans: [SubscriptionPlan] = []
        plans.reserveCapacity(accounts.count)
        for account in accounts where account.isEnabled {
            for index in planners.indices {
                plans += planners[index].plans(for: account, diagnostics: &diagnostics)
            }
        }
        return plans
    }

    /// What asks receivers about accepted subscriptions, one per service that confirms later.
    public func pollers(_ context: BackendContext) -> [any ConfirmationPoller] {
        all.flatMap { $0.pollers(context) }
    }

    /// Gives every backend what the state kept for its subscriptions, once, before anything is sent.
    public func restore(_ records: [SubscriptionRecord]) {
        let kept = records.compactMap(KeptData.init)
        guard !kept.isEmpty else { return }
        for backend in all { backend.restore(kept) }
    }

    /// The tables of their own that backends add to `status`, from the delivered subscriptions.
    public func statusTables(_ records: [SubscriptionRecord]) -> [StatusTable] {
        let kept = records.filter { $0.state == .delivered }.compactMap(KeptData.init)
        guard !kept.isEmpty else { return [] }
        return all.compactMap { $0.statusTable(kept) }
    }

    /// The cleanup kept in state for `key`, ready to send; nil when no backend can read it.
    public func cleanupRequest(_ key: SubscriptionKey, stored: String) -> SubscriptionRequest? {
        for backend in all {
            if let request = backend.cleanupRequest(account: key.account, service: key.service, stored: stored) {
                return request
            }
        }
        return nil
    }

    /// Sends a batch of requests of one backend; one outcome per request, in order.
    public func send(_ requests: [SubscriptionRequest], transport: any HTTPTransport, defaultTimeout: Duration) async -> [Outcome] {
        guard let family = requests.first?.family else { return [] }
        guard let backend = backend(type: family) else {
            return requests.map { _ in .rejected("this version of pushreporter cannot send to a \(family) service") }
        }
        let outcomes = await backend.send(requests, transport: transport, defaultTimeout: defaultTimeout)
        guard outcomes.count == requests.count else {
            return requests.map { _ in .retry(.init(status: nil, reason: "the \(family) backend answered \(outcomes.count) outcomes for \(requests.count) requests")) }
        }
        return outcomes
    }
}

extension KeptData {
    /// What `record` keeps for its backend; nil when it keeps nothing.
    init?(_ record: SubscriptionRecord) {
        guard let data = record.backendData else { return nil }
        self.init(account: record.key.account, service: record.key.service, data: data)
    }
}
