import Foundation
@testable import PushState
import PushTestSupport
import Testing
import PushTestThreads

/// What only the SQLite store does: its files, its layouts and their migration.
@Suite(.blockingThreads) struct SQLiteStateStoreTests {
    private func sample(_ id: String) -> SubscriptionRecord {
        SubscriptionRecord(key: SubscriptionKey(account: id, service: SubscriptionKey.acrobits), fingerprint: "f-\(id)",
                           deliveredFingerprint: "f-\(id)", state: .delivered, lastAttemptAt: 1_700_000_000_000,
                           lastOutcome: "delivered", lastSuccessAt: 1_700_000_000_000, cleanup: #"{"method":"DELETE"}"#)
    }

    @Test func filesAreOwnerOnlyAndTheJournalIsWAL() throws {
        let temporary = TemporaryDirectory()
        let directory = try StateDirectory(path: temporary.path + "/new/state")
        let store = try SQLiteStateStore(directory: directory)
        try store.save([sample("alice")], deleting: [])
        func mode(_ path: String) throws -> Int {
            try (FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
        }
        #expect(try mode(directory.path) == 0o700)
        #expect(try mode(store.path) == 0o600)
        #expect(try mode(store.path + "-wal") == 0o600)
        #expect(try mode(store.path + "-shm") == 0o600)
    }

    @Test func aLargeBatchIsWrittenWithALargerCacheAndTheSmallOneComesBack() throws {
        let temporary = TemporaryDirectory()
        let store = try SQLiteStateStore(directory: try StateDirectory(path: temporary.path + "/state"))
        #expect(try store.pageCacheSize() == Int64(SQLiteStateStore.idleCacheSize))
        let records = (0..<SQLiteStateStore.largeBatch + 10).map { sample("a\($0)") }
        try store.save(records, deleting: [])
        #expect(try store.pageCacheSize() == Int64(SQLiteStateStore.idleCacheSize), "the idle agent keeps its small cache")
        #expect(try store.records().count == records.count)
        try store.save([], deleting: records.prefix(SQLiteStateStore.largeBatch).map(\.key))
        #expect(try store.records().map(\.key.account).sorted() == (SQLiteStateStore.largeBatch..<records.count).map { "a\($0)" }.sorted())
        #expect(try store.pageCacheSize() == Int64(SQLiteStateStore.idleCacheSize))
    }

    @Test func readingADirectoryWithoutStateSaysSo() throws {
        let temporary = TemporaryDirectory()
        let directory = try StateDirectory(path: temporary.path, create: false)
        #expect(throws: StateError.self) { try SQLiteStateStore(directory: directory, readOnly: true) }
        do {
            _ = try SQLiteStateStore(directory: directory, readOnly: true)
        } catch {
            #expect(error.isMissing)
            #expect(error.description == "there is no state in \(temporary.path) yet: the agent has not run with this state directory")
        }
        #expect(throws: StateDirectory.Problem.self) { try StateDirectory(path: temporary.path + "/absent", create: false) }
    }

    @Test func aDatabaseOfANewerSchemaIsRefusedAndLeftAsItIs() throws {
        let temporary = TemporaryDirectory()
        let directory = try StateDirectory(path: temporary.path + "/state")
        try SQLiteStateStore(directory: directory).save([sample("alice")], deleting: [])
        // Closed, the WAL is checkpointed into the file, whose header holds user_version as a
        // big-endian 32-bit number at byte 60 (SQLite's file format, section 1.3).
        let path = directory.path + "/" + SQLiteStateStore.fileName
        var bytes = try #require(FileManager.default.contents(atPath: path))
        #expect(bytes[60..<64].elementsEqual([0, 0, 0, 5]))
        bytes.replaceSubrange(60..<64, with: [0, 0, 0, 7])
        try bytes.write(to: URL(fileURLWithPath: path))
        for readOnly in [false, true] {
            #expect {
                try SQLiteStateStore(directory: directory, readOnly: readOnly)
            } throws: { error in
                "\(error)" == "the state database \(path) was written by a newer pushreporter (schema 7; "
                    + "this one reads schema 5); run that version, or move the state directory aside"
            }
        }
        #expect(try #require(FileManager.default.contents(atPath: path))[60..<64].elementsEqual([0, 0, 0, 7]))
    }

    /// A state directory whose database has the first layout (schema 1), as an earlier
    /// pushreporter wrote it: its accounts table has `pastRemovals` or not, and holds `row`;
    /// `version` 0 is the table without its number (a crash between the two writes).
    private func firstLayout(_ temporary: TemporaryDirectory, pastRemovals: Bool, row: String,
                             version: Int = 1) throws -> StateDirectory {
        let directory = try StateDirectory(path: temporary.path + "/state")
        let old = try SQLiteConnection(path: directory.path + "/" + SQLiteStateStore.fileName, readOnly: false)
        try old.execute("""
            CREATE TABLE accounts (id TEXT PRIMARY KEY NOT NULL, fingerprint TEXT NOT NULL, delivered_fingerprint TEXT,
                attempts INTEGER NOT NULL, last_attempt_at INTEGER, last_outcome TEXT, next_due_at INTEGER,
                last_success_at INTEGER, removal TEXT, \(pastRemovals ? "past_removals TEXT, " : "")removing INTEGER NOT NULL)
                WITHOUT ROWID;
            INSERT INTO accounts VALUES \(row);
            PRAGMA user_version = \(version);
            """)
        return directory
    }

    @Test func aDatabaseOfTheFirstLayoutIsReadAsItIsAndMigratedWhenWritten() throws {
        let temporary = TemporaryDirectory()
        // What pushreporter wrote before past_removals existed.
        let directory = try firstLayout(temporary, pastRemovals: false,
                                        row: #"('alice', 'f1', NULL, 2, 5, 'HTTP 503', 9, NULL, '{"method":"DELETE"}', 0)"#)
        let path = directory.path + "/" + SQLiteStateStore.fileName
        func version() throws -> Int64 {
            let statement = try SQLiteConnection(path: path, readOnly: true).prepare("PRAGMA user_version")
            return try statement.step() ? statement.int64(0) ?? -1 : -1
        }

        let read = try SQLiteStateStore(directory: directory, readOnly: true).records()
        #expect(read.map(\.key) == [SubscriptionKey(account: "alice", service: SubscriptionKey.acrobits)])
        #expect(read.first?.state == .retrying)
        #expect(read.first?.lastOutcome == "HTTP 503")
        #expect(read.first?.pastCleanups == [])
        #expect(try version() == 1, "reading changes nothing")

        let store = try SQLiteStateStore(directory: directory)
        #expect(try version() == 5)
        var record = try #require(try store.records().first)
        #expect(record.cleanup == #"{"method":"DELETE"}"#)
        record.pastCleanups = ["earlier"]
        try store.save([record], deleting: [])
        #expect(try SQLiteStateStore(directory: directory, readOnly: true).records().first?.pastCleanups == ["earlier"])
    }

    @Test func aDatabaseOfTheFirstLayoutThatHasPastRemovalsAlreadyOpens() throws {
        let temporary = TemporaryDirectory()
        // What later builds of schema 1 wrote: the column added, the number left at 1.
        let directory = try firstLayout(temporary, pastRemovals: true,
                                        row: #"('bob', 'f1', NULL, 0, NULL, NULL, NULL, NULL, NULL, '["kept"]', 0)"#)
        #expect(try SQLiteStateStore(directory: directory, readOnly: true).records().first?.pastCleanups == ["kept"])
        let store = try SQLiteStateStore(directory: directory)
        #expect(try store.records().first?.pastCleanups == ["kept"])
    }

    @Test func aFirstLayoutTableWithoutItsNumberIsMigrated() throws {
        let temporary = TemporaryDirectory()
        let directory = try firstLayout(temporary, pastRemovals: false,
                                        row: #"('carol', 'f1', NULL, 0, NULL, NULL, NULL, NULL, NULL, 0)"#, version: 0)
        let store = try SQLiteStateStore(directory: directory)
        var record = try #require(try store.records().first)
        #expect(record.key.account == "carol")
        record.pastCleanups = ["earlier"]
        try store.save([record], deleting: [])
        #expect(try SQLiteStateStore(directory: directory, readOnly: true).records().first?.pastCleanups == ["earlier"])
    }
}

extension SQLiteStateStoreTests {
    @Test func aSecondLayoutDatabaseBecomesOneSubscriptionPerAccount() throws {
        let temporary = TemporaryDirectory()
        let directory = try firstLayout(temporary, pastRemovals: true, row: """
            ('alice', 'f1', 'f1', 0, 5, 'delivered', NULL, 5, 'R', '["P"]', 0),
            ('bob', 'f2', NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL, 0),
            ('carol', '', 'f3', 1, 6, 'HTTP 503', 9, 4, 'R3', NULL, 1)
            """, version: 2)
        let records = try SQLiteStateStore(directory: directory).records()
        #expect(records.map(\.key.description) == ["alice", "bob", "carol"])
        #expect(records.allSatisfy { $0.key.service == SubscriptionKey.acrobits })
        #expect(records.map(\.state) == [.delivered, .pending, .removing])
        #expect(records[0].cleanup == "R" && records[0].pastCleanups == ["P"] && records[0].lastSuccessAt == 5)
        #expect(records[2].attempts == 1 && records[2].nextDueAt == 9 && records[2].cleanup == "R3")
        let statement = try SQLiteConnection(path: directory.path + "/" + SQLiteStateStore.fileName, readOnly: true)
            .prepare("SELECT count(*) FROM sqlite_master WHERE name = 'accounts'")
        #expect(try statement.step() && statement.int64(0) == 0, "the old table is gone")
    }
}

/// Layout 4: the tracking actions sent once, beside the subscriptions.
extension SQLiteStateStoreTests {
    @Test func aThirdLayoutDatabaseGainsTheTrackedActionsAndKeepsItsSubscriptions() throws {
        let temporary = TemporaryDirectory()
        let directory = try StateDirectory(path: temporary.path + "/state")
        let path = directory.path + "/" + SQLiteStateStore.fileName
        // What pushreporter wrote with layout 3: the subscriptions table alone.
        let old = try SQLiteConnection(path: path, readOnly: false)
        try old.execute("""
            CREATE TABLE subscriptions (account TEXT NOT NULL, service TEXT NOT NULL, fingerprint TEXT NOT NULL,
                delivered_fingerprint TEXT, state TEXT NOT NULL, attempts INTEGER NOT NULL, last_attempt_at INTEGER,
                last_outcome TEXT, next_due_at INTEGER, last_success_at INTEGER, backend_data TEXT, cleanup TEXT,
                past_cleanups TEXT, PRIMARY KEY (account, service)) WITHOUT ROWID;
            INSERT INTO subscriptions VALUES ('alice', 'acrobits', 'f1', 'f1', 'delivered', 0, 5, 'delivered', NULL, 5, NULL, 'R', NULL);
            PRAGMA user_version = 3;
            """)
        #expect(try SQLiteStateStore(directory: directory, readOnly: true).records().map(\.key.account) == ["alice"],
                "an agent of layout 3 may still run: its file is read as it is")

        let tracked = try SQLiteTrackedActions(directory: directory)
        let action = TrackedAction(key: "k1", service: "adobe", messageId: "h138a", deliveryId: "56c4", action: "7", sentAt: 9)
        #expect(try !tracked.contains("k1"))
        try tracked.record(action)
        #expect(try tracked.contains("k1"))

        let store = try SQLiteStateStore(directory: directory)
        #expect(try store.schemaVersion() == 5)
        let records = try store.records()
        #expect(records.map(\.key.description) == ["alice"])
        #expect(records.first?.cleanup == "R" && records.first?.state == .delivered)
        #expect(try SQLiteTrackedActions(directory: directory).all() == [action], "kept across connections")
    }

    @Test func aNewDatabaseHasBothTablesAndTheActionsSurviveReopening() throws {
        let temporary = TemporaryDirectory()
        let directory = try StateDirectory(path: temporary.path + "/state")
        do {
            let tracked = try SQLiteTrackedActions(directory: directory)
            try tracked.record(TrackedAction(key: "a", service: "s", messageId: "m", deliveryId: "d", action: "2", sentAt: 1))
            try tracked.record(TrackedAction(key: "b", service: "s", messageId: "m", deliveryId: "d", action: "1", sentAt: 2))
        }
        try SQLiteStateStore(directory: directory).save([sample("bob")], deleting: [])
        #expect(try SQLiteTrackedActions(directory: directory).all().map(\.key) == ["a", "b"])
        #expect(try SQLiteStateStore(directory: directory, readOnly: true).records().map(\.key.account) == ["bob"])
    }
}
