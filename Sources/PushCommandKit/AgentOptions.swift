import ArgumentParser
import Logging
import PushAgent
import PushConfig

/// `--state-dir`, `--deadline` and `--log-level`, shared by the commands that send: `run` and
/// `remove`.
public struct AgentOptions: ParsableArguments {
    public init() {}

    @Option(help: ArgumentHelp("A state directory, or a postgres:// database several agents share (default: agent.state, else agent.stateDirectory, else $STATE_DIRECTORY, else /var/lib/pushreporter).",
                               valueName: "dir"))
    public var stateDir: String?

    @Option(help: ArgumentHelp("How long to keep retrying (run --once, remove), e.g. 60s, 5m (default: 60s).",
                               valueName: "duration"))
    public var deadline: String?

    @Option(help: "Least severe log level shown: trace, debug, info, notice, warning, error or critical.")
    public var logLevel: Logger.Level = .info

    public func validate() throws {
        _ = try Self.deadline(deadline)
    }

    /// `--deadline` (checked by `validate()`), 60 s when not given.
    public var deadlineDuration: Duration { (try? Self.deadline(deadline)) ?? .seconds(60) }

    /// The `--deadline` `text` gives (60 s without one), or the usage error that says why it is none.
    public static func deadline(_ text: String?) throws -> Duration {
        guard let text else { return .seconds(60) }
        guard let parsed = DurationParser.parse(text), parsed > .zero else {
            throw ValidationError("--deadline must be a duration such as 60s, 5m or 1h30m, not '\(text)'")
        }
        return parsed
    }

    /// The command's logger, writing to `output` at `--log-level`.
    public func logger(output: LogOutput) -> Logger {
        Logger(label: "pushreporter") { _ in AgentLogHandler(output: output, level: logLevel) }
    }
}

extension AgentSetup.Failure {
    /// Prints why the command cannot go on: configuration errors as the diagnostics they are
    /// (in the log's format), anything else as error log lines.
    public func report(output: LogOutput, logger: Logger) {
        for diagnostic in diagnostics { output.diagnostic(diagnostic) }
        for line in lines { logger.error("\(line)") }
    }
}
