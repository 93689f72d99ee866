import PushCommandKit
import ArgumentParser
import PushAgent
import PushBackend
import PushConfig
import PushState
import PushTemplates
#if canImport(Glibc)
import Glibc
#endif

/// `pushreporter plan`: what a start or a reload would send now, without sending anything or
/// writing the state (SPEC §14).
struct Plan: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what a start or a reload would send now, per service, without sending anything.",
        discussion: """
            Loads the configuration and reads the state (a directory or a postgres:// database, also while \
            the agent runs) and says, per service, which subscriptions are new (never delivered), changed (what \
            would be sent differs from what was delivered; the parts of the request that differ are named, never \
            their values), unchanged, removed (in the state, no longer configured: their removal report is sent), \
            and held (removals agent.removalGuard would hold). It compares as a reload does; a start also re-reports \
            the unchanged ones. Nothing is sent and nothing is written. Exit 0 when nothing new, changed or \
            removed would be sent, 2 when something would, 78 for an invalid configuration, 1 when the state \
            cannot be read.
            """
    )

    @OptionGroup var config: ConfigOptions

    @Option(help: ArgumentHelp("The state: a directory, or a postgres:// URI (default: agent.state or agent.stateDirectory of the configuration).",
                               valueName: "state"))
    var stateDir: String?

    @Option(name: .customLong("service"), help: ArgumentHelp("Only this service (repeatable): acrobits, or a name under services:.",
                                                             valueName: "name"))
    var services: [String] = []

    @Option(help: SummaryFormat.help)
    var format: SummaryFormat = .text

    func run() throws {
        let backends = CommandEnvironment.backends
        var loaded = LoadedConfiguration(options: config, backends: backends)
        let files = loaded.result.configuration.files
        if loaded.diagnostics.hasErrors {
            loaded.checkRendering(installID: loaded.storedInstallID, backends: backends)
            for diagnostic in loaded.diagnostics.errors(fileOrder: files) { printError(diagnostic.formatted) }
            printError("plan: the configuration has errors, so there is no plan; for every problem, run: \(config.validateCommand)")
            throw Exit.configuration
        }
        let settings = loaded.result.configuration.agent
        let known = Set(backends.accountServiceNames + loaded.result.configuration.services.keys)
        for name in services where !known.contains(name) {
            let nearest = NameSuggester.nearest(to: name, among: known).map { "; did you mean '\($0.displayEscaped)'?" } ?? ""
            printError("plan: the configuration has no service '\(name.displayEscaped)'\(nearest)")
            throw ExitCode(64)
        }
        let state = stateDir ?? settings.resolvedState(environment: loaded.environment.variables)
        let (records, deliveredParts, installID) = try Self.read(state, settings: settings, fallbackInstallID: loaded.storedInstallID)

        var context = BackendContext(configuration: loaded.result.configuration, sources: loaded.result.sources,
                                     installID: installID, hostname: loaded.environment.hostname)
        backends.configure(context)
        var problems = DiagnosticList()
        let planned = backends.plans(lettingGoOf: &context, noting: { _ in false }, diagnostics: &problems)
        if problems.hasErrors {
            for diagnostic in problems.errors(fileOrder: files) { printError(diagnostic.formatted) }
            throw Exit.configuration
        }
        // As a reload decides: over the state directory's accounts, or the group's (PostgreSQL).
        let plan = ChangePlan(plans: planned.plans, records: records, services: Set(services),
                              removalGuard: settings.removalGuard, deliveredParts: deliveredParts,
                              changes: { delivery, stored, fingerprint in
                                  backends.changes(of: delivery, stored: stored, deliveredFingerprint: fingerprint)
                              })
        switch format {
        case .text: print(plan.text())
        case .json: print(plan.json)
        }
        throw plan.sendsSomething ? ExitCode(2) : ExitCode.success
    }

    /// The state's records and installation id, read only. A state directory that does not exist
    /// yet is an empty state (everything is new); one that cannot be read exits 1.
    static func read(_ state: String, settings: AgentSettings, fallbackInstallID: String?) throws
        -> ([SubscriptionRecord], [SubscriptionKey: String], String?) {
        if !AgentRuntime.isDatabase(state) && access(state, F_OK) != 0 {
            printError("plan: there is no state directory \(state) (no agent has run with it yet); comparing with an empty state")
            return ([], [:], fallbackInstallID)
        }
        do {
            let stored = try StoredState.read(state, password: settings.statePassword, deliveredParts: true)
            return (stored.records, stored.deliveredParts, stored.installID)
        } catch let error as StateError where error.isMissing {
            printError("plan: \(error.description); comparing with an empty state")
            return ([], [:], fallbackInstallID)
        } catch {
            printError("plan: \(error)")
            throw Exit.failure
        }
    }
}
