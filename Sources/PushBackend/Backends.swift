import Logging
import PushConfig
import PushScheduler
import PushSystem
import PushTemplates
import Synchronization

/// The registry of the backends a build has (SPEC §9), and what the agent and the commands do
/// with all of them at once: check, plan, preview, send, read back a stored cleanup, poll, run
/// their services. A backend plugs in by being in the list the application makes (its one
/// list: `Backends.standard`, in PushRegistry); nothing else names it.
public struct Backends: Sendable {
    public let all: [any Backend]

    public init(_ all: [any Backend]) {
        self.all = all
    }

    /// What the state keeps of `delivery`, delivered as `fingerprint`, for `plan` to name what
    /// changed; nil when its backend cannot name its parts.
    public func deliveredSignature(of delivery: SubscriptionRequest, fingerprint: String) -> String? {
        backend(type: delivery.family)?.deliveredParts(of: delivery)?.signature(fingerprint: fingerprint)
    }

    /// The names of the parts of `delivery` that differ from what the state kept of the delivery
    /// of `deliveredFingerprint`; nil when they cannot be told.
    public func changes(of delivery: SubscriptionRequest, stored: String, deliveredFingerprint: String) -> [String]? {
        guard let parts = backend(type: delivery.family)?.deliveredParts(of: delivery) else { return nil }
        return DeliveredParts.changes(stored: stored, deliveredFingerprint: deliveredFingerprint, now: parts)
    }

    /// The backend of `type:`, if this build has it.
    public func backend(type: String) -> (any Backend)? {
        all.first { $0.type == type }
    }

    /// Checks every service and subscription, as `validate` does (see ``Backend/check(_:skipping:diagnostics:)``).
    public func check(_ context: BackendContext, skipping passedEarly: [Bool]? = nil, diagnostics: inout DiagnosticList) {
        for backend in all { backend.check(context, skipping: passedEarly, diagnostics: &diagnostics) }
    }

    /// An error at the `type:` of each service no backend of this build takes, with the nearest:
    /// part of loading a configuration with these backends (the loader itself knows none).
    public func checkTypes(_ configuration: Configuration, diagnostics: inout DiagnosticList) {
        let types = all.map(\.type)
        for service in configuration.services.values.sorted(by: { $0.name < $1.name }) where !types.contains(service.type) {
            var message = "unknown service type '\(service.type.displayEscaped)'"
            if let nearest = NameSuggester.nearest(to: service.type, among: types) { message += "; did you mean '\(nearest)'?" }
            diagnostics.error(message, file: service.file, at: service.typePosition ?? service.position)
        }
    }

    /// A planner of each backend that has something to plan, for rendering one account at a
    /// time: a backend with no service of its type in the configuration has none
    /// (``Backend/plansWithoutServices``), and is not asked about each account.
    public func planners(_ context: BackendContext, diagnostics: inout DiagnosticList) -> [any SubscriptionPlanner] {
        planning(context).map { $0.planner(context, diagnostics: &diagnostics) }
    }

    /// The backends that have something to plan in `context` (see ``planners(_:diagnostics:)``).
    private func planning(_ context: BackendContext) -> [any Backend] {
        let types = Set(context.configuration.services.values.map(\.type))
        return all.filter { $0.plansWithoutServices || types.contains($0.type) }
    }

    /// The subscriptions of every enabled account, rendered as sent; those that cannot be
    /// rendered add diagnostics and are left out.
    public func plans(_ context: BackendContext, diagnostics: inout DiagnosticList) -> [SubscriptionPlan] {
        plans(context, runs: Processors.runs(accounts: context.configuration.accounts.count), diagnostics: &diagnostics)
    }

    /// `plans` in `runs` runs of accounts on every processor when every planner allows it
    /// (``SubscriptionPlanner/forRuns``), else in one; the same plans and diagnostics, in the
    /// same order (tests compare other numbers of runs with 1).
    package func plans(_ context: BackendContext, runs: Int, diagnostics: inout DiagnosticList) -> [SubscriptionPlan] {
        var planners = planners(context, diagnostics: &diagnostics)
        let accounts = context.configuration.accounts
        return plans(count: accounts.count, runs: runs, planners: &planners, account: { accounts[$0] }, noting: { _ in false },
                     diagnostics: &diagnostics).plans
    }

