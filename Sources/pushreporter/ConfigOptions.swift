import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
import PushAgent
import PushConfig
import PushState

/// `--config PATH`, repeatable, shared by every command that reads configuration.
struct ConfigOptions: ParsableArguments {
    @Option(name: .customLong("config"),
            help: ArgumentHelp("A configuration file, or a directory of *.yaml and *.yml files (repeatable).",
                               discussion: "Default: $PUSHREPORTER_CONFIG, else /etc/pushreporter.",
                               valueName: "path"))
    var paths: [String] = []

    /// The paths to load: the options, else `$PUSHREPORTER_CONFIG` (colon-separated), else `/etc/pushreporter`.
    func resolvedPaths(environment: LoaderEnvironment) -> [String] {
        if !paths.isEmpty { return paths }
        if let fromEnvironment = environment.variables["PUSHREPORTER_CONFIG"], !fromEnvironment.isEmpty {
            return fromEnvironment.split(separator: ":").map(String.init)
        }
        return ["/etc/pushreporter"]
    }
}

/// Loading shared by `validate` and `preview`.
struct LoadedConfiguration {
    var result: LoadResult
    var builder: RequestBuilder
    var diagnostics: DiagnosticList

    init(options: ConfigOptions) {
        let environment = LoaderEnvironment.current()
        let paths = options.resolvedPaths(environment: environment)
        result = ConfigurationLoader(environment: environment).load(paths: paths)
        if options.paths.isEmpty, environment.variables["PUSHREPORTER_CONFIG"] == nil,
           access(paths[0], F_OK) != 0 {
            // The default place is empty: say how to name a configuration instead.
            var hinted = DiagnosticList()
            hinted.error("no configuration here (the default); give --config PATH or set PUSHREPORTER_CONFIG", file: paths[0])
            result.diagnostics = hinted
        }
        diagnostics = result.diagnostics
        let stateDirectory = result.configuration.agent.resolvedStateDirectory(environment: environment.variables)
        builder = RequestBuilder(configuration: result.configuration, sources: result.sources,
                                 installID: StateDirectory.storedInstallID(in: stateDirectory), hostname: environment.hostname)
    }
}

/// Writes to standard error, for diagnostics and notes a person reads.
func printError(_ text: String) {
    LogOutput.standardError(text + "\n")
}

/// Ends the process at once with `code`, after flushing standard output, without tearing down
/// what the command loaded.
func exitNow(_ code: ExitCode) -> Never {
    fflush(nil)
    exit(code.rawValue)
}
