#if canImport(Glibc)
import Glibc
#endif
import PushSystem
import Synchronization

/// A small HTTP/1.1 server for the agent's own endpoint (SPEC §9.5): it binds where it is
/// told, answers one request per connection, and never lets a client hold it.
///
/// One thread does all the network work with `poll(2)`, for every connection at once: a client
/// that sends nothing, or a byte at a time, costs a descriptor and a few bytes, never a thread.
/// A connection that sends nothing is closed after `requestTimeout`, and a request must arrive
/// whole, head and body, within `requestTimeout` of its first byte (else 408); a head over
/// 16 KiB is answered 431, a body over `maxBodyBytes` 413, a malformed request 400. Past
/// `maxConnections`, the connection that has waited longest without a whole request is closed
/// to admit the new one, so idle clients cannot keep a new one out. Whole requests go to
/// `handlerThreads` threads of their own, which run the handler (it must not block for long,
/// and never runs on a thread of the caller's); the answer is written by the network thread,
/// within `requestTimeout` too.
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

        public init(status: Int, contentType: String = "text/plain; charset=utf-8", bytes: [UInt8]) {
            self.status = status
            self.contentType = contentType
            self.body = bytes
        }
    }

    /// Why the endpoint cannot listen, as a sentence.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The port it listens on (the one asked for, or the one the system chose for 0).
    public let port: Int
    private let network: Network
    private let handlers: Handlers
    private let thread: Mutex<OwnThread?>

    /// Listens on `host:port` (`host` a numeric address or `localhost`) and serves until `stop()`.
    public init(host: String, port: Int, maxBodyBytes: Int = 64 << 10, maxConnections: Int = 256,
                requestTimeout: Duration = .seconds(10), handlerThreads: Int = 4,
                handler: @escaping @Sendable (Request) -> Response) throws(Failure) {
        let (listener, port) = try Self.listen(host: host, port: port)
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            close(listener)
            throw Failure(description: "cannot make a pipe (\(String(cString: strerror(errno))))")
        }
        for end in pipeEnds {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        self.port = port
        handlers = Handlers(count: max(1, handlerThreads), handler: handler)
        network = Network(listener: listener, wake: (pipeEnds[0], pipeEnds[1]), maxBodyBytes: maxBodyBytes,
                          maxConnections: max(1, maxConnections), requestTimeout: requestTimeout, handlers: handlers)
        handlers.network = network
        let network = network
        guard let started = OwnThread(named: "pushrep-http", detached: false, { network.run() }) else {
            network.closeAll()
            throw Failure(description: "cannot start the endpoint's thread")
        }
        thread = Mutex(started)
    }

    deinit {
        stop()
    }

    /// Stops: closes the listener and every connection, and returns once the network thread has
    /// ended. A handler still running finishes on its own thread; its answer is dropped.
    public func stop() {
        network.stop()
        if let thread = thread.withLock({ state -> OwnThread? in defer { state = nil }; return state }) { thread.join() }
        handlers.stop()
    }

    /// How many connections are open now (for tests).
    public var openConnections: Int { network.openConnections }

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
        let fd = socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "cannot listen on \(host):\(port): \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0, Glibc.listen(fd, 128) == 0 else {
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

extension HTTPEndpoint {
    /// The network thread's side: every connection, read, timed and written with `poll(2)`.
    private final class Network: @unchecked Sendable {
        private let listener: Int32
        private let wake: (read: Int32, write: Int32)
        private let maxBodyBytes: Int
        private let maxConnections: Int
        private let requestTimeout: Duration
        private let handlers: Handlers
        /// What other threads hand the network thread: answers to write, and whether to stop.
        private let inbox = Mutex(Inbox())
        /// Only the network thread reads and changes these.
        private var connections: [Int32: Connection] = [:]
        /// Until when accepting pauses (the process is out of descriptors).
        private var acceptPausedUntil: ContinuousClock.Instant?
        private let count = Atomic<Int>(0)

        struct Inbox {
            var answers: [(fd: Int32, bytes: [UInt8])] = []
            var stopped = false
        }

        struct Connection {
            enum Phase {
                /// Waiting for the request; `firstByte` once one came.
                case reading(firstByte: ContinuousClock.Instant?)
                /// A handler has the request.
                case handling
                /// Writing the answer from `offset`, then closing.
                case writing(bytes: [UInt8], offset: Int)
            }

            var parser: HTTPRequestParser
            var phase: Phase
            /// When the connection is closed whatever its phase: the request's deadline, then the answer's.
            var deadline: ContinuousClock.Instant
            let accepted: ContinuousClock.Instant
        }

        init(listener: Int32, wake: (read: Int32, write: Int32), maxBodyBytes: Int, maxConnections: Int,
             requestTimeout: Duration, handlers: Handlers) {
            self.listener = listener
            self.wake = wake
            self.maxBodyBytes = maxBodyBytes
            self.maxConnections = maxConnections
            self.requestTimeout = requestTimeout
            self.handlers = handlers
        }

