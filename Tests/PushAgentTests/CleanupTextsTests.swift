@testable import PushAgent
import PushAcrobits
import PushBackend
import PushState
import PushTestSupport
import PushTestThreads
import Synchronization
import Testing

/// The cleanup texts the agent lets go of once the state holds them (``AgentBook+CleanupTexts``):
/// nothing is lost on the way (SPEC §6), and a reload that replaces or removes a delivery sends
/// the cleanup that was stored.
@Suite(.blockingThreads) struct CleanupTextsTests {
    typealias Book = AgentBookTests

    static func entry(_ book: AgentBook, _ account: String) throws -> AgentBook.Entry {
        try #require(book.entries[Book.k(account)])
    }

    @Test func theBookLetsGoOfWrittenTextsAndAReloadReadsBackThoseItReplacesOrRemoves() throws {
        var book = Book.book()
        book.cleanupTextsInStateOnly = true
        let plans = ["alice", "bob", "carol"].map { Book.plan($0, token: "1") }
        let start = book.start(plans: plans, records: [])
        // The state as the recorder wrote it.
        var state: [SubscriptionKey: String] = [:]
        for record in Book.saved(start) { state[record.key] = record.cleanup }
        #expect(state.count == 3)
        Book.send(&book, start)
        for account in ["alice", "bob", "carol"] { #expect(book.settle(Book.k(account), .delivered, attempt: 1, now: 1_000) != nil) }
        #expect(try Self.entry(book, "alice").record.cleanup != nil, "held until the recorder says it is written")

        book.letGoOfWrittenCleanups(plans.map(\.key))
        for account in ["alice", "bob", "carol"] {
            let record = try Self.entry(book, account).record
            #expect(record.cleanup == nil && record.cleanupInState != nil)
            #expect(record.hasCleanup(state[Book.k(account)]))
        }

        // alice unchanged, bob's token changed, carol gone: only bob's and carol's are read back.
        let next = [Book.plan("alice", token: "1"), Book.plan("bob", token: "2")]
        let asked = book.beginReadingBack(for: next)
        #expect(Set(asked) == [Book.k("bob"), Book.k("carol")])
        #expect(book.restoreCleanups(state.filter { asked.contains($0.key) }, asked: asked).isEmpty)
        // Written meanwhile: let go only once the reload is applied, and only if not recorded again.
        book.letGoOfWrittenCleanups([Book.k("bob")])
        #expect(try Self.entry(book, "bob").record.cleanup != nil)
        let (actions, summary) = Book.reload(&book, next, reportInterval: nil, now: 2_000)
        book.endReadingBack(isPending: { $0 == Book.k("bob") })
        #expect(try Self.entry(book, "bob").record.cleanup != nil, "bob's new text is still to write")
        #expect(summary.unchanged == 1 && summary.changed == 1 && summary.removed == 1)
        #expect(try Self.entry(book, "alice").record.cleanupInState != nil, "an unchanged one stays let go, and is not written")
        #expect(!Book.saved(actions).contains { $0.key == Book.k("alice") })
        // bob's earlier delivery may have reached the receiver: its cleanup, as stored, stays owed.
        let bob = try Self.entry(book, "bob").record
        #expect(bob.pastCleanups == [state[Book.k("bob")]!])
        #expect(bob.cleanup?.contains("t=2") == true)
        // carol's removal is the one stored.
        let carol = try Self.entry(book, "carol")
        #expect(carol.job == .cleanup)
        #expect(carol.cleanups.map(\.text) == [state[Book.k("carol")]!])
    }

    @Test func aTextTheStateLostIsSaidAndNotSent() throws {
        var book = Book.book()
        book.cleanupTextsInStateOnly = true
        let start = book.start(plans: [Book.plan("alice", token: "1")], records: [])
        Book.send(&book, start)
        #expect(book.settle(Book.k("alice"), .delivered, attempt: 1, now: 1_000) != nil)
        book.letGoOfWrittenCleanups([Book.k("alice")])
        let asked = book.beginReadingBack(for: [])
        #expect(asked == [Book.k("alice")])
        #expect(book.restoreCleanups([:], asked: asked) == [Book.k("alice")])
        let (actions, _) = Book.reload(&book, [], reportInterval: nil, now: 2_000)
        book.endReadingBack(isPending: { _ in false })
        #expect(Book.submitted(actions).isEmpty)
        #expect(actions.contains(.forget(Book.k("alice"))))
    }

    /// Shared state, or the book's own tests: texts are kept.
    @Test func withoutItTheBookKeepsEveryText() throws {
        var book = Book.book()
        Book.send(&book, book.start(plans: [Book.plan("alice", token: "1")], records: []))
        book.letGoOfWrittenCleanups([Book.k("alice")])
        #expect(try Self.entry(book, "alice").record.cleanup != nil)
        #expect(book.beginReadingBack(for: []).isEmpty)
    }

    /// The recorder writes a text a later version of the record leaves to the state, whether
    /// that version comes before the write or while a write fails, and tells which records it
    /// wrote with their text.
    @Test func theRecorderWritesATextALaterVersionLetGoOf() throws {
        let store = MemoryStateStore()
        let recorder = StateRecorder(store: store, logger: AgentOnceTests.quiet, clock: ManualClock())
        let told = Mutex<[SubscriptionKey]>([])
        recorder.whenCleanupsWritten { keys in told.withLock { $0 += keys } }
        let key = Book.k("alice")
        var first = SubscriptionRecord(key: key, fingerprint: "f1", cleanup: "removal 1")
        recorder.save(first)
        first.keepCleanupInStateOnly()
        first.state = .delivered
        recorder.save(first)
        #expect(recorder.flush())
        #expect(try store.records().map(\.cleanup) == ["removal 1"])
        #expect(try store.records().map(\.state) == [.delivered])
        #expect(told.withLock { $0 } == [key])

        store.failsWrites = true
        var second = SubscriptionRecord(key: key, fingerprint: "f2", cleanup: "removal 2")
        recorder.save(second)
        #expect(!recorder.flush())
        second.keepCleanupInStateOnly()
        second.lastOutcome = "delivered"
        recorder.save(second)
        store.failsWrites = false
        #expect(recorder.flush())
        #expect(try store.records().map(\.cleanup) == ["removal 2"])
        #expect(try store.records().map(\.lastOutcome) == ["delivered"])

        // Read back as the state will hold it: a text not written yet is the one.
        recorder.save(SubscriptionRecord(key: key, fingerprint: "f3", cleanup: "removal 3"))
        #expect(try recorder.storedCleanups(of: [key, Book.k("bob")]) == [key: "removal 3"])
    }
}
