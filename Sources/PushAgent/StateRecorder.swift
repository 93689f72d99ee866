import Logging
import PushConfig
import PushState
import ServiceLifecycle
import Synchronization
import PushSystem

/// Writes changed subscription records to the state database in batches (SPEC §6), so that state
/// never limits throughput: changes are collected in memory and written in one transaction at
/// most every `batchInterval`, and once more when the agent stops.
///
/// Run it as a ``Service`` listed before the services that record into it: the service group
/// stops services in reverse order, so the final flush comes after the last change. `run --once`
/// runs ``writeInBatches()`` instead, and flushes itself at the end.
public final class StateRecorder<C: Clock>: Service, Sendable where C.Duration == Duration {
    /// The state could not be written when it had to be.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    private struct Pending {
        var records: [SubscriptionKey: SubscriptionRecord] = [:]
        var forgotten: Set<SubscriptionKey> = []
        var isEmpty: Bool { records.isEmpty && forgotten.isEmpty }

        /// Keeps `record` for `key`, over an earlier unsaved version: what that one carried and
        /// this one leaves to the store as it is (its delivery's parts, its cleanup's text) is
        /// written all the same.
        mutating func keep(_ record: SubscriptionRecord, over earlier: SubscriptionRecord?) {
            var record = record
            if let earlier {
                if record.deliveredParts == nil { record.deliveredParts = earlier.deliveredParts }
                if record.cleanupInState != nil, let text = earlier.cleanup { record.setCleanup(text) }
            }
            records[record.key] = record
        }
    }

    private let store: any StateStore
    private let logger: Logger
    private let clock: C
    private let batchInterval: Duration
    private let pending = Mutex(Pending())
    /// Held for the whole of a flush, so that a flush that returns has written everything
    /// recorded before it began, including a batch another flush had taken.
    private let flushing = Mutex(())
    private let releaseAfterWrite = Mutex(false)
    /// Writes that failed since the last one that did not.
    private let failedWrites = Mutex(0)
    /// Told the keys of records written with a cleanup text and not recorded again since
    /// (``AgentBook/letGoOfWrittenCleanups(_:)``).
    private let onWritten = Mutex<(@Sendable ([SubscriptionKey]) -> Void)?>(nil)

    /// Sets what is told of records written with their cleanup's text.
    public func whenCleanupsWritten(_ body: @escaping @Sendable ([SubscriptionKey]) -> Void) {
        onWritten.withLock { $0 = body }
    }

    /// Whether the last write of the state succeeded (or none failed yet): `/readyz` and
    /// `pushreporter_state_up`.
    public var lastWriteSucceeded: Bool { failedWrites.withLock { $0 == 0 } }
    private let signal: AsyncStream<Void>
    private let signalContinuation: AsyncStream<Void>.Continuation
    /// Yielded while `batchSize` changes or more are pending (``writeInBatches()``).
    private let fullBatch: AsyncStream<Void>
    private let fullBatchContinuation: AsyncStream<Void>.Continuation
    private let batchSize: Int

    public init(store: any StateStore, logger: Logger, clock: C, batchInterval: Duration = .milliseconds(100), batchSize: Int = 8_192) {
        self.store = store
        self.batchSize = max(1, batchSize)
        (fullBatch, fullBatchContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.logger = logger
        self.clock = clock
        self.batchInterval = batchInterval
        (signal, signalContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Records `record` (replacing an earlier unsaved version of the same subscription).
    public func save(_ record: SubscriptionRecord) {
        change { pending in
            pending.keep(record, over: pending.records[record.key])
            pending.forgotten.remove(record.key)
        }
    }

    /// Deletes the record of `key`.
    public func forget(_ key: SubscriptionKey) {
        change { pending in
            pending.records[key] = nil
            pending.forgotten.insert(key)
        }
    }

    /// Applies `edit` to the pending changes and wakes the flush loop if they were empty.
    private func change(_ edit: (inout Pending) -> Void) {
        let (wasEmpty, isFull) = pending.withLock { pending in
            let wasEmpty = pending.isEmpty
            edit(&pending)
            // At or above (a batch that could not be written is back in `pending`): the stream
            // keeps one signal, however many changes yield it.
            return (wasEmpty, pending.records.count + pending.forgotten.count >= batchSize)
        }
        if wasEmpty { signalContinuation.yield() }
        if isFull { fullBatchContinuation.yield() }
    }

    /// Whether a change of `key`'s record waits to be written.
    public func isPending(_ key: SubscriptionKey) -> Bool {
        pending.withLock { $0.records[key] != nil }
    }

    /// The cleanup texts of `keys` as the state will hold them: those of changes not written
    /// yet, else the store's (``StateStore/cleanups(of:)``). Read while no write is under way: a
    /// batch being written is in neither.
    public func storedCleanups(of keys: [SubscriptionKey]) throws(StateError) -> [SubscriptionKey: String] {
        try flushing.withLock { _ throws(StateError) in
            var texts: [SubscriptionKey: String] = [:]
            var unwritten: [SubscriptionKey] = []
            pending.withLock { pending in
                for key in keys {
                    if let text = pending.records[key]?.cleanup { texts[key] = text } else { unwritten.append(key) }
                }
            }
            for (key, text) in try store.cleanups(of: unwritten) { texts[key] = text }
            return texts
        }
    }

    /// Once the last write is done: the store's files made as small as they can be.
    public func compactStoreOnClose() {
        store.compactOnClose()
    }

    /// Writes everything recorded so far in one transaction, and returns whether it was
    /// written. On failure the changes stay pending for the next flush.
    @discardableResult
    public func flush() -> Bool {
        let onWritten = onWritten.withLock { $0 }
        let (written, withCleanups) = flushBatch(listing: onWritten != nil)
        if !withCleanups.isEmpty, let onWritten {
            // Only those not recorded again meanwhile: a later version is still to write.
            let settled = pending.withLock { pending in withCleanups.filter { pending.records[$0] == nil } }
            onWritten(settled)
        }
        return written
    }

    /// ``flush()``'s write: whether it was written, and (when `listing`) the keys written with a
    /// cleanup's text.
    private func flushBatch(listing: Bool) -> (written: Bool, withCleanups: [SubscriptionKey]) {
        flushing.withLock { _ -> (Bool, [SubscriptionKey]) in
            let batch = pending.withLock { pending in
                // Room for as many as this batch (up to a full one): an empty table doubled its
                // way up again while `run --once` sent (1 % of its CPU, perf).
                var next = Pending()
                next.records.reserveCapacity(min(pending.records.count, batchSize))
                swap(&next, &pending)
                return next
            }
            guard !batch.isEmpty else { return (true, []) }
            do throws(StateError) {
                let records = Array(batch.records.values)
                try store.save(records, deleting: Array(batch.forgotten))
                let failed = failedWrites.withLock { count in defer { count = 0 }; return count }
                if failed > 0 {
                    logger.notice("the state is written again (\(failed) \(failed == 1 ? "write" : "writes") failed meanwhile; nothing was lost)")
                }
                return (true, listing ? records.compactMap { $0.cleanup == nil ? nil : $0.key } : [])
            } catch {
                // Said once, not once a second for as long as the state cannot be written.
                if failedWrites.withLock({ count in defer { count += 1 }; return count }) == 0 {
                    logger.error("cannot save the state: \(error.description); it is kept in memory and written once it can be (tried again every second)")
                }
                pending.withLock { pending in
                    // Changes recorded since the batch was taken are newer: keep them, with what
                    // they leave to the store as it is.
                    for (id, record) in batch.records where !pending.forgotten.contains(id) {
                        if let newer = pending.records[id] {
                            pending.keep(newer, over: record)
                        } else {
                            pending.records[id] = record
                        }
                    }
                    for id in batch.forgotten where pending.records[id] == nil {
                        pending.forgotten.insert(id)
                    }
                }
                return (false, [])
            }
        }
    }

    /// Once what is recorded so far is written, frees the state database's page cache and gives
    /// the heap's free memory back to the system. The agent asks for it when every account is
    /// reported: loading, rendering and the first burst of requests are over, and the last
    /// records are still to be written.
    public func releaseMemoryOnceWritten() {
        releaseAfterWrite.withLock { $0 = true }
        signalContinuation.yield()
    }

    /// Writes what is recorded in batches of `batchSize` while it comes, until the task is
    /// cancelled; for `run --once`, whose answers all come in one burst and whose caller writes
    /// the rest at the end. Without it the outcomes waited in memory for that last flush: at
    /// 100,000 accounts, 0.9 s of writing after the last answer. A batch that cannot be written
    /// stays pending and is tried again a second later, as ``run()`` does (real time: the
    /// agent's clock may be a test's).
    public func writeInBatches() async {
        for await _ in fullBatch {
            if !(await offPool { self.flush() }) {
                try? await Task.sleep(for: .seconds(1))
                fullBatchContinuation.yield()
            }
        }
    }

    /// Flushes a batch shortly after each change, until graceful shutdown; then flushes once
    /// more, and throws if that last write fails (the agent then exits non-zero).
    public func run() async throws {
        for await _ in signal.cancelOnGracefulShutdown() {
            try? await clock.sleep(for: batchInterval)
            if !(await offPool { self.flush() }) {
                // Back off before the next try; a later change wakes the loop again.
                try? await clock.sleep(for: .seconds(1))
                signalContinuation.yield()
            } else if pending.withLock({ $0.isEmpty }),
                      releaseAfterWrite.withLock({ release in defer { release = false }; return release }) {
                // Only once nothing waits to be written: writing refills the cache.
                let store = store
                await offPool { store.releaseMemory() }
                Allocator.releaseFreedMemory()
            }
        }
        guard await offPool({ self.flush() }) else {
            throw Failure(description: "the last changes could not be saved to \(store.location)")
        }
    }
}
