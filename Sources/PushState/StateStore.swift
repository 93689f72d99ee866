import CSQLite
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The state database (SPEC §6): one SQLite file in WAL mode, `state.sqlite` in the state
/// directory, mode 0600. Commits are synchronous (`synchronous = FULL`): a batch that
/// ``save(_:deleting:)`` returned from survives a power loss too.
///
/// It stores ``AccountRecord``s and nothing else; deciding what to write, and batching the
/// writes, is the agent's job. ``save(_:deleting:)`` writes any number of records in one
/// transaction, so a `kill -9` leaves either all of a batch or none of it. Several processes
/// may use the file at once (`status` reads while the agent writes).
public final class StateStore: Sendable {
    /// The database's file name inside the state directory.
    public static let fileName = "state.sqlite"

    /// The database file.
    public let path: String
    private let connection: Mutex<Statements>

    /// Opens the database of `directory`, creating it (0600) and its schema when missing.
    ///
    /// With `readOnly`, nothing is created: a directory without a database throws an error whose
    /// ``StateError/isMissing`` is true.
    public init(directory: StateDirectory, readOnly: Bool = false) throws(StateError) {
        path = directory.path + "/" + Self.fileName
        if readOnly {
            guard access(path, F_OK) == 0 else {
                throw StateError(.missing, "there is no state in \(directory.path) yet: the agent has not run with this state directory")
            }
        } else {
            // SQLite gives the -wal and -shm files the mode of the database file.
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                throw StateError(.open, "cannot create the state database \(path) (\(String(cString: strerror(errno))))")
            }
            close(fd)
        }
        let database = try SQLiteConnection(path: path, readOnly: readOnly)
        var version = try Self.schemaVersion(of: database)
        guard version <= Self.schemaVersion else {
            throw StateError(.schema, "the state database \(path) was written by a newer pushreporter (schema \(version); "
                             + "this one reads schema \(Self.schemaVersion)); run that version, or move the state directory aside")
        }
        if !readOnly {
            try database.execute("""
                PRAGMA journal_mode = WAL;
                PRAGMA synchronous = FULL;
                PRAGMA cache_size = -1024;
                """)
            // A current database is left as it is; an older one is migrated under the write lock.
            if version < Self.schemaVersion {
                try database.execute("BEGIN IMMEDIATE")
                do throws(StateError) {
                    // Read again under the lock: another process may have migrated meanwhile.
                    version = try Self.schemaVersion(of: database)
                    try database.execute(Self.migrations(from: version, in: database) + "PRAGMA user_version = \(Self.schemaVersion);")
                    try database.execute("COMMIT")
                } catch {
                    try? database.execute("ROLLBACK")
                    throw error
                }
            }
        }
        // Written, the database is at this layout now; read-only, an older one may lack the column.
        let hasPastRemovals = readOnly && version < Self.schemaVersion ? try Self.columns(of: database).contains("past_removals") : true
        connection = Mutex(try Statements(database, readOnly: readOnly, hasPastRemovals: hasPastRemovals))
    }

    /// The layout this code reads and writes, kept in SQLite's `user_version`. Opening for
    /// writing migrates from the number it finds (`migrations(from:)`); a database with a higher
    /// one is refused. Read-only, an older layout is read as it is.
    /// 1: the first layout (its later databases have `past_removals` already); 2: `past_removals`
    /// always there.
    static let schemaVersion: Int64 = 2

    /// The SQL that brings `database`, of layout `version` (0: none yet), to `schemaVersion`.
    private static func migrations(from version: Int64, in database: SQLiteConnection) throws(StateError) -> String {
        switch version {
        case 0 where try !columns(of: database).isEmpty:
            // Layout 1's table, without its number: releases before the migrations set the
            // number after creating the table, not in the same transaction.
            try migrations(from: 1, in: database)
        case 0:
            """
            CREATE TABLE accounts (
                id TEXT PRIMARY KEY NOT NULL,
                fingerprint TEXT NOT NULL,
                delivered_fingerprint TEXT,
                attempts INTEGER NOT NULL,
                last_attempt_at INTEGER,
                last_outcome TEXT,
                next_due_at INTEGER,
                last_success_at INTEGER,
                removal TEXT,
                past_removals TEXT,
                removing INTEGER NOT NULL
            ) WITHOUT ROWID;
            """
        case 1:
            // Layout 1 gained the column without a new number: only the earliest files lack it.
            try columns(of: database).contains("past_removals") ? "" : "ALTER TABLE accounts ADD COLUMN past_removals TEXT;"
        default:
            ""
        }
    }

    /// The columns of the accounts table (none before it exists).
    private static func columns(of database: SQLiteConnection) throws(StateError) -> Set<String> {
        let statement = try database.prepare("SELECT name FROM pragma_table_info('accounts')")
        var names: Set<String> = []
        while try statement.step() {
            if let name = statement.text(0) { names.insert(name) }
        }
        return names
    }

    private static func schemaVersion(of database: SQLiteConnection) throws(StateError) -> Int64 {
        let statement = try database.prepare("PRAGMA user_version")
        return try statement.step() ? statement.int64(0) ?? 0 : 0
    }

    /// A list of texts as one column: a JSON array of strings, or NULL when empty.
    static func encodeList(_ texts: [String]) -> String? {
        guard !texts.isEmpty, let data = try? JSONEncoder().encode(texts) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    static func decodeList(_ text: String?) -> [String] {
        guard let text, let list = try? JSONDecoder().decode([String].self, from: Data(text.utf8)) else { return [] }
        return list
    }

    /// Every stored record, ordered by id.
    public func records() throws(StateError) -> [AccountRecord] {
        try connection.withLock { (statements: inout Statements) throws(StateError) -> [AccountRecord] in
            let select = statements.selectAll
            defer { select.reset() }
            var records: [AccountRecord] = []
            while try select.step() {
                records.append(AccountRecord(
                    id: select.text(0) ?? "", fingerprint: select.text(1) ?? "",
                    deliveredFingerprint: select.text(2), attempts: Int(select.int64(3) ?? 0),
                    lastAttemptAt: select.int64(4), lastOutcome: select.text(5), nextDueAt: select.int64(6),
                    lastSuccessAt: select.int64(7), removal: select.text(8), pastRemovals: Self.decodeList(select.text(9)),
                    isRemoving: (select.int64(10) ?? 0) != 0))
            }
            return records
        }
    }

    /// Writes `records` (inserted or replaced by id) and deletes `ids`, all in one transaction.
    public func save(_ records: some Collection<AccountRecord>, deleting ids: some Collection<String> = [String]())
        throws(StateError) {
        guard !records.isEmpty || !ids.isEmpty else { return }
        try connection.withLock { (statements: inout Statements) throws(StateError) in
            guard let writes = statements.writes else {
                throw StateError(.query, "the state database \(path) is open read-only")
            }
            try writes.begin.run()
            do throws(StateError) {
                let upsert = writes.upsert
                for record in records {
                    upsert.bind(1, record.id)
                    upsert.bind(2, record.fingerprint)
                    upsert.bind(3, record.deliveredFingerprint)
                    upsert.bind(4, Int64(record.attempts))
                    upsert.bind(5, record.lastAttemptAt)
                    upsert.bind(6, record.lastOutcome)
                    upsert.bind(7, record.nextDueAt)
                    upsert.bind(8, record.lastSuccessAt)
                    upsert.bind(9, record.removal)
                    upsert.bind(10, Self.encodeList(record.pastRemovals))
                    upsert.bind(11, record.isRemoving ? 1 : 0)
                    try upsert.run()
                }
                for id in ids {
                    writes.delete.bind(1, id)
                    try writes.delete.run()
                }
                try writes.commit.run()
            } catch {
                try? writes.rollback.run()
                throw error
            }
        }
    }

    /// Gives back the memory of the connection's page cache; an idle agent calls it.
    public func releaseMemory() {
        connection.withLock { statements in statements.database.releaseMemory() }
    }

    /// SQLite's `PRAGMA integrity_check`: `ok`, or the problems it found.
    public func integrityCheck() throws(StateError) -> String {
        try connection.withLock { (statements: inout Statements) throws(StateError) -> String in
            let check = try statements.database.prepare("PRAGMA integrity_check")
            var lines: [String] = []
            while try check.step() { lines.append(check.text(0) ?? "") }
            return lines.joined(separator: "\n")
        }
    }
}

