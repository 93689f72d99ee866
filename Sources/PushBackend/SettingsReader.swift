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
            var message = "unknown setting '\(key)' of a \(definition.type) service"
            if let nearest = NameSuggester.nearest(to: key, among: keys) { message += "; did you mean '\(nearest)'?" }
            error(message, at: key, diagnostics: &diagnostics)
        }
        for key in definition.mappings.keys where !mappings.contains(key) && keys.contains(key) {
            error("'\(key)' must be a single value, not a mapping", at: key, diagnostics: &diagnostics)
        }
    }

    /// Where `key` is written, else where the service is.
    public func position(_ key: String) -> SourcePosition {
        definition.keyPositions[key] ?? definition.position
    }

    /// An error at `key`, prefixed with the service's name; the service is unusable.
    public mutating func error(_ message: String, at key: String, diagnostics: inout DiagnosticList) {
        diagnostics.error("service '\(definition.name)': \(message)", file: definition.file, at: position(key))
        usable = false
    }

    /// A warning at `key`, prefixed with the service's name.
    public func warning(_ message: String, at key: String, diagnostics: inout DiagnosticList) {
        diagnostics.warning("service '\(definition.name)': \(message)", file: definition.file, at: position(key))
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
