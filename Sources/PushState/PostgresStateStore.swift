import Synchronization

/// The state in PostgreSQL (SPEC §11): for several agents sharing their work, or a state that
/// must outlive one machine. The same records as ``SQLiteStateStore``, in a
/// `pushreporter_subscriptions` table of the database `agent.state` names, written in one transaction per batch (one round
/// trip: the batch goes as arrays), so a database is never the bottleneck.
///
/// The schema is created and migrated by the first agent that opens it (or `pushreporter
/// migrate`), under an advisory lock: two agents starting at once do it once.
public final class PostgresStateStore: SharedStateStore {
    /// Where the state is: the URI without its password.
    public let location: String
    private let connection: Mutex<PostgresConnection>
    /// A second connection for the leases (opened on first use), so that a round of leases never
    /// waits behind a batch of records being written, nor the records behind a claim.
    private let leaseConnection = Mutex<PostgresConnection?>(nil)
    private let uri: String
    private let password: String?
    private let readOnly: Bool
    /// The agent this store writes for (`host:pid`), as `status` names it.
    public let agent: String
    /// This process's own identity in the database, unique even when a restarted agent gets
    /// the pid of one that died: the rows it holds name it, and it writes only those (or rows
    /// nobody holds).
    let instance: String
    /// The group this agent joined (``join(leaseTimeout:startsGroups:)``), written with each row.
    private let generation = Mutex<Int64>(0)

    /// The layout this code reads and writes, kept in `pushreporter_schema`.
    /// 1: the first layout; 2: `removal_held` (the removal guard, decided for the group, SPEC
    /// §14) and `delivered_parts` (what `plan` names as changed).
    static let schemaVersion = 2
    /// The advisory lock that serialises migrations (any number unique to pushreporter).
    static let migrationLock: Int64 = 0x7075_7368_7265_7070

