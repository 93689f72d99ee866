import Synchronization

/// The state in PostgreSQL (SPEC §11): for several agents sharing their work, or a state that
/// must outlive one machine. The same records as ``SQLiteStateStore``, in a `subscriptions`
/// table of the database `agent.state` names, written in one transaction per batch (one round
/// trip: the batch goes as arrays), so a database is never the bottleneck.
///
/// The schema is created and migrated by the first agent that opens it (or `pushreporter
/// migrate`), under an advisory lock: two agents starting at once do it once.
public final class PostgresStateStore: StateStore {
    /// Where the state is: the URI without its password.
    public let location: String
    private let connection: Mutex<PostgresConnection>
    private let readOnly: Bool

    /// The layout this code reads and writes, kept in `pushreporter_schema`.
    static let schemaVersion = 1
    /// The advisory lock that serialises migrations (any number unique to pushreporter).
    static let migrationLock: Int64 = 0x7075_7368_7265_7070

    /// Connects to `uri` (a libpq URI; the password from `password`, `PGPASSWORD` or
    /// `~/.pgpass`, never from the URI's text in messages), creating or migrating the schema
    /// unless `readOnly`.
    public init(uri: String, password: String? = nil, readOnly: Bool = false) throws(StateError) {
        let connection = try PostgresConnection(uri: uri, password: password)
        location = connection.location
        self.readOnly = readOnly
        let version = try Self.version(of: connection)
        if version > Self.schemaVersion {
            throw StateError(.schema, "the state database \(location) was written by a newer pushreporter (schema \(version); "
                             + "this one reads schema \(Self.schemaVersion)); run that version")
        }
        if !readOnly && version < Self.schemaVersion {
            try Self.migrate(connection)
        } else if readOnly && version == 0 {
            throw StateError(.missing, "there is no state in \(location) yet: no agent has run with this database")
        }
        self.connection = Mutex(connection)
    }

    /// The schema's version, 0 when there is none yet.
    private static func version(of connection: PostgresConnection) throws(StateError) -> Int {
        let exists = try connection.query("SELECT to_regclass('pushreporter_schema') IS NOT NULL")
        guard exists.first?.first == "t" else { return 0 }
        return Int(try connection.query("SELECT max(version) FROM pushreporter_schema").first?.first.flatMap { $0 } ?? "0") ?? 0
    }

    /// Brings the schema to ``schemaVersion`` in one transaction, under the advisory lock.
    private static func migrate(_ connection: PostgresConnection) throws(StateError) {
        try connection.query("BEGIN")
        do throws(StateError) {
            try connection.query("SELECT pg_advisory_xact_lock($1)", [String(migrationLock)])
            // Read again under the lock: another agent may have migrated meanwhile.
            let version = try Self.version(of: connection)
            if version < 1 {
                try connection.execute("""
                    CREATE TABLE pushreporter_schema (version integer NOT NULL);
                    CREATE TABLE subscriptions (
                        account text NOT NULL,
                        service text NOT NULL,
                        fingerprint text NOT NULL,
                        delivered_fingerprint text,
                        state text NOT NULL,
                        attempts integer NOT NULL,
                        last_attempt_at bigint,
                        last_outcome text,
                        next_due_at bigint,
                        last_success_at bigint,
                        backend_data text,
                        cleanup text,
                        past_cleanups text[] NOT NULL DEFAULT '{}',
                        lease_holder text,
                        lease_expires_at bigint,
                        PRIMARY KEY (account, service)
                    );
                    CREATE INDEX subscriptions_lease ON subscriptions (lease_expires_at);
                    CREATE TABLE pushreporter_installation (key text PRIMARY KEY, value text NOT NULL);
                    CREATE TABLE pushreporter_agents (
                        name text PRIMARY KEY,
                        started_at bigint NOT NULL,
                        seen_at bigint NOT NULL
                    );
                    """)
            }
            try connection.query("DELETE FROM pushreporter_schema")
            try connection.query("INSERT INTO pushreporter_schema VALUES ($1)", [String(schemaVersion)])
            try connection.query("COMMIT")
        } catch {
            _ = try? connection.query("ROLLBACK")
            throw error
        }
    }

    /// The columns of a record, in the order `records()` reads them and `save` writes them.
    static let columns = "account, service, fingerprint, delivered_fingerprint, state, attempts, last_attempt_at, last_outcome, "
        + "next_due_at, last_success_at, backend_data, cleanup, past_cleanups"

    public func records() throws(StateError) -> [SubscriptionRecord] {
        try withConnection { connection throws(StateError) in
            try connection.query("SELECT \(Self.columns) FROM subscriptions ORDER BY account, service").map(Self.record)
        }
    }

    /// A record from a row of ``columns``.
    static func record(_ row: [String?]) -> SubscriptionRecord {
        SubscriptionRecord(
            key: SubscriptionKey(account: row[0] ?? "", service: row[1] ?? ""), fingerprint: row[2] ?? "",
            deliveredFingerprint: row[3], state: row[4].flatMap(SubscriptionState.init(rawValue:)) ?? .pending,
            attempts: Int(row[5] ?? "0") ?? 0, lastAttemptAt: row[6].flatMap { Int64($0) }, lastOutcome: row[7],
            nextDueAt: row[8].flatMap { Int64($0) }, lastSuccessAt: row[9].flatMap { Int64($0) }, backendData: row[10],
            cleanup: row[11], pastCleanups: PostgresArray.decode(row[12] ?? "{}").compactMap { $0 })
    }

