import CCurl
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Transport-wide settings.
public struct TransportSettings: Sendable {
    /// A PEM file of private CAs trusted besides the system store (`agent.tls.caFile`).
    public var caFile: String?
    /// The longest a connection may take to establish (capped by each request's own timeout).
    public var connectTimeout: Duration
    /// Idle connections kept open for reuse.
    public var connectionCacheSize: Int

    public init(caFile: String? = nil, connectTimeout: Duration = .seconds(10), connectionCacheSize: Int = 128) {
        self.caFile = caFile
        self.connectTimeout = connectTimeout
        self.connectionCacheSize = connectionCacheSize
    }
}

/// HTTP over libcurl's multi interface, driven by one dedicated thread.
///
/// `send` may be called from any task; each call becomes an easy handle on the transport thread,
/// and the calling task resumes when the exchange ends. Easy handles are reused, and connections
/// stay open between requests (HTTP keep-alive, HTTP/2 multiplexing where offered). Proxies come
/// from `http_proxy`, `https_proxy` and `no_proxy` as libcurl reads them.
/// Cancelling the calling task aborts its transfer.
public final class CurlTransport: Sendable {
    private let loop: CurlLoop

    /// Starts the transport thread. Throws when libcurl cannot start or `caFile` cannot be read.
    public init(settings: TransportSettings = TransportSettings()) throws {
        CurlGlobal.initialize()
        var bundle: [UInt8]?
        if let caFile = settings.caFile {
            bundle = try Self.caBundle(adding: caFile)
        }
        guard let multi = curl_multi_init() else {
            throw TransportError(.other, "libcurl could not create a multi handle")
        }
        _ = pr_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, settings.connectionCacheSize)
        let loop = CurlLoop(multi: multi, settings: settings, caBundle: bundle)
        // Started before `self` is complete: if it cannot start, no deinit waits for a thread
        // that never ran.
        try Self.startThread(running: loop)
        self.loop = loop
    }

    /// Runs `loop` on a detached thread of its own, named `pushrep-curl`.
    private static func startThread(running loop: CurlLoop) throws {
        var thread = pthread_t()
        let retained = Unmanaged.passRetained(loop)
        let status = pthread_create(&thread, nil, { argument in
            // Named from inside (no /proc needed), for `top -H`, `ps -L` and debuggers; Linux
            // allows 15 bytes. A failure only leaves the default name.
            _ = nameThread(pthread_self(), "pushrep-curl")
            let loop = Unmanaged<CurlLoop>.fromOpaque(argument!).takeRetainedValue()
            loop.run()
            return nil
        }, retained.toOpaque())
        guard status == 0 else {
            retained.release()
            throw TransportError(.other, "cannot start the transport thread (\(String(cString: strerror(status))))")
        }
        pthread_detach(thread)
    }

    deinit {
        shutdown()
    }

    /// Sends `request` and returns the final response, whatever its status.
    /// Throws `TransportError` when no response came (timeout, refused, reset, TLS, …).
    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        let id = loop.nextID()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                loop.submit(CurlTransfer(id: id, request: request, waiter: .task(continuation)))
            }
        } onCancel: {
            loop.cancel(id)
        }
    }

    /// `count` ids for ``start(_:firstID:sink:)``, the first returned, the others following it:
    /// taken before starting, so that the caller knows them before any completion comes.
    public func reserveIDs(_ count: Int) -> UInt64 {
        loop.nextIDs(count)
    }

    /// Starts `requests` together (one hand-over to the transport thread, at most one wake-up),
    /// with the ids `firstID`, `firstID + 1`, … (from ``reserveIDs(_:)``). No task waits: each
    /// one's end goes to `sink`, those finished in the same turn of the transport thread in one
    /// call, so that their answers cross to the agent's threads in batches, not one by one.
    public func start(_ requests: [TransportRequest], firstID: UInt64, sink: any TransportCompletionSink) {
        var transfers: [CurlTransfer] = []
        transfers.reserveCapacity(requests.count)
        for (offset, request) in requests.enumerated() {
            transfers.append(CurlTransfer(id: firstID + UInt64(offset), request: request, waiter: .sink(sink)))
        }
        loop.submit(transfers)
    }

    /// Aborts the transfers `ids` (of ``start(_:firstID:sink:)``); their sink hears of each as cancelled.
    public func cancel(_ ids: [UInt64]) {
        loop.cancel(ids)
    }

    /// How many easy handles the transport has freed when nothing ran (for tests and diagnostics).
    package var releasedIdleHandles: Int { loop.releasedIdleHandles }

    /// Aborts every transfer (their callers get a cancellation error) and stops the thread.
    /// Idempotent; returns once the thread has cleaned up.
    public func shutdown() {
        loop.stop()
    }

    /// The system trust store followed by `caFile`, so that both are trusted.
    private static func caBundle(adding caFile: String) throws -> [UInt8] {
        guard let extra = FileManager.default.contents(atPath: caFile) else {
            let reason = access(caFile, R_OK) == 0 ? "not readable" : String(cString: strerror(errno))
            throw TransportError(.tls, "cannot read the CA file \(caFile) (agent.tls.caFile): \(reason)")
        }
        var bundle: [UInt8] = []
        if let info = curl_version_info(PR_CURLVERSION_NOW), let path = info.pointee.cainfo,
           let system = FileManager.default.contents(atPath: String(cString: path)) {
            bundle.append(contentsOf: system)
            bundle.append(0x0A)
        }
        bundle.append(contentsOf: extra)
        return bundle
    }
}

/// libcurl's process-wide initialisation, done once before the first handle.
enum CurlGlobal {
    private static let once: Void = { _ = curl_global_init(PR_CURL_GLOBAL_DEFAULT) }()
    static func initialize() { _ = once }
}

/// glibc's `pthread_setname_np` (declared only under `_GNU_SOURCE`, so not by the Glibc module).
@_silgen_name("pthread_setname_np")
private func nameThread(_ thread: pthread_t, _ name: UnsafePointer<CChar>) -> Int32