/// The connection and its prepared statements, used only under the store's lock.
private struct Statements: @unchecked Sendable {
    let database: SQLiteConnection
    let selectAll: SQLiteConnection.Statement
    /// The statements that write; nil when the store is open read-only.
    let writes: Writes?

    struct Writes {
        let upsert: SQLiteConnection.Statement
        let delete: SQLiteConnection.Statement
        let begin: SQLiteConnection.Statement
        let commit: SQLiteConnection.Statement
        let rollback: SQLiteConnection.Statement
    }

    /// Without `hasPastRemovals` (a layout-1 database read as it is), that column reads as NULL.
    init(_ database: SQLiteConnection, readOnly: Bool, hasPastRemovals: Bool) throws(StateError) {
        self.database = database
        let columns = "id, fingerprint, delivered_fingerprint, attempts, last_attempt_at, last_outcome, next_due_at, last_success_at, removal, past_removals, removing"
        let selected = hasPastRemovals ? columns : columns.replacing("past_removals", with: "NULL")
        selectAll = try database.prepare("SELECT \(selected) FROM accounts ORDER BY id")
        writes = readOnly ? nil : Writes(
            upsert: try database.prepare("INSERT OR REPLACE INTO accounts (\(columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
            delete: try database.prepare("DELETE FROM accounts WHERE id = ?"),
            begin: try database.prepare("BEGIN IMMEDIATE"),
            commit: try database.prepare("COMMIT"),
            rollback: try database.prepare("ROLLBACK"))
    }
}
