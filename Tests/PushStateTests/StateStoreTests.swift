import Foundation
@testable import PushState
import PushTestSupport
import Testing

@Suite struct StateStoreTests {
    private func sample(_ id: String) -> AccountRecord {
        AccountRecord(id: id, fingerprint: "f-\(id)", deliveredFingerprint: "f-\(id)", attempts: 0,
                      lastAttemptAt: 1_700_000_000_000, lastOutcome: "delivered", nextDueAt: nil,
                      lastSuccessAt: 1_700_000_000_000, removal: #"{"method":"DELETE"}"#, isRemoving: false)
    }

    @Test func recordsSurviveReopeningAndDeletesAreApplied() throws {
        let temporary = TemporaryDirectory()
        let directory = try StateDirectory(path: temporary.path + "/state")
        do {
            let store = try StateStore(directory: directory)
            var retrying = sample("bob")
            retrying.attempts = 3
            retrying.lastOutcome = "HTTP 503"
            retrying.nextDueAt = 1_700_000_060_000
            try store.save([sample("alice"), retrying, sample("carol")])
            try store.save([AccountRecord](), deleting: ["carol"])
        }
        let reopened = try StateStore(directory: directory, readOnly: true)
        let records = try reopened.records()
        #expect(records.map(\.id) == ["alice", "bob"])
        #expect(records[0] == sample("alice"))
        #expect(records[1].attempts == 3)
        #expect(records[1].lastOutcome == "HTTP 503")
        #expect(records[1].nextDueAt == 1_700_000_060_000)
        #expect(records[1].phase == .retrying)
        #expect(records[0].phase == .delivered)
        #expect(try reopened.integrityCheck() == "ok")
    }

    @Test func filesAreOwnerOnlyAndTheJournalIsWAL() throws {
        let temporary = TemporaryDirectory()
        let directory = try StateDirectory(path: temporary.path + "/new/state")
        let store = try StateStore(directory: directory)
        try store.save([sample("alice")])
        func mode(_ path: String) throws -> Int {
            try (FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
        }
        #expect(try mode(directory.path) == 0o700)
        #expect(try mode(store.path) == 0o600)
        #expect(try mode(store.path + "-wal") == 0o600)
        #expect(try mode(store.path + "-shm") == 0o600)
    }

    @Test func aReaderSeesTheWritersCommittedBatches() throws {
        let temporary = TemporaryDirectory()
        let directory = try StateDirectory(path: temporary.path)
        let writer = try StateStore(directory: directory)
        try writer.save([sample("alice")])
        let reader = try StateStore(directory: directory, readOnly: true)
        #expect(try reader.records().count == 1)
        try writer.save((0..<500).map { sample("account-\($0)") })
        #expect(try reader.records().count == 501)
    }

    @Test func readingADirectoryWithoutStateSaysSo() throws {
        let temporary = TemporaryDirectory()
        let directory = try StateDirectory(path: temporary.path, create: false)
        #expect(throws: StateError.self) { try StateStore(directory: directory, readOnly: true) }
        do {
            _ = try StateStore(directory: directory, readOnly: true)
        } catch {
            #expect(error.isMissing)
            #expect(error.description == "there is no state in \(temporary.path) yet: the agent has not run with this state directory")
        }
        #expect(throws: StateDirectory.Problem.self) { try StateDirectory(path: temporary.path + "/absent", create: false) }
    }

    @Test func aDatabaseOfANewerSchemaIsRefusedAndLeftAsItIs() throws {
        let temporary = TemporaryDirectory()
        let directory = try StateDirectory(path: temporary.path + "/state")
        try StateStore(directory: directory).save([sample("alice")])
        // Closed, the WAL is checkpointed into the file, whose header holds user_version as a
        // big-endian 32-bit number at byte 60 (SQLite's file format, section 1.3).
        let path = directory.path + "/" + StateStore.fileName
        var bytes = try #require(FileManager.default.contents(atPath: path))
        #expect(bytes[60..<64].elementsEqual([0, 0, 0, 2]))
        bytes.replaceSubrange(60..<64, with: [0, 0, 0, 7])
        try bytes.write(to: URL(fileURLWithPath: path))
        for readOnly in [false, true] {
            #expect {
                try StateStore(directory: directory, readOnly: readOnly)
            } throws: { error in
                "\(error)" == "the state database \(path) was written by a newer pushreporter (schema 7; "
                    + "this one reads schema 2); run that version, or move the state directory aside"
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
        let old = try SQLiteConnection(path: directory.path + "/" + StateStore.fileName, readOnly: false)
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
        let path = directory.path + "/" + StateStore.fileName
        func version() throws -> Int64 {
            let statement = try SQLiteConnection(path: path, readOnly: true).prepare("PRAGMA user_version")
            return try statement.step() ? statement.int64(0) ?? -1 : -1
        }

        let read = try StateStore(directory: directory, readOnly: true).records()
        #expect(read.map(\.id) == ["alice"])
        #expect(read.first?.lastOutcome == "HTTP 503")
        #expect(read.first?.pastRemovals == [])
        #expect(try version() == 1, "reading changes nothing")

        let store = try StateStore(directory: directory)
        #expect(try version() == 2)
        var record = try #require(try store.records().first)
        #expect(record.removal == #"{"method":"DELETE"}"#)
        record.pastRemovals = ["earlier"]
        try store.save([record])
        #expect(try StateStore(directory: directory, readOnly: true).records().first?.pastRemovals == ["earlier"])
    }

    @Test func aDatabaseOfTheFirstLayoutThatHasPastRemovalsAlreadyOpens() throws {
        let temporary = TemporaryDirectory()
        // What later builds of schema 1 wrote: the column added, the number left at 1.
        let directory = try firstLayout(temporary, pastRemovals: true,
                                        row: #"('bob', 'f1', NULL, 0, NULL, NULL, NULL, NULL, NULL, '["kept"]', 0)"#)
        #expect(try StateStore(directory: directory, readOnly: true).records().first?.pastRemovals == ["kept"])
        let store = try StateStore(directory: directory)
        #expect(try store.records().first?.pastRemovals == ["kept"])
    }

    @Test func aFirstLayoutTableWithoutItsNumberIsMigrated() throws {
        let temporary = TemporaryDirectory()
        let directory = try firstLayout(temporary, pastRemovals: false,
                                        row: #"('carol', 'f1', NULL, 0, NULL, NULL, NULL, NULL, NULL, 0)"#, version: 0)
        let store = try StateStore(directory: directory)
        var record = try #require(try store.records().first)
        #expect(record.id == "carol")
        record.pastRemovals = ["earlier"]
        try store.save([record])
        #expect(try StateStore(directory: directory, readOnly: true).records().first?.pastRemovals == ["earlier"])
    }

    @Test func phasesFollowTheRecord() {
        #expect(AccountRecord(id: "a", fingerprint: "x").phase == .pending)
        #expect(AccountRecord(id: "a", fingerprint: "x", attempts: 2).phase == .retrying)
        #expect(AccountRecord(id: "a", fingerprint: "x", deliveredFingerprint: "y").phase == .pending)
        #expect(AccountRecord(id: "a", fingerprint: "x", deliveredFingerprint: "x").phase == .delivered)
        #expect(AccountRecord(id: "a", deliveredFingerprint: "x", isRemoving: true).phase == .removing)
    }
}
