#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import PushListener

/// An HTTP/1.1 server on 127.0.0.1 for tests and the demo receiver: it records every request and
/// answers each with the reply its handler scripts.
///
/// One thread per connection with blocking I/O; keep-alive and pipelined requests are served in
/// order, `Connection: close` is honoured, `Expect: 100-continue` is answered before the body is
/// read, and bodies may come with `Content-Length` or `Transfer-Encoding: chunked`. A request
/// whose head exceeds 64 KiB or whose body exceeds 16 MiB, or that is malformed, gets a 4xx/5xx
/// answer with `Connection: close` and is not recorded. Replies carry no `Date` header, so a
/// response is the same bytes every time.
///
/// ```swift
/// let server = try LoopbackHTTPServer { request, index in
///     index == 0 ? .status(503, headers: [("Retry-After", "1")]) : .status(204)
/// }
/// // … point a client at server.baseURL + "/push" …
/// #expect(server.requests.map(\.path) == ["/push", "/push"])
/// ```
///
/// `stop()` (also run by `deinit`) closes the listener and every connection, hung ones included,
/// and returns once all of the server's threads have finished.
public final class LoopbackHTTPServer: Sendable {
    /// One request as it was received.
    public struct Request: Sendable {
        /// The method, e.g. `GET`.
        public var method: String
        /// The request target exactly as received: path and query (or the absolute URL a proxy is sent).
        public var target: String
        /// The header fields in the order received, values without surrounding spaces.
        /// Trailer fields of a chunked body are not included.
        public var headers: [(name: String, value: String)]
        /// The body, de-chunked if it came chunked.
        public var body: [UInt8]
        /// Which TCP connection carried the request: connections are numbered from 1 in the order accepted.
        public var connectionID: Int

        /// A request as the server would record it, e.g. to test the authorization helpers.
        public init(method: String, target: String, headers: [(name: String, value: String)] = [],
                    body: [UInt8] = [], connectionID: Int = 1) {
            self.method = method
            self.target = target
            self.headers = headers
            self.body = body
            self.connectionID = connectionID
        }

        /// The value of the first header field called `name`, compared case-insensitively.
        public func header(_ name: String) -> String? {
            let wanted = name.lowercased()
            return headers.first { $0.name.lowercased() == wanted }?.value
        }

        /// The body decoded as UTF-8 (invalid bytes become U+FFFD).
        public var bodyText: String { String(decoding: body, as: UTF8.self) }

        /// The target before the first `?`.
        public var path: String {
            target.firstIndex(of: "?").map { String(target[..<$0]) } ?? target
        }

        /// The target after the first `?`, or `nil` when there is no `?`.
        public var query: String? {
            target.firstIndex(of: "?").map { String(target[target.index(after: $0)...]) }
        }
    }

    /// What the server does with a request.
    public enum Reply: Sendable {
        /// Answer with `status`, `headers` in order and `body`.
        ///
        /// `Content-Length` is added unless `headers` has `Content-Length` or `Transfer-Encoding`
        /// (then the head and body are sent as given, to script a malformed response) or the status
        /// is 1xx, 204 or 304 (then no body is sent). A `HEAD` request gets the head only.
        /// `Connection: close` is added, and the connection closed after the reply, when the client
        /// asked for that; a `Connection: close` in `headers` closes it too.
        case respond(status: Int, headers: [(name: String, value: String)], body: [UInt8])
        /// Never answer. The connection stays open, and what the client sends is discarded,
        /// until the client closes it or `stop()` is called.
        case hang
        /// Close the connection with a TCP reset (`SO_LINGER` 0) without answering.
        case reset
        /// Close the connection cleanly (FIN) without answering.
        case close

        /// `.respond` with a text body: `contentType`, if given, comes first in the headers,
        /// then `headers`; `body` is sent as UTF-8.
        public static func status(_ status: Int, contentType: String? = nil, body: String = "",
                                  headers: [(name: String, value: String)] = []) -> Reply {
            let type = contentType.map { [(name: "Content-Type", value: $0)] } ?? []
            return .respond(status: status, headers: type + headers, body: Array(body.utf8))
        }
    }

    /// A socket call failed while the server was starting, e.g. `bind` on a port in use.
    public struct SocketError: Error, CustomStringConvertible, Sendable {
        /// The call that failed: `socket`, `bind`, `listen`, ….
        public var operation: String
        /// Its `errno`.
        public var code: Int32

        /// `bind failed: Address already in use`.
        public var description: String { "\(operation) failed: \(String(cString: strerror(code)))" }
    }

