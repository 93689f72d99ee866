import PushBackend
import PushConfig
import PushTemplates

/// The settings of one `services:` entry of `type: adobe-campaign` (SPEC §9.4).
struct AdobeSettings: Sendable {
    /// The service's name.
    var service: String
    /// `trackingServer`: `https://host[:port]` without a trailing slash (the SDK's
    /// `campaign.server`; plain http only to loopback).
    var trackingServer: String
    /// `timeout` (default 5s, the SDK's): how long one tracking request may take.
    var timeout: Duration

    /// The settings every entry may give.
    static let keys = ["type", "trackingServer", "timeout"]
    /// The Adobe SDK's timeout for a tracking request.
    static let defaultTimeout: Duration = .seconds(5)

    /// Reads `definition`, reporting every problem at its file, line and column; nil when the
    /// service cannot be used.
    init?(_ definition: ServiceDefinition, diagnostics: inout DiagnosticList) {
        service = definition.name
        var reader = SettingsReader(definition, keys: Self.keys, diagnostics: &diagnostics)
        trackingServer = ""
        if let server = reader.required("trackingServer", needs: "the tracking server, the SDK's campaign.server, as https://host",
                                        diagnostics: &diagnostics) {
            var text = server.text
            while text.hasSuffix("/") { text.removeLast() }
            if let problem = Self.serverProblem(text) {
                reader.error("trackingServer \(problem), not '\(server.shown)'", at: "trackingServer", diagnostics: &diagnostics)
            }
            trackingServer = text
        }

        timeout = Self.defaultTimeout
        if let value = definition.settings["timeout"] {
            if let duration = DurationParser.parse(value.text), duration > .zero {
                timeout = duration
            } else {
                reader.error("timeout must be a duration such as 5s, not '\(value.shown)'", at: "timeout", diagnostics: &diagnostics)
            }
        }
        guard reader.usable else { return nil }
    }

    /// Why `url` cannot be a tracking server (`https://host[:port]`, plain http only to a
    /// loopback address), or nil.
    static func serverProblem(_ url: String) -> String? {
        guard URLText.hasHTTPPrefix(url), let target = URLText.target(of: url) else {
            return "must be https://host[:port] (the SDK's campaign.server, with https:// before it)"
        }
        if target.scheme != "https" && !URLText.isLoopback(target.host) {
            return "must be https (plain http only to a loopback address)"
        }
        let authority = url.dropFirst(target.scheme.count + 3)
        if authority.contains(where: { $0 == "/" || $0 == "?" || $0 == "#" || $0 == "@" }) {
            return "must be https://host[:port] alone, without a path, query, fragment or user"
        }
        return nil
    }
}
