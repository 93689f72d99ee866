import _CryptoExtras
import PushBackend
import PushConfig
@testable import PushFCM
import PushTestSupport

/// A configuration loaded from files in a fresh directory, checked by the FCM backend as
/// `validate` checks it.
final class LoadedFCM {
    /// A service-account key pair for these tests: made once.
    static let privateKey = try! _RSA.Signing.PrivateKey(keySize: .bits2048)

    let directory = TemporaryDirectory()
    let result: LoadResult
    var diagnostics: DiagnosticList

    /// Loads `yaml` as `config.yaml`, beside `sa.json` (a service-account key with `tokenURI`).
    init(_ yaml: String, environment: [String: String] = [:], tokenURI: String = "https://oauth2.googleapis.com/token") {
        directory.write("sa.json", Self.serviceAccount(tokenURI: tokenURI))
        let path = directory.write("config.yaml", yaml)
        result = ConfigurationLoader(environment: LoaderEnvironment(variables: environment, templateSearchPath: []))
            .load(paths: [path])
        diagnostics = result.diagnostics
        FCMBackend().check(context, skipping: nil, diagnostics: &diagnostics)
    }

    var context: BackendContext {
        BackendContext(configuration: result.configuration, sources: result.sources, installID: "install-1", hostname: "host1")
    }

    /// Diagnostics as `config.yaml:LINE:COLUMN: severity: message`.
    var lines: [String] {
        diagnostics.sorted(fileOrder: result.configuration.files).map {
            $0.formatted.replacingOccurrences(of: directory.path + "/", with: "")
        }
    }

    /// The lines but Google's deprecation warning, which every fcm service gets.
    var problems: [String] { lines.filter { !$0.contains(DeviceGroupDeprecation.warning) } }

    static func serviceAccount(tokenURI: String, extra: String = "") -> String {
        let pem = privateKey.pkcs8PEMRepresentation.replacingOccurrences(of: "\n", with: "\\n")
        return """
            {"type": "service_account", "project_id": "p-1", "private_key_id": "kid-1", "private_key": "\(pem)",
             "client_email": "agent@p-1.iam.gserviceaccount.com", "token_uri": "\(tokenURI)"\(extra)}
            """
    }
}
