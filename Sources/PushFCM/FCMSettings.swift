import PushBackend
import PushConfig

/// The settings of one `services:` entry of `type: fcm-device-group` (SPEC §9.3).
struct FCMSettings: Sendable {
    /// The service's name.
    var service: String
    /// `endpoint`, without a trailing slash: `https://…` (plain http only to loopback).
    var endpoint: String
    /// `projectId`: sent as the `project_id` header.
    var projectId: String
    /// `serviceAccount` (parsed, `tokenUri` applied) or the legacy `serverKey`.
    var credential: FCMCredential
    /// The value the credential was written as (its `!credential`, `!file` or `!env` name, for
    /// `preview --format curl`).
    var credentialValue: ConfigValue

    /// The settings every entry may give.
    static let keys = ["type", "endpoint", "projectId", "serviceAccount", "serverKey", "tokenUri"]
    /// Where Google serves device groups.
    static let defaultEndpoint = "https://fcm.googleapis.com/fcm/notification"

    /// Where and how this service's requests go.
    var target: FCMTarget {
        FCMTarget(service: service, endpoint: endpoint, projectId: projectId, credential: credential)
    }

    /// Reads `definition`, reporting every problem at its file, line and column (and Google's
    /// deprecation of device groups as a warning); nil when the service cannot be used.
    init?(_ definition: ServiceDefinition, diagnostics: inout DiagnosticList) {
        service = definition.name
        var reader = SettingsReader(definition, keys: Self.keys, diagnostics: &diagnostics)
        // Google's dates, not the file's: said, but no reason for --strict to fail.
        diagnostics.standingWarning(DeviceGroupDeprecation.warning, file: definition.file, at: reader.position("type"))

        endpoint = Self.defaultEndpoint
        if let value = definition.settings["endpoint"] {
            var text = value.text
            while text.hasSuffix("/") { text.removeLast() }
            if let problem = URLText.endpointProblem(text) {
                reader.error("endpoint \(problem), not '\(value.shown)'", at: "endpoint", diagnostics: &diagnostics)
            }
            endpoint = text
        }
        let project = reader.required("projectId", needs: "projectId, and serviceAccount or serverKey", diagnostics: &diagnostics)
        projectId = project?.text ?? ""
        if let project, project.text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            reader.error("projectId holds a control character", at: "projectId", diagnostics: &diagnostics)
        }

        let account = definition.settings["serviceAccount"]
        let serverKey = definition.settings["serverKey"]
        let tokenURI = definition.settings["tokenUri"]
        credential = .serverKey("")
        credentialValue = ConfigValue(text: "", isSecret: true, origin: reader.origin)
        if let tokenURI, let problem = URLText.endpointProblem(tokenURI.text) {
            reader.error("tokenUri \(problem), not '\(tokenURI.shown)'", at: "tokenUri", diagnostics: &diagnostics)
        }
        switch (account, serverKey) {
        case (let account?, nil) where !account.text.isEmpty:
            do throws(ServiceAccountKey.Problem) {
                let key = try ServiceAccountKey.parse(account.text, tokenURI: tokenURI?.text)
                if tokenURI == nil, let problem = URLText.endpointProblem(key.tokenURI) {
                    reader.error("the service account's token_uri \(problem) (tokenUri overrides it)", at: "serviceAccount",
                                 diagnostics: &diagnostics)
                }
                credential = .serviceAccount(key)
            } catch {
                reader.error("serviceAccount \(error.message)", at: "serviceAccount", diagnostics: &diagnostics)
            }
            credentialValue = account
        case (nil, let key?) where !key.text.isEmpty:
            reader.warning(DeviceGroupDeprecation.legacyKeyWarning, at: "serverKey", diagnostics: &diagnostics)
            if key.text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
                reader.error("serverKey holds a control character, which a header cannot carry", at: "serverKey", diagnostics: &diagnostics)
            }
            if tokenURI != nil {
                reader.warning("tokenUri is used only with serviceAccount, so it is not used", at: "tokenUri", diagnostics: &diagnostics)
            }
            credential = .serverKey(key.text)
            credentialValue = key
        case (.some, .some):
            reader.error("give serviceAccount or serverKey, not both", at: "serverKey", diagnostics: &diagnostics)
        default:
            // Written but not read (an unset !env or !credential): that was said where it is written.
            if definition.keyPositions["serviceAccount"] == nil && definition.keyPositions["serverKey"] == nil {
                diagnostics.error("service '\(definition.name)' needs a credential: serviceAccount (a Google service-account JSON key) or the legacy serverKey",
                                  file: definition.file, at: definition.position)
            }
            reader.usable = false
        }
        // Secret by what they are, however they are written.
        credentialValue.isSecret = true
        guard reader.usable else { return nil }
    }
}
