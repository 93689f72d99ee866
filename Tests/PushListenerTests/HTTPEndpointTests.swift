#if canImport(Glibc)
import Glibc
#endif
import PushListener
import PushTestSupport
import Synchronization
import Testing
import PushTestThreads

/// The agent's endpoint (SPEC §9.5) in process: what it answers, and that no client, idle, slow
/// or hostile, holds it.
@Suite(.blockingThreads) struct HTTPEndpointTests {
    /// A client socket of the test's.
    final class Client {
        let fd: Int32

        init(port: Int) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            try #require(connected == 0, "connect: \(String(cString: strerror(errno)))")
            // A read waits this long at most: the bound of a test that would otherwise hang.
            var limit = timeval(tv_sec: 60, tv_usec: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        }

        deinit { close(fd) }

        /// Sends `text`; false once the server has closed the connection.
        @discardableResult
        func send(_ text: String) -> Bool {
            let bytes = Array(text.utf8)
            return bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
        }

        /// Everything the server sends until it closes the connection (or the read limit passes).
        func readToEnd() -> String {
            var received: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count <= 0 { break }
                received += chunk[..<count]
            }
            return String(decoding: received, as: UTF8.self)
        }

        /// The status of the answer read to its end, 0 when none came.
        func status() -> Int {
            let answer = readToEnd()
            guard answer.hasPrefix("HTTP/1.1 ") else { return 0 }
            return Int(answer.dropFirst(9).prefix(3)) ?? 0
        }
    }

    static func endpoint(maxConnections: Int = 256, requestTimeout: Duration = .seconds(10),
                         handler: @escaping @Sendable (HTTPEndpoint.Request) -> HTTPEndpoint.Response = { request in
                             HTTPEndpoint.Response(status: 200, body: "\(request.method) \(request.path) \(request.body.count)\n")
                         }) throws -> HTTPEndpoint {
        try HTTPEndpoint(host: "127.0.0.1", port: 0, maxConnections: maxConnections, requestTimeout: requestTimeout, handler: handler)
    }

    @Test func aRequestIsAnsweredAndTheConnectionClosed() throws {
        let server = try Self.endpoint()
        defer { server.stop() }
        let client = try Client(port: server.port)
        client.send("POST /journeys/a/b?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc")
        let answer = client.readToEnd()
        #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(answer.hasSuffix("\r\n\r\nPOST /journeys/a/b 3\n"))
        #expect(answer.contains("Connection: close\r\n"))
    }

    @Test func aHundredIdleAndSlowClientsDoNotKeepAnotherFromItsAnswer() throws {
        // Their time is long, so they are all still connected when the last client is answered.
        let server = try Self.endpoint(requestTimeout: .seconds(600))
        defer { server.stop() }
        var clients: [Client] = []
        for index in 0..<120 {
            let client = try Client(port: server.port)
            // A third start a request and never finish it.
            if index % 3 == 0 { client.send("GET /livez HTTP/1.1\r\nHo") }
            clients.append(client)
        }
        #expect(Polling.until { server.openConnections == 120 }, "\(server.openConnections)")
        let last = try Client(port: server.port)
        last.send("GET /livez HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(last.status() == 200)
        #expect(server.openConnections >= 120, "answered while every idle and slow client still holds its connection")
    }

    @Test func aClientThatDripsItsRequestIsCutOffAtTheRequestsDeadline() throws {
        // SPEC §9.5: the whole request within the timeout of its first byte, not a timeout per read.
        let server = try Self.endpoint(requestTimeout: .milliseconds(300))
        defer { server.stop() }
        let client = try Client(port: server.port)
        var sent = 0
        // A byte every 50 ms would take 5 s for these 100: far past the 0.3 s the request has.
        for byte in String(repeating: "X", count: 100) {
            guard client.send(String(byte)) else { break }
            sent += 1
            var pause = timespec(tv_sec: 0, tv_nsec: 50_000_000)
            nanosleep(&pause, nil)
            var probe = pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)
            if poll(&probe, 1, 0) > 0 { break }
        }
        #expect(sent < 100, "the connection was cut while the client still dripped")
        let answer = client.readToEnd()
        #expect(answer.hasPrefix("HTTP/1.1 408 "), "\(answer)")
    }

    @Test func aConnectionThatSendsNothingIsClosedSilently() throws {
        let server = try Self.endpoint(requestTimeout: .milliseconds(100))
        defer { server.stop() }
        let client = try Client(port: server.port)
        #expect(client.readToEnd() == "", "closed without an answer")
        #expect(Polling.until { server.openConnections == 0 })
    }

    @Test func pastTheMostConnectionsTheOldestWaitingOneMakesRoom() throws {
        let server = try Self.endpoint(maxConnections: 4, requestTimeout: .seconds(600))
        defer { server.stop() }
        let idle = try (0..<4).map { _ in try Client(port: server.port) }
        #expect(Polling.until { server.openConnections == 4 })
        let client = try Client(port: server.port)
        client.send("GET /livez HTTP/1.1\r\n\r\n")
        #expect(client.status() == 200)
        #expect(idle[0].readToEnd() == "", "the oldest idle connection was closed to admit it")
    }

    @Test func oversizedAndSmugglingShapedRequestsAreRefused() throws {
        let handled = Mutex(0)
        let server = try Self.endpoint { _ in
            handled.withLock { $0 += 1 }
            return HTTPEndpoint.Response(status: 200)
        }
        defer { server.stop() }
        func status(_ request: String) throws -> Int {
            let client = try Client(port: server.port)
            client.send(request)
            return client.status()
        }
        let big = String(repeating: "a", count: 17 << 10)
        #expect(try status("GET / HTTP/1.1\r\nX-Big: \(big)\r\n\r\n") == 431)
        #expect(try status("POST / HTTP/1.1\r\nContent-Length: \((64 << 10) + 1)\r\n\r\n") == 413)
        #expect(try status("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n") == 400)
        #expect(try status("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd") == 400)
        #expect(try status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n") == 400)
        #expect(try status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n") == 400)
        #expect(try status("GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n") == 400, "obsolete line folding")
        #expect(try status("GET / HTTP/2.0\r\n\r\n") == 505)
        #expect(handled.withLock { $0 } == 0, "none reached the handler")
        // A pipelined second request is not answered: one request per connection.
        let client = try Client(port: server.port)
        client.send("GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n")
        #expect(client.readToEnd().components(separatedBy: "HTTP/1.1 ").count == 2, "one answer")
        #expect(handled.withLock { $0 } == 1)
    }

    @Test func aClientThatExpectsContinueIsToldToSendItsBody() throws {
        let server = try Self.endpoint()
        defer { server.stop() }
        let client = try Client(port: server.port)
        client.send("POST /x HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        var chunk = [UInt8](repeating: 0, count: 64)
        let count = chunk.withUnsafeMutableBytes { recv(client.fd, $0.baseAddress, $0.count, 0) }
        #expect(String(decoding: chunk[..<max(0, count)], as: UTF8.self) == "HTTP/1.1 100 Continue\r\n\r\n")
        client.send("hi")
        #expect(client.readToEnd().hasSuffix("POST /x 2\n"))
    }

    @Test func aSlowHandlerDoesNotHoldTheOthers() throws {
        let gate = Mutex(false)
        let server = try Self.endpoint { request in
            if request.path == "/slow" { while !gate.withLock({ $0 }) { usleep(1_000) } }
            return HTTPEndpoint.Response(status: 200)
        }
        defer {
            gate.withLock { $0 = true }
            server.stop()
        }
        let slow = try Client(port: server.port)
        slow.send("GET /slow HTTP/1.1\r\n\r\n")
        let quick = try Client(port: server.port)
        quick.send("GET /livez HTTP/1.1\r\n\r\n")
        #expect(quick.status() == 200, "answered while the slow handler still runs")
        gate.withLock { $0 = true }
        #expect(slow.status() == 200)
    }

    @Test func stopClosesEveryConnection() throws {
        let server = try Self.endpoint(requestTimeout: .seconds(600))
        let client = try Client(port: server.port)
        #expect(Polling.until { server.openConnections == 1 })
        server.stop()
        #expect(client.readToEnd() == "")
    }
}
