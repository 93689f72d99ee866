import Synchronization

/// The state in PostgreSQL (SPEC §11): for several agents sharing their work, or a state that
/// must outlive one machine. The same records as ``SQLiteStateStore``, in a `subscriptions`
/// table of the database `agent.state` names, written in one transaction per batch (one round
/// trip: the batch goes as arrays), so a database is never the bottleneck.
///
/// The schema is created and migrated by the first agent that opens it (or `pushreporter
/// migrate`), under an advisory lock: two agents starting at once do it once.
public final class PostgresStateStore: SharedStateStore {
    /// Where the state is: the URI without its password.
    public let location: String
    private let connection: Mutex<PostgresConnection>
    private let readOnly: Bool
    /// The agent this store writes for (`host:pid`): it writes only rows it holds the lease of.
    public let agent: String

    /// The layout this code reads and writes, kept in `pushreporter_schema`.
    static let schemaVersion = 1
    /// The advisory lock that serialises migrations (any number unique to pushreporter).
    static let migrationLock: Int64 = 0x7075_7368_7265_7070

    /// Connects to `uri` (a libpq URI; the password from `password`, `PGPASSWORD` or
    /// `~/.pgpass`, never from the URI's text in messages), creating or migrating the schema
    /// unless `readOnly`.
    public init(uri: String, password: String? = nil, readOnly: Bool = false, agent: String = "") throws(StateError) {
        let connection = try PostgresConnection(uri: uri, password: password)
        location = connection.location
        self.readOnly = readOnly
        self.agent = agent
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
            // Read again under the lock: another agent may have migrated meanwhile (the DDL
            // below also holds if it did, as its catalogue may be read from before the lock).
            let version = try Self.version(of: connection)
            if version < 1 {
                try connection.execute("""
                    CREATE TABLE IF NOT EXISTS pushreporter_schema (version integer NOT NULL);
                    CREATE TABLE IF NOT EXISTS subscriptions (
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
                    CREATE TABLE IF NOT EXISTS pushreporter_group (started_at bigint NOT NULL);
                    CREATE INDEX IF NOT EXISTS subscriptions_lease ON subscriptions (lease_expires_at);
                    CREATE TABLE IF NOT EXISTS pushreporter_installation (key text PRIMARY KEY, value text NOT NULL);
                    CREATE TABLE IF NOT EXISTS pushreporter_agents (
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
                        WHERE subscriptions.lease_holder IS NULL OR subscriptions.lease_holder = $14
                        """, [
                            column { $0.key.account }, column { $0.key.service }, column { $0.fingerprint },
                            column { $0.deliveredFingerprint }, column { $0.state.rawValue }, column { String($0.attempts) },
                            column { $0.lastAttemptAt.map(String.init) }, column { $0.lastOutcome },
                            column { $0.nextDueAt.map(String.init) }, column { $0.lastSuccessAt.map(String.init) },
                            column { $0.backendData }, column { $0.cleanup },
                            // A list per record: each an array literal of its own, read back by unnest above.
                            column { PostgresArray.encode($0.pastCleanups) },
                            agent,
                        ])
                }
                if !keys.isEmpty {
                    try connection.query("""
                        DELETE FROM subscriptions WHERE (account, service) IN (SELECT * FROM unnest($1::text[], $2::text[]))
                            AND (lease_holder IS NULL OR lease_holder = $3)
                        """, [PostgresArray.encode(keys.map(\.account)), PostgresArray.encode(keys.map(\.service)), agent])
                }
                try connection.query("COMMIT")
            } catch {
                _ = try? connection.query("ROLLBACK")
                throw error
            }
        }
    }

    public func releaseMemory() {}

    // MARK: Several agents (SPEC §11)

    /// What joining the agents sharing this database told this one.
    public struct Membership: Sendable, Equatable {
        /// When the group of agents last started (database time, Unix milliseconds): a
        /// subscription not delivered since is delivered again, as on any start (SPEC §5).
        public var groupStartedAt: Int64
        /// Whether this agent started the group (no other agent was alive).
        public var startedGroup: Bool
        /// The agents alive now, this one included.
        public var agents: Int
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    /// The database's clock, Unix milliseconds: leases are reckoned on it, not on the agents'.
    static let now = "(extract(epoch from clock_timestamp()) * 1000)::bigint"

    /// Joins the agents sharing this database as ``agent``. The first agent alive (none seen
    /// within `leaseTimeout`) starts the group: everything is delivered again.
    public func join(leaseTimeout: Duration) throws(StateError) -> Membership {
        let timeout = String(Self.milliseconds(leaseTimeout))
        return try transaction { connection throws(StateError) in
            try connection.query("SELECT pg_advisory_xact_lock($1)", [String(Self.migrationLock + 1)])
            let alive = Int(try connection.query("""
                SELECT count(*) FROM pushreporter_agents WHERE seen_at > \(Self.now) - $1::bigint AND name <> $2
                """, [timeout, agent]).first?.first.flatMap { $0 } ?? "0") ?? 0
            if alive == 0 {
                try connection.query("DELETE FROM pushreporter_group")
                try connection.query("INSERT INTO pushreporter_group VALUES (\(Self.now))")
            }
            try connection.query("""
                INSERT INTO pushreporter_agents VALUES ($1, \(Self.now), \(Self.now))
                ON CONFLICT (name) DO UPDATE SET started_at = EXCLUDED.started_at, seen_at = EXCLUDED.seen_at
                """, [agent])
            let started = Int64(try connection.query("SELECT max(started_at) FROM pushreporter_group").first?.first.flatMap { $0 } ?? "0") ?? 0
            return Membership(groupStartedAt: started, startedGroup: alive == 0, agents: alive + 1)
        }
    }

    /// Adds the records of `subscriptions` that the database does not have yet, unheld, so that
    /// some agent claims them (every agent loads the same configuration and adds the same ones).
    public func insertMissing(_ records: [SubscriptionRecord]) throws(StateError) {
        guard !records.isEmpty else { return }
        try withConnection { connection throws(StateError) in
            try connection.query("""
                INSERT INTO subscriptions (account, service, fingerprint, state, attempts)
                SELECT a, s, '', 'pending', 0 FROM unnest($1::text[], $2::text[]) AS t(a, s)
                ON CONFLICT (account, service) DO NOTHING
                """, [PostgresArray.encode(records.map(\.key.account)), PostgresArray.encode(records.map(\.key.service))])
        }
    }

    /// One round of leases: renews this agent's (and says it is alive), then claims, of the
    /// subscriptions no live agent holds (`FOR UPDATE SKIP LOCKED`: agents claiming at once take
    /// different ones), as many as bring it to its share (the subscriptions divided by the agents
    /// alive), at most `maxClaim`.
    public func renewAndClaim(leaseTimeout: Duration, maxClaim: Int) throws(StateError) -> LeaseRound {
        let timeout = String(Self.milliseconds(leaseTimeout))
        return try transaction { connection throws(StateError) in
            try connection.query("UPDATE pushreporter_agents SET seen_at = \(Self.now) WHERE name = $1", [agent])
            let held = try connection.query("""
                UPDATE subscriptions SET lease_expires_at = \(Self.now) + $1::bigint WHERE lease_holder = $2 RETURNING account, service
                """, [timeout, agent]).map { SubscriptionKey(account: $0[0] ?? "", service: $0[1] ?? "") }
            let alive = max(1, Int(try connection.query("""
                SELECT count(*) FROM pushreporter_agents WHERE seen_at > \(Self.now) - $1::bigint
                """, [timeout]).first?.first.flatMap { $0 } ?? "1") ?? 1)
            let total = Int(try connection.query("SELECT count(*) FROM subscriptions").first?.first.flatMap { $0 } ?? "0") ?? 0
            let share = (total + alive - 1) / alive
            let limit = min(maxClaim, max(0, share - held.count))
            var claimed: [SubscriptionRecord] = []
            if limit > 0 {
                claimed = try connection.query("""
                    UPDATE subscriptions SET lease_holder = $2, lease_expires_at = \(Self.now) + $1::bigint
                    WHERE (account, service) IN (
                        SELECT account, service FROM subscriptions
                        WHERE lease_holder IS NULL OR lease_expires_at < \(Self.now)
                        ORDER BY next_due_at NULLS FIRST, account, service
                        LIMIT $3 FOR UPDATE SKIP LOCKED)
                    RETURNING \(Self.columns)
                    """, [timeout, agent, String(limit)]).map(Self.record)
            }
            return LeaseRound(held: Set(held), claimed: claimed, share: share, agents: alive, wanted: limit)
        }
    }

    /// What one round of leases found.
    public struct LeaseRound: Sendable {
        /// The subscriptions this agent held and renewed.
        public var held: Set<SubscriptionKey>
        /// Those it claimed this round, as the database had them.
        public var claimed: [SubscriptionRecord]
        /// This agent's share: the subscriptions divided by the agents alive, rounded up.
        public var share: Int
        /// The agents alive, this one included.
        public var agents: Int
        /// How many it tried to claim (fewer claimed: none were free).
        public var wanted: Int
    }

    /// Gives up the leases of `keys` (all of this agent's when nil), so another agent may claim
    /// them at once; an agent that stops gracefully gives up all of them.
    public func release(_ keys: [SubscriptionKey]?) throws(StateError) {
        try withConnection { connection throws(StateError) in
            if let keys {
                guard !keys.isEmpty else { return }
                try connection.query("""
                    UPDATE subscriptions SET lease_holder = NULL, lease_expires_at = NULL
                    WHERE lease_holder = $3 AND (account, service) IN (SELECT * FROM unnest($1::text[], $2::text[]))
                    """, [PostgresArray.encode(keys.map(\.account)), PostgresArray.encode(keys.map(\.service)), agent])
            } else {
                try connection.query("UPDATE subscriptions SET lease_holder = NULL, lease_expires_at = NULL WHERE lease_holder = $1", [agent])
                try connection.query("DELETE FROM pushreporter_agents WHERE name = $1", [agent])
            }
        }
    }

    /// Which agent holds each subscription whose lease has not expired (for `status`).
    public func holders() throws(StateError) -> [SubscriptionKey: String] {
        try withConnection { connection throws(StateError) in
            var holders: [SubscriptionKey: String] = [:]
            for row in try connection.query("""
                SELECT account, service, lease_holder FROM subscriptions WHERE lease_holder IS NOT NULL AND lease_expires_at >= \(Self.now)
                """) {
                holders[SubscriptionKey(account: row[0] ?? "", service: row[1] ?? "")] = row[2] ?? ""
            }
            return holders
        }
    }

    /// The installation id all agents of this database share (`%installid%`), made by the first.
    public func installID() throws(StateError) -> String {
        try withConnection { connection throws(StateError) in
            try connection.query("""
                INSERT INTO pushreporter_installation VALUES ('installid', gen_random_uuid()::text) ON CONFLICT (key) DO NOTHING
                """)
            return try connection.query("SELECT value FROM pushreporter_installation WHERE key = 'installid'").first?.first.flatMap { $0 } ?? ""
        }
    }

    /// The schema version of the database, for `pushreporter migrate`.
    public func storedSchemaVersion() throws(StateError) -> Int {
        try withConnection { connection throws(StateError) in try Self.version(of: connection) }
    }

    /// Runs `body` in a transaction, rolled back when it throws.
    private func transaction<R: Sendable>(_ body: (PostgresConnection) throws(StateError) -> R) throws(StateError) -> R {
        try withConnection { connection throws(StateError) in
            try connection.query("BEGIN")
            do throws(StateError) {
                let result = try body(connection)
                try connection.query("COMMIT")
                return result
            } catch {
                _ = try? connection.query("ROLLBACK")
                throw error
            }
        }
    }

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