        var openConnections: Int { count.load(ordering: .relaxed) }

        func stop() {
            let first = inbox.withLock { inbox in
                defer { inbox.stopped = true }
                return !inbox.stopped
            }
            if first { ring() }
        }

        /// Hands the answer for `fd` to the network thread.
        func answer(_ fd: Int32, _ bytes: [UInt8]) {
            inbox.withLock { $0.answers.append((fd, bytes)) }
            ring()
        }

        private func ring() {
            var byte: UInt8 = 1
            _ = write(wake.write, &byte, 1)
        }

        /// The network thread: until stopped.
        func run() {
            defer { closeAll() }
            var fds: [pollfd] = []
            while true {
                let (answers, stopped) = inbox.withLock { inbox in
                    defer { inbox.answers = [] }
                    return (inbox.answers, inbox.stopped)
                }
                if stopped { return }
                let now = ContinuousClock.now
                for (fd, bytes) in answers where connections[fd] != nil {
                    connections[fd]!.phase = .writing(bytes: bytes, offset: 0)
                    connections[fd]!.deadline = now.advanced(by: requestTimeout)
                    flush(fd, now: now)
                }
                expire(now: now)
                fds.removeAll(keepingCapacity: true)
                fds.append(pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0))
                let accepting = acceptPausedUntil.map { now >= $0 } ?? true
                if accepting { acceptPausedUntil = nil }
                fds.append(pollfd(fd: accepting ? listener : -1, events: Int16(POLLIN), revents: 0))
                var next = now.advanced(by: .seconds(3600))
                if let paused = acceptPausedUntil { next = min(next, paused) }
                for (fd, connection) in connections {
                    next = min(next, connection.deadline)
                    switch connection.phase {
                    case .reading: fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0))
                    case .writing: fds.append(pollfd(fd: fd, events: Int16(POLLOUT), revents: 0))
                    case .handling: break
                    }
                }
                let wait = now.duration(to: next)
                let milliseconds = max(0, Int32(clamping: wait.components.seconds * 1_000 + wait.components.attoseconds / 1_000_000_000_000_000 + 1))
                let ready = poll(&fds, nfds_t(fds.count), milliseconds)
                if ready < 0 && errno != EINTR { return }
                guard ready > 0 else { continue }
                if fds[0].revents != 0 { drainWake() }
                let after = ContinuousClock.now
                for index in fds.indices.dropFirst(2) where fds[index].revents != 0 {
                    let fd = fds[index].fd
                    guard let connection = connections[fd] else { continue }
                    switch connection.phase {
                    case .reading: receive(fd, now: after)
                    case .writing: flush(fd, now: after)
                    case .handling: break
                    }
                }
                if fds[1].revents != 0 { acceptAll(now: after) }
            }
        }

        private func drainWake() {
            var buffer = [UInt8](repeating: 0, count: 256)
            while buffer.withUnsafeMutableBytes({ read(wake.read, $0.baseAddress, $0.count) }) > 0 {}
        }

        private func acceptAll(now: ContinuousClock.Instant) {
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else {
                    if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                        // Out of descriptors: the listener would stay readable and the loop spin.
                        acceptPausedUntil = now.advanced(by: .milliseconds(100))
                    }
                    return
                }
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
                if connections.count >= maxConnections { evictOldestWaiting() }
                if connections.count >= maxConnections {
                    // Every connection has its request with a handler or is being answered.
                    sendBestEffort(client, Self.errorBytes(503, "too many connections"))
                    close(client)
                    continue
                }
                connections[client] = Connection(parser: HTTPRequestParser(maxHeadBytes: 16 << 10, maxBodyBytes: maxBodyBytes),
                                                 phase: .reading(firstByte: nil), deadline: now.advanced(by: requestTimeout),
                                                 accepted: now)
                count.store(connections.count, ordering: .relaxed)
            }
        }

        /// Closes the connection that has waited longest without sending a whole request.
        private func evictOldestWaiting() {
            var oldest: (fd: Int32, accepted: ContinuousClock.Instant)?
            for (fd, connection) in connections {
                guard case .reading = connection.phase else { continue }
                if oldest.map({ connection.accepted < $0.accepted }) ?? true { oldest = (fd, connection.accepted) }
            }
            if let oldest { drop(oldest.fd) }
        }

        private func receive(_ fd: Int32, now: ContinuousClock.Instant) {
            var chunk = [UInt8](repeating: 0, count: 16 << 10)
            while true {
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count < 0 {
                    if errno == EINTR { continue }
                    if errno == EAGAIN || errno == EWOULDBLOCK { return }
                    return drop(fd)
                }
                // The client closed its side before its request was whole.
                if count == 0 { return drop(fd) }
                if case .reading(nil) = connections[fd]!.phase {
                    // The whole request must arrive within the timeout of its first byte.
                    connections[fd]!.phase = .reading(firstByte: now)
                    connections[fd]!.deadline = now.advanced(by: requestTimeout)
                }
                connections[fd]!.parser.append(chunk[..<count])
                while true {
                    let event: HTTPRequestParser.Event?
                    do {
                        event = try connections[fd]!.parser.next()
                    } catch {
                        return answerNow(fd, Self.errorBytes(error.status, error.reason), now: now)
                    }
                    switch event {
                    case nil:
                        break
                    case .head(let head):
                        if head.expectsContinue && !connections[fd]!.parser.hasUnparsedBytes {
                            sendBestEffort(fd, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
                        }
                        continue
                    case .request(let head, let body):
                        connections[fd]!.phase = .handling
                        let path = head.target.firstIndex(of: "?").map { String(head.target[..<$0]) } ?? head.target
                        handlers.submit(fd: fd, method: head.method,
                                        request: Request(method: head.method, path: path, headers: head.headers, body: body))
                        return
                    }
                    break
                }
            }
        }

        private func answerNow(_ fd: Int32, _ bytes: [UInt8], now: ContinuousClock.Instant) {
            connections[fd]!.phase = .writing(bytes: bytes, offset: 0)
            connections[fd]!.deadline = now.advanced(by: requestTimeout)
            flush(fd, now: now)
        }

        /// Writes what it can of the answer; closes once it is all written.
        private func flush(_ fd: Int32, now: ContinuousClock.Instant) {
            guard case .writing(let bytes, var offset) = connections[fd]?.phase else { return }
            while offset < bytes.count {
                let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if sent < 0 {
                    if errno == EINTR { continue }
                    if errno == EAGAIN || errno == EWOULDBLOCK {
                        connections[fd]!.phase = .writing(bytes: bytes, offset: offset)
                        return
                    }
                    return drop(fd)
                }
                offset += sent
            }
            drop(fd)
        }

        /// Closes what is past its deadline: a request that did not come whole (408), an answer
        /// the client does not read.
        private func expire(now: ContinuousClock.Instant) {
            for (fd, connection) in connections where connection.deadline <= now {
                switch connection.phase {
                case .reading(let firstByte):
                    if firstByte != nil { sendBestEffort(fd, Self.errorBytes(408, "the request did not arrive whole in time")) }
                    drop(fd)
                case .writing:
                    drop(fd)
                case .handling:
                    // The handler's answer is written when it comes, with its own deadline.
                    break
                }
            }
        }

        private func drop(_ fd: Int32) {
            guard connections.removeValue(forKey: fd) != nil else { return }
            close(fd)
            count.store(connections.count, ordering: .relaxed)
        }

        func closeAll() {
            for fd in connections.keys { close(fd) }
            connections = [:]
            count.store(0, ordering: .relaxed)
            close(listener)
            close(wake.read)
            close(wake.write)
        }

        /// Writes `bytes` if the socket takes them at once, without waiting.
        private func sendBestEffort(_ fd: Int32, _ bytes: [UInt8]) {
            _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        }

        static func errorBytes(_ status: Int, _ reason: String) -> [UInt8] {
            HTTPResponse.bytes(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")],
                               body: Array((reason + "\n").utf8), method: "GET", closing: true)
        }
    }

    /// The threads that run the handler, one whole request at a time each.
    private final class Handlers: @unchecked Sendable {
        private struct Job {
            var fd: Int32
            var method: String
            var request: Request
        }

        private struct Queue {
            var jobs: [Job] = []
            var stopped = false
        }

        private let handler: @Sendable (Request) -> Response
        private let queue = ConditionLock(Queue())
        /// Set once, before any request comes.
        var network: Network?

        init(count: Int, handler: @escaping @Sendable (Request) -> Response) {
            self.handler = handler
            for _ in 0..<count {
                _ = OwnThread(named: "pushrep-http-h", detached: true) { [self] in work() }
            }
        }

        func submit(fd: Int32, method: String, request: Request) {
            queue.change { $0.jobs.append(Job(fd: fd, method: method, request: request)) }
        }

        func stop() {
            queue.change { $0.stopped = true }
        }

        private func work() {
            while true {
                let job = queue.wait(until: { !$0.jobs.isEmpty || $0.stopped }) { queue -> Job? in
                    queue.jobs.isEmpty ? nil : queue.jobs.removeFirst()
                }
                guard let job else { return }
                let response = handler(job.request)
                let bytes = HTTPResponse.bytes(status: response.status, headers: [("Content-Type", response.contentType)],
                                               body: response.body, method: job.method, closing: true)
                network?.answer(job.fd, bytes)
            }
        }
    }
}
