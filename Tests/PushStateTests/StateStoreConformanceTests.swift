import Foundation
import PushState
import PushTestSupport
import Testing
import PushTestThreads

/// What every state store must do (SPEC §6, §11), run against each kind of store: SQLite now,
/// a shared database beside it later. Each test opens stores through a ``StoreKind``.
@Suite(.blockingThreads) struct StateStoreConformanceTests {
    /// A kind of store the suite runs against, and how to open a fresh one and the same one again.
    struct StoreKind: CustomTestStringConvertible, Sendable {
        var name: String
        /// Opens the store of `place` (made by `makePlace`), as writer or reader.
        var open: @Sendable (_ place: String, _ readOnly: Bool) throws -> any StateStore
        /// A fresh place for a store, living as long as the returned object.
        var makePlace: @Sendable () throws -> (place: String, keepAlive: AnyObject)

        var testDescription: String { name }
    }

    static let kinds: [StoreKind] = [
        StoreKind(name: "SQLite", open: { place, readOnly in
            try SQLiteStateStore(directory: StateDirectory(path: place, create: !readOnly), readOnly: readOnly)
        }, makePlace: {
            let temporary = TemporaryDirectory()
            return (temporary.path + "/state", temporary)
        }),
        // A real server, started by the tests (Debian's postgresql); without it these fail and say why.
        StoreKind(name: "PostgreSQL", open: { uri, readOnly in
            try PostgresStateStore(uri: uri, readOnly: readOnly)
        }, makePlace: {
            let server = try TemporaryPostgres.shared()
            return (try server.makeDatabase(), server)
        }),
    ]

