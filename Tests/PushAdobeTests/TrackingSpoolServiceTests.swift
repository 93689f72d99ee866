import Foundation
import Logging
@testable import PushAdobe
import PushConfig
import ServiceLifecycle
import PushTestSupport
import Synchronization
import Testing
import PushTestThreads

/// A ledger whose first `failingReads` reads throw, as a locked or damaged database would.
final class FlakyLedger: TrackingLedger {
    let reads = Mutex(0)
    let failingReads: Int
    let memory = SentOnceTrackingLedger(MemorySentOnceLedger())

    init(failingReads: Int) { self.failingReads = failingReads }

    struct Unreadable: Error, CustomStringConvertible {
        var description: String { "database is locked" }
    }

    var location: String { "state.sqlite" }
    func wasDelivered(_ request: TrackingRequest) throws -> Bool {
        let read = reads.withLock { reads in
            defer { reads += 1 }
            return reads
        }
        if read < failingReads { throw Unreadable() }
        return try memory.wasDelivered(request)
    }
    func recordDelivered(_ request: TrackingRequest, at epochMilliseconds: Int64) throws {
        try memory.recordDelivered(request, at: epochMilliseconds)
    }
}

/// The spool service in process, on a manual clock: what it does with a file when the state
/// or the server fails.
@Suite(.ownThreads) struct TrackingSpoolServiceTests {
    static func targets() -> TrackingTargets.Current {
        var retry = RetryPolicy()
        retry.initial = .seconds(10)
        retry.max = .seconds(10)
        return TrackingTargets.Current(TrackingTargets(
            services: ["adobe": .init(name: "adobe", trackingServer: "https://t.example", timeout: .seconds(5))],
            otherServices: [:], ecids: ["adobe": ["dana": .init(sent: "e", shown: "e")]], accounts: ["dana": true], retry: retry))
    }

