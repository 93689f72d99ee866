#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A small HTTP/1.1 server for the agent's own endpoint (SPEC §9.5): it binds where it is
/// told, answers one request per connection, and never lets a client hold it.
///
/// One thread accepts; each connection gets a thread of its own, at most `maxConnections` at
/// once (a connection beyond them is answered 503 and closed). A client has `readTimeout` to
/// send its whole request; a head over 16 KiB is answered 431, a body over `maxBodyBytes` 413,
/// a malformed request 400. The handler runs on the connection's thread: it must not block
/// for long, and it never runs on a thread of the caller's.
public final class HTTPEndpoint: Sendable {
    /// A request as the handler sees it.
    public struct Request: Sendable {
        public var method: String
        /// The target before any `?`, percent-encoding left as sent.
        public var path: String
        public var headers: [(name: String, value: String)]
        public var body: [UInt8]

        /// The first header called `name` (case-insensitive).
        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    /// What the handler answers.
    public struct Response: Sendable {
        public var status: Int
        public var contentType: String
        public var body: [UInt8]

        public init(status: Int, contentType: String = "text/plain; charset=utf-8", body: String = "") {
            self.status = status
            self.contentType = contentType
            self.body = Array(body.utf8)
        }
    }

    /// Why the endpoint cannot listen, as a sentence.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The port it listens on (the one asked for, or the one the system chose for 0).
    public let port: Int
    private let listener: Int32
    private let wake: (read: Int32, write: Int32)
    private let handler: @Sendable (Request) -> Response
    private let maxBodyBytes: Int
    private let maxConnections: Int
    private let readTimeout: Duration
    private let state = Mutex(State())

    private struct State {
        var connections = 0
        var stopped = false
        var acceptorDone = false
    }

    /// Listens on `host:port` (`host` a numeric address or `localhost`) and serves until `stop()`.
    public init(host: String, port: Int, maxBodyBytes: Int = 64 << 10, maxConnections: Int = 32,
                readTimeout: Duration = .seconds(10), handler: @escaping @Sendable (Request) -> Response) throws(Failure) {
        self.handler = handler
        self.maxBodyBytes = maxBodyBytes
        self.maxConnections = maxConnections
        self.readTimeout = readTimeout
        (listener, self.port) = try Self.listen(host: host, port: port)
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            close(listener)
            throw Failure(description: "cannot make a pipe (\(String(cString: strerror(errno))))")
        }
        wake = (pipeEnds[0], pipeEnds[1])
        _ = fcntl(wake.read, F_SETFD, FD_CLOEXEC)
        _ = fcntl(wake.write, F_SETFD, FD_CLOEXEC)
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit {
        stop()
    }

    /// Stops accepting and returns once the accepting thread has ended; connections being
    /// served finish on their own (each within its read timeout).
    public func stop() {
        let first = state.withLock { state in
            defer { state.stopped = true }
            return !state.stopped
        }
        if first {
            var byte: UInt8 = 1
            _ = write(wake.write, &byte, 1)
        }
        while !state.withLock({ $0.acceptorDone }) { usleep(1_000) }
    }

    // MARK: Accepting

    private func acceptLoop() {
        defer {
            close(listener)
            close(wake.read)
            close(wake.write)
            state.withLock { $0.acceptorDone = true }
        }
        var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
        while !state.withLock({ $0.stopped }) {
            fds[0].revents = 0
            fds[1].revents = 0
            guard poll(&fds, 2, -1) >= 0 || errno == EINTR else { return }
            if fds[1].revents != 0 { return }
            guard fds[0].revents != 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            let admitted = state.withLock { state -> Bool in
                guard state.connections < maxConnections else { return false }
                state.connections += 1
                return true
            }
            guard admitted else {
                Self.send(client, HTTPResponse.bytes(status: 503, headers: [("Content-Type", "text/plain; charset=utf-8")],
                                                     body: Array("too many connections\n".utf8), method: "GET", closing: true))
                close(client)
                continue
            }
            Thread { [self] in
                serve(client)
                state.withLock { $0.connections -= 1 }
            }.start()
        }
    }

    // MARK: One connection

    private func serve(_ fd: Int32) {
        defer { close(fd) }
        var timeout = timeval(tv_sec: Int(readTimeout.components.seconds), tv_usec: Int(readTimeout.components.attoseconds / 1_000_000_000_000))
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var parser = HTTPRequestParser(maxHeadBytes: 16 << 10, maxBodyBytes: maxBodyBytes)
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let event: HTTPRequestParser.Event?
            do {
                event = try parser.next()
            } catch {
                Self.send(fd, HTTPResponse.bytes(status: error.status, headers: [("Content-Type", "text/plain; charset=utf-8")],
                                                 body: Array((error.reason + "\n").utf8), method: "GET", closing: true))
                return
            }
            switch event {
            case nil:
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { return }
                parser.append(chunk[..<count])
            case .head(let head):
                if head.expectsContinue && !parser.hasUnparsedBytes {
                    Self.send(fd, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
                }
            case .request(let head, let body):
                let path = head.target.firstIndex(of: "?").map { String(head.target[..<$0]) } ?? head.target
                let response = handler(Request(method: head.method, path: path, headers: head.headers, body: body))
                Self.send(fd, HTTPResponse.bytes(status: response.status, headers: [("Content-Type", response.contentType)],
                                                 body: response.body, method: head.method, closing: true))
                return
            }
        }
    }

    private static func send(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    // MARK: Listening

    private static func listen(host: String, port: Int) throws(Failure) -> (Int32, Int) {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV | (host == "localhost" ? 0 : AI_NUMERICHOST)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let first = found else {
            throw Failure(description: "cannot listen on \(host):\(port): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(found) }
        let fd = socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "cannot listen on \(host):\(port): \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0, Glibc.listen(fd, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw Failure(description: "cannot listen on \(host):\(port): \(reason)")
        }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        var actual = port
        if bound {
            actual = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
            }
        }
        return (fd, actual)
    }
}

/// A thread that runs `body` (Foundation's `Thread` is not imported here).
private final class Thread: @unchecked Sendable {
    private let body: () -> Void

    init(_ body: @escaping () -> Void) {
        self.body = body
    }

    func start() {
        var thread = pthread_t()
        let box = Unmanaged.passRetained(self).toOpaque()
        guard pthread_create(&thread, nil, { box in
            let thread = Unmanaged<Thread>.fromOpaque(box!).takeRetainedValue()
            thread.body()
            return nil
        }, box) == 0 else {
            Unmanaged<Thread>.fromOpaque(box).release()
            return
        }
        pthread_detach(thread)
    }
}
