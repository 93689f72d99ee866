/// Why the state database could not be read or written.
///
/// ``label`` is stable and short (usable as a metric label); ``description`` is a sentence for
/// the log that names the file.
public struct StateError: Error, CustomStringConvertible, Sendable {
    enum Code: String, Sendable {
        case open = "state_open"
        case query = "state_query"
        case schema = "state_schema"
        case missing = "state_missing"
    }

    private let code: Code
    public let description: String

    init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    /// A short, stable name of the kind of failure.
    public var label: String { code.rawValue }

    /// True when the state database does not exist yet (read-only open of a new directory).
    public var isMissing: Bool { code == .missing }
}