    /// The port the server listens on.
    public let port: Int
    private let core: LoopbackServerCore

    /// Starts listening on 127.0.0.1 and serving.
    ///
    /// - Parameters:
    ///   - port: The port to listen on; 0 (the default) takes a free ephemeral port. See `port`.
    ///   - recording: Whether `requests` keeps every request. A long-running server that does not
    ///     need them (the demo receiver) passes `false`; the counts and indexes are kept either way.
    ///   - handler: Called on the connection's thread with each request and its 0-based index among
    ///     all requests the server received; its reply is sent before the connection reads on.
    ///     Calls for different connections run concurrently.
    /// - Throws: `SocketError` when the socket cannot be set up.
    public init(port: Int = 0, recording: Bool = true,
                handler: @escaping @Sendable (Request, Int) -> Reply = { _, _ in .status(204) }) throws {
        let listener = try LoopbackSocket.listen(port: port)
        self.port = listener.port
        core = try LoopbackServerCore(listener: listener.fd, recording: recording, handler: handler)
        core.start()
    }

    deinit {
        core.stop()
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Every request received so far, in the order they arrived; safe to read from any thread.
    public var requests: [Request] { core.recordedRequests }

    /// Blocks until at least `count` requests have arrived or `timeout` has passed, and returns
    /// whether they arrived. A request counts once its body is in, before its handler runs.
    /// Returns `false` at once if the server is stopped before they did.
    public func waitForRequests(_ count: Int, timeout: Duration) -> Bool {
        core.waitUntil(timeout: timeout) { $0.requestCount >= count }
    }

    /// Blocks until at least `count` replies are done or `timeout` has passed, and returns whether
    /// they are. A reply is done when `.respond` has been written to the socket (or the write failed)
    /// or `.close`/`.reset` has closed the connection; `.hang` is never done.
    public func waitForReplies(_ count: Int, timeout: Duration) -> Bool {
        core.waitUntil(timeout: timeout) { $0.replyCount >= count }
    }

    /// Closes the listener and all connections, hung ones included, and waits for the server's
    /// threads to finish. Afterwards connecting to `port` is refused. Idempotent and thread-safe;
    /// called from a handler it waits for every thread but the caller's.
    public func stop() {
        core.stop()
    }
}

/// The shared state of a server and the work of its threads. The threads hold this, not the
/// `LoopbackHTTPServer`, so that dropping the server runs its `deinit`, which stops them.
final class LoopbackServerCore: @unchecked Sendable {
    typealias Request = LoopbackHTTPServer.Request
    typealias Reply = LoopbackHTTPServer.Reply

    /// What `waitUntil` may look at.
    struct Counts {
        var requestCount: Int
        var replyCount: Int
    }

    private let listener: Int32
    /// Closing the write end wakes the accept loop to end it.
    private let wakeRead: Int32, wakeWrite: Int32
    private let recording: Bool
    private let handler: @Sendable (Request, Int) -> Reply

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var requests: [Request] = []
    private var counts = Counts(requestCount: 0, replyCount: 0)
    private var connections: [Int: Int32] = [:]
    private var nextConnectionID = 1
    private var liveThreads = 0
    private var serverThreads: Set<pthread_t> = []
    private var stopping = false
    private var closed = false

    init(listener: Int32, recording: Bool, handler: @escaping @Sendable (Request, Int) -> Reply) throws {
        self.listener = listener
        self.recording = recording
        self.handler = handler
        do {
            (wakeRead, wakeWrite) = try LoopbackSocket.pipe()
        } catch {
            close(listener)
            throw error
        }
    }

    /// Starts the accept thread.
    func start() {
        condition.withLock { liveThreads += 1 }
        Thread { [self] in acceptLoop() }.start()
    }

    var recordedRequests: [Request] {
        condition.withLock { requests }
    }

    func waitUntil(timeout: Duration, _ satisfied: (Counts) -> Bool) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return condition.wait(timeout: timeout) { satisfied(counts) ? true : stopping ? false : nil }
    }

    func stop() {
        condition.lock()
        defer { condition.unlock() }
        if !stopping {
            stopping = true
            // shutdown acts on the socket, not on this descriptor: a child process being spawned
            // at this moment holds a copy of every descriptor until its exec, and would keep a
            // merely closed listener accepting. On Linux this refuses new connections at once.
            _ = shutdown(listener, Int32(SHUT_RDWR))
            close(wakeWrite)
            for fd in connections.values { shutdown(fd, Int32(SHUT_RDWR)) }
            condition.broadcast()
        }
        let own = serverThreads.contains(pthread_self()) ? 1 : 0
        while liveThreads > own { condition.wait() }
        if !closed {
            closed = true
            close(listener)
            close(wakeRead)
        }
    }

