import PushCommandKit
import ArgumentParser
import Dispatch
import PushBackend
import PushConfig
import PushRegistry
import PushSystem
import PushTemplates

/// `pushreporter`: reports mobile push tokens from YAML account configurations.
@main
struct PushReporter: AsyncParsableCommand {
    static var configuration: CommandConfiguration { CommandConfiguration(
        commandName: "pushreporter",
        abstract: "Report mobile push tokens to web services from YAML account configurations.",
        discussion: """
            Exit codes: 0 success; 1 operational failure; 64 bad command-line usage; 78 invalid configuration.
            Configuration: --config PATH (repeatable), else $PUSHREPORTER_CONFIG, else /etc/pushreporter.
            """,
        version: PushReporterVersion.current,
        // Ours, then the backends' own (`track` and `payload`).
        subcommands: [Run.self, Validate.self, Preview.self, Plan.self, Status.self, Remove.self] + Backends.standard.commands + [Migrate.self, Schema.self]
    ) }

    /// The entry point, synchronous on purpose: it blocks SIGHUP, SIGTERM and SIGINT on the
    /// process's main thread before anything else runs (``AgentSignals``), runs the command in a
    /// task and waits for it there. An `async` main would leave the main thread in libdispatch's
    /// `sigsuspend` with an empty mask, where any of them arrives, and ends the process until a
    /// handler exists.
    static func main() {
        AgentSignals.block()
        CommandEnvironment.install(backends: .standard)
        // Before anything allocates: loading and checking a large configuration then costs a
        // tenth less CPU. The agent goes back to the default once loaded.
        Allocator.useLargeSteps()
        // As ArgumentParser's main(nil), but parsed here, so that the signals are unblocked on
        // this thread for every command but `run`.
        var command: ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            // A misspelt command (`validat`) gets its suggestion, as a misspelt key does.
            if let suggestion = commandSuggestion(CommandLine.arguments.dropFirst()) {
                printError("Error: unknown command '\(suggestion.given.displayEscaped)'; did you mean '\(suggestion.nearest)'?")
                printError("Usage: pushreporter <subcommand>\n  See 'pushreporter --help' for more information.")
                exitNow(Exit.usage)
            }
            exit(withError: error)
        }
        // `run` reads them itself (the agent, and `run --once` to end its round cleanly).
        if !(command is Run) { AgentSignals.unblock() }
        let finished = DispatchSemaphore(value: 0)
        Task.detached { [command] in
            await execute(command)
            finished.signal()
        }
        finished.wait()
    }

    /// The command the first argument probably meant, when it names none (`validat`).
    static func commandSuggestion(_ arguments: ArraySlice<String>) -> (given: String, nearest: String)? {
        guard let first = arguments.first, !first.hasPrefix("-") else { return nil }
        let names = configuration.subcommands.map { $0._commandName }
        guard !names.contains(first), let nearest = NameSuggester.nearest(to: first, among: Set(names)) else { return nil }
        return (first, nearest)
    }

    /// Runs `command` as ArgumentParser's `main` does; exits with its error when it throws.
    private static func execute(_ command: ParsableCommand) async {
        var command = command
        do {
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

