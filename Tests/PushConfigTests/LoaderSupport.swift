import Foundation
import PushConfig
@testable import PushAcrobits
import PushAgent
import PushBackend
import PushRegistry
import PushTestSupport

/// Loads `files` (name → YAML) from a fresh directory and runs every request check, as validate does.
final class Loaded {
    let directory = TemporaryDirectory()
    var result: LoadResult
    var diagnostics: DiagnosticList
    var builder: RequestBuilder

    init(_ files: [(String, String)], environment: [String: String] = [:], load names: [String]? = nil) {
        let directory = self.directory
        for (name, text) in files { directory.write(name, text) }
        let paths = (names ?? files.map(\.0)).map { directory.path + "/" + $0 }
        let loader = ConfigurationLoader(environment: Backends.standard.loaderEnvironment(
            LoaderEnvironment(variables: environment, templateSearchPath: [RepositoryPaths.templates])))
        result = loader.load(paths: paths)
        diagnostics = result.diagnostics
        // As every command loads: the services' types are the backends'.
        Backends.standard.checkTypes(result.configuration, diagnostics: &diagnostics)
        builder = RequestBuilder(configuration: result.configuration, sources: result.sources, installID: "install-1",
                                 hostname: "host1")
        // As validate checks: every backend, every subscription.
        Backends.standard.check(BackendContext(configuration: result.configuration, sources: result.sources, installID: "install-1",
                                               hostname: "host1"), diagnostics: &diagnostics)
    }

    convenience init(_ text: String, environment: [String: String] = [:]) {
        self.init([("config.yaml", text)], environment: environment)
    }

    /// Diagnostics as `NAME:LINE:COLUMN: severity: message`, with the directory stripped.
    var lines: [String] {
        diagnostics.sorted(fileOrder: result.configuration.files).map {
            $0.formatted.replacingOccurrences(of: directory.path + "/", with: "")
        }
    }

    var configuration: Configuration { result.configuration }

    func account(_ id: String) -> Account? { configuration.accounts.first { $0.id == id } }

    func request(_ id: String, _ reporter: Reporter = .pushTokenReporter, display: SecretDisplay = .asSent) -> RenderedRequest? {
        guard let account = account(id) else { return nil }
        var scratch = DiagnosticList()
        return builder.request(for: account, reporter: reporter, display: display, diagnostics: &scratch)
    }
}