    public func save(_ records: [SubscriptionRecord], deleting keys: [SubscriptionKey]) throws(StateError) {
        guard !records.isEmpty || !keys.isEmpty else { return }
        guard !readOnly else { throw StateError(.query, "the state database \(location) is open read-only") }
        try withConnection { connection throws(StateError) in
            try connection.query("BEGIN")
            do throws(StateError) {
                if !records.isEmpty {
                    // Every record in one statement: each column as an array.
                    func column(_ value: (SubscriptionRecord) -> String?) -> String? { PostgresArray.encode(records.map(value)) }
                    try connection.query("""
                        INSERT INTO subscriptions (\(Self.columns))
                        SELECT a, s, f, df, st, at, la, lo, nd, ls, bd, c,
                               coalesce((SELECT array_agg(x) FROM unnest(pc::text[]) AS x), '{}')
                        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::integer[], $7::bigint[],
                                    $8::text[], $9::bigint[], $10::bigint[], $11::text[], $12::text[], $13::text[])
                             AS t(a, s, f, df, st, at, la, lo, nd, ls, bd, c, pc)
                        ON CONFLICT (account, service) DO UPDATE SET
                            fingerprint = EXCLUDED.fingerprint, delivered_fingerprint = EXCLUDED.delivered_fingerprint,
                            state = EXCLUDED.state, attempts = EXCLUDED.attempts, last_attempt_at = EXCLUDED.last_attempt_at,
                            last_outcome = EXCLUDED.last_outcome, next_due_at = EXCLUDED.next_due_at,
                            last_success_at = EXCLUDED.last_success_at, backend_data = EXCLUDED.backend_data,
                            cleanup = EXCLUDED.cleanup, past_cleanups = EXCLUDED.past_cleanups
                        """, [
                            column { $0.key.account }, column { $0.key.service }, column { $0.fingerprint },
                            column { $0.deliveredFingerprint }, column { $0.state.rawValue }, column { String($0.attempts) },
                            column { $0.lastAttemptAt.map(String.init) }, column { $0.lastOutcome },
                            column { $0.nextDueAt.map(String.init) }, column { $0.lastSuccessAt.map(String.init) },
                            column { $0.backendData }, column { $0.cleanup },
                            // A list per record: each an array literal of its own, read back by unnest above.
                            column { PostgresArray.encode($0.pastCleanups) },
                        ])
                }
                if !keys.isEmpty {
                    try connection.query("""
                        DELETE FROM subscriptions WHERE (account, service) IN (SELECT * FROM unnest($1::text[], $2::text[]))
                        """, [PostgresArray.encode(keys.map(\.account)), PostgresArray.encode(keys.map(\.service))])
                }
                try connection.query("COMMIT")
            } catch {
                _ = try? connection.query("ROLLBACK")
                throw error
            }
        }
    }

    public func releaseMemory() {}

    /// Runs `body` with the connection, reconnecting once first if the server went away.
    func withConnection<R: Sendable>(_ body: (PostgresConnection) throws(StateError) -> R) throws(StateError) -> R {
        try connection.withLock { (connection: inout PostgresConnection) throws(StateError) -> R in
            if !connection.isAlive { try connection.connect() }
            let result = try body(connection)
            return result
        }
    }
}

/// PostgreSQL's text form of one-dimensional arrays: `{"a","b\"c",NULL}`.
enum PostgresArray {
    static func encode(_ values: [String?]) -> String {
        "{" + values.map { value in
            guard let value else { return "NULL" }
            var out = "\""
            for character in value.unicodeScalars {
                if character == "\"" || character == "\\" { out += "\\" }
                out.unicodeScalars.append(character)
            }
            return out + "\""
        }.joined(separator: ",") + "}"
    }

    static func encode(_ values: [String]) -> String {
        encode(values.map(Optional.some))
    }

    /// Reads what PostgreSQL writes for a `text[]`: quoted or bare elements, NULL.
    static func decode(_ text: String) -> [String?] {
        var scalars = Array(text.unicodeScalars)[...]
        guard scalars.first == "{", scalars.last == "}" else { return [] }
        scalars = scalars.dropFirst().dropLast()
        var values: [String?] = []
        while !scalars.isEmpty {
            var value = ""
            if scalars.first == "\"" {
                scalars = scalars.dropFirst()
                while let scalar = scalars.popFirst(), scalar != "\"" {
                    if scalar == "\\", let escaped = scalars.popFirst() {
                        value.unicodeScalars.append(escaped)
                    } else {
                        value.unicodeScalars.append(scalar)
                    }
                }
                values.append(value)
            } else {
                while let scalar = scalars.first, scalar != "," {
                    value.unicodeScalars.append(scalar)
                    scalars = scalars.dropFirst()
                }
                values.append(value == "NULL" ? nil : value)
            }
            if scalars.first == "," { scalars = scalars.dropFirst() }
        }
        return values
    }
}
