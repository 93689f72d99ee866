import Foundation
import Logging
@testable import PushAdobe
import PushConfig
import PushTestSupport
import Synchronization
import Testing
import PushTestThreads

/// A ledger whose first `failingReads` reads throw, as a locked or damaged database would.
final class FlakyLedger: TrackingLedger {
    let reads = Mutex(0)
    let failingReads: Int
    let memory = MemoryLedger()

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
        let transport = NumberedTransport { _ in 200 }
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
        let ledger = MemoryLedger()
        // The click was acknowledged and remembered before the crash.
        let click = try #require(try Self.targets().value.services["adobe"]?.requests(
            .open, for: PushPayload(json: Array(#"{"_mId":"m","_dId":"d"}"#.utf8)), ecid: .known(sent: "e", shown: "e")).get().first)
        try ledger.recordDelivered(click, at: 0)
        let transport = NumberedTransport { _ in 200 }
        let spool = TrackingSpool(directory: directory.path, targets: Self.targets(), ledger: ledger, transport: transport,
                                  concurrency: 2, logger: TrackingDeliveryTests.quiet, clock: ManualClock(), wallClock: { 0 })
        let running = Task(executorPreference: TestThreads.shared) { await spool.run() }
        #expect(await Polling.until { !FileManager.default.fileExists(atPath: file) })
        #expect(transport.urls == ["https://t.example/r/?id=m,d,1&mcId=e"])
        running.cancel()
        await running.value
    }
}
