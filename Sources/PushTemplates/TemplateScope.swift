/// Resolves the variables a template names to value slots, once, when the template is compiled.
///
/// The engine knows nothing of accounts or globals: the caller's scope decides which names exist
/// and gives each a slot number; at render time a ``TemplateValues`` answers by slot, so rendering
/// never looks a name up.
public protocol TemplateScope {
    /// The slot of `%name%`, or nil when no such variable exists.
    mutating func slot(forVariable name: String) -> Int?
    /// The slot of `%name[key]%`, or nil when `name` takes no key.
    mutating func slot(forVariable name: String, key: String) -> Int?
    /// Every plain variable name, for "did you mean" suggestions.
    var variableNames: [String] { get }
    /// Every name that takes a `[key]`, for "did you mean" suggestions.
    var keyedVariableNames: [String] { get }
}

/// The values a compiled template renders with, addressed by the slots its scope gave out.
public protocol TemplateValues {
    /// The value in `slot`; a missing value is the empty string.
    func value(at slot: Int) -> String
    /// Whether the value in `slot` is a secret (masked in previews and over plain http).
    func isSecret(at slot: Int) -> Bool
}

/// What rendering does with secret values and values derived from them (by a function).
public enum SecretMasking: Sendable {
    /// Secrets are rendered as they are.
    case reveal
    /// Each secret, or value computed from one, is replaced by the given text, inserted without
    /// encoding. The closure receives the secret's slot, or nil for a value derived from secrets.
    case replace(@Sendable (_ slot: Int?) -> String)

    /// Secrets shown as `********`.
    public static let stars = SecretMasking.replace { _ in "********" }
}