    /// ``plans(_:diagnostics:)``, letting each account go once it is planned: `context` is left
    /// without its accounts (``Configuration/takeAccounts()``), and they are freed as planning
    /// goes if nothing else holds them (drop the load's copy first). Unless a planner reads every
    /// account when it is made (``Backend/plannerReadsEveryAccount``, FCM's device groups): the
    /// accounts are then kept, and planned as they are. The ids of the enabled accounts that have
    /// no plan at all and that `note` picks are kept too (`noted`), looked at before they go.
    ///
    /// With every account kept, the plans came on top of them: the peak of `run --once` 100,000.
    public func plans(lettingGoOf context: inout BackendContext, noting note: @Sendable (Account) -> Bool,
                      diagnostics: inout DiagnosticList) -> (plans: [SubscriptionPlan], noted: [String]) {
        plans(lettingGoOf: &context, runs: Processors.runs(accounts: context.configuration.accounts.count), noting: note,
              diagnostics: &diagnostics)
    }

    /// ``plans(lettingGoOf:noting:diagnostics:)`` in `runs` runs when every planner allows it.
    package func plans(lettingGoOf context: inout BackendContext, runs: Int, noting note: @Sendable (Account) -> Bool,
               diagnostics: inout DiagnosticList) -> (plans: [SubscriptionPlan], noted: [String]) {
        // Decided from the backends, before any planner is made: making one is not always
        // without effect (FCM's tells the backend which members each group should have).
        guard !planning(context).contains(where: \.plannerReadsEveryAccount) else {
            var planners = planners(context, diagnostics: &diagnostics)
            let accounts = context.configuration.accounts
            return plans(count: accounts.count, runs: runs, planners: &planners, account: { accounts[$0] }, noting: note,
                         diagnostics: &diagnostics)
        }
        var accounts = context.configuration.takeAccounts()
        var planners = planners(context, diagnostics: &diagnostics)
        return accounts.withUnsafeMutableBufferPointer { buffer in
            let taker = AccountTaker(buffer)
            return plans(count: taker.count, runs: runs, planners: &planners, account: { taker.take($0) }, noting: note,
                         freeingAccounts: true, diagnostics: &diagnostics)
        }
    }

    /// The plans of the `count` accounts that `account` gives by index (each asked for once), in
    /// `runs` runs when every planner allows it, with the ids of those `note` picks.
    /// `freeingAccounts`: the accounts are let go as they are planned, and the pages they leave
    /// free go back to the system as planning goes.
    private func plans(count: Int, runs: Int, planners: inout [any SubscriptionPlanner], account: @Sendable (Int) -> Account,
                       noting note: @Sendable (Account) -> Bool, freeingAccounts: Bool = false,
                       diagnostics: inout DiagnosticList) -> (plans: [SubscriptionPlan], noted: [String]) {
        let forRuns = planners.compactMap(\.forRuns)
        guard runs > 1, count > 1, forRuns.count == planners.count else {
            var noted: [String] = []
            let plans = Self.plans(of: 0..<count, account: account, planners: &planners, noting: note, noted: &noted, diagnostics: &diagnostics)
            return (plans, noted)
        }
        // Each run joins the list as soon as the runs before it have, and is let go then: its
        // room goes back to its thread's heap for a later run. Joined only at the end, every
        // run was still held while the whole list was filled (17 MB more at 100,000 accounts,
        // at the end of planning).
        let runs = min(runs, count)
        // The accounts were made by the loading threads, in heaps the planning threads mostly do
        // not allocate from: what they free stays resident unless given back. A quarter of the
        // runs at a time (malloc_trim, about 2 ms): run --once 100k peaked 3-6 MB lower at the end
        // of planning (ru_maxrss, three turns).
        let merged = Mutex(MergedRuns(givingBackEvery: freeingAccounts ? max(1, runs / 4) : nil))
        merged.withLock { $0.plans.reserveCapacity(count) }
        _ = Processors.inRuns(count: count, runs: runs) { range in
            var copies: [any SubscriptionPlanner] = forRuns
            var found = DiagnosticList()
            var noted: [String] = []
            let plans = Self.plans(of: range, account: account, planners: &copies, noting: note, noted: &noted, diagnostics: &found)
            merged.withLock { $0.add(MergedRuns.Run(range: range, plans: plans, diagnostics: found, noted: noted)) }
        }
        return merged.withLock { merged in
            diagnostics.append(contentsOf: merged.diagnostics.all)
            defer { merged = MergedRuns(givingBackEvery: nil) }
            return (merged.plans, merged.noted)
        }
    }

    /// The runs of ``plans(count:runs:planners:account:noting:freeingAccounts:diagnostics:)`` joined in order,
    /// each as soon as every run before it is in.
    private struct MergedRuns {
        struct Run {
            var range: Range<Int>
            var plans: [SubscriptionPlan]
            var diagnostics: DiagnosticList
            var noted: [String]
        }

        var plans: [SubscriptionPlan] = []
        var diagnostics = DiagnosticList()
        var noted: [String] = []
        /// Where the next run to join starts.
        private var next = 0
        /// Runs done before one that comes before them, by where they start.
        private var waiting: [Int: Run] = [:]
        /// After how many joined runs the free pages go back to the system (nil: never).
        let givingBackEvery: Int?
        private var joined = 0

