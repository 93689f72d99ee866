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
/// Several processes may use the file at once (`status` reads while the agent writes).
public final class SQLiteStateStore: StateStore {
    /// The database's file name inside the state directory.
    public static let fileName = "state.sqlite"

    /// The database file.
    public let path: String
    public var location: String { path }
    private let connection: Mutex<Statements>
    private let readOnly: Bool

    /// Opens the database of `directory`, creating it (0600) and its schema when missing, and
    /// migrating an older layout.
    ///
    /// With `readOnly`, nothing is created or migrated: a directory without a database throws an
    /// error whose ``StateError/isMissing`` is true, and an older layout is read as it is.
    public init(directory: StateDirectory, readOnly: Bool = false) throws(StateError) {
        path = directory.path + "/" + Self.fileName
        self.readOnly = readOnly
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
                PRAGMA cache_size = \(Self.idleCacheSize);
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
                version = Self.schemaVersion
            }
        }
        var layout = Statements.Layout.subscriptions
        if readOnly && version < 3 {
            // Written by an earlier version (which may still be running): read as it is.
            let accountColumns = try Self.columns(of: database, table: "accounts")
            if !accountColumns.isEmpty {
                layout = .accounts(hasPastRemovals: accountColumns.contains("past_removals"))
            } else if try Self.columns(of: database, table: "subscriptions").isEmpty {
                // Created by an agent that has not written its layout yet.
                layout = .empty
            }
        }
        connection = Mutex(try Statements(database, readOnly: readOnly, layout: layout))
    }

    /// The layout this code reads and writes, kept in SQLite's `user_version`. Opening for
    /// writing migrates from the number it finds (`migrations(from:)`); a database with a higher
    /// one is refused. Read-only, an older layout is read as it is.
    /// 1: the first layout, one row per account (its later databases have `past_removals`
    /// already); 2: `past_removals` always there; 3: one row per subscription (account × service);
    /// 4: the tracking actions sent once (``SQLiteTrackedActions``) beside them; 5:
    /// `delivered_parts` (what `plan` names as changed).
    static let schemaVersion: Int64 = 5

    /// The table of layout 3.
    private static let subscriptionsTable = """
        CREATE TABLE subscriptions (
            account TEXT NOT NULL,
            service TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            delivered_fingerprint TEXT,
            state TEXT NOT NULL,
            attempts INTEGER NOT NULL,
            last_attempt_at INTEGER,
            last_outcome TEXT,
            next_due_at INTEGER,
            last_success_at INTEGER,
            backend_data TEXT,
            cleanup TEXT,
            past_cleanups TEXT,
            PRIMARY KEY (account, service)
        ) WITHOUT ROWID;

        """

    /// The table layout 4 adds: one row per tracking action delivered (SPEC §9.4), keyed by
    /// what identifies the request (see ``SQLiteTrackedActions``).
    static let trackedActionsTable = """
        CREATE TABLE tracked_actions (
            key TEXT PRIMARY KEY NOT NULL,
            service TEXT NOT NULL,
            message_id TEXT NOT NULL,
            delivery_id TEXT NOT NULL,
            action TEXT NOT NULL,
            sent_at INTEGER NOT NULL
        ) WITHOUT ROWID;

        """

    /// How a row of layouts 1 and 2 (one per account) reads as a subscription: the account's own
    /// Acrobits web services, its removal as the cleanup, its phase as the state.
    fileprivate static func accountsAsSubscriptions(pastRemovals: String) -> String {
        """
        SELECT id, '\(SubscriptionKey.acrobits)', fingerprint, delivered_fingerprint,
               CASE WHEN removing != 0 THEN 'removing'
                    WHEN fingerprint != '' AND delivered_fingerprint = fingerprint AND attempts = 0 THEN 'delivered'
                    WHEN attempts > 0 THEN 'retrying'
                    ELSE 'pending' END,
               attempts, last_attempt_at, last_outcome, next_due_at, last_success_at, NULL, removal, \(pastRemovals)
        FROM accounts
        """
    }

    /// The SQL that brings `database`, of layout `version` (0: none yet), to `schemaVersion`.
    private static func migrations(from version: Int64, in database: SQLiteConnection) throws(StateError) -> String {
        // Each layout's tables, then what later layouts add beside them.
        try subscriptionMigrations(from: version, in: database) + (version < 4 ? trackedActionsTable : "")
            + (version < 5 ? "ALTER TABLE subscriptions ADD COLUMN delivered_parts TEXT;\n" : "")
    }

    /// The SQL that brings the subscriptions of layout `version` to layout 3.
    private static func subscriptionMigrations(from version: Int64, in database: SQLiteConnection) throws(StateError) -> String {
        switch version {
        case 0 where try !columns(of: database, table: "accounts").isEmpty:
            // Layout 1's table, without its number: releases before the migrations set the
            // number after creating the table, not in the same transaction.
            try subscriptionMigrations(from: 1, in: database)
        case 0:
            subscriptionsTable
        case 1:
            // Layout 1 gained the column without a new number: only the earliest files lack it.
            try columns(of: database, table: "accounts").contains("past_removals")
                ? try subscriptionMigrations(from: 2, in: database)
                : "ALTER TABLE accounts ADD COLUMN past_removals TEXT;\n" + subscriptionsTable
                    + "INSERT INTO subscriptions \(accountsAsSubscriptions(pastRemovals: "past_removals"));\nDROP TABLE accounts;\n"
        case 2:
            subscriptionsTable + "INSERT INTO subscriptions \(accountsAsSubscriptions(pastRemovals: "past_removals"));\nDROP TABLE accounts;\n"
        default:
            ""
        }
    }

    /// The columns of `table` (none before it exists).
    private static func columns(of database: SQLiteConnection, table: String) throws(StateError) -> Set<String> {
        let statement = try database.prepare("SELECT name FROM pragma_table_info('\(table)')")
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

    public func records() throws(StateError) -> [SubscriptionRecord] {
        try connection.withLock { (statements: inout Statements) throws(StateError) -> [SubscriptionRecord] in
            let select = statements.selectAll
            defer { select.reset() }
            var records: [SubscriptionRecord] = []
            while try select.step() {
                records.append(SubscriptionRecord(
                    key: SubscriptionKey(account: select.text(0) ?? "", service: select.text(1) ?? ""),
                    fingerprint: FingerprintText.current(select.text(2) ?? ""),
                    deliveredFingerprint: FingerprintText.current(select.text(3)),
                    state: select.text(4).flatMap(SubscriptionState.init(rawValue:)) ?? .pending,
                    attempts: Int(select.int64(5) ?? 0), lastAttemptAt: select.int64(6), lastOutcome: select.text(7),
                    nextDueAt: select.int64(8), lastSuccessAt: select.int64(9), backendData: select.text(10),
                    cleanup: select.text(11), pastCleanups: Self.decodeList(select.text(12))))
            }
            return records
        }
    }

    public func deliveredParts() throws(StateError) -> [SubscriptionKey: String] {
        try connection.withLock { (statements: inout Statements) throws(StateError) -> [SubscriptionKey: String] in
            // An older layout (read-only, its agent may still run) keeps none.
            guard try Self.columns(of: statements.database, table: "subscriptions").contains("delivered_parts") else { return [:] }
            let select = try statements.database.prepare(
                "SELECT account, service, delivered_parts, delivered_fingerprint FROM subscriptions WHERE delivered_parts IS NOT NULL")
            var parts: [SubscriptionKey: String] = [:]
            while try select.step() {
                parts[SubscriptionKey(account: select.text(0) ?? "", service: select.text(1) ?? "")] =
                    FingerprintText.currentParts(select.text(2) ?? "", deliveredFingerprint: select.text(3))
            }
            return parts
        }
    }

    /// One row read per key: a reload asks for the few whose delivery it replaces, or the
    /// accounts that left, not for every record.
    public func cleanups(of keys: [SubscriptionKey]) throws(StateError) -> [SubscriptionKey: String] {
        guard !keys.isEmpty else { return [:] }
        return try connection.withLock { (statements: inout Statements) throws(StateError) -> [SubscriptionKey: String] in
            let select = try statements.database.prepare("SELECT cleanup FROM subscriptions WHERE account = ? AND service = ?")
            var texts: [SubscriptionKey: String] = [:]
            for key in keys {
                select.bind(1, key.account)
                select.bind(2, key.service)
                if try select.step(), let text = select.text(0) { texts[key] = text }
                select.reset()
            }
            return texts
        }
    }

    /// The page cache between writes (in KiB, as `PRAGMA cache_size` takes a negative size).
    static let idleCacheSize = -1024
    /// The batches that get a larger cache while they are written (64 MB at most, taken as used).
    static let largeBatch = 1_000

    public func save(_ records: [SubscriptionRecord], deleting keys: [SubscriptionKey] = []) throws(StateError) {
        guard !records.isEmpty || !keys.isEmpty else { return }
        try connection.withLock { (statements: inout Statements) throws(StateError) in
            guard let writes = statements.writes else {
                throw StateError(.query, "the state database \(path) is open read-only")
            }
            // A large batch (the first start of 100,000 subscriptions) gets a page cache that holds
            // the table while it is written: with the idle agent's 1 MB, SQLite spilled pages to
            // the log mid-transaction, and writing 100k rows took 0.57 s instead of 0.37 s.
            let large = records.count + keys.count >= Self.largeBatch
            if large, (try? statements.database.execute("PRAGMA cache_size = -65536")) != nil { statements.cacheRaised = true }
            // Put back after the batch, or at the next write if that failed (SQLITE_BUSY, say).
            defer {
                if statements.cacheRaised, (try? statements.database.execute("PRAGMA cache_size = \(Self.idleCacheSize)")) != nil {
                    statements.cacheRaised = false
                }
            }
            try writes.begin.run()
            do throws(StateError) {
                let upsert = writes.upsert
                for record in records {
                    upsert.bind(1, record.key.account)
                    upsert.bind(2, record.key.service)
                    upsert.bind(3, record.fingerprint)
                    upsert.bind(4, record.deliveredFingerprint)
                    upsert.bind(5, record.state.rawValue)
                    upsert.bind(6, Int64(record.attempts))
                    upsert.bind(7, record.lastAttemptAt)
                    upsert.bind(8, record.lastOutcome)
                    upsert.bind(9, record.nextDueAt)
                    upsert.bind(10, record.lastSuccessAt)
                    upsert.bind(11, record.backendData)
                    upsert.bind(12, record.cleanup)
                    upsert.bind(13, Self.encodeList(record.pastCleanups))
                    upsert.bind(14, record.deliveredParts)
                    upsert.bind(15, Int64(record.cleanupInState == nil ? 0 : 1))
                    try upsert.run()
                }
                for key in keys {
                    writes.delete.bind(1, key.account)
                    writes.delete.bind(2, key.service)
                    try writes.delete.run()
                }
                try writes.commit.run()
            } catch {
                try? writes.rollback.run()
                throw error
            }
        }
    }

    /// The connection's `PRAGMA cache_size` (for tests).
    func pageCacheSize() throws(StateError) -> Int64 {
        try connection.withLock { (statements: inout Statements) throws(StateError) -> Int64 in
            let query = try statements.database.prepare("PRAGMA cache_size")
            _ = try query.step()
            return query.int64(0) ?? 0
        }
    }

    /// Gives back the memory of the connection's page cache; an idle agent calls it.
    public func releaseMemory() {
        connection.withLock { statements in statements.database.releaseMemory() }
    }

    /// The write-ahead log folded into the database and truncated: a round left megabytes of
    /// `state.sqlite-wal` behind, which the next opening would fold in anyway.
    public func compactOnClose() {
        guard !readOnly else { return }
        connection.withLock { statements in statements.database.checkpointTruncating() }
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

    /// The layout's `user_version` (for `pushreporter migrate` and tests).
    public func schemaVersion() throws(StateError) -> Int64 {
        try connection.withLock { (statements: inout Statements) throws(StateError) -> Int64 in
            try Self.schemaVersion(of: statements.database)
        }
    }
}

/// The connection and its prepared statements, used only under the store's lock.
private struct Statements: @unchecked Sendable {
    /// The table rows are read from.
    enum Layout {
        /// Layout 3: one row per subscription.
        case subscriptions
        /// Layouts 1 and 2 (read-only): one row per account.
        case accounts(hasPastRemovals: Bool)
        /// No table yet (read-only): no rows.
        case empty
    }

    let database: SQLiteConnection
    let selectAll: SQLiteConnection.Statement
    /// The statements that write; nil when the store is open read-only.
    let writes: Writes?
    /// Whether the page cache is still the larger one of a large batch.
    var cacheRaised = false

    struct Writes {
        let upsert: SQLiteConnection.Statement
        let delete: SQLiteConnection.Statement
        let begin: SQLiteConnection.Statement
        let commit: SQLiteConnection.Statement
        let rollback: SQLiteConnection.Statement
    }

    init(_ database: SQLiteConnection, readOnly: Bool, layout: Layout) throws(StateError) {
        self.database = database
        let columns = "account, service, fingerprint, delivered_fingerprint, state, attempts, last_attempt_at, last_outcome, "
            + "next_due_at, last_success_at, backend_data, cleanup, past_cleanups"
        switch layout {
        case .subscriptions:
            selectAll = try database.prepare("SELECT \(columns) FROM subscriptions ORDER BY account, service")
        case .accounts(let hasPastRemovals):
            selectAll = try database.prepare(SQLiteStateStore.accountsAsSubscriptions(pastRemovals: hasPastRemovals ? "past_removals" : "NULL")
                                             + " ORDER BY id")
        case .empty:
            selectAll = try database.prepare("SELECT \(columns.split(separator: ",").map { _ in "NULL" }.joined(separator: ", ")) WHERE 0")
        }
        writes = readOnly ? nil : Writes(
            // An upsert, not a replacement: a record written without its delivery's parts keeps
            // those written with it, and one whose cleanup's text the agent let go keeps its text.
            upsert: try database.prepare("""
                INSERT INTO subscriptions (\(columns), delivered_parts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (account, service) DO UPDATE SET fingerprint = excluded.fingerprint,
                    delivered_fingerprint = excluded.delivered_fingerprint, state = excluded.state, attempts = excluded.attempts,
                    last_attempt_at = excluded.last_attempt_at, last_outcome = excluded.last_outcome,
                    next_due_at = excluded.next_due_at, last_success_at = excluded.last_success_at,
                    backend_data = excluded.backend_data, cleanup = CASE WHEN ?15 THEN cleanup ELSE excluded.cleanup END,
                    past_cleanups = excluded.past_cleanups,
                    delivered_parts = coalesce(excluded.delivered_parts, delivered_parts)
                """),
            delete: try database.prepare("DELETE FROM subscriptions WHERE account = ? AND service = ?"),
            begin: try database.prepare("BEGIN IMMEDIATE"),
            commit: try database.prepare("COMMIT"),
            rollback: try database.prepare("ROLLBACK"))
    }
}