    // MARK: Threads

    private func threadStarted() {
        condition.withLock { _ = serverThreads.insert(pthread_self()) }
    }

    private func threadFinished() {
        condition.withLock {
            serverThreads.remove(pthread_self())
            liveThreads -= 1
            condition.broadcast()
        }
    }

    private func acceptLoop() {
        threadStarted()
        defer { threadFinished() }
        var watched = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        while true {
            if poll(&watched, 2, -1) < 0 {
                if errno == EINTR { continue }
                return
            }
            if watched[1].revents != 0 { return }
            if watched[0].revents & Int16(POLLERR | POLLNVAL) != 0 { return }
            if watched[0].revents == 0 { continue }
            let fd = LoopbackSocket.accept(listener)
            if fd < 0 {
                switch errno {
                case EAGAIN, EWOULDBLOCK, EINTR, ECONNABORTED, EPROTO:
                    continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors or memory: wait a little (or for stop) rather than spin.
                    _ = poll(&watched[1], 1, 50)
                    continue
                default:
                    return
                }
            }
            guard let id = register(fd) else {
                close(fd)
                return
            }
            Thread { [self] in serve(fd, connectionID: id) }.start()
        }
    }

    /// Counts a new connection and its thread; `nil` once stopping.
    private func register(_ fd: Int32) -> Int? {
        condition.withLock {
            guard !stopping else { return nil }
            let id = nextConnectionID
            nextConnectionID += 1
            connections[id] = fd
            liveThreads += 1
            return id
        }
    }

    /// Forgets and closes a connection. Only here is a connection's descriptor closed, so `stop()`
    /// never shuts down a reused descriptor.
    private func release(_ id: Int, _ fd: Int32) {
        condition.withLock { _ = connections.removeValue(forKey: id) }
        close(fd)
    }

    /// Records a request and returns its index; `nil` once stopping.
    private func record(_ request: Request) -> Int? {
        condition.withLock {
            guard !stopping else { return nil }
            if recording { requests.append(request) }
            counts.requestCount += 1
            condition.broadcast()
            return counts.requestCount - 1
        }
    }

    private func replyDone() {
        condition.withLock {
            counts.replyCount += 1
            condition.broadcast()
        }
    }

    private var isStopping: Bool { condition.withLock { stopping } }

    // MARK: One connection

    private func serve(_ fd: Int32, connectionID: Int) {
        threadStarted()
        defer { threadFinished() }
        var parser = HTTPRequestParser()
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let event: HTTPRequestParser.Event?
            do {
                event = try parser.next()
            } catch {
                _ = LoopbackSocket.sendAll(fd, Self.errorResponse(error))
                LoopbackSocket.closeGracefully(fd)
                return release(connectionID, fd)
            }
            switch event {
            case nil:
                let count = LoopbackSocket.receive(fd, into: &chunk)
                guard count > 0 else { return release(connectionID, fd) }
                parser.append(chunk[..<count])
            case .head(let head):
                if head.expectsContinue && !parser.hasUnparsedBytes {
                    guard LoopbackSocket.sendAll(fd, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else {
                        return release(connectionID, fd)
                    }
                }
            case .request(let head, let body):
                let request = Request(method: head.method, target: head.target, headers: head.headers, body: body,
                                      connectionID: connectionID)
                guard let index = record(request) else { return release(connectionID, fd) }
                guard answer(handler(request, index), to: head, on: fd) else { return release(connectionID, fd) }
            }
        }
    }

    /// Carries out `reply`; returns whether the connection stays open for another request.
    private func answer(_ reply: Reply, to head: HTTPRequestHead, on fd: Int32) -> Bool {
        switch reply {
        case .respond(let status, let headers, let body):
            let closing = !head.keepAlive || Self.saysClose(headers) || isStopping
            let sent = LoopbackSocket.sendAll(fd, HTTPResponse.bytes(status: status, headers: headers, body: body,
                                                                method: head.method, closing: closing))
            replyDone()
            if sent && closing { LoopbackSocket.closeGracefully(fd) }
            return sent && !closing
        case .hang:
            LoopbackSocket.discardUntilClosed(fd)
            return false
        case .reset:
            LoopbackSocket.lingerZero(fd)
            replyDone()
            return false
        case .close:
            LoopbackSocket.closeGracefully(fd)
            replyDone()
            return false
        }
    }

