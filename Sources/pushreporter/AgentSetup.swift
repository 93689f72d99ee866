import ArgumentParser
import Logging
import PushAdobe
import PushAgent
import PushBackend
import PushConfig
import PushState

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
    var configuration: Configuration { loaded.result.configuration }

    /// Loads everything, or fails with the lines to print (configuration errors only; warnings,
    /// those of rendering included, are in `loaded.diagnostics`). `remove` asks for no plans, and
    /// does not fail on configuration errors.
    init(options: ConfigOptions, stateDir: String?, logger: Logger, forRemove: Bool = false) throws(Failure) {
        loaded = LoadedConfiguration(options: options)
        let configuration = loaded.result.configuration
        if loaded.diagnostics.hasErrors && !forRemove {
            loaded.checkRendering(installID: loaded.storedInstallID)
            throw Failure(diagnostics: loaded.diagnostics.errors(fileOrder: configuration.files), code: Exit.configuration)
        }
        let environment = loaded.environment
        do {
            runtime = try AgentRuntime(settings: configuration.agent,
                                       state: stateDir ?? configuration.agent.resolvedState(environment: environment.variables),
                                       logger: logger,
                                       lockAdvice: forRemove ? "remove works while the agent is stopped (systemctl stop pushreporter); "
                                           + "or delete the account from the files and reload the agent, which then sends its removal" : nil)
        } catch {
            throw Failure(lines: [error.description], code: Exit.failure)
        }
        guard !forRemove else { return }
        var problems = DiagnosticList()
        let context = runtime.context(loaded.result, hostname: environment.hostname)
        (plans, pollers) = runtime.plan(context, diagnostics: &problems)
        if problems.hasErrors {
            throw Failure(diagnostics: problems.errors(fileOrder: configuration.files), code: Exit.configuration)
        }
        loaded.diagnostics.append(contentsOf: problems.all)
        runtime.trackingTargets.replace(with: AdobeBackend.trackingTargets(context))
    }

    /// Loads the configuration again for a reload: its subscriptions, or why it is invalid.
    static func reload(options: ConfigOptions, runtime: AgentRuntime) -> ConfigurationLoad {
        var loaded = LoadedConfiguration(options: options)
        var planned: (plans: [SubscriptionPlan], pollers: [any ConfirmationPoller]) = ([], [])
        let context = runtime.context(loaded.result, hostname: loaded.environment.hostname)
        if !loaded.diagnostics.hasErrors {
            planned = runtime.plan(context, diagnostics: &loaded.diagnostics)
        } else {
            // So that "(and N more …)" counts what rendering finds too.
            loaded.checkRendering(installID: runtime.installID, backends: runtime.backends)
        }
        let problems = loaded.diagnostics
        let errors = problems.errors(fileOrder: loaded.result.configuration.files)
        guard let first = errors.first else {
            runtime.trackingTargets.replace(with: AdobeBackend.trackingTargets(context))
            return .loaded(plans: planned.plans, pollers: planned.pollers, settings: loaded.result.configuration.agent,
                           warnings: problems.sorted(fileOrder: loaded.result.configuration.files).filter { $0.severity == .warning })
        }
        let more = errors.count > 1 ? " (and \(errors.count - 1) more; \(options.validateCommand) lists them)" : ""
        return .invalid(reason: first.formatted + more)
    }
}
