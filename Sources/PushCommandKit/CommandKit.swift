import ArgumentParser
import Logging
import PushAgent
import PushBackend
import PushState
import PushTransport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Exit codes of SPEC §7.
public enum Exit {
    public static let configuration = ExitCode(78)
    public static let failure = ExitCode(1)
    public static let usage = ExitCode(64)
}

/// `--format` of the commands that say what they did (`run --once`, `migrate`, `remove`,
/// `track`): sentences, or one JSON object on standard output for the pipelines that call them
/// (SPEC §7).
public enum SummaryFormat: String, ExpressibleByArgument, CaseIterable, Sendable {
    case text, json

    public static let help = ArgumentHelp("What to print of what was done: text, or json (one object on standard output).",
                                          valueName: "format")
}

/// `noun`, or its plural for a `count` other than one.
public func plural(_ count: Int, _ noun: String) -> String {
    count == 1 ? noun : noun + "s"
}

/// What the commands share of the application: the registry of its backends, set once by the
/// executable before it parses the command line (``install(backends:)``). A backend's own
/// commands (``CommandContributor``) reach the others' through it, never by name.
public enum CommandEnvironment {
    private static let installed = Mutex<Backends?>(nil)

    /// The backends of this build.
    public static var backends: Backends {
        guard let backends = installed.withLock({ $0 }) else { preconditionFailure("CommandEnvironment.install(backends:) was not called") }
        return backends
    }

    public static func install(backends: Backends) {
        installed.withLock { $0 = backends }
    }

    /// The transport a command sends with (libcurl), trusting `caFile` too when given.
    public static func makeTransport(caFile: String?) throws -> any ShutdownableTransport {
        try CurlTransport(settings: TransportSettings(caFile: caFile))
    }

    /// What was sent once, kept in the state directory `path` (``SentOnceLedger``); throws a
    /// sentence when it cannot be opened.
    public static func sentOnceLedger(stateDirectory path: String) throws(BackendServiceFailure) -> any SentOnceLedger {
        do {
            return try SQLiteTrackedActions(directory: StateDirectory(path: path))
        } catch let problem as StateDirectory.Problem {
            throw BackendServiceFailure(problem.description)
        } catch {
            throw BackendServiceFailure(String(describing: error))
        }
    }

    /// A command's logger, writing text lines to standard error at `level`.
    public static func logger(level: Logger.Level = .info) -> Logger {
        let output = LogOutput(format: .text)
        return Logger(label: "pushreporter") { _ in AgentLogHandler(output: output, level: level) }
    }
}

/// A transport a command makes and shuts down when done.
public protocol ShutdownableTransport: HTTPTransport {
    func shutdown()
}

extension CurlTransport: ShutdownableTransport {}

/// A backend that has commands of its own (`pushreporter track`): the executable lists them
/// beside its own.
public protocol CommandContributor {
    var commands: [any ParsableCommand.Type] { get }
}

extension Backends {
    /// The commands the backends bring (``CommandContributor``).
    public var commands: [any ParsableCommand.Type] {
        all.compactMap { $0 as? any CommandContributor }.flatMap(\.commands)
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
extension LogOutput.Format: ExpressibleByArgument {}
