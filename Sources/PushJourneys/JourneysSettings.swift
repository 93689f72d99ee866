import PushBackend
import PushConfig
import PushTemplates

/// The settings of one `services:` entry of `type: customer-insights-journeys` (SPEC §9.2).
struct JourneysSettings: Sendable {
    /// The service's name.
    var service: String
    /// `publicEndpoint`, without a trailing slash: `https://…` (plain http only to loopback).
    var publicEndpoint: String
    var orgId: ConfigValue
    var mobileAppId: ConfigValue
    /// `apiToken`: a secret, always.
    var apiToken: ConfigValue
    /// `trackRegistration` (default true): sends `x-ms-track-registration: true` and polls.
    var trackRegistration: Bool
    /// `callbackUrl`: a template over the account's keys.
    var callbackURL: ConfigValue?
    /// `callbackHeaders`, in file order; only with `callbackUrl`.
    var callbackHeaders: [(key: String, value: ConfigValue)]
    /// `batchSize`, 1–100 (default 100): 1 uses the single endpoints.
    var batchSize: Int
    /// `statusInterval` (default 1m); nil (`off`) never polls.
    var statusInterval: Duration?
    /// `statusTimeout` (default 24h): still `Pending` then is *unconfirmed*.
    var statusTimeout: Duration

    /// The settings every entry may give, and what each is.
    static let keys = ["type", "publicEndpoint", "orgId", "mobileAppId", "apiToken", "trackRegistration", "callbackUrl",
                       "callbackHeaders", "batchSize", "statusInterval", "statusTimeout"]
    /// The most registrations (and status ids) one request may carry (seed 000).
    static let batchLimit = 100

    /// `{publicEndpoint}/api/v1.0/orgs/{orgId}/pushdeviceregistration`.
    var baseURL: String {
        publicEndpoint + "/api/v1.0/orgs/" + TextEncoding.pathSegment(orgId.text) + "/pushdeviceregistration"
    }

    /// Reads `definition`, reporting every problem at its file, line and column; nil when the
    /// service cannot be used.
    /// `evenIfUnusable`: settings with problems (reported) are still made, from what they do
    /// say, to check the accounts' values against (nothing is sent with them).
    init?(_ definition: ServiceDefinition, diagnostics: inout DiagnosticList, evenIfUnusable: Bool = false) {
        service = definition.name
        let file = definition.file
        var reader = SettingsReader(definition, keys: Self.keys, mappings: ["callbackHeaders"], diagnostics: &diagnostics)
        func keyPosition(_ key: String) -> SourcePosition { reader.position(key) }
        func error(_ message: String, at key: String) { reader.error(message, at: key, diagnostics: &diagnostics) }
        func required(_ key: String) -> ConfigValue? {
            reader.required(key, needs: "publicEndpoint, orgId, mobileAppId and apiToken", diagnostics: &diagnostics)
        }
        let endpoint = required("publicEndpoint")
        let org = required("orgId")
        let app = required("mobileAppId")
        var token = required("apiToken")
        // Secret by its key name, and however it is written.
        token?.isSecret = true

        publicEndpoint = ""
        if let endpoint {
            var text = endpoint.text
            while text.hasSuffix("/") { text.removeLast() }
            if let problem = URLText.endpointProblem(text) {
                error("publicEndpoint \(problem), not '\(endpoint.shown)'", at: "publicEndpoint")
            }
            publicEndpoint = text
        }
        orgId = org ?? ConfigValue(text: "", origin: reader.origin)
        mobileAppId = app ?? ConfigValue(text: "", origin: reader.origin)
        apiToken = token ?? ConfigValue(text: "", isSecret: true, origin: reader.origin)

        trackRegistration = true
        if let value = definition.settings["trackRegistration"] {
            switch value.text.lowercased() {
            case "true", "yes", "on": trackRegistration = true
            case "false", "no", "off": trackRegistration = false
            default: error("trackRegistration must be true or false, not '\(value.shown)'", at: "trackRegistration")
            }
        }
        callbackURL = definition.settings["callbackUrl"]
        if let callback = callbackURL, !URLText.hasHTTPPrefix(callback.text) {
            error("callbackUrl must start with http:// or https://", at: "callbackUrl")
        }
        callbackHeaders = definition.mappings["callbackHeaders"] ?? []
        if definition.settings["callbackHeaders"] != nil {
            error("callbackHeaders must be a mapping of header names to values", at: "callbackHeaders")
        }
        if !callbackHeaders.isEmpty && callbackURL == nil {
            diagnostics.warning("service '\(definition.name)': callbackHeaders are sent only with a callbackUrl, so they are not sent",
                                file: file, at: keyPosition("callbackHeaders"))
        }
        for (name, value) in callbackHeaders where value.text.utf8.contains(where: Template.isForbiddenInHeader) {
            error("the callback header '\(name)' holds a line break or NUL", at: "callbackHeaders")
            _ = value
        }

        batchSize = Self.batchLimit
        if let value = definition.settings["batchSize"] {
            if let size = Int(value.text), (1...Self.batchLimit).contains(size) {
                batchSize = size
            } else {
                error("batchSize must be a whole number from 1 to \(Self.batchLimit), not '\(value.shown)'", at: "batchSize")
            }
        }
        statusInterval = .seconds(60)
        if let value = definition.settings["statusInterval"] {
            if value.text.lowercased() == "off" {
                statusInterval = nil
            } else if let duration = DurationParser.parse(value.text), duration > .zero {
                statusInterval = duration
            } else {
                error("statusInterval must be a duration such as 1m, or off, not '\(value.shown)'", at: "statusInterval")
            }
        }
        statusTimeout = .seconds(24 * 3600)
        if let value = definition.settings["statusTimeout"] {
            if let duration = DurationParser.parse(value.text), duration > .zero {
                statusTimeout = duration
            } else {
                error("statusTimeout must be a duration such as 24h, not '\(value.shown)'", at: "statusTimeout")
            }
        }
        if !trackRegistration && (definition.settings["statusInterval"] != nil || definition.settings["statusTimeout"] != nil) {
            diagnostics.warning("service '\(definition.name)': without trackRegistration there is no status to poll, so statusInterval and statusTimeout are not used",
                                file: file, at: keyPosition(definition.settings["statusInterval"] != nil ? "statusInterval" : "statusTimeout"))
        }
        guard reader.usable || evenIfUnusable else { return nil }
    }
}
