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
        var usable = true
        func error(_ message: String, at key: String) {
            diagnostics.error("service '\(definition.name)': \(message)", file: definition.file,
                              at: definition.keyPositions[key] ?? definition.position)
            usable = false
        }
        for key in Array(definition.settings.keys) + Array(definition.mappings.keys) where !Self.keys.contains(key) {
            var message = "unknown setting '\(key)' of an adobe-campaign service"
            if let nearest = NameSuggester.nearest(to: key, among: Self.keys) { message += "; did you mean '\(nearest)'?" }
            error(message, at: key)
        }
        for key in definition.mappings.keys where Self.keys.contains(key) {
            error("'\(key)' must be a single value, not a mapping", at: key)
        }

        trackingServer = ""
        if let server = definition.settings["trackingServer"], !server.text.isEmpty {
            var text = server.text
            while text.hasSuffix("/") { text.removeLast() }
            if let problem = Self.serverProblem(text) {
                error("trackingServer \(problem), not '\(server.shown)'", at: "trackingServer")
            }
            trackingServer = text
        } else if definition.keyPositions["trackingServer"] == nil || definition.settings["trackingServer"] != nil {
            // Written but not read (an unset !env, a mapping) was said where it is written.
            diagnostics.error("service '\(definition.name)' needs 'trackingServer' (adobe-campaign: the tracking server, the SDK's campaign.server, as https://host)",
                              file: definition.file, at: definition.position)
            usable = false
        } else {
            usable = false
        }

        timeout = Self.defaultTimeout
        if let value = definition.settings["timeout"] {
            if let duration = DurationParser.parse(value.text), duration > .zero {
                timeout = duration
            } else {
                error("timeout must be a duration such as 5s, not '\(value.shown)'", at: "timeout")
            }
        }
        guard usable else { return nil }
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