    static func record(_ account: String, _ service: String = SubscriptionKey.acrobits, state: SubscriptionState = .delivered) -> SubscriptionRecord {
        SubscriptionRecord(key: SubscriptionKey(account: account, service: service), fingerprint: "f-\(account)-\(service)",
                           deliveredFingerprint: state == .delivered ? "f-\(account)-\(service)" : nil, state: state,
                           attempts: state == .retrying ? 3 : 0, lastAttemptAt: 1_700_000_000_000, lastOutcome: "delivered",
                           nextDueAt: state == .retrying ? 1_700_000_060_000 : nil, lastSuccessAt: 1_700_000_000_000,
                           backendData: service == "journeys" ? #"{"registrationRequestId":"r-1"}"# : nil,
                           cleanup: #"{"method":"DELETE"}"#, pastCleanups: state == .retrying ? ["earlier"] : [])
    }

    @Test(arguments: kinds)
    func everyFieldSurvivesReopening(_ kind: StoreKind) throws {
        let (place, keep) = try kind.makePlace()
        let written = [Self.record("alice"), Self.record("alice", "journeys", state: .accepted), Self.record("bob", state: .retrying)]
        try kind.open(place, false).save(written, deleting: [])
        let read = try kind.open(place, true).records()
        #expect(read == written.sorted { $0.key < $1.key })
        withExtendedLifetime(keep) {}
    }

    /// What `plan` names as changed: the parts written with a delivery are kept when later
    /// versions of the record are written without them, replaced by the next delivery's, read
    /// apart from the records (the agent holds none), and gone with the record.
    @Test(arguments: kinds)
    func aDeliverysPartsOutliveLaterWritesWithoutThem(_ kind: StoreKind) throws {
        let (place, keep) = try kind.makePlace()
        let store = try kind.open(place, false)
        var delivered = Self.record("alice")
        delivered.deliveredParts = "f-alice-acro\n0123 query t"
        try store.save([delivered, Self.record("bob")], deleting: [])
        let alice = SubscriptionKey(account: "alice", service: SubscriptionKey.acrobits)
        var later = Self.record("alice")
        later.lastOutcome = "delivered again"
        try store.save([later], deleting: [])
        #expect(try kind.open(place, true).deliveredParts() == [alice: "f-alice-acro\n0123 query t"])
        #expect(try store.records().allSatisfy { $0.deliveredParts == nil })
        later.deliveredParts = "f-alice-acro\n4567 query t"
        try store.save([later], deleting: [])
        #expect(try store.deliveredParts() == [alice: "f-alice-acro\n4567 query t"])
        try store.save([], deleting: [alice])
        #expect(try store.deliveredParts().isEmpty)
        withExtendedLifetime(keep) {}
    }

    /// An agent lets go of a cleanup's text once it is written: a later version of the record
    /// written without it (``SubscriptionRecord/cleanupInState``) leaves the stored text, in a
    /// batch beside records that change theirs; the texts are read back by key.
    @Test(arguments: kinds)
    func aCleanupLetGoOfStaysStored(_ kind: StoreKind) throws {
        let (place, keep) = try kind.makePlace()
        let store = try kind.open(place, false)
        try store.save([Self.record("alice"), Self.record("bob"), Self.record("carol")], deleting: [])
        var alice = Self.record("alice")
        alice.keepCleanupInStateOnly()
        alice.lastOutcome = "delivered again"
        #expect(alice.cleanup == nil && alice.hasCleanup(#"{"method":"DELETE"}"#) && !alice.hasCleanup(#"{"method":"PUT"}"#))
        var bob = Self.record("bob")
        bob.setCleanup(#"{"method":"PUT"}"#)
        try store.save([alice, bob], deleting: [])
        let read = try kind.open(place, true).records()
        #expect(read.map(\.cleanup) == [#"{"method":"DELETE"}"#, #"{"method":"PUT"}"#, #"{"method":"DELETE"}"#])
        #expect(read.first?.lastOutcome == "delivered again")
        let keys = ["alice", "bob", "dave"].map { SubscriptionKey(account: $0, service: SubscriptionKey.acrobits) }
        #expect(try store.cleanups(of: keys) == [keys[0]: #"{"method":"DELETE"}"#, keys[1]: #"{"method":"PUT"}"#])
        withExtendedLifetime(keep) {}
    }

    /// A fingerprint an earlier version wrote (64 hex digits of its digest) reads in the form
    /// written now, as the planners make it for the same request: an upgrade sends nothing
    /// again. The digests of its delivery's parts, kept beside the hex, are read beside the
    /// fingerprint it now reads as, so `plan` names what changed after an upgrade.
    @Test(arguments: kinds)
    func anEarlierFingerprintAndItsPartsReadInTheFormWrittenNow(_ kind: StoreKind) throws {
        let (place, keep) = try kind.makePlace()
        let legacy = "83d6651a807187c0a8d112e366a01f88f5ab4014ce5d59aab5fdb63ff0017b00"
        var alice = Self.record("alice")
        alice.fingerprint = legacy
        alice.deliveredFingerprint = legacy
        alice.deliveredParts = "83d6651a807187c0\n0123 query t"
        var bob = Self.record("bob")
        bob.deliveredParts = "f-bob-acrobits\n4567 query t"
        try kind.open(place, false).save([alice, bob], deleting: [])
        let reader = try kind.open(place, true)
        let read = try reader.records()
        #expect(read.map(\.fingerprint) == ["g9ZlGoBxh8Co0RL", "f-bob-acrobits"])
        #expect(read.map(\.deliveredFingerprint) == ["g9ZlGoBxh8Co0RL", "f-bob-acrobits"])
        let parts = try reader.deliveredParts()
        #expect(parts[alice.key] == "g9ZlGoBxh8Co0RL\n0123 query t")
        #expect(parts[bob.key] == "f-bob-acrobits\n4567 query t")
        withExtendedLifetime(keep) {}
    }

    @Test(arguments: kinds)
    func subscriptionsOfOneAccountAreApart(_ kind: StoreKind) throws {
        let (place, keep) = try kind.makePlace()
        let store = try kind.open(place, false)
        try store.save([Self.record("alice"), Self.record("alice", "journeys"), Self.record("bob")], deleting: [])
        try store.save([], deleting: [SubscriptionKey(account: "alice", service: SubscriptionKey.acrobits)])
        #expect(try store.records().map(\.key.description) == ["alice/journeys", "bob"])
        var changed = Self.record("alice", "journeys", state: .rejected)
        changed.lastOutcome = "DeviceTokenTooLong"
        try store.save([changed], deleting: [])
        #expect(try store.records().first == changed)
        withExtendedLifetime(keep) {}
    }

    @Test(arguments: kinds)
    func aBatchIsWrittenWhole(_ kind: StoreKind) throws {
        let (place, keep) = try kind.makePlace()
        let store = try kind.open(place, false)
        let many = (0..<2_000).map { Self.record("account-\($0)") }
        try store.save(many, deleting: [])
        #expect(try kind.open(place, true).records().count == 2_000)
        try store.save([Self.record("new")], deleting: many.prefix(1_000).map(\.key))
        let left = try kind.open(place, true).records()
        #expect(left.count == 1_001)
        #expect(left.contains { $0.key.account == "new" })
        withExtendedLifetime(keep) {}
    }

    @Test(arguments: kinds)
    func aReaderSeesTheWritersCommittedBatches(_ kind: StoreKind) throws {
        let (place, keep) = try kind.makePlace()
        let writer = try kind.open(place, false)
        try writer.save([Self.record("alice")], deleting: [])
        let reader = try kind.open(place, true)
        #expect(try reader.records().count == 1)
        try writer.save((0..<500).map { Self.record("account-\($0)") }, deleting: [])
        #expect(try reader.records().count == 501)
        withExtendedLifetime(keep) {}
    }

    @Test(arguments: kinds)
    func everyStateIsKept(_ kind: StoreKind) throws {
        let (place, keep) = try kind.makePlace()
        let written = SubscriptionState.allCases.map { Self.record("a-\($0.rawValue)", state: $0) }
        try kind.open(place, false).save(written, deleting: [])
        #expect(try kind.open(place, true).records().map(\.state) == written.sorted { $0.key < $1.key }.map(\.state))
        withExtendedLifetime(keep) {}
    }

    @Test(arguments: kinds)
    func textsAreKeptByteForByte(_ kind: StoreKind) throws {
        let (place, keep) = try kind.makePlace()
        var record = Self.record("ünï\u{1F600}", "svc with space")
        // Every character but NUL, which PostgreSQL's text cannot hold (nothing the agent stores has one).
        record.cleanup = "line1\nline2\t\u{1}\u{7f}end"
        record.pastCleanups = ["a\"b", "c\\d", ""]
        try kind.open(place, false).save([record], deleting: [])
        #expect(try kind.open(place, true).records() == [record])
        withExtendedLifetime(keep) {}
    }
}
