import CCurl
import Dispatch
import Synchronization

/// The transport thread: the multi handle, the idle easy handles and the running transfers.
/// Other threads reach it only through the inbox (`submit`, `cancel`, `stop`), which wakes
/// `curl_multi_poll`.
final class CurlLoop: @unchecked Sendable {
    private struct Inbox {
        var submitted: [CurlTransfer] = []
        var cancelled: [UInt64] = []
        /// Cancellations that arrived before their transfer (a task cancelled while submitting).
        var cancelledEarly: Set<UInt64> = []
        var stopping = false
        /// True while the thread sleeps in `curl_multi_poll`: only then does a submission need
        /// `curl_multi_wakeup` (a syscall); otherwise the thread sees the inbox on its next turn.
        var polling = false
    }

    private let inbox = Mutex(Inbox())
    private let lastID = Atomic<UInt64>(0)
    private let multi: UnsafeMutableRawPointer
    /// TLS sessions shared by every easy handle (each would otherwise keep its own, and they
    /// come and go with bursts), so a new connection to a host resumes the last session.
    /// Used on the transport thread only, so it needs no lock callbacks.
    private let share: UnsafeMutableRawPointer?
    private let settings: TransportSettings
    /// The trust store with `caFile` (``CurlTransport``), copied once here and handed to every
    /// TLS request as is (libcurl copied it per request before).
    private let caBundle: UnsafeMutableRawBufferPointer?
    private let finished = DispatchSemaphore(value: 0)
    // Owned by the transport thread.
    private var idleHandles: [UnsafeMutableRawPointer] = []
    private var running: [UInt64: CurlTransfer] = [:]
    private let releasedHandles = Atomic<Int>(0)
    private var loopbackHosts = LoopbackCache()
    /// What finished for sinks in this turn, handed over at its end.
    private var turn = TurnCompletions()

    init(multi: UnsafeMutableRawPointer, settings: TransportSettings, caBundle: [UInt8]?) {
        self.multi = multi
        var share = curl_share_init()
        if let created = share, pr_share_setopt_data(created, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK {
            curl_share_cleanup(created)
            share = nil
        }
        self.share = share
        self.settings = settings
        self.caBundle = caBundle.map { bytes in
            let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
            bytes.withUnsafeBytes { copy.copyMemory(from: $0) }
            return copy
        }
    }

    /// How many easy handles were freed when nothing ran.
    var releasedIdleHandles: Int { releasedHandles.load(ordering: .relaxed) }

    /// A new transfer id (from 1), without taking the inbox's lock.
    func nextID() -> UInt64 {
        lastID.wrappingAdd(1, ordering: .relaxed).newValue
    }

    /// `count` new transfer ids, the first returned, the others following it.
    func nextIDs(_ count: Int) -> UInt64 {
        lastID.wrappingAdd(UInt64(count), ordering: .relaxed).newValue - UInt64(count) + 1
    }

    /// Hands `transfers` to the thread in one turn (one lock, at most one wake-up).
    func submit(_ transfers: [CurlTransfer]) {
        guard !transfers.isEmpty else { return }
        let (accepted, polling) = inbox.withLock { state -> ([CurlTransfer], Bool) in
            if state.stopping { return ([], false) }
            var accepted: [CurlTransfer] = []
            accepted.reserveCapacity(transfers.count)
            for transfer in transfers {
                if state.cancelledEarly.remove(transfer.id) != nil { continue }
                state.submitted.append(transfer)
                accepted.append(transfer)
            }
            return (accepted, state.polling)
        }
        if accepted.count < transfers.count {
            let taken = Set(accepted.map(\.id))
            for transfer in transfers where !taken.contains(transfer.id) { transfer.fail(.cancelled) }
        }
        if polling { wake() }
    }

    /// Cancels several transfers at once.
    func cancel(_ ids: [UInt64]) {
        guard !ids.isEmpty else { return }
        let polling = inbox.withLock { state in
            state.cancelled.append(contentsOf: ids)
            return state.polling
        }
        if polling { wake() }
    }

    /// Hands `transfer` to the thread, or fails it at once when the transport has stopped.
    func submit(_ transfer: CurlTransfer) {
        let (accepted, polling) = inbox.withLock { state -> (Bool, Bool) in
            if state.stopping { return (false, false) }
            if state.cancelledEarly.remove(transfer.id) != nil { return (false, false) }
            state.submitted.append(transfer)
            return (true, state.polling)
        }
        if !accepted {
            transfer.fail(.cancelled)
        } else if polling {
            wake()
        }
    }

    func cancel(_ id: UInt64) {
        let polling = inbox.withLock { state in
            state.cancelled.append(id)
            return state.polling
        }
        if polling { wake() }
    }

    /// Ends the thread, failing what is left with a cancellation; waits for it. Idempotent.
    func stop() {
        let first = inbox.withLock { state -> Bool in
            defer { state.stopping = true }
            return !state.stopping
        }
        if first {
            wake()
            finished.wait()
        }
    }

    private func wake() {
        _ = curl_multi_wakeup(multi)
    }

    /// The thread's body: add what was submitted, drop what was cancelled, let libcurl work,
    /// finish what completed, then sleep in `curl_multi_poll` until a socket or `wake()` stirs.
    func run() {
        var stillRunning: Int32 = 0
        while true {
            // Take the queues whole (their buffers go with them): emptying them in place while a
            // copy is held would copy the buffer every turn.
            let (submitted, cancelled, stopping) = inbox.withLock { state in
                defer {
                    state.submitted = []
                    state.cancelled = []
                    state.polling = false
                }
                return (state.submitted, state.cancelled, state.stopping)
            }
            if stopping {
                for transfer in submitted { transfer.fail(.cancelled, turn: &turn) }
                turn.deliver()
                break
            }
            for transfer in submitted { start(transfer) }
            for id in cancelled { abort(id) }

            _ = curl_multi_perform(multi, &stillRunning)
            var remaining: Int32 = 0
            while let message = curl_multi_info_read(multi, &remaining) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
                finish(handle, result: pr_message_result(message))
            }
            releaseIdleHandlesWhenNothingRuns()
            // Each sink hears of what finished in this turn at once.
            if !turn.isEmpty { turn.deliver() }
            // Announce the sleep, then look at the inbox once more: a submission that came
            // before the flag was set saw no sleeper and did not wake us.
            let idle = inbox.withLock { state -> Bool in
                state.polling = true
                return state.submitted.isEmpty && state.cancelled.isEmpty && !state.stopping
            }
            if idle { _ = curl_multi_poll(multi, nil, 0, pollTimeout(), nil) }
        }
        for id in Array(running.keys) { abort(id) }
        turn.deliver()
        for handle in idleHandles { curl_easy_cleanup(handle) }
        idleHandles.removeAll()
        // The multi handle lives until deinit: a caller that saw `polling` may still wake it.
        finished.signal()
    }

