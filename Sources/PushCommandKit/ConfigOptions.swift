import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
import PushAgent
import PushBackend
import PushConfig
import PushState

/// `--config PATH`, repeatable, shared by every command that reads configuration.
public struct ConfigOptions: ParsableArguments, Sendable {
    public init() {}

    @Option(name: .customLong("config"),
            help: ArgumentHelp("A configuration file, or a directory of *.yaml and *.yml files (repeatable).",
                               discussion: "Default: $PUSHREPORTER_CONFIG, else /etc/pushreporter.",
                               valueName: "path"))
    public var paths: [String] = []

    /// The paths to load: the options, else `$PUSHREPORTER_CONFIG` (colon-separated), else `/etc/pushreporter`.
    public func resolvedPaths(environment: LoaderEnvironment) -> [String] {
        if !paths.isEmpty { return paths }
        if let fromEnvironment = environment.variables["PUSHREPORTER_CONFIG"], !fromEnvironment.isEmpty {
            return fromEnvironment.split(separator: ":").map(String.init)
        }
        return ["/etc/pushreporter"]
    }

    /// `pushreporter validate` for the same configuration, as a shell takes it: what a command
    /// that stops on errors tells the reader to run for the whole list. (Without its `--config`,
    /// the command it named read /etc/pushreporter.)
    public var validateCommand: String {
        (["pushreporter", "validate"] + paths.flatMap { ["--config", Self.shellWord($0)] }).joined(separator: " ")
    }

    /// `text` as it is when a shell reads it as one word unchanged, else single-quoted.
    private static func shellWord(_ text: String) -> String {
        let plain = !text.isEmpty && text.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "_./:=@%+,-".unicodeScalars.contains(scalar))
        }
        return plain ? text : RequestFormatter.shellWord(text, markers: false)
    }
}

/// Loading shared by every command that reads configuration.
public struct LoadedConfiguration {
    public var result: LoadResult
    /// The load's diagnostics, which checking and rendering add to.
    public var diagnostics: DiagnosticList {
        get { result.diagnostics }
        // In place: a get-then-set would copy every diagnostic (and their set) for each change.
        _modify { yield &result.diagnostics }
    }
    /// What it was loaded with: environment variables, template path and hostname.
    public let environment: LoaderEnvironment

    /// Loads the configuration `options` name; `checkingEarly` also checks each account as it
    /// loads (for `validate`, see ``ConfigurationLoader/earlyChecker``), and `leavingOutPassed`
    /// then keeps only those it could not pass (``ConfigurationLoader/leavesOutPassedAccounts``),
    /// when the files can be read again (``loadAgain(options:handing:)``; not a pipe) and the
    /// installation id is one they passed with. Without `splitting`, no file is parsed by two
    /// threads at once (``ConfigurationLoader/splitAbove``), and a large one is read in chunks
    /// instead of whole (``ConfigurationLoader/windowAbove``).
    public init(options: ConfigOptions, checkingEarly: Bool = false, leavingOutPassed: Bool = false, splitting: Bool = true,
                backends: Backends = CommandEnvironment.backends) {
        environment = backends.loaderEnvironment(LoaderEnvironment.current())
        let paths = options.resolvedPaths(environment: environment)
        var loader = ConfigurationLoader(environment: environment)
        if checkingEarly { loader.earlyChecker = backends.earlyChecker(hostname: environment.hostname) }
        loader.leavesOutPassedAccounts = leavingOutPassed && ConfigurationLoader.canReadAgain(paths: paths)
        // Read again if a diagnostic needs them: kept, they would be a large part of what a
        // command holds (391 MB of validate's 618 for a million accounts).
        loader.releasesSourceBytes = true
        if !splitting {
            loader.splitAbove = .max
            loader.windowAbove = Self.windowAbove
        }
        result = loader.load(paths: paths)
        backends.checkTypes(result.configuration, diagnostics: &result.diagnostics)
        if loader.leavesOutPassedAccounts, result.configuration.accountsLeftOut.count > 0,
           AccountTemplates.builtinsHoldHeaderForbiddenBytes(installID: storedInstallID, hostname: environment.hostname) {
            // They passed with `<installid>`, and this installation's id can break a header: every
            // account is checked again with it, so every one is kept.
            loader.leavesOutPassedAccounts = false
            result = loader.load(paths: paths)
            backends.checkTypes(result.configuration, diagnostics: &result.diagnostics)
        }
        if options.paths.isEmpty, environment.variables["PUSHREPORTER_CONFIG"] ?? "" == "",
           access(paths[0], F_OK) != 0 {
            // The default place is empty: say how to name a configuration instead.
            var hinted = DiagnosticList()
            hinted.error("no configuration here (the default); give --config PATH or set PUSHREPORTER_CONFIG", file: paths[0])
            result.diagnostics = hinted
        }
    }

    /// Loads the same configuration again, handing each account to `take` in file order instead
    /// of keeping it (``ConfigurationLoader/load(paths:unstreamed:handing:)``): the files that
    /// are not the ones read the first time (changed, added or gone since). Its diagnostics
    /// are those of the first load, unless one of those files changed.
    public func loadAgain(options: ConfigOptions, handing take: @escaping (consuming Account) -> Void) -> [String] {
        var loader = ConfigurationLoader(environment: environment)
        loader.releasesSourceBytes = true
        loader.windowAbove = Self.windowAbove
        let again = loader.load(paths: options.resolvedPaths(environment: environment), unstreamed: Set(result.restoredFiles),
                                handing: take)
        let first = result.configuration.files
        return (first + again.configuration.files.filter { !first.contains($0) }).filter { file in
            guard let before = result.sources[file], let after = again.sources[file] else { return true }
            return !before.isSameFile(as: after)
        }
    }

    /// From how many bytes on a file is read in chunks by a load that does not split files
    /// (``ConfigurationLoader/windowAbove``): below, reading it whole costs little.
    static let windowAbove = 1 << 20

    /// What backends render the configuration with; a nil `installID` shows `%installid%` as
    /// `<installid>`.
    public func context(installID: String?) -> BackendContext {
        BackendContext(configuration: result.configuration, sources: result.sources, installID: installID,
                       hostname: environment.hostname)
    }

    /// Adds to the diagnostics every problem rendering would find, each once, as `validate`
    /// says them: a command that stops on errors says them all at once, not in rounds.
    public mutating func checkRendering(installID: String?, backends: Backends = CommandEnvironment.backends) {
        backends.check(context(installID: installID), skipping: result.passedEarly, diagnostics: &diagnostics)
    }

    /// The installation id kept in the configuration's state directory, for `validate` and
    /// `preview` (which take no `--state-dir`); nil when the agent has not run with it.
    public var storedInstallID: String? {
        StateDirectory.storedInstallID(in: result.configuration.agent.resolvedStateDirectory(environment: environment.variables))
    }
}

/// Writes to standard error, for diagnostics and notes a person reads.
public func printError(_ text: String) {
    LogOutput.standardError(text + "\n")
}

/// Ends the process at once with `code`, after flushing standard output, without tearing down
/// what the command loaded.
public func exitNow(_ code: ExitCode) -> Never {
    // The agent's log lines still queued (LogOutput.queuedStandardError), within a bound: a
    // journal that does not read must not keep the process from ending.
    LogOutput.drain(within: .seconds(2))
    fflush(nil)
    exit(code.rawValue)
}
