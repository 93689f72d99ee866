import ArgumentParser
import Logging
import PushAgent
import PushBackend
import PushConfig
import PushState
import PushSystem

/// Loading shared by `run` and `remove`: the configuration, then the agent's runtime (state
/// directory, installation id, store), then the subscriptions rendered with that id.
public struct AgentSetup {
    /// Why the command cannot go on, and the exit code to end with.
    public struct Failure: Error {
        /// Configuration errors (exit 78), as the diagnostics they are.
        public var diagnostics: [Diagnostic] = []
        /// Any other reason, as sentences.
        public var lines: [String] = []
        public var code: ExitCode
    }

    public var loaded: LoadedConfiguration
    public var runtime: AgentRuntime
    public var plans: [SubscriptionPlan] = []
    public var pollers: [any ConfirmationPoller] = []
    /// The enabled accounts with nothing to report on start (no subscription of any backend),
    /// in file order.
    public var quiet: [String] = []
    /// The configuration, without its accounts once they are planned.
    public var configuration: Configuration { loaded.result.configuration }

    /// Loads everything, or fails with the lines to print (configuration errors only; warnings,
    /// those of rendering included, are in `loaded.diagnostics`). `remove` asks for no plans, and
    /// does not fail on configuration errors.
    public init(options: ConfigOptions, stateDir: String?, logger: Logger, forRemove: Bool = false,
                backends: Backends = CommandEnvironment.backends) throws(Failure) {
        loaded = LoadedConfiguration(options: options, backends: backends)
        // Read through `loaded`: a copy of the configuration here would keep every account to
        // the end, and planning lets them go.
        let files = loaded.result.configuration.files
        let settings = loaded.result.configuration.agent
        if loaded.diagnostics.hasErrors && !forRemove {
            loaded.checkRendering(installID: loaded.storedInstallID, backends: backends)
            throw Failure(diagnostics: loaded.diagnostics.errors(fileOrder: files), code: Exit.configuration)
        }
        let environment = loaded.environment
        do {
            runtime = try AgentRuntime(settings: settings,
                                       state: stateDir ?? settings.resolvedState(environment: environment.variables),
                                       backends: backends, logger: logger,
                                       lockAdvice: forRemove ? "remove works while the agent is stopped (systemctl stop pushreporter); "
                                           + "or delete the account from the files and reload the agent, which then sends its removal" : nil)
        } catch {
            throw Failure(lines: [error.description], code: Exit.failure)
        }
        guard !forRemove else { return }
        var problems = DiagnosticList()
        let planned = Self.plan(&loaded, runtime: runtime, notingQuiet: true, diagnostics: &problems)
        (plans, pollers, quiet) = (planned.plans, planned.pollers, planned.noted)
        if problems.hasErrors {
            throw Failure(diagnostics: problems.errors(fileOrder: files), code: Exit.configuration)
        }
        loaded.diagnostics.append(contentsOf: problems.all)
    }

    /// The plans of `loaded`, each account let go once it is planned (nothing needs them after:
    /// `loaded` keeps the configuration without them); the backends are told of the
    /// configuration first (``Backends/configure(_:)``: what their services read of it).
    /// With `notingQuiet`, the enabled accounts no backend plans anything for.
    private static func plan(_ loaded: inout LoadedConfiguration, runtime: AgentRuntime, notingQuiet: Bool,
                             diagnostics: inout DiagnosticList)
        -> (plans: [SubscriptionPlan], pollers: [any ConfirmationPoller], noted: [String]) {
        var context = runtime.context(loaded.result, hostname: loaded.environment.hostname)
        runtime.backends.configure(context)
        // The context's copy only, so that they are freed as they are planned.
        loaded.result.configuration.accounts = []
        // What loading freed goes back before the plans are made on top of it.
        Allocator.returnFreePages()
        return runtime.plan(lettingGoOf: &context, noting: { _ in notingQuiet }, diagnostics: &diagnostics)
    }

    /// Loads the configuration again for a reload: its subscriptions, or why it is invalid.
    public static func reload(options: ConfigOptions, runtime: AgentRuntime) -> ConfigurationLoad {
        var loaded = LoadedConfiguration(options: options, backends: runtime.backends)
        var planned: (plans: [SubscriptionPlan], pollers: [any ConfirmationPoller]) = ([], [])
        if !loaded.diagnostics.hasErrors {
            var problems = DiagnosticList()
            let found = plan(&loaded, runtime: runtime, notingQuiet: false, diagnostics: &problems)
            loaded.diagnostics.append(contentsOf: problems.all)
            planned = (found.plans, found.pollers)
        } else {
            // So that "(and N more …)" counts what rendering finds too.
            loaded.checkRendering(installID: runtime.installID, backends: runtime.backends)
        }
        let problems = loaded.diagnostics
        let errors = problems.errors(fileOrder: loaded.result.configuration.files)
        guard let first = errors.first else {
            return .loaded(plans: planned.plans, pollers: planned.pollers, settings: loaded.result.configuration.agent,
                           warnings: problems.sorted(fileOrder: loaded.result.configuration.files).filter { $0.severity == .warning })
        }
        let more = errors.count > 1 ? " (and \(errors.count - 1) more; \(options.validateCommand) lists them)" : ""
        return .invalid(reason: first.formatted + more)
    }
}