    deinit {
        curl_multi_cleanup(multi)
        if let share { curl_share_cleanup(share) }
        // No handle is left (the thread cleaned them all up before ending).
        caBundle?.deallocate()
    }

    /// How long `curl_multi_poll` may sleep: what libcurl asks for (capped at a second while
    /// transfers run); with nothing to do, until `wake()`, so an idle agent never wakes up.
    private func pollTimeout() -> Int32 {
        var wanted = -1
        curl_multi_timeout(multi, &wanted)
        if wanted >= 0 { return Int32(min(wanted, 1000)) }
        return running.isEmpty ? Int32.max : 1000
    }

    /// Frees the idle easy handles when nothing runs. They are reused within a burst; between
    /// bursts each would hold libcurl's buffers (16 KiB to download, 64 KiB more once it has
    /// sent a body) for nothing, and making one again costs microseconds. Connections are not
    /// the handles': they stay in the multi handle's cache and are reused either way.
    private func releaseIdleHandlesWhenNothingRuns() {
        guard running.isEmpty, !idleHandles.isEmpty else { return }
        for handle in idleHandles { curl_easy_cleanup(handle) }
        releasedHandles.wrappingAdd(idleHandles.count, ordering: .relaxed)
        idleHandles = []
    }

    private func start(_ transfer: CurlTransfer) {
        guard let handle = idleHandles.popLast() ?? curl_easy_init() else {
            transfer.fail(TransportError(.other, "libcurl could not create an easy handle"), turn: &turn)
            return
        }
        var configured = transfer.configure(handle, settings: settings, caBundle: caBundle,
                                            isLoopback: loopbackHosts.isLoopback(transfer.url))
        if configured == CURLE_OK, let share { configured = pr_easy_setopt_pointer(handle, CURLOPT_SHARE, share) }
        guard configured == CURLE_OK else {
            transfer.complete(configured, turn: &turn)
            recycle(handle)
            return
        }
        let added = curl_multi_add_handle(multi, handle)
        guard added == CURLM_OK else {
            transfer.fail(TransportError(.other, "libcurl could not start the transfer: " + String(cString: curl_multi_strerror(added))),
                          turn: &turn)
            recycle(handle)
            return
        }
        running[transfer.id] = transfer
    }

    private func finish(_ handle: UnsafeMutableRawPointer, result: CURLcode) {
        var context: UnsafeMutableRawPointer?
        _ = pr_easy_getinfo_pointer(handle, CURLINFO_PRIVATE, &context)
        _ = curl_multi_remove_handle(multi, handle)
        guard let context else {
            recycle(handle)
            return
        }
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
        running[transfer.id] = nil
        let reusable = !transfer.usedCredentials
        if transfer.bodyWasHeldBack(result: result) {
            recycle(handle, reusable: reusable)
            transfer.dropCredentials()
            start(transfer)
            return
        }
        switch transfer.redirect(result: result) {
        case .success(let next):
            recycle(handle, reusable: reusable)
            transfer.follow(next)
            start(transfer)
            return
        case .failure(let error):
            transfer.fail(error, turn: &turn)
            recycle(handle, reusable: reusable)
            return
        case nil:
            break
        }
        transfer.complete(result, turn: &turn)
        recycle(handle, reusable: reusable)
    }

    private func abort(_ id: UInt64) {
        guard let transfer = running.removeValue(forKey: id) else {
            // Not running: submitted since this turn began (fail it now, it must not start), or
            // not submitted yet (remember, so `submit` fails it), or already finished.
            let queued = inbox.withLock { state -> CurlTransfer? in
                if let index = state.submitted.firstIndex(where: { $0.id == id }) {
                    return state.submitted.remove(at: index)
                }
                state.cancelledEarly.insert(id)
                return nil
            }
            queued?.fail(.cancelled, turn: &turn)
            return
        }
        if let handle = transfer.handle {
            _ = curl_multi_remove_handle(multi, handle)
            recycle(handle, reusable: !transfer.usedCredentials)
        }
        transfer.fail(.cancelled, turn: &turn)
    }

    /// Keeps `handle` for another transfer, unless it did HTTP authentication: `curl_easy_reset`
    /// does not clear a handle's authentication state, and a handle that had sent a Digest
    /// request's first leg (which holds its body back for the challenge) sent the next POST it
    /// carried with an empty body.
    private func recycle(_ handle: UnsafeMutableRawPointer, reusable: Bool = true) {
        guard reusable else {
            curl_easy_cleanup(handle)
            return
        }
        curl_easy_reset(handle)
        idleHandles.append(handle)
    }
}
