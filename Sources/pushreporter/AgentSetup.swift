import ArgumentParser
import PushAcrobits
import PushAgent
import PushBackend
import PushConfig
import PushState

/// Loading shared by `run` and `remove`: the configuration, the state directory and its
/// database, and the accounts' plans rendered with the installation's id.
struct AgentSetup {
    /// Why the agent cannot start, and the exit code to end with.
    struct Failure: Error {
        var lines: [String]
        var code: ExitCode
    }

    var loaded: LoadedConfiguration
    var directory: StateDirectory
    var store: StateStore
    var installID: String
    var plans: [AccountPlan]
    var configuration: Configuration { loaded.result.configuration }

    /// Loads everything, or fails with the diagnostics to print (errors only; warnings, those of
    /// rendering the plans included, are in `loaded.diagnostics`). `remove` asks for no plans,
    /// and does not fail on configuration errors.
    init(options: ConfigOptions, stateDir: String?, forRemove: Bool = false) throws(Failure) {
        loaded = LoadedConfiguration(options: options)
        let configuration = loaded.result.configuration
        if loaded.diagnostics.hasErrors && !forRemove {
            throw Failure(lines: loaded.diagnostics.errors(fileOrder: configuration.files).map(\.formatted), code: Exit.configuration)
        }
        let environment = loaded.environment
        // Two blocks: the directory and the store throw different error types.
        do {
            directory = try StateDirectory(path: stateDir ?? configuration.agent.resolvedStateDirectory(environment: environment.variables))
            installID = try directory.installID()
        } catch {
            throw Failure(lines: [error.description], code: Exit.failure)
        }
        do {
            store = try StateStore(directory: directory)
        } catch {
            throw Failure(lines: [error.description], code: Exit.failure)
        }
        guard !forRemove else {
            plans = []
            return
        }
        var problems = DiagnosticList()
        plans = Self.plans(loaded: loaded, installID: installID, diagnostics: &problems)
        if problems.hasErrors {
            throw Failure(lines: problems.errors(fileOrder: configuration.files).map(\.formatted), code: Exit.configuration)
        }
        loaded.diagnostics.append(contentsOf: problems.all)
    }

    /// Renders the plans of a loaded configuration.
    static func plans(loaded: LoadedConfiguration, installID: String, diagnostics: inout DiagnosticList) -> [AccountPlan] {
        var builder = loaded.builder(installID: installID)
        return AccountPlan.plans(builder: &builder, defaultTimeout: loaded.result.configuration.agent.timeout,
                                 diagnostics: &diagnostics)
    }

    /// Loads the configuration again for a reload: its plans, or why it is invalid.
    static func reload(options: ConfigOptions, installID: String) -> ConfigurationLoad {
        let loaded = LoadedConfiguration(options: options)
        var problems = loaded.diagnostics
        var plans: [AccountPlan] = []
        if !problems.hasErrors {
            plans = Self.plans(loaded: loaded, installID: installID, diagnostics: &problems)
        }
        let errors = problems.errors(fileOrder: loaded.result.configuration.files)
        guard let first = errors.first else { return .loaded(plans: plans, settings: loaded.result.configuration.agent) }
        let more = errors.count > 1 ? " (and \(errors.count - 1) more; 'pushreporter validate' lists them)" : ""
        return .invalid(reason: first.formatted + more)
    }
}
