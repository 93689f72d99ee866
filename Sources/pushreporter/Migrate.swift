import PushCommandKit
import ArgumentParser
import PushAgent
import PushConfig
import PushState

/// `pushreporter migrate`: create or bring the state's schema up to this version, alone.
struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create or migrate the state database's schema, and say which version it is at.",
        discussion: """
            Agents migrate their state themselves when they start (several at once do it once); this does it \
            alone, for an operator who prefers to do it before upgrading the agents. The state is --state-dir \
            (a directory or a postgres:// URI), else agent.state, else agent.stateDirectory of the configuration.
            """
    )

    @OptionGroup var config: ConfigOptions

    @Option(help: ArgumentHelp("The state: a directory, or a postgres:// URI (default: from the configuration).", valueName: "state"))
    var stateDir: String?

    @Option(help: SummaryFormat.help)
    var format: SummaryFormat = .text

    func run() throws {
        let loaded = LoadedConfiguration(options: config)
        let settings = loaded.result.configuration.agent
        let state = stateDir ?? settings.resolvedState(environment: loaded.environment.variables)
        do {
            if AgentRuntime.isDatabase(state) {
                let database = try PostgresStateStore(uri: state, password: settings.statePassword)
                say(kind: "database", location: database.location, schema: try database.storedSchemaVersion())
            } else {
                let directory = try StateDirectory(path: state)
                let store = try SQLiteStateStore(directory: directory)
                say(kind: "directory", location: state, schema: Int(try store.schemaVersion()))
            }
        } catch let error as StateError {
            printError("migrate: \(error.description)")
            throw Exit.failure
        } catch {
            printError("migrate: \(error)")
            throw Exit.failure
        }
    }

    /// Says where the state is and at which schema version.
    private func say(kind: String, location: String, schema: Int) {
        switch format {
        case .text:
            print("The state \(kind) \(location) is at schema \(schema).")
        case .json:
            print(JSONText.object([("state", JSONText.string(kind == "database" ? "postgresql" : "directory")),
                                   ("location", JSONText.string(location)), ("schemaVersion", "\(schema)")]))
        }
    }
}