    @Test func aFileWhoseStateCannotBeReadIsKeptAndTriedAgainNotMovedAside() async throws {
        let directory = TemporaryDirectory()
        let file = directory.write("a.json", #"{"event":"click","account":"dana","_mId":"m","_dId":"d"}"#)
        let clock = ManualClock()
        let ledger = FlakyLedger(failingReads: 1)
        let transport = ScriptedTransport(numbered: { _ in 200 })
        let spool = TrackingSpool(directory: directory.path, targets: Self.targets(), ledger: ledger, transport: transport,
                                  concurrency: 2, logger: TrackingDeliveryTests.quiet, clock: clock, wallClock: { 0 },
                                  scanInterval: .seconds(1))
        let running = Task(executorPreference: TestThreads.shared) { await spool.run() }
        #expect(await Polling.until { ledger.reads.withLock { $0 } == 1 })
        // The scan's sleep and the file's backoff.
        await clock.waitForSleepers(2)
        #expect(FileManager.default.fileExists(atPath: file), "kept")
        #expect(!FileManager.default.fileExists(atPath: file + ".rejected"))
        #expect(transport.urls.isEmpty, "nothing sent while it is not known whether it was")
        clock.advance(by: .seconds(10))
        #expect(await Polling.until { !FileManager.default.fileExists(atPath: file) })
        #expect(transport.urls == ["https://t.example/r/?id=m,d,2&mcId=e"])
        running.cancel()
        await running.value
    }

    @Test func aFileFoundAgainAfterACrashSendsOnlyWhatWasNotRemembered() async throws {
        let directory = TemporaryDirectory()
        let file = directory.write("a.json", #"{"event":"open","ecid":"e","_mId":"m","_dId":"d"}"#)
        let ledger = SentOnceTrackingLedger(MemorySentOnceLedger())
        // The click was acknowledged and remembered before the crash.
        let click = try #require(try Self.targets().value.services["adobe"]?.requests(
            .open, for: PushPayload(json: Array(#"{"_mId":"m","_dId":"d"}"#.utf8)), ecid: .known(sent: "e", shown: "e")).get().first)
        try ledger.recordDelivered(click, at: 0)
        let transport = ScriptedTransport(numbered: { _ in 200 })
        let spool = TrackingSpool(directory: directory.path, targets: Self.targets(), ledger: ledger, transport: transport,
                                  concurrency: 2, logger: TrackingDeliveryTests.quiet, clock: ManualClock(), wallClock: { 0 })
        let running = Task(executorPreference: TestThreads.shared) { await spool.run() }
        #expect(await Polling.until { !FileManager.default.fileExists(atPath: file) })
        #expect(transport.urls == ["https://t.example/r/?id=m,d,1&mcId=e"])
        running.cancel()
        await running.value
    }
}

/// What the spool takes: only regular files of its own directory, never waiting on one.
@Suite(.ownThreads) struct TrackingSpoolEntryTests {
    static let payload = #"{"event":"click","account":"dana","_mId":"m","_dId":"d"}"#

    /// Makes a FIFO at `path` and holds it open for writing, as a producer that never finishes
    /// would, until the returned descriptor is closed.
    static func heldFIFO(_ path: String) throws -> Int32 {
        #expect(mkfifo(path, 0o600) == 0)
        let fd = open(path, O_RDWR | O_NONBLOCK)
        try #require(fd >= 0)
        return fd
    }

    @Test func onlyARegularFileOfTheDirectoryIsRead() throws {
        let directory = TemporaryDirectory()
        let outside = TemporaryDirectory()
        let elsewhere = outside.write("elsewhere.json", Self.payload)
        directory.write("good.json", Self.payload)
        #expect(symlink(elsewhere, directory.path + "/link.json") == 0)
        #expect(symlink("/dev/zero", directory.path + "/zero.json") == 0)
        _ = directory.makeDirectory("dir.json")
        directory.write("large.json", String(repeating: "x", count: (1 << 20) + 1))
        let fifo = try Self.heldFIFO(directory.path + "/fifo.json")
        defer { close(fifo) }
        func read(_ name: String) -> SpoolEntry { SpoolEntry.read(name, in: directory.path, limit: 1 << 20) }
        #expect(read("good.json") == .file(Array(Self.payload.utf8)))
        #expect(read("link.json") == .refused("it is a symbolic link; the spool takes only regular files in its own directory"))
        #expect(read("zero.json") == .refused("it is a symbolic link; the spool takes only regular files in its own directory"))
        #expect(read("dir.json") == .refused("it is a directory, not a file"))
        #expect(read("large.json") == .refused("it is larger than 1 MiB, the most a payload may be"))
        #expect(read("fifo.json") == .refused("it is a FIFO, not a file"), "refused at once, without waiting for the writer")
        #expect(read("missing.json") == .gone)
    }

    @Test func whatIsNotAPayloadIsMovedAsideAndAGoodFileBesideItIsTracked() async throws {
        let directory = TemporaryDirectory()
        let outside = TemporaryDirectory()
        let elsewhere = outside.write("elsewhere.json", Self.payload)
        #expect(symlink(elsewhere, directory.path + "/a-link.json") == 0)
        #expect(symlink("/dev/zero", directory.path + "/b-zero.json") == 0)
        _ = directory.makeDirectory("c-dir.json")
        directory.write("d-large.json", String(repeating: "x", count: (1 << 20) + 1))
        // Two FIFOs held open by their writer: more than the cooperative pool has threads here.
        let fifos = [try Self.heldFIFO(directory.path + "/e-fifo.json"), try Self.heldFIFO(directory.path + "/f-fifo.json")]
        defer { for fd in fifos { close(fd) } }
        let good = directory.write("z-good.json", Self.payload)
        let transport = ScriptedTransport(numbered: { _ in 200 })
        let spool = TrackingSpool(directory: directory.path, targets: TrackingSpoolServiceTests.targets(), ledger: SentOnceTrackingLedger(MemorySentOnceLedger()),
                                  transport: transport, concurrency: 2, logger: TrackingDeliveryTests.quiet, clock: ManualClock(),
                                  wallClock: { 0 })
        let running = Task(executorPreference: TestThreads.shared) { await spool.run() }
        let asideNames = ["a-link.json", "b-zero.json", "c-dir.json", "d-large.json", "e-fifo.json", "f-fifo.json"]
        #expect(await Polling.until {
            !FileManager.default.fileExists(atPath: good)
                && asideNames.allSatisfy { FileManager.default.fileExists(atPath: directory.path + "/" + $0 + ".rejected") }
        }, "every entry that is not a payload is moved aside, the good file tracked")
        #expect(transport.urls == ["https://t.example/r/?id=m,d,2&mcId=e"], "only the good file's click, once")
        #expect(FileManager.default.fileExists(atPath: elsewhere), "a file outside the spool is neither read nor deleted")
        running.cancel()
        await running.value
    }

    /// A ledger whose reads wait at a gate until the test opens it: a database that hangs.
    final class HangingLedger: TrackingLedger {
        let gate = BlockingPoolTestGate()
        let reads = Mutex(0)
        var location: String { "state.sqlite" }
        func wasDelivered(_ request: TrackingRequest) throws -> Bool {
            reads.withLock { $0 += 1 }
            gate.wait()
            return false
        }
        func recordDelivered(_ request: TrackingRequest, at epochMilliseconds: Int64) throws {}
    }

    @Test func aLedgerThatHangsDoesNotKeepTheSpoolFromStopping() async throws {
        let directory = TemporaryDirectory()
        directory.write("a.json", Self.payload)
        let ledger = HangingLedger()
        defer { ledger.gate.release() }
        let clock = ManualClock()
        let spool = TrackingSpool(directory: directory.path, targets: TrackingSpoolServiceTests.targets(), ledger: ledger,
                                  transport: ScriptedTransport(numbered: { _ in 200 }), concurrency: 2, logger: TrackingDeliveryTests.quiet,
                                  clock: clock, wallClock: { 0 }, gracePeriod: .seconds(10))
        let group = ServiceGroup(configuration: .init(services: [.init(service: spool)], logger: TrackingDeliveryTests.quiet))
        let running = Task(executorPreference: TestThreads.shared) { try await group.run() }
        #expect(await Polling.until { ledger.reads.withLock { $0 } == 1 }, "the file's attempt is stuck in the ledger")
        await group.triggerGracefulShutdown()
        let ended = Mutex(false)
        let waiter = Task(executorPreference: TestThreads.shared) { try? await running.value; ended.withLock { $0 = true } }
        // The grace period's sleep may start after the scan's or the scheduler's: the clock
        // moves a grace period at a time until the spool has ended, whichever sleep is late.
        let stopped = await Polling.until {
            if ended.withLock({ $0 }) { return true }
            clock.advance(by: .seconds(10))
            return false
        }
        #expect(stopped, "the grace period over, the stuck attempt is cancelled and the spool stops")
        // Not waited for when it did not stop: the test would hang instead of failing.
        if stopped { await waiter.value }
    }
}

/// A gate a blocked call waits at until the test opens it.
final class BlockingPoolTestGate: Sendable {
    private let open = Mutex(false)
    func wait() { while !open.withLock({ $0 }) { usleep(1_000) } }
    func release() { open.withLock { $0 = true } }
}
