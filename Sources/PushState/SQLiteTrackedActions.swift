import Synchronization

/// One tracking action that reached its tracking server (SPEC §9.4): what identifies it, and
/// what a person reading the table wants to know about it.
public struct TrackedAction: Sendable, Equatable {
    /// What identifies the request (a digest of it): the same key is never sent twice.
    public var key: String
    /// The service it was sent for.
    public var service: String
    /// The payload's `_mId` (broadlog id).
    public var messageId: String
    /// The payload's `_dId` (delivery id).
    public var deliveryId: String
    /// The action: `7` (impression), `2` (click) or `1` (open).
    public var action: String
    /// When the server acknowledged it (Unix time in milliseconds).
    public var sentAt: Int64

    public init(key: String, service: String, messageId: String, deliveryId: String, action: String, sentAt: Int64) {
        self.key = key
        self.service = service
        self.messageId = messageId
        self.deliveryId = deliveryId
        self.action = action
        self.sentAt = sentAt
    }
}

/// The tracking actions delivered, kept in the state database's `tracked_actions` table (layout
/// 4), so that `track --state-dir` and the agent's tracking spool send each (payload, action)
/// once (SPEC §9.4).
///
/// Commits are synchronous, like the state store's: an action ``record(_:)`` returned from is
/// remembered after a `kill -9` or a power loss. It takes no lock on the state directory:
/// `track` may share a running agent's memory (SQLite serialises the writers).
public final class SQLiteTrackedActions: Sendable {
    /// The database file.
    public let path: String
    private let statements: Mutex<Statements>

    /// Opens the state database of `directory`, creating it (0600) or migrating it to the
    /// layout that has the table, as ``SQLiteStateStore`` does.
    public init(directory: StateDirectory) throws(StateError) {
        // The state store creates the file with its mode and migrates it; its connection is
        // closed again at once.
        path = try SQLiteStateStore(directory: directory).path
        let database = try SQLiteConnection(path: path, readOnly: false)
        try database.execute("PRAGMA synchronous = FULL;")
        statements = Mutex(try Statements(database))
    }

    /// Whether the action of `key` was delivered.
    public func contains(_ key: String) throws(StateError) -> Bool {
        try statements.withLock { (statements: inout Statements) throws(StateError) -> Bool in
            let select = statements.select
            defer { select.reset() }
            select.bind(1, key)
            return try select.step()
        }
    }

    /// Remembers that `action` was delivered (a key recorded before is replaced).
    public func record(_ action: TrackedAction) throws(StateError) {
        try statements.withLock { (statements: inout Statements) throws(StateError) in
            let insert = statements.insert
            insert.bind(1, action.key)
            insert.bind(2, action.service)
            insert.bind(3, action.messageId)
            insert.bind(4, action.deliveryId)
            insert.bind(5, action.action)
            insert.bind(6, action.sentAt)
            try insert.run()
        }
    }

    /// Every action remembered, in the order they were sent (for tests and inspection).
    public func all() throws(StateError) -> [TrackedAction] {
        try statements.withLock { (statements: inout Statements) throws(StateError) -> [TrackedAction] in
            let select = try statements.database.prepare(
                "SELECT key, service, message_id, delivery_id, action, sent_at FROM tracked_actions ORDER BY sent_at, key")
            var actions: [TrackedAction] = []
            while try select.step() {
                actions.append(TrackedAction(key: select.text(0) ?? "", service: select.text(1) ?? "",
                                             messageId: select.text(2) ?? "", deliveryId: select.text(3) ?? "",
                                             action: select.text(4) ?? "", sentAt: select.int64(5) ?? 0))
            }
            return actions
        }
    }

    /// The connection and its statements, used only under the lock.
    private struct Statements: @unchecked Sendable {
        let database: SQLiteConnection
        let select: SQLiteConnection.Statement
        let insert: SQLiteConnection.Statement

        init(_ database: SQLiteConnection) throws(StateError) {
            self.database = database
            select = try database.prepare("SELECT 1 FROM tracked_actions WHERE key = ?")
            insert = try database.prepare("""
                INSERT OR REPLACE INTO tracked_actions (key, service, message_id, delivery_id, action, sent_at)
                VALUES (?, ?, ?, ?, ?, ?)
                """)
        }
    }
}
