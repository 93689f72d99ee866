import PushCommandKit
import ArgumentParser
import PushAgent
import PushBackend
import PushConfig
import PushState
import PushTemplates

/// `pushreporter status`: what the state directory says about every account.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show every account's last outcome, attempts, next attempt and last success.",
        discussion: """
            Reads the state directory, also while the agent runs. --format prometheus writes the text \
            exposition format, for node_exporter's textfile collector. A state directory without state \
            yet prints no accounts (exit 0); one that does not exist or cannot be read exits 1.
            """
    )

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case text, json, prometheus
    }

    @Option(help: ArgumentHelp("The agent's state directory, or a postgres:// database several agents share (default: agent.state or agent.stateDirectory of --config, else $STATE_DIRECTORY, else /var/lib/pushreporter).",
                               valueName: "dir"))
    var stateDir: String?

    @Option(name: .customLong("config"),
            help: ArgumentHelp("A configuration file or directory whose agent.stateDirectory says where the state is (repeatable).",
                               valueName: "path"))
    var configPaths: [String] = []

    @Option(name: .customLong("service"), help: ArgumentHelp("Only this service (repeatable): acrobits, or a name under services:.",
                                                             valueName: "name"))
    var services: [String] = []

    @Option(help: "Output format: text, json or prometheus.")
    var format: Format = .text

    func run() throws {
        let environment = LoaderEnvironment.current().variables
        var settings = AgentSettings()
        var configured: [String] = []
        if !configPaths.isEmpty {
            // To find the state, and the services --service may name: the configuration's other
            // problems are validate's.
            var options = ConfigOptions()
            options.paths = configPaths
            let configuration = LoadedConfiguration(options: options).result.configuration
            settings = configuration.agent
            configured = Array(configuration.services.keys)
        }
        let path = stateDir ?? settings.resolvedState(environment: environment)
        var records: [SubscriptionRecord] = []
        var holders: [SubscriptionKey: String]?
        do {
            let stored = try StoredState.read(path, password: settings.statePassword, holders: true)
            (records, holders) = (stored.records, stored.holders)
        } catch let error as StateError where error.isMissing {
            printError("status: \(error.description)")
        } catch {
            printError("status: \(error)")
            throw Exit.failure
        }
        // A name that neither the state nor the configuration knows is most likely misspelt: an
        // empty table would read as an empty system.
        let known = Set(CommandEnvironment.backends.accountServiceNames + configured + records.map(\.key.service))
        for name in services where !known.contains(name) {
            let nearest = NameSuggester.nearest(to: name, among: known).map { "; did you mean '\($0.displayEscaped)'?" } ?? ""
            // Only a configuration knows every service: without one, a service may be there with
            // nothing reported yet.
            if !configPaths.isEmpty && !nearest.isEmpty {
                printError("status: no service '\(name.displayEscaped)' in the state or the configuration\(nearest)")
                throw ExitCode(64)
            }
            printError("status: the state has no subscription of a service '\(name.displayEscaped)'\(nearest)")
        }
        // With --service, the agents line counts what is shown, too.
        let shown = { (key: SubscriptionKey) in services.isEmpty || services.contains(key.service) }
        let report = StatusReport(records: records.filter { shown($0.key) }, backends: CommandEnvironment.backends,
                                  holders: holders?.filter { shown($0.key) })
        switch format {
        case .text: print(report.text)
        case .json: print(report.json)
        case .prometheus: print(report.prometheus, terminator: "")
        }
    }
}
