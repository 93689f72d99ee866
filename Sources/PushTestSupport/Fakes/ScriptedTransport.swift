import PushBackend
import PushTransport
import Synchronization

/// A transport that answers from a script and records what it was asked, for tests that send in
/// process. The script gets the request and how many times its URL was asked before (0 the
/// first time); ``init(numbered:)`` answers by the request's place among all of them instead.
public final class ScriptedTransport: HTTPTransport {
    public typealias Answer = @Sendable (TransportRequest, Int) throws -> TransportResponse
    private enum Script {
        case byURL(Answer)
        case byIndex(@Sendable (Int) -> Int)
    }

    private let script: Script
    private let log = Mutex<[TransportRequest]>([])

    /// Answers each request with `answer(request, earlier requests to its URL)`; what it throws
    /// is the transport's failure (`TransportError`).
    public init(_ answer: @escaping Answer) { script = .byURL(answer) }

    /// The `index`th request (from 0) gets the status `status(index)` and no body.
    public init(numbered status: @escaping @Sendable (Int) -> Int) { script = .byIndex(status) }

    /// Every request, in the order they came.
    public var requests: [TransportRequest] { log.withLock { $0 } }

    /// The URL of every request, in the order they came.
    public var urls: [String] { log.withLock { $0.map(\.url) } }

    /// Waits (without blocking a thread) until `count` requests came, or `limit` of real time passed.
    public func waitForRequests(_ count: Int, within limit: Duration = Polling.generous) async -> Bool {
        await Polling.until(timeout: limit) { log.withLock { $0.count } >= count }
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        let (index, earlier) = log.withLock { requests in
            defer { requests.append(request) }
            return (requests.count, requests.count { $0.url == request.url })
        }
        switch script {
        case .byURL(let answer): return try answer(request, earlier)
        case .byIndex(let status): return TransportResponse(status: status(index))
        }
    }
}

/// A transport whose request to a URL ending in `/held` waits until ``release()``, or ends as a
/// cancelled transfer does when its task is cancelled; any other is answered 204 at once.
public final class HoldingTransport: HTTPTransport {
    private let released = Mutex(false)
    private let sent = Mutex<[String]>([])
    /// The held request's answer once released.
    public let heldStatus: Int

    public init(heldStatus: Int = 204) { self.heldStatus = heldStatus }

    /// The URL of every request, in the order they came.
    public var urls: [String] { sent.withLock { $0 } }

    /// Lets the held requests, and every later one, be answered.
    public func release() { released.withLock { $0 = true } }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        sent.withLock { $0.append(request.url) }
        if request.url.hasSuffix("/held") {
            while !released.withLock({ $0 }) {
                if Task.isCancelled { throw TransportError.cancelled }
                try? await Task.sleep(for: .milliseconds(5))
            }
            return TransportResponse(status: heldStatus)
        }
        return TransportResponse(status: 204)
    }
}
