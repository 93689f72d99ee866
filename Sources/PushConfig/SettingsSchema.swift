/// What a backend's `services:` entries may hold, for `pushreporter schema` (SPEC §14): the
/// names its `SettingsReader` takes (the very list it checks against, so the two cannot
/// drift), each with what kind of value it is and a line of documentation. Its ``Setting``s
/// describe the `agent:` block too (``AgentSettings/schemaKeys``).
public struct SettingsSchema: Sendable {
    /// What a value is, as the schema writes it.
    public indirect enum Kind: Sendable {
        /// Any single value (a template, a name, a secret).
        case text
        /// An `http://` or `https://` URL.
        case url
        /// A duration (`500ms`, `5s`, `1h30m`, or seconds).
        case duration
        /// A duration, or `off`.
        case durationOrOff
        /// A whole number from `minimum` to `maximum`.
        case integer(minimum: Int, maximum: Int)
        /// `true` or `false`.
        case boolean
        /// A mapping of names to single values (headers).
        case mapping
        /// One of a few words, in any case.
        case oneOf([String])
        /// A mapping of these settings only.
        case object([Setting])
        /// `off`, or a mapping of these settings only.
        case guarded([Setting])
    }

    public struct Setting: Sendable {
        public var name: String
        public var kind: Kind
        public var doc: String

        public init(_ name: String, _ kind: Kind = .text, _ doc: String) {
            self.name = name
            self.kind = kind
            self.doc = doc
        }
    }

    public var settings: [Setting]
    /// The settings a service of this type must have.
    public var required: [String]
    /// Whether settings beyond ``settings`` are taken (a `type: acrobits` service takes any
    /// account key, as defaults for its accounts).
    public var acceptsOtherSettings: Bool
    /// What the type is, in a sentence.
    public var doc: String

    /// `keys` is the list the backend's ``SettingsReader`` checks against (`type` included);
    /// `described` gives the kind and documentation of those that have them. A name of
    /// `described` missing from `keys` is a programming error (the schema would offer a setting
    /// the loader refuses).
    public init(doc: String, keys: [String], required: [String] = [], described: [Setting], acceptsOtherSettings: Bool = false) {
        let byName = Dictionary(described.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        precondition(byName.keys.allSatisfy(keys.contains), "a setting described that the loader does not take")
        self.doc = doc
        self.settings = keys.filter { $0 != "type" }.map { byName[$0] ?? Setting($0, .text, "") }
        self.required = required
        self.acceptsOtherSettings = acceptsOtherSettings
    }
}