        init(givingBackEvery: Int?) {
            self.givingBackEvery = givingBackEvery
        }

        mutating func add(_ run: Run) {
            waiting[run.range.lowerBound] = run
            while let run = waiting.removeValue(forKey: next) {
                plans += run.plans
                diagnostics.append(contentsOf: run.diagnostics.all)
                noted += run.noted
                next = run.range.upperBound
                joined += 1
                if let every = givingBackEvery, joined % every == 0 { Allocator.returnFreePages() }
            }
        }
    }

    /// The subscriptions of the enabled accounts of `indices`, in order, from every planner.
    private static func plans(of indices: Range<Int>, account: (Int) -> Account, planners: inout [any SubscriptionPlanner],
                              noting note: (Account) -> Bool, noted: inout [String], diagnostics: inout DiagnosticList) -> [SubscriptionPlan] {
        var plans: [SubscriptionPlan] = []
        plans.reserveCapacity(indices.count)
        for index in indices {
            let account = account(index)
            guard account.isEnabled else { continue }
            let before = plans.count
            for planner in planners.indices {
                plans += planners[planner].plans(for: account, diagnostics: &diagnostics)
            }
            if plans.count == before && note(account) { noted.append(account.id) }
        }
        return plans
    }

    /// What asks receivers about accepted subscriptions, one per service that confirms later.
    public func pollers(_ context: BackendContext) -> [any ConfirmationPoller] {
        all.flatMap { $0.pollers(context) }
    }

    /// Gives every backend what the state kept for its subscriptions, once, before anything is sent.
    public func restore(_ kept: [KeptData]) {
        guard !kept.isEmpty else { return }
        for backend in all { backend.restore(kept) }
    }

    /// The tables of their own that backends add to `status`, from what the state keeps for the
    /// delivered subscriptions.
    public func statusTables(_ kept: [KeptData]) -> [StatusTable] {
        guard !kept.isEmpty else { return [] }
        return all.compactMap { $0.statusTable(kept) }
    }

    /// The types of `services:` entries these backends take.
    public var types: [String] { all.map(\.type) }

    /// The backends whose subscriptions accounts have without a `services:` entry (the Acrobits
    /// web services of the account itself): their types are also service names (`--service`).
    public var accountServiceNames: [String] { all.filter(\.plansWithoutServices).map(\.type) }

    /// The account keys every backend acts on (``Backend/accountKeys``).
    public var accountKeys: [String] { all.flatMap(\.accountKeys) }

    /// `environment` with the account keys of these backends, for loading a configuration.
    public func loaderEnvironment(_ environment: LoaderEnvironment) -> LoaderEnvironment {
        var environment = environment
        environment.backendAccountKeys = accountKeys
        return environment
    }

    /// Tells every backend of the configuration loaded for the agent (``Backend/configure(_:)``).
    public func configure(_ context: BackendContext) {
        for backend in all { backend.configure(context) }
    }

    /// What checks each account as it loads, for `validate`: the backends' early checks, all of
    /// which an account must pass (``Backend/earlyChecker(hostname:)``); nil when none has one.
    public func earlyChecker(hostname: String) -> (@Sendable (Configuration) -> any EarlyAccountChecker)? {
        let makers = all.compactMap { $0.earlyChecker(hostname: hostname) }
        guard makers.count > 1 else { return makers.first }
        return { configuration in AllEarlyCheckers(checkers: makers.map { $0(configuration) }) }
    }

    /// Whether any backend runs services of its own with these settings (``Backend/hasServices(_:)``).
    public func hasServices(_ settings: AgentSettings) -> Bool {
        all.contains { $0.hasServices(settings) }
    }

    /// Every backend's own long-running services.
    public func services(_ context: BackendServiceContext) throws(BackendServiceFailure) -> [any BackendService] {
        var services: [any BackendService] = []
        for backend in all { services += try backend.services(context) }
        return services
    }

    /// The cleanup kept in state for the subscription (`account`, `service`), ready to send; nil
    /// when no backend can read it.
    public func cleanupRequest(account: String, service: String, stored: String) -> SubscriptionRequest? {
        for backend in all {
            if let request = backend.cleanupRequest(account: account, service: service, stored: stored) {
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

/// Several backends' early checks as one: an account passes when it passes all of them.
private struct AllEarlyCheckers: EarlyAccountChecker {
    var checkers: [any EarlyAccountChecker]

    mutating func passesWithoutRendering(_ account: Account) -> Bool {
        for index in checkers.indices where !checkers[index].passesWithoutRendering(account) { return false }
        return true
    }
}
