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
        publicEndpoint + "/api/v1.0/orgs/" + URLPath.segment(orgId.text) + "/pushdeviceregistration"
    }

    /// Reads `definition`, reporting every problem at its file, line and column; nil when the
    /// service cannot be used.
    init?(_ definition: ServiceDefinition, diagnostics: inout DiagnosticList) {
        service = definition.name
        let file = definition.file
        var usable = true
        func keyPosition(_ key: String) -> SourcePosition { definition.keyPositions[key] ?? definition.position }
        func error(_ message: String, at key: String) {
            diagnostics.error("service '\(definition.name)': \(message)", file: file, at: keyPosition(key))
            usable = false
        }
        for key in Array(definition.settings.keys) + Array(definition.mappings.keys) where !Self.keys.contains(key) {
            var message = "unknown setting '\(key)' of a customer-insights-journeys service"
            if let nearest = NameSuggester.nearest(to: key, among: Self.keys) { message += "; did you mean '\(nearest)'?" }
            error(message, at: key)
        }
        for key in definition.mappings.keys where key != "callbackHeaders" && Self.keys.contains(key) {
            error("'\(key)' must be a single value, not a mapping", at: key)
        }
        func required(_ key: String) -> ConfigValue? {
            guard let value = definition.settings[key], !value.text.isEmpty else {
                // Written but not read (an unset !env, a mapping): that was said where it is written.
                if definition.keyPositions[key] == nil || definition.settings[key] != nil {
                    diagnostics.error("service '\(definition.name)' needs '\(key)' (customer-insights-journeys: publicEndpoint, orgId, mobileAppId and apiToken)",
                                      file: file, at: definition.position)
                }
                usable = false
                return nil
            }
            return value
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
            if let problem = Self.endpointProblem(text) {
                error("publicEndpoint \(problem), not '\(endpoint.shown)'", at: "publicEndpoint")
            }
            publicEndpoint = text
        }
        orgId = org ?? ConfigValue(text: "", origin: definition.origin)
        mobileAppId = app ?? ConfigValue(text: "", origin: definition.origin)
        apiToken = token ?? ConfigValue(text: "", isSecret: true, origin: definition.origin)

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
        guard usable else { return nil }
    }

    /// Why `url` cannot be a publicEndpoint (SPEC §9.0: https, plain http only to loopback), or nil.
    static func endpointProblem(_ url: String) -> String? {
        guard URLText.hasHTTPPrefix(url), let target = URLText.target(of: url) else {
            return "must be an https:// URL"
        }
        if target.scheme != "https" && !URLText.isLoopback(target.host) {
            return "must be https (plain http only to a loopback address)"
        }
        if url.dropFirst(target.scheme.count + 3).contains(where: { $0 == "?" || $0 == "#" }) {
            return "must be a base URL without a query or fragment"
        }
        return nil
    }
}

extension ServiceDefinition {
    /// Where the service's entry is, as a value's origin (for settings it lacks).
    var origin: ValueOrigin {
        ValueOrigin(file: file, position: position)
    }
}

/// Percent-encoding for a URL path segment (RFC 3986 unreserved stays).
enum URLPath {
    static func segment(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                out += "%"
                out.unicodeScalars.append(hex[Int(byte >> 4)])
                out.unicodeScalars.append(hex[Int(byte & 0x0F)])
            }
        }
        return out
    }
}
