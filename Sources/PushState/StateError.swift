/// Why the state database could not be read or written: ``description`` is a sentence for the
/// log that names the file.
public struct StateError: Error, CustomStringConvertible, Sendable {
    enum Code: Sendable {
        case open, query, schema, missing
    }

    private let code: Code
    public let description: String

    init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    /// True when the state database does not exist yet (read-only open of a new directory).
    public var isMissing: Bool { code == .missing }

    /// The state cannot be reached now (a store other than SQLite, or a test's); `description` says why.
    public static func unavailable(_ description: String) -> StateError {
        StateError(.query, description)
    }
}