    private static func saysClose(_ headers: [(name: String, value: String)]) -> Bool {
        headers.contains { field in
            field.name.lowercased() == "connection"
                && field.value.split(separator: ",").contains { $0.trimmingSpaces().lowercased() == "close" }
        }
    }

    private static func errorResponse(_ error: HTTPParseError) -> [UInt8] {
        HTTPResponse.bytes(status: error.status, headers: [("Content-Type", "text/plain; charset=utf-8")],
                 body: Array((error.reason + "\n").utf8), method: "GET", closing: true)
    }

}

/// The POSIX socket calls the server makes, with the platform differences kept here.
enum LoopbackSocket {
    #if canImport(Glibc)
    private static let streamType = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    private static let sendFlags = Int32(MSG_NOSIGNAL)
    #else
    private static let streamType = SOCK_STREAM
    private static let sendFlags: Int32 = 0
    #endif

    /// A non-blocking listening socket on 127.0.0.1:`port` (0: an ephemeral port) and its port.
    static func listen(port: Int) throws(LoopbackHTTPServer.SocketError) -> (fd: Int32, port: Int) {
        guard (0...65535).contains(port) else { throw .init(operation: "bind", code: EINVAL) }
        let fd = socket(AF_INET, streamType, 0)
        guard fd >= 0 else { throw .init(operation: "socket", code: errno) }
        func fail(_ operation: String) -> LoopbackHTTPServer.SocketError {
            let error = LoopbackHTTPServer.SocketError(operation: operation, code: errno)
            close(fd)
            return error
        }
        #if !canImport(Glibc)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        #endif
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        #if !canImport(Glibc)
        address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw fail("bind") }
        guard systemListen(fd) == 0 else { throw fail("listen") }
        guard fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0 else { throw fail("fcntl") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw fail("getsockname") }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    private static func systemListen(_ fd: Int32) -> Int32 {
        #if canImport(Glibc)
        Glibc.listen(fd, 1024)
        #else
        Darwin.listen(fd, 1024)
        #endif
    }

    /// A pipe whose ends are closed on exec.
    static func pipe() throws(LoopbackHTTPServer.SocketError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard systemPipe(&fds) == 0 else { throw .init(operation: "pipe", code: errno) }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return (fds[0], fds[1])
    }

    private static func systemPipe(_ fds: inout [Int32]) -> Int32 {
        #if canImport(Glibc)
        Glibc.pipe(&fds)
        #else
        Darwin.pipe(&fds)
        #endif
    }

    /// Accepts a connection as a blocking, close-on-exec socket with Nagle off; -1 with `errno`
    /// set on failure.
    ///
    /// `accept4` is not visible from Swift without `_GNU_SOURCE`, so close-on-exec is set just
    /// after; `Process` closes inherited descriptors in the child anyway.
    static func accept(_ listener: Int32) -> Int32 {
        #if canImport(Glibc)
        let fd = Glibc.accept(listener, nil, nil)
        #else
        let fd = Darwin.accept(listener, nil, nil)
        #endif
        guard fd >= 0 else { return fd }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        #if !canImport(Glibc)
        _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        return fd
    }

    /// Reads what has arrived (blocking until something has); 0 at end of stream or on an error.
    static func receive(_ fd: Int32, into buffer: inout [UInt8]) -> Int {
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            return max(count, 0)
        }
    }

    /// Writes all of `bytes`; `false` if the peer is gone or the socket was shut down. Never raises SIGPIPE.
    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let count = send(fd, buffer.baseAddress! + offset, buffer.count - offset, sendFlags)
                if count < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += count
            }
            return true
        }
    }

    /// Sends FIN, then reads and drops what the client still sends until it closes too (for at
    /// most two seconds), so that closing does not reset the connection while the reply is unread.
    static func closeGracefully(_ fd: Int32) {
        _ = shutdown(fd, Int32(SHUT_WR))
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(2))
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        var watched = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let remaining = clock.now.duration(to: deadline)
            guard remaining > .zero else { return }
            let milliseconds = Int32(remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000)
            let ready = poll(&watched, 1, max(milliseconds, 1))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0, receive(fd, into: &buffer) > 0 else { return }
        }
    }

    /// Reads and drops everything until the client closes or the socket is shut down.
    static func discardUntilClosed(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while receive(fd, into: &buffer) > 0 {}
    }

    /// Makes the coming `close` send a TCP reset.
    static func lingerZero(_ fd: Int32) {
        var option = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
    }
}
