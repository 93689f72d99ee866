/// Why the state database could not be read or written: ``description`` is a sentence for the
/// log that names the file.
public struct StateError: Error, CustomStringConvertible, Sendable {
    enum Code: Sendable {
        case open, query, schema, missing, corrupt
        /// A transaction lost to another (a deadlock, a serialization failure): try it again.
        case conflict
    }

    private let code: Code
    public let description: String

    init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    /// True when the state database does not exist yet (read-only open of a new directory).
    public var isMissing: Bool { code == .missing }

    /// True when the transaction lost to another one at the same time and may simply be run again.
    var isConflict: Bool { code == .conflict }

    /// The state cannot be reached now (a store other than SQLite, or a test's); `description` says why.
    public static func unavailable(_ description: String) -> StateError {
        StateError(.query, description)
    }

    /// The database at `path` is damaged or not a database (SQLite said `message`): nothing can
    /// be read or written, and only moving it aside lets the agent run again.
    static func corrupt(_ path: String, _ message: String) -> StateError {
        StateError(.corrupt, "the state database \(path) is damaged (\(message)); move it aside, with its -wal and -shm "
                   + "files, and start again: every account is then reported again")
    }
}
