import ArgumentParser
import Logging
import PushAdobe
import PushAgent
import PushBackend
import PushConfig
import PushState
import PushSystem

/// Loading shared by `run` and `remove`: the configuration, then the agent's runtime (state
/// directory, installation id, store), then the subscriptions rendered with that id.
struct AgentSetup {
    /// Why the command cannot go on, and the exit code to end with.
    struct Failure: Error {
        /// Configuration errors (exit 78), as the diagnostics they are.
        var diagnostics: [Diagnostic] = []
        /// Any other reason, as sentences.
        var lines: [String] = []
        var code: ExitCode
    }

    var loaded: LoadedConfiguration
    var runtime: AgentRuntime
    var plans: [SubscriptionPlan] = []
    var pollers: [any ConfirmationPoller] = []
    /// The enabled accounts with nothing to report on start (no pushTokenReporterUrl, no
    /// service that registers devices), in file order.
    var quiet: [String] = []
    /// The configuration, without its accounts once they are planned.
    var configuration: Configuration { loaded.result.configuration }

    /// Loads everything, or fails with the lines to print (configuration errors only; warnings,
    /// those of rendering included, are in `loaded.diagnostics`). `remove` asks for no plans, and
    /// does not fail on configuration errors.
    init(options: ConfigOptions, stateDir: String?, logger: Logger, forRemove: Bool = false) throws(Failure) {
        loaded = LoadedConfiguration(options: options)
        // Read through `loaded`: a copy of the configuration here would keep every account to
        // the end, and planning lets them go.
        let files = loaded.result.configuration.files
        let settings = loaded.result.configuration.agent
        if loaded.diagnostics.hasErrors && !forRemove {
            loaded.checkRendering(installID: loaded.storedInstallID)
            throw Failure(diagnostics: loaded.diagnostics.errors(fileOrder: files), code: Exit.configuration)
        }
        let environment = loaded.environment
        do {
            runtime = try AgentRuntime(settings: settings,
                                       state: stateDir ?? settings.resolvedState(environment: environment.variables),
                                       logger: logger,
                                       lockAdvice: forRemove ? "remove works while the agent is stopped (systemctl stop pushreporter); "
                                           + "or delete the account from the files and reload the agent, which then sends its removal" : nil)
        } catch {
            throw Failure(lines: [error.description], code: Exit.failure)
        }
        guard !forRemove else { return }
        var problems = DiagnosticList()
        let (planned, trackingTargets) = Self.plan(&loaded, runtime: runtime, noting: Self.mayBeQuiet, diagnostics: &problems)
        (plans, pollers) = (planned.plans, planned.pollers)
        if problems.hasErrors {
            throw Failure(diagnostics: problems.errors(fileOrder: files), code: Exit.configuration)
        }
        quiet = Self.quietAccounts(planned.noted, plans: plans)
        loaded.diagnostics.append(contentsOf: problems.all)
        runtime.trackingTargets.replace(with: trackingTargets)
    }

    /// The plans of `loaded`, each account let go once it is planned (nothing needs them after:
    /// `loaded` keeps the configuration without them), and what Adobe tracking resolves
    /// payloads with, read from the accounts before they go.
    private static func plan(_ loaded: inout LoadedConfiguration, runtime: AgentRuntime, noting note: @Sendable (Account) -> Bool,
                             diagnostics: inout DiagnosticList)
        -> (planned: (plans: [SubscriptionPlan], pollers: [any ConfirmationPoller], noted: [String]), trackingTargets: TrackingTargets) {
        var context = runtime.context(loaded.result, hostname: loaded.environment.hostname)
        let trackingTargets = AdobeBackend.trackingTargets(context)
        // The context's copy only, so that they are freed as they are planned.
        loaded.result.configuration.accounts = []
        // What loading freed goes back before the plans are made on top of it.
        Allocator.returnFreePages()
        return (runtime.plan(lettingGoOf: &context, noting: note, diagnostics: &diagnostics), trackingTargets)
    }

    /// Whether an enabled account may have nothing to report on start: it has no
    /// pushTokenReporterUrl (whether a service registers it is known once it is planned).
    @Sendable private static func mayBeQuiet(_ account: Account) -> Bool {
        !account.values.contains(pushTokenReporterURL)
    }

    private static let pushTokenReporterURL = AccountValueTable.PreparedKey("pushTokenReporterUrl")

    /// Of `candidates` (enabled accounts without a pushTokenReporterUrl), those that no plan of
    /// `plans` is for. The set is only of the few plans that are not the Acrobits ones.
    static func quietAccounts(_ candidates: [String], plans: [SubscriptionPlan]) -> [String] {
        guard !candidates.isEmpty else { return [] }
        var planned = Set<String>()
        for index in plans.indices where plans[index].service != SubscriptionKey.acrobits { planned.insert(plans[index].account) }
        return candidates.filter { !planned.contains($0) }
    }

    /// Loads the configuration again for a reload: its subscriptions, or why it is invalid.
    static func reload(options: ConfigOptions, runtime: AgentRuntime) -> ConfigurationLoad {
        var loaded = LoadedConfiguration(options: options)
        var planned: (plans: [SubscriptionPlan], pollers: [any ConfirmationPoller]) = ([], [])
        var trackingTargets = TrackingTargets()
        if !loaded.diagnostics.hasErrors {
            var problems = DiagnosticList()
            let found = plan(&loaded, runtime: runtime, noting: { _ in false }, diagnostics: &problems)
            loaded.diagnostics.append(contentsOf: problems.all)
            planned = (found.planned.plans, found.planned.pollers)
            trackingTargets = found.trackingTargets
        } else {
            // So that "(and N more …)" counts what rendering finds too.
            loaded.checkRendering(installID: runtime.installID, backends: runtime.backends)
        }
        let problems = loaded.diagnostics
        let errors = problems.errors(fileOrder: loaded.result.configuration.files)
        guard let first = errors.first else {
            runtime.trackingTargets.replace(with: trackingTargets)
            return .loaded(plans: planned.plans, pollers: planned.pollers, settings: loaded.result.configuration.agent,
                           warnings: problems.sorted(fileOrder: loaded.result.configuration.files).filter { $0.severity == .warning })
        }
        let more = errors.count > 1 ? " (and \(errors.count - 1) more; \(options.validateCommand) lists them)" : ""
        return .invalid(reason: first.formatted + more)
    }
}
