import PushAgent
import PushState

/// The state as the commands that only look at it read it (`status`, `plan`): a state directory
/// (SQLite) or a PostgreSQL database, opened read-only, never created, migrated or written, also
/// while agents run.
public struct StoredState {
    public var records: [SubscriptionRecord]
    /// With a database: which agent holds each subscription whose lease has not expired.
    public var holders: [SubscriptionKey: String]?
    /// The installation id (`%installid%`), if an agent made one.
    public var installID: String?
    /// What the state keeps of each subscription's last delivery's parts (read when asked).
    public var deliveredParts: [SubscriptionKey: String] = [:]

    /// Reads the state at `path` (a directory, or a `postgres://` URI with `password`). Throws a
    /// ``StateError`` (``StateError/isMissing`` for a directory without state yet), or the
    /// directory's problem.
    public static func read(_ path: String, password: String?, holders wantsHolders: Bool = false,
                            deliveredParts wantsParts: Bool = false) throws -> StoredState {
        if AgentRuntime.isDatabase(path) {
            let database = try PostgresStateStore(uri: path, password: password, readOnly: true)
            return StoredState(records: try database.records(), holders: wantsHolders ? try database.holders() : nil,
                               installID: try database.storedInstallID(),
                               deliveredParts: wantsParts ? try database.deliveredParts() : [:])
        }
        let directory = try StateDirectory(path: path, create: false)
        let store = try SQLiteStateStore(directory: directory, readOnly: true)
        return StoredState(records: try store.records(), holders: nil, installID: StateDirectory.storedInstallID(in: path),
                           deliveredParts: wantsParts ? try store.deliveredParts() : [:])
    }
}
