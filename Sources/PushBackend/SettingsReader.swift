import PushConfig
import PushTemplates

/// Reads the settings of one `services:` entry for its backend, reporting every problem at the
/// key it concerns, in the words every backend uses: an unknown setting (with a did-you-mean),
/// a mapping where a single value belongs, a required setting that is missing.
public struct SettingsReader {
    public let definition: ServiceDefinition
    /// False once a problem makes the service unusable.
    public var usable = true

    /// Starts reading `definition`, whose settings may be `keys` (`type` included), of which
    /// only `mappings` may be mappings; reports the others.
    public init(_ definition: ServiceDefinition, keys: [String], mappings: Set<String> = [], diagnostics: inout DiagnosticList) {
        self.definition = definition
        for key in Array(definition.settings.keys) + Array(definition.mappings.keys) where !keys.contains(key) {
            let article = definition.type.first.map { "aeiou".contains($0) } == true ? "an" : "a"
            var message = "unknown setting '\(key)' of \(article) \(definition.type) service"
            if let nearest = NameSuggester.nearest(to: key, among: keys) { message += "; did you mean '\(nearest)'?" }
            diagnostics.error("service '\(definition.name)': \(message)", file: definition.file, at: position(key))
            usable = false
        }
        for key in definition.mappings.keys where !mappings.contains(key) && keys.contains(key) {
            diagnostics.error("service '\(definition.name)': '\(key)' must be a single value, not a mapping", file: definition.file,
                              at: position(key))
            usable = false
        }
    }

    /// Where `key` is written, else where the service is.
    public func position(_ key: String) -> SourcePosition {
        definition.keyPositions[key] ?? definition.position
    }

    /// Where the problem of `key`'s setting is: its value when it is a single one (a bad
    /// duration or URL is pointed at, as an account's or the agent's is), else the key.
    public func valuePosition(_ key: String) -> SourcePosition {
        definition.settings[key].map { $0.origin.position } ?? position(key)
    }

    /// An error about `key`'s setting, at its value, prefixed with the service's name; the
    /// service is unusable.
    public mutating func error(_ message: String, at key: String, diagnostics: inout DiagnosticList) {
        diagnostics.error("service '\(definition.name)': \(message)", file: definition.file, at: valuePosition(key))
        usable = false
    }

    /// A warning about `key`'s setting, at its value, prefixed with the service's name.
    public func warning(_ message: String, at key: String, diagnostics: inout DiagnosticList) {
        diagnostics.warning("service '\(definition.name)': \(message)", file: definition.file, at: valuePosition(key))
    }

    /// The non-empty value of `key`; nil (the service unusable) when it is missing, saying so
    /// with `needs` (what the type requires). A value written but not read (an unset `!env`)
    /// was reported where it is written, and is not reported again.
    public mutating func required(_ key: String, needs: String, diagnostics: inout DiagnosticList) -> ConfigValue? {
        guard let value = definition.settings[key], !value.text.isEmpty else {
            if definition.keyPositions[key] == nil || definition.settings[key] != nil {
                diagnostics.error("service '\(definition.name)' needs '\(key)' (\(definition.type): \(needs))",
                                  file: definition.file, at: definition.position)
            }
            usable = false
            return nil
        }
        return value
    }

    /// Where the service's entry is, as the origin of a value it does not give.
    public var origin: ValueOrigin {
        ValueOrigin(file: definition.file, position: definition.position)
    }
}