    /// Connects to `uri` (a libpq URI; the password from `password`, `PGPASSWORD` or
    /// `~/.pgpass`, never from the URI's text in messages), creating or migrating the schema
    /// unless `readOnly`.
    public init(uri: String, password: String? = nil, readOnly: Bool = false, agent: String = "") throws(StateError) {
        let connection = try PostgresConnection(uri: uri, password: password)
        self.uri = uri
        self.password = password
        location = connection.location
        self.readOnly = readOnly
        self.agent = agent
        var random = SystemRandomNumberGenerator()
        instance = String(random.next() as UInt64, radix: 16)
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
                    CREATE TABLE IF NOT EXISTS pushreporter_subscriptions (
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
                        holder text,
                        group_generation bigint NOT NULL DEFAULT 0,
                        leaving boolean NOT NULL DEFAULT false,
                        PRIMARY KEY (account, service)
                    );
                    CREATE INDEX IF NOT EXISTS pushreporter_subscriptions_holder ON pushreporter_subscriptions (holder);
                    CREATE INDEX IF NOT EXISTS pushreporter_subscriptions_unheld
                        ON pushreporter_subscriptions (next_due_at NULLS FIRST, account, service) WHERE holder IS NULL;
                    CREATE TABLE IF NOT EXISTS pushreporter_group (
                        id integer PRIMARY KEY,
                        generation bigint NOT NULL,
                        started_at bigint NOT NULL
                    );
                    CREATE TABLE IF NOT EXISTS pushreporter_installation (key text PRIMARY KEY, value text NOT NULL);
                    CREATE TABLE IF NOT EXISTS pushreporter_agents (
                        instance text PRIMARY KEY,
                        name text NOT NULL,
                        started_at bigint NOT NULL,
                        seen_at bigint NOT NULL
                    );
                    """)
            }
            if version < 2 {
                try connection.execute("""
                    ALTER TABLE pushreporter_subscriptions ADD COLUMN IF NOT EXISTS removal_held boolean NOT NULL DEFAULT false;
                    ALTER TABLE pushreporter_subscriptions ADD COLUMN IF NOT EXISTS delivered_parts text;
                    CREATE INDEX IF NOT EXISTS pushreporter_subscriptions_held
                        ON pushreporter_subscriptions (account) WHERE removal_held;
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
            try connection.query("SELECT \(Self.columns), removal_held FROM pushreporter_subscriptions ORDER BY account, service")
                .map { row in
                    var record = Self.record(row)
                    if row[13] == "t" {
                        // Held for the group (``publish(_:holdingRemovals:)``), whatever its holder last wrote.
                        record.state = .held
                        record.nextDueAt = nil
                        record.lastOutcome = Self.heldOutcome
                    }
                    return record
                }
        }
    }

    public func deliveredParts() throws(StateError) -> [SubscriptionKey: String] {
        try withConnection { connection throws(StateError) in
            var parts: [SubscriptionKey: String] = [:]
            for row in try connection.query(
                "SELECT account, service, delivered_parts, delivered_fingerprint FROM pushreporter_subscriptions WHERE delivered_parts IS NOT NULL") {
                parts[SubscriptionKey(account: row[0] ?? "", service: row[1] ?? "")] =
                    FingerprintText.currentParts(row[2] ?? "", deliveredFingerprint: row[3])
            }
            return parts
        }
    }

    /// What `status` says of a removal the guard holds for the group.
    static let heldOutcome = "removal held: more accounts left the configuration at once than agent.removalGuard allows; "
        + "pushreporter remove --held sends it"

    /// A record from a row of ``columns``.
    static func record(_ row: [String?]) -> SubscriptionRecord {
        SubscriptionRecord(
            key: SubscriptionKey(account: row[0] ?? "", service: row[1] ?? ""), fingerprint: FingerprintText.current(row[2] ?? ""),
            deliveredFingerprint: FingerprintText.current(row[3]), state: row[4].flatMap(SubscriptionState.init(rawValue:)) ?? .pending,
            attempts: Int(row[5] ?? "0") ?? 0, lastAttemptAt: row[6].flatMap { Int64($0) }, lastOutcome: row[7],
            nextDueAt: row[8].flatMap { Int64($0) }, lastSuccessAt: row[9].flatMap { Int64($0) }, backendData: row[10],
            cleanup: row[11], pastCleanups: PostgresArray.decode(row[12] ?? "{}").compactMap { $0 })
    }

    public func save(_ records: [SubscriptionRecord], deleting keys: [SubscriptionKey]) throws(StateError) {
        guard !records.isEmpty || !keys.isEmpty else { return }
        guard !readOnly else { throw StateError(.query, "the state database \(location) is open read-only") }
        // In key order, as every statement that locks many rows takes them, so that two agents'
        // transactions never wait on each other in a circle.
        let records = records.sorted { $0.key < $1.key }
        // Every record in one statement, each column as an array; those that leave their
        // cleanup's text as it is stored in a second one.
        let groups = !records.contains { $0.cleanupInState != nil } ? [(records, false)]
            : [(records.filter { $0.cleanupInState == nil }, false), (records.filter { $0.cleanupInState != nil }, true)]
        try transaction { connection throws(StateError) in
            for (records, keepsCleanup) in groups where !records.isEmpty {
                func column(_ value: (SubscriptionRecord) -> String?) -> String? { PostgresArray.encode(records.map(value)) }
                let cleanup = keepsCleanup ? "pushreporter_subscriptions.cleanup" : "EXCLUDED.cleanup"
                try connection.query("""
                    INSERT INTO pushreporter_subscriptions (\(Self.columns), group_generation, delivered_parts)
                    SELECT a, s, f, df, st, at, la, lo, nd, ls, bd, c, coalesce(pc::text[], '{}'), $15, dp
                    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::integer[], $7::bigint[],
                                $8::text[], $9::bigint[], $10::bigint[], $11::text[], $12::text[], $13::text[], $16::text[])
                         AS t(a, s, f, df, st, at, la, lo, nd, ls, bd, c, pc, dp)
                    ON CONFLICT (account, service) DO UPDATE SET
                        fingerprint = EXCLUDED.fingerprint, delivered_fingerprint = EXCLUDED.delivered_fingerprint,
                        state = EXCLUDED.state, attempts = EXCLUDED.attempts, last_attempt_at = EXCLUDED.last_attempt_at,
                        last_outcome = EXCLUDED.last_outcome, next_due_at = EXCLUDED.next_due_at,
                        last_success_at = EXCLUDED.last_success_at, backend_data = EXCLUDED.backend_data,
                        cleanup = \(cleanup), past_cleanups = EXCLUDED.past_cleanups,
                        group_generation = EXCLUDED.group_generation,
                        delivered_parts = coalesce(EXCLUDED.delivered_parts, pushreporter_subscriptions.delivered_parts)
                    WHERE pushreporter_subscriptions.holder IS NULL OR pushreporter_subscriptions.holder = $14
                    """, [
                        column { $0.key.account }, column { $0.key.service }, column { $0.fingerprint },
                        column { $0.deliveredFingerprint }, column { $0.state.rawValue }, column { String($0.attempts) },
                        column { $0.lastAttemptAt.map(String.init) }, column { $0.lastOutcome },
                        column { $0.nextDueAt.map(String.init) }, column { $0.lastSuccessAt.map(String.init) },
                        column { $0.backendData }, column { $0.cleanup },
                        // A list per record: each an array literal of its own, read back by unnest above.
                        column { PostgresArray.encode($0.pastCleanups) },
                        instance, String(generation.withLock { $0 }), column { $0.deliveredParts },
                    ])
            }
            if !keys.isEmpty {
                try connection.query("""
                    DELETE FROM pushreporter_subscriptions WHERE (account, service) IN (SELECT * FROM unnest($1::text[], $2::text[]))
                        AND (holder IS NULL OR holder = $3)
                    """, [PostgresArray.encode(keys.map(\.account)), PostgresArray.encode(keys.map(\.service)), instance])
            }
        }
    }

    public func releaseMemory() {}

    // MARK: Several agents (SPEC §11)
    //
    // An agent is alive while its row in `pushreporter_agents` is younger than the lease timeout:
    // renewing its leases is one update of that row, whatever it holds. A subscription is held by
    // the instance its `holder` names. An agent that finds another's row expired deletes it and
    // clears what it held, in one transaction; the expired agent, should it come back, finds its
    // row gone and knows it holds nothing any more. Its heartbeat locks its own row first, and the
    // expiry skips locked rows, so an agent renewing in time is never expelled.

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    /// The database's clock, Unix milliseconds: liveness is reckoned on it, not on the agents'.
    /// Fixed for a statement, so the indexes serve comparisons with it.
    static let now = "(extract(epoch from statement_timestamp()) * 1000)::bigint"

    /// Joins the agents sharing this database. The first agent alive (none seen within
    /// `leaseTimeout`) starts a new group: everything is delivered again. With `startsGroups`
    /// false (`pushreporter remove`) it joins without starting one.
    public func join(leaseTimeout: Duration, startsGroups: Bool = true) throws(StateError) -> SharedStateMembership {
        let timeout = String(Self.milliseconds(leaseTimeout))
        let membership = try transaction(leases: true) { connection throws(StateError) -> SharedStateMembership in
            try connection.query("SELECT pg_advisory_xact_lock($1)", [String(Self.migrationLock + 1)])
            try expireAgents(connection, timeout: timeout)
            let alive = Int(try connection.query("SELECT count(*) FROM pushreporter_agents WHERE instance <> $1", [instance])
                .first?.first.flatMap { $0 } ?? "0") ?? 0
            // Rows whose holder is no agent (a row deleted by hand): nobody's.
            try connection.query("""
                UPDATE pushreporter_subscriptions s SET holder = NULL
                WHERE holder IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pushreporter_agents a WHERE a.instance = s.holder)
                """)
            let startsGroup = alive == 0 && startsGroups
            if startsGroup {
                try connection.query("""
                    INSERT INTO pushreporter_group (id, generation, started_at) VALUES (1, 1, \(Self.now))
                    ON CONFLICT (id) DO UPDATE SET generation = pushreporter_group.generation + 1, started_at = EXCLUDED.started_at
                    """)
            }
            try connection.query("""
                INSERT INTO pushreporter_agents (instance, name, started_at, seen_at) VALUES ($1, $2, \(Self.now), \(Self.now))
                ON CONFLICT (instance) DO UPDATE SET seen_at = EXCLUDED.seen_at
                """, [instance, agent])
            let generation = Int64(try connection.query("SELECT generation FROM pushreporter_group WHERE id = 1")
                .first?.first.flatMap { $0 } ?? "0") ?? 0
            return SharedStateMembership(generation: generation, startedGroup: startsGroup, agents: alive + 1)
        }
        self.generation.withLock { $0 = membership.generation }
        return membership
    }

    /// Deletes the agents not seen within `timeout` (ms) and frees what they held. Rows locked
    /// by an agent renewing now are skipped: it is alive.
    private func expireAgents(_ connection: PostgresConnection, timeout: String) throws(StateError) {
        try connection.query("""
            WITH dead AS (
                DELETE FROM pushreporter_agents WHERE instance IN (
                    SELECT instance FROM pushreporter_agents WHERE seen_at < \(Self.now) - $1::bigint FOR UPDATE SKIP LOCKED)
                RETURNING instance)
            UPDATE pushreporter_subscriptions SET holder = NULL WHERE holder IN (SELECT instance FROM dead)
            """, [timeout])
    }

    /// Writes this agent's configuration into the shared state (the last configuration loaded
    /// by any agent counts): its subscriptions are added when missing and marked as staying;
    /// the others are marked as leaving, and whoever holds them sends their cleanup.
    ///
    /// The removal guard is decided here, for the group (SPEC §14): when `holdingRemovals` says
    /// so of the accounts leaving (those newly leaving and those held already) and of every
    /// account in the state, they are all held (`removal_held`): nobody claims them, so nothing
    /// is sent for them, until a configuration brings them back, one published with the guard
    /// off or not holding releases them, or `pushreporter remove` takes them.
    @discardableResult
    public func publish(_ keys: [SubscriptionKey], holdingRemovals: RemovalsHeld?) throws(StateError) -> PublishedRemovals {
        let keys = keys.sorted()
        let accounts = PostgresArray.encode(keys.map(\.account))
        let services = PostgresArray.encode(keys.map(\.service))
        return try transaction(leases: true) { connection throws(StateError) -> PublishedRemovals in
            // The configuration as a table of its own, keyed, for the joins below: compared with
            // an unnest() of the arrays, each row's EXISTS scanned the whole list, and a million
            // subscriptions ran past the statement timeout. Emptied at commit; per connection.
            try connection.execute("""
                CREATE TEMPORARY TABLE IF NOT EXISTS pushreporter_published (
                    account text NOT NULL, service text NOT NULL, PRIMARY KEY (account, service)
                ) ON COMMIT DELETE ROWS
                """)
            try connection.query("""
                INSERT INTO pushreporter_published SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING
                """, [accounts, services])
            try connection.execute("ANALYZE pushreporter_published")
            // DO NOTHING locks no existing row: publishing never waits on the agents' writes.
            try connection.query("""
                INSERT INTO pushreporter_subscriptions (account, service, fingerprint, state, attempts)
                SELECT account, service, '', 'pending', 0 FROM pushreporter_published
                ON CONFLICT (account, service) DO NOTHING
                """)
            // Back in the configuration: staying, and no longer held (nothing is sent for one
            // that was delivered as it is: its claimer finds it delivered).
            try connection.query("""
                UPDATE pushreporter_subscriptions s SET leaving = false, removal_held = false
                FROM pushreporter_published p
                WHERE (s.leaving OR s.removal_held) AND p.account = s.account AND p.service = s.service
                """)
            // Leaving now: those that were staying, and those held already (decided again).
            let leaving = """
                (NOT leaving OR removal_held) AND NOT EXISTS (
                    SELECT 1 FROM pushreporter_published p WHERE p.account = s.account AND p.service = s.service)
                """
            var holds = false
            if let holdingRemovals {
                let counts = try connection.query("""
                    SELECT count(DISTINCT account) FILTER (WHERE \(leaving)), count(DISTINCT account)
                    FROM pushreporter_subscriptions s
                    """).first ?? []
                func number(_ index: Int) -> Int { counts.count > index ? Int(counts[index] ?? "0") ?? 0 : 0 }
                holds = number(0) > 0 && holdingRemovals(number(0), number(1))
            }
            let newlyHeld = holds ? Int(try connection.query("""
                SELECT count(DISTINCT account) FROM pushreporter_subscriptions s WHERE NOT removal_held AND \(leaving)
                """).first?.first.flatMap { $0 } ?? "0") ?? 0 : 0
            try connection.query("""
                UPDATE pushreporter_subscriptions s SET leaving = true, removal_held = $1 WHERE \(leaving)
                """, [holds ? "true" : "false"])
            return PublishedRemovals(newlyHeldAccounts: newlyHeld, held: try Self.heldCount(connection))
        }
    }

    /// The subscriptions the guard holds for the group.
    private static func heldCount(_ connection: PostgresConnection) throws(StateError) -> Int {
        Int(try connection.query("SELECT count(*) FROM pushreporter_subscriptions WHERE removal_held")
            .first?.first.flatMap { $0 } ?? "0") ?? 0
    }

    /// One round of leases: renews this agent's (one row), expires the agents not seen within
    /// `leaseTimeout` (their subscriptions are nobody's), then claims, of the subscriptions
    /// nobody holds, as many as bring it to its share (the subscriptions divided by the agents
    /// alive), at most `maxClaim`, none of `excluding`. `FOR UPDATE SKIP LOCKED`: agents
    /// claiming at once take different ones.
    public func renewAndClaim(leaseTimeout: Duration, maxClaim: Int, excluding: [SubscriptionKey] = []) throws(StateError) -> LeaseRound {
        let timeout = String(Self.milliseconds(leaseTimeout))
        return try transaction(leases: true) { connection throws(StateError) -> LeaseRound in
            // Its row gone: another agent found it expired and freed what it held.
            let expelled = try connection.query("""
                UPDATE pushreporter_agents SET seen_at = \(Self.now) WHERE instance = $1 RETURNING 1
                """, [instance]).isEmpty
            if expelled {
                try connection.query("""
                    INSERT INTO pushreporter_agents (instance, name, started_at, seen_at) VALUES ($1, $2, \(Self.now), \(Self.now))
                    """, [instance, agent])
            }
            try expireAgents(connection, timeout: timeout)
            let counts = try connection.query("""
                SELECT (SELECT count(*) FROM pushreporter_agents), (SELECT count(*) FROM pushreporter_subscriptions),
                       (SELECT count(*) FROM pushreporter_subscriptions WHERE holder = $1),
                       (SELECT generation FROM pushreporter_group WHERE id = 1),
                       (SELECT count(*) FROM pushreporter_subscriptions WHERE removal_held)
                """, [instance]).first ?? []
            func number(_ index: Int) -> Int { counts.count > index ? Int(counts[index] ?? "0") ?? 0 : 0 }
            let alive = max(1, number(0))
            let share = (number(1) + alive - 1) / alive
            let limit = min(maxClaim, max(0, share - number(2)))
            var claimed: [ClaimedSubscription] = []
            let generation = Int64(counts.count > 3 ? counts[3] ?? "0" : "0") ?? 0
            if limit > 0 {
                claimed = try connection.query("""
                    UPDATE pushreporter_subscriptions SET holder = $1
                    WHERE (account, service) IN (
                        SELECT account, service FROM pushreporter_subscriptions
                        WHERE holder IS NULL AND NOT removal_held
                          AND (account, service) NOT IN (SELECT * FROM unnest($3::text[], $4::text[]))
                        ORDER BY next_due_at NULLS FIRST, account, service
                        LIMIT $2 FOR UPDATE SKIP LOCKED)
                    RETURNING \(Self.columns), group_generation, leaving
                    """, [instance, String(limit), PostgresArray.encode(excluding.map(\.account)),
                          PostgresArray.encode(excluding.map(\.service))]).map { row in
                    ClaimedSubscription(record: Self.record(row), writtenThisGroup: Int64(row[13] ?? "0") == generation,
                                        leaving: row[14] == "t")
                }
            }
            return LeaseRound(expelled: expelled, claimed: claimed, share: share, agents: alive, wanted: limit,
                              heldRemovals: number(4))
        }
    }

    /// Takes `keys` for this agent where nobody holds them (`pushreporter remove`); returns the
    /// agents that hold the others.
    public func take(_ keys: [SubscriptionKey]) throws(StateError) -> [SubscriptionKey: String] {
        guard !keys.isEmpty else { return [:] }
        return try transaction(leases: true) { connection throws(StateError) in
            let accounts = PostgresArray.encode(keys.map(\.account))
            let services = PostgresArray.encode(keys.map(\.service))
            try connection.query("""
                UPDATE pushreporter_subscriptions SET holder = $1, removal_held = false
                WHERE holder IS NULL AND (account, service) IN (SELECT * FROM unnest($2::text[], $3::text[]))
                """, [instance, accounts, services])
            var refused: [SubscriptionKey: String] = [:]
            for row in try connection.query("""
                SELECT s.account, s.service, a.name FROM pushreporter_subscriptions s JOIN pushreporter_agents a ON a.instance = s.holder
                WHERE s.holder <> $1 AND (s.account, s.service) IN (SELECT * FROM unnest($2::text[], $3::text[]))
                """, [instance, accounts, services]) {
                refused[SubscriptionKey(account: row[0] ?? "", service: row[1] ?? "")] = row[2] ?? ""
            }
            return refused
        }
    }

    /// Gives up the leases of `keys` (all of this agent's when nil), so another agent may claim
    /// them at once; an agent that stops gracefully gives up all of them and leaves the group.
    public func release(_ keys: [SubscriptionKey]?) throws(StateError) {
        try transaction(leases: true) { connection throws(StateError) in
            if let keys {
                guard !keys.isEmpty else { return }
                try connection.query("""
                    UPDATE pushreporter_subscriptions SET holder = NULL
                    WHERE holder = $3 AND (account, service) IN (SELECT * FROM unnest($1::text[], $2::text[]))
                    """, [PostgresArray.encode(keys.map(\.account)), PostgresArray.encode(keys.map(\.service)), instance])
            } else {
                try connection.query("UPDATE pushreporter_subscriptions SET holder = NULL WHERE holder = $1", [instance])
                try connection.query("DELETE FROM pushreporter_agents WHERE instance = $1", [instance])
            }
        }
    }

    /// Which agent (`host:pid`) holds each subscription that an agent holds (for `status`).
    /// An agent that died holds its subscriptions until another finds it expired.
    public func holders() throws(StateError) -> [SubscriptionKey: String] {
        try withConnection(leases: true) { connection throws(StateError) in
            var holders: [SubscriptionKey: String] = [:]
            for row in try connection.query("""
                SELECT s.account, s.service, a.name FROM pushreporter_subscriptions s JOIN pushreporter_agents a ON a.instance = s.holder
                """) {
                holders[SubscriptionKey(account: row[0] ?? "", service: row[1] ?? "")] = row[2] ?? ""
            }
            return holders
        }
    }

    /// The installation id all agents of this database share (`%installid%`), made by the first.
    public func installID() throws(StateError) -> String {
        try withConnection(leases: true) { connection throws(StateError) in
            try connection.query("""
                INSERT INTO pushreporter_installation VALUES ('installid', gen_random_uuid()::text) ON CONFLICT (key) DO NOTHING
                """)
            return try connection.query("SELECT value FROM pushreporter_installation WHERE key = 'installid'").first?.first.flatMap { $0 } ?? ""
        }
    }

    /// The installation id, if an agent made one; read only (`pushreporter plan`).
    public func storedInstallID() throws(StateError) -> String? {
        try withConnection { connection throws(StateError) in
            try connection.query("SELECT value FROM pushreporter_installation WHERE key = 'installid'").first?.first.flatMap { $0 }
        }
    }

    /// The schema version of the database, for `pushreporter migrate`.
    public func storedSchemaVersion() throws(StateError) -> Int {
        try withConnection { connection throws(StateError) in try Self.version(of: connection) }
    }

    /// Runs `body` in a transaction, rolled back when it throws; run again (up to three times)
    /// when it lost to another agent's transaction at the same time.
    private func transaction<R: Sendable>(leases: Bool = false, _ body: (PostgresConnection) throws(StateError) -> R) throws(StateError) -> R {
        var tries = 0
        while true {
            do {
                return try withConnection(leases: leases) { connection throws(StateError) in
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
            } catch where error.isConflict && tries < 3 {
                tries += 1
            }
        }
    }

    /// Runs `body` with the connection (the leases' with `leases`), reconnecting first if the
    /// server went away.
    func withConnection<R: Sendable>(leases: Bool = false, _ body: (PostgresConnection) throws(StateError) -> R) throws(StateError) -> R {
        guard leases else {
            return try connection.withLock { (connection: inout PostgresConnection) throws(StateError) -> R in
                if !connection.isAlive { try connection.connect() }
                return try body(connection)
            }
        }
        return try leaseConnection.withLock { (connection: inout PostgresConnection?) throws(StateError) -> R in
            guard let open = connection else {
                let opened = try PostgresConnection(uri: uri, password: password)
                connection = opened
                return try body(opened)
            }
            if !open.isAlive { try open.connect() }
            return try body(open)
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
