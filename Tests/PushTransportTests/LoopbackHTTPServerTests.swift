import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// The loopback server the transport and end-to-end tests rely on, checked with curl and with a
/// raw socket for what curl will not send (exact bytes, pipelining, malformed input).
@Suite(.timeLimit(.minutes(10)), .blockingThreads) struct LoopbackHTTPServerTests {
    @Test func aGetWithAQueryIsRecordedExactly() async throws {
        let server = try LoopbackHTTPServer { request, _ in .status(200, contentType: "text/plain", body: "seen \(request.path)") }
        let result = try await curl(["-H", "X-Custom:   value with spaces  ", "-H", "x-lower: v",
                                     server.baseURL + "/token/?username=johndow&token=a%2Fb%3D&flag"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "seen /token/")
        #expect(server.requests.count == 1)
        let request = try #require(server.requests.first)
        #expect(request.method == "GET")
        #expect(request.target == "/token/?username=johndow&token=a%2Fb%3D&flag")
        #expect(request.path == "/token/")
        #expect(request.query == "username=johndow&token=a%2Fb%3D&flag")
        #expect(request.header("host") == "127.0.0.1:\(server.port)")
        #expect(request.header("X-CUSTOM") == "value with spaces")
        #expect(request.header("X-Lower") == "v")
        #expect(request.headers.suffix(2).map(\.name) == ["X-Custom", "x-lower"])
        #expect(request.body.isEmpty)
    }

    @Test func aContentLengthBodyIsRecordedByteForByte() async throws {
        let server = try LoopbackHTTPServer()
        let body = Self.pattern(70_000)
        let directory = TemporaryDirectory()
        let file = directory.write("body", bytes: body)
        let result = try await curl(["-H", "Content-Type: application/octet-stream", "-H", "Expect:", "--data-binary", "@" + file,
                                     "-w", "%{http_code}", server.baseURL + "/upload"])
        #expect(result.stdout == "204", "\(result.stderr)")
        let request = try #require(server.requests.first)
        #expect(request.method == "POST")
        #expect(request.header("Content-Length") == "70000")
        #expect(request.body == body)
    }

    @Test func aChunkedBodyIsDechunked() async throws {
        let server = try LoopbackHTTPServer()
        let body = Self.pattern(200_000)
        let directory = TemporaryDirectory()
        let file = directory.write("body", bytes: body)
        let result = try await curl(["-H", "Transfer-Encoding: chunked", "-H", "Expect:", "--data-binary", "@" + file,
                                     "-w", "%{http_code}", server.baseURL + "/chunked"])
        #expect(result.stdout == "204", "\(result.stderr)")
        let request = try #require(server.requests.first)
        #expect(request.header("Transfer-Encoding") == "chunked")
        #expect(request.header("Content-Length") == nil)
        #expect(request.body == body)
    }

    @Test func expectContinueIsAnsweredBeforeTheBody() async throws {
        let server = try LoopbackHTTPServer()
        let directory = TemporaryDirectory()
        let file = directory.write("body", bytes: Self.pattern(2000))
        let started = ContinuousClock.now
        // Without a 100 Continue curl would wait the full 120 s before sending the body anyway.
        let result = try await curl(["-v", "--expect100-timeout", "120", "-H", "Expect: 100-continue", "--data-binary", "@" + file,
                                     server.baseURL + "/expect"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(ContinuousClock.now - started < .seconds(60))
        #expect(result.stderr.contains("< HTTP/1.1 100 Continue"))
        #expect(server.requests.first?.body == Self.pattern(2000))
    }

    @Test func expectContinueComesBeforeTheBodyIsSent() throws {
        let server = try LoopbackHTTPServer { request, _ in .status(200, body: request.bodyText.uppercased()) }
        let connection = try RawConnection(port: server.port)
        try connection.write("POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
        #expect(connection.readHead() == "HTTP/1.1 100 Continue\r\n\r\n")
        #expect(server.requests.isEmpty)
        try connection.write("hello")
        #expect(connection.readHead() == "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
        #expect(connection.read(count: 5) == Array("HELLO".utf8))
        #expect(server.requests.map(\.bodyText) == ["hello"])
    }

    @Test func pipelinedRequestsAreAnsweredInOrderOnOneConnection() throws {
        let server = try LoopbackHTTPServer { request, _ in .status(200, body: request.path) }
        let connection = try RawConnection(port: server.port)
        try connection.write("GET /one HTTP/1.1\r\nHost: x\r\n\r\n"
            + "POST /two?x=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
            + "HEAD /three HTTP/1.1\r\nHost: x\r\n\r\n"
            + "\r\nGET /four HTTP/1.1\nHost: x\nConnection: close\n\n")
        let (bytes, end) = connection.readToEnd()
        #expect(String(decoding: bytes, as: UTF8.self) == "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n/one"
            + "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n/two"
            + "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n"
            + "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n/four")
        #expect(end == .closed)
        let requests = server.requests
        try #require(requests.map(\.target) == ["/one", "/two?x=1", "/three", "/four"])
        #expect(requests.map(\.method) == ["GET", "POST", "HEAD", "GET"])
        #expect(Set(requests.map(\.connectionID)).count == 1)
        #expect(requests[1].bodyText == "hello world")
        #expect(requests[1].header("X-Trailer") == nil)
    }

    @Test func keepAliveSharesAConnectionAndConnectionCloseDoesNot() async throws {
        let server = try LoopbackHTTPServer { _, index in .status(200, body: "\(index)") }
        let kept = try await curl([server.baseURL + "/a", server.baseURL + "/b"])
        #expect(kept.stdout == "01", "\(kept.stderr)")
        let closed = try await curl(["-H", "Connection: close", server.baseURL + "/c", server.baseURL + "/d"])
        #expect(closed.stdout == "23", "\(closed.stderr)")
        let ids = server.requests.map(\.connectionID)
        #expect(ids.count == 4)
        if ids.count == 4 {
            #expect(ids[0] == ids[1])
            #expect(Set(ids).count == 3)
        }
    }

    @Test func aHangingReplyTimesTheClientOutAndStopStillReturns() async throws {
        let server = try LoopbackHTTPServer { _, _ in .hang }
        let result = try await curl(["--max-time", "1", server.baseURL + "/slow"])
        #expect(result.status == 28, "\(result.stderr)")
        // Read by the server's thread, which curl's timeout does not wait for.
        #expect(server.waitForRequests(1, timeout: Polling.generous))

        let connection = try RawConnection(port: server.port)
        try connection.write("GET /held HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(server.waitForRequests(2, timeout: Polling.generous))
        // stop() runs on its own thread, so that if it hung this test would fail, not hang.
        let stopped = DispatchSemaphore(value: 0)
        Thread {
            server.stop()
            stopped.signal()
        }.start()
        #expect(stopped.wait(timeout: .now() + 60) == .success)
        #expect(connection.readToEnd() == ([], .closed))
    }

    @Test func aResetReplyResetsTheConnection() async throws {
        let server = try LoopbackHTTPServer { _, _ in .reset }
        let result = try await curl([server.baseURL + "/"])
        #expect(result.status == 56 || result.status == 52, "\(result.stderr)")
        if result.status == 56 { #expect(result.stderr.contains("reset by peer")) }

        let connection = try RawConnection(port: server.port)
        try connection.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(connection.readToEnd() == ([], .reset))
        #expect(server.requests.count == 2)
    }

    @Test func aCloseReplyClosesWithoutAnAnswer() async throws {
        let server = try LoopbackHTTPServer { _, _ in .close }
        let result = try await curl([server.baseURL + "/"])
        #expect(result.status == 52, "\(result.stderr)")
        #expect(result.stderr.contains("Empty reply from server"))

        let connection = try RawConnection(port: server.port)
        try connection.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(connection.readToEnd() == ([], .closed))
    }

    @Test func digestAuthenticationAsCurlAnswersIt() async throws {
        let server = try LoopbackHTTPServer { request, _ in
            LoopbackHTTPServer.isDigestAuthorized(request, username: "bob", password: "digest-secret", realm: "push", nonce: "n0nce")
                ? .status(204) : LoopbackHTTPServer.digestChallenge(realm: "push", nonce: "n0nce")
        }
        let accepted = try await curl(["--digest", "-u", "bob:digest-secret", "-d", "a=1", "-w", "%{http_code}",
                                       server.baseURL + "/register?x=1"])
        #expect(accepted.stdout == "204", "\(accepted.stderr)")
        #expect(server.requests.count == 2)
        #expect(server.requests.first?.header("Authorization") == nil)
        let answer = try #require(server.requests.last)
        #expect(answer.header("Authorization")?.hasPrefix("Digest username=\"bob\"") == true)
        #expect(answer.header("Authorization")?.contains("uri=\"/register?x=1\"") == true)
        #expect(answer.bodyText == "a=1")

        let refused = try await curl(["--digest", "-u", "bob:wrong", "-w", "%{http_code}", "-o", "/dev/null", server.baseURL + "/r"])
        #expect(refused.stdout == "401", "\(refused.stderr)")
        #expect(server.requests.count == 4)
        #expect(server.requests.last?.header("Authorization")?.hasPrefix("Digest ") == true)
    }

    @Test func digestChallengeNamesRealmNonceQopAndAlgorithm() {
        guard case .respond(let status, let headers, let body) = LoopbackHTTPServer.digestChallenge(realm: "p\"x", nonce: "n0nce") else {
            Issue.record("not a response")
            return
        }
        #expect(status == 401)
        #expect(headers.map(\.name) == ["WWW-Authenticate"])
        #expect(headers.first?.value == #"Digest realm="p\"x", qop="auth", nonce="n0nce", algorithm=MD5"#)
        #expect(body.isEmpty)
    }

    /// RFC 2617 §3.5's example, and each part of it changed.
    @Test(arguments: [
        ("", true),
        ("password", false), ("method", false), ("target", false), ("nonce", false), ("realm", false),
        ("response", false), ("qop", false), ("algorithm", false), ("malformed", false), ("basic", false),
    ])
    func digestChecksEveryPartOfTheAnswer(change: String, authorized: Bool) {
        var fields = [
            "username=\"Mufasa\"", "realm=\"testrealm@host.com\"", "nonce=\"dcd98b7102dd2f0e8b11d0f600bfb0c093\"",
            "uri=\"/dir/index.html\"", "qop=auth", "nc=00000001", "cnonce=\"0a4f113b\"",
            "response=\"6629fae49393a05397450978507c4ef1\"", "opaque=\"5ccc069c403ebaf9f0171e9517f40e41\"",
        ]
        var method = "GET", target = "/dir/index.html", password = "Circle Of Life", nonce = "dcd98b7102dd2f0e8b11d0f600bfb0c093"
        var scheme = "Digest"
        switch change {
        case "password": password = "Circle of Life"
        case "method": method = "POST"
        case "target": target = "/dir/index.html?x"
        case "nonce": nonce = "dcd98b7102dd2f0e8b11d0f600bfb0c094"
        case "realm": fields[1] = "realm=\"other\""
        case "response": fields[7] = "response=\"6629fae49393a05397450978507c4ef2\""
        case "qop": fields.remove(at: 4)
        case "algorithm": fields.append("algorithm=SHA-256")
        case "malformed": fields[6] = "cnonce=\"0a4f113b"
        case "basic": scheme = "Basic"
        default: break
        }
        let request = LoopbackHTTPServer.Request(method: method, target: target,
                                                 headers: [("Authorization", scheme + " " + fields.joined(separator: ", "))])
        #expect(LoopbackHTTPServer.isDigestAuthorized(request, username: "Mufasa", password: password,
                                                      realm: "testrealm@host.com", nonce: nonce) == authorized)
    }

    @Test func basicAuthenticationAsCurlSendsIt() async throws {
        let server = try LoopbackHTTPServer { request, _ in
            LoopbackHTTPServer.isBasicAuthorized(request, username: "bob", password: "s3cret:x")
                ? .status(204) : LoopbackHTTPServer.basicChallenge(realm: "push")
        }
        let accepted = try await curl(["-u", "bob:s3cret:x", "-w", "%{http_code}", server.baseURL + "/"])
        #expect(accepted.stdout == "204", "\(accepted.stderr)")
        let refused = try await curl(["-u", "bob:wrong", "-i", server.baseURL + "/"])
        #expect(refused.stdout.hasPrefix("HTTP/1.1 401 Unauthorized\r\n"), "\(refused.stderr)")
        #expect(refused.stdout.contains("\r\nWWW-Authenticate: Basic realm=\"push\", charset=\"UTF-8\"\r\n"))
        #expect(server.requests.count == 2)
    }

    @Test func aLargeBodyIsServedEvenToClientsThatLeaveEarly() async throws {
        let big = Self.pattern(1 << 20)
        let server = try LoopbackHTTPServer { _, _ in .respond(status: 200, headers: [("Content-Type", "text/plain")], body: big) }
        // A client that reads the head of an 8 MiB answer and closes: the server's write fails
        // (without SIGPIPE, which would end this test process) and it serves on.
        let eight = Self.pattern(8 << 20)
        let early = try LoopbackHTTPServer { _, _ in .respond(status: 200, headers: [], body: eight) }
        do {
            let connection = try RawConnection(port: early.port)
            try connection.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(connection.readHead() == "HTTP/1.1 200 OK\r\nContent-Length: 8388608\r\n\r\n")
        }
        #expect(early.waitForReplies(1, timeout: Polling.generous))

        let directory = TemporaryDirectory()
        let file = directory.path + "/out"
        let result = try await curl(["-w", "%{http_code} %{size_download} ", "-o", file, server.baseURL + "/big",
                                     "-o", "/dev/null", early.baseURL + "/again"])
        #expect(result.stdout == "200 1048576 200 8388608 ", "\(result.stderr)")
        #expect(FileManager.default.contents(atPath: file).map(Array.init) == big)
    }

    @Test func aClientThatLeavesBeforeTheReplyDoesNotEndTheProcess() async throws {
        // The client closes first, so writing the reply draws a reset and then EPIPE: without
        // MSG_NOSIGNAL that is a SIGPIPE, which would end this test process.
        let left = DispatchSemaphore(value: 0)
        let eight = Self.pattern(8 << 20)
        let server = try LoopbackHTTPServer { _, index in
            if index == 0 { left.wait() }
            return .respond(status: 200, headers: [], body: eight)
        }
        do {
            let connection = try RawConnection(port: server.port)
            try connection.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(server.waitForRequests(1, timeout: Polling.generous))
        }
        left.signal()
        #expect(server.waitForReplies(1, timeout: Polling.generous))
        let result = try await curl(["-o", "/dev/null", "-w", "%{http_code}", server.baseURL + "/"])
        #expect(result.stdout == "200", "\(result.stderr)")
    }

    @Test func stopCalledFromAHandlerDoesNotWaitForItself() async throws {
        let slot = ServerSlot()
        let server = try LoopbackHTTPServer { _, _ in
            slot.server?.stop()
            return .status(200)
        }
        slot.server = server
        defer { slot.server = nil }
        let result = try await curl([server.baseURL + "/"])
        #expect(result.status == 52, "\(result.stderr)")
        #expect(throws: RawConnection.Refused.self) { try RawConnection(port: server.port) }
    }

    /// A request the server must refuse, named for the test report.
    struct BadRequest: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var input: String
        var status: Int
        var reason: String

        init(_ name: String, _ input: String, _ status: Int, _ reason: String) {
            testDescription = name
            self.input = input
            self.status = status
            self.reason = reason
        }
    }

    @Test(arguments: [
        BadRequest("no version", "GARBAGE\r\n\r\n", 400, "malformed request line"),
        BadRequest("bad method", "G(T / HTTP/1.1\r\n\r\n", 400, "malformed method"),
        BadRequest("control in target", "GET /a\u{1}b HTTP/1.1\r\n\r\n", 400, "malformed request target"),
        BadRequest("bad version", "GET / HTTQ/1.1\r\n\r\n", 400, "malformed HTTP version"),
        BadRequest("HTTP/2", "GET / HTTP/2.0\r\n\r\n", 505, "only HTTP/1.x is supported"),
        BadRequest("no colon", "GET / HTTP/1.1\r\nNo colon here\r\n\r\n", 400, "malformed header field"),
        BadRequest("space before colon", "GET / HTTP/1.1\r\nName : value\r\n\r\n", 400, "malformed header field"),
        BadRequest("folded line", "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400, "obsolete line folding"),
        BadRequest("bare CR", "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", 400, "bare CR in a line"),
        BadRequest("control in value", "GET / HTTP/1.1\r\nHost: a\u{1}b\r\n\r\n", 400, "control character in a header value"),
        BadRequest("length and chunked", "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc", 400,
                   "both Content-Length and Transfer-Encoding"),
        BadRequest("two lengths", "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400, "malformed Content-Length"),
        BadRequest("negative length", "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "malformed Content-Length"),
        BadRequest("overflowing length", "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 413, "request body too large"),
        BadRequest("length over 16 MiB", "POST / HTTP/1.1\r\nContent-Length: 16777217\r\n\r\n", 413, "request body too large"),
        BadRequest("gzip coding", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "unsupported transfer coding"),
        BadRequest("chunked not last", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400,
                   "Transfer-Encoding does not end in chunked"),
        BadRequest("bad chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "malformed chunk size"),
        BadRequest("chunk overrun", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n", 400,
                   "chunk data longer than its size"),
        BadRequest("chunk over 16 MiB", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1000001\r\n", 413, "request body too large"),
        BadRequest("head over 64 KiB", "GET / HTTP/1.1\r\nX-Big: " + String(repeating: "a", count: 70_000) + "\r\n\r\n", 431,
                   "request header section too large"),
    ])
    func malformedRequestsAreRefusedAndNotRecorded(_ bad: BadRequest) throws {
        let server = try LoopbackHTTPServer()
        let connection = try RawConnection(port: server.port)
        try connection.write(bad.input)
        let (bytes, end) = connection.readToEnd()
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 \(bad.status) "), "\(text)")
        #expect(text.hasSuffix("\r\nConnection: close\r\n\r\n\(bad.reason)\n"), "\(text)")
        #expect(end == .closed)
        #expect(server.requests.isEmpty)
    }

    @Test func aRefusalIsPlainText() throws {
        let server = try LoopbackHTTPServer()
        let connection = try RawConnection(port: server.port)
        try connection.write("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n")
        #expect(connection.readToEnd() == (Array(("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
            + "Content-Length: 22\r\nConnection: close\r\n\r\nobsolete line folding\n").utf8), .closed))
    }

    @Test func stopIsIdempotentAndRefusesConnectionsAfterwards() throws {
        let server = try LoopbackHTTPServer()
        let idle = try RawConnection(port: server.port)
        try idle.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(idle.readHead() == "HTTP/1.1 204 No Content\r\n\r\n")
        server.stop()
        server.stop()
        #expect(idle.readToEnd() == ([], .closed))
        #expect(throws: RawConnection.Refused.self) { try RawConnection(port: server.port) }
        // A stopped server gets no more requests: the wait ends at once, long before its bound.
        let started = ContinuousClock.now
        #expect(!server.waitForRequests(2, timeout: .seconds(120)))
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    @Test func droppingTheServerStopsIt() throws {
        var server: LoopbackHTTPServer? = try LoopbackHTTPServer { _, _ in .hang }
        let port = try #require(server?.port)
        let connection = try RawConnection(port: port)
        try connection.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(server?.waitForRequests(1, timeout: Polling.generous) == true)
        server = nil
        #expect(connection.readToEnd() == ([], .closed))
        #expect(throws: RawConnection.Refused.self) { try RawConnection(port: port) }
    }

    @Test func waitForRequestsWaitsOnlyAsLongAsItIsTold() async throws {
        let server = try LoopbackHTTPServer()
        let started = ContinuousClock.now
        #expect(!server.waitForRequests(1, timeout: .milliseconds(200)))
        let waited = ContinuousClock.now - started
        // At least as told; the upper bound only says it did not wait for something else.
        #expect(waited >= .milliseconds(200) && waited < .seconds(30))
        _ = try await curl([server.baseURL + "/"])
        #expect(server.waitForRequests(1, timeout: Polling.generous))
        #expect(server.waitForReplies(1, timeout: Polling.generous))
    }

    @Test func theHandlerSeesEachRequestsIndexAcrossConnections() async throws {
        let server = try LoopbackHTTPServer { request, index in .status(200, body: "\(index)\(request.path)") }
        let urls = (0..<8).map { server.baseURL + "/p\($0)" }
        let result = try await curl(["--parallel", "--parallel-immediate", "-H", "Connection: close"] + urls)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(server.requests.count == 8)
        #expect(Set(server.requests.map(\.connectionID)).count == 8)
        let indexes = result.stdout.matches(of: /(\d+)\/p\d/).map { Int($0.1)! }
        #expect(indexes.sorted() == Array(0..<8))
    }

    // MARK: Helpers

    /// Distinct bytes that show a shift or a dropped byte.
    static func pattern(_ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
    }
}

/// `pushreporter-receiver`, the demo receiver built on the server: what it prints, answers and
/// exits with.
@Suite(.timeLimit(.minutes(10)), .blockingThreads) struct ReceiverTests {
    /// The receiver built beside this test bundle.
    static let receiver = ProcessRunner.builtProducts + "/pushreporter-receiver"

    /// Starts the receiver with `arguments` plus `--port-file`, and returns it with its port once it listens.
    static func start(_ arguments: [String], in directory: TemporaryDirectory) throws -> (Process, Pipe, Int) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: receiver)
        let portFile = directory.path + "/port"
        process.arguments = arguments + ["--port-file", portFile]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = ContinuousClock.now + Polling.generous
        while ContinuousClock.now < deadline {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8), let port = Int(text.dropLast()) {
                return (process, output, port)
            }
            usleep(10_000)
        }
        process.terminate()
        throw RawConnection.Failed(call: "port file", code: 0)
    }

    /// Waits for `process` to exit; `nil` (and the process killed) if it does not.
    static func exitStatus(_ process: Process) -> Int32? {
        let deadline = ContinuousClock.now + Polling.generous
        while process.isRunning && ContinuousClock.now < deadline { usleep(10_000) }
        guard !process.isRunning else {
            kill(process.processIdentifier, SIGKILL)
            return nil
        }
        return process.terminationReason == .exit ? process.terminationStatus : -process.terminationStatus
    }

    @Test func printsEachRequestAnswersAndExitsAfterTheCount() throws {
        let directory = TemporaryDirectory()
        let (process, output, port) = try Self.start(["--count", "2", "--status", "201"], in: directory)
        let connection = try RawConnection(port: port)
        try connection.write("POST /push/register HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: pushreporter/0.1.0\r\n"
            + "Content-Type: application/json\r\nContent-Length: 22\r\n\r\n{\"username\":\"johndow\"}")
        #expect(connection.readHead() == "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n")
        #expect(connection.read(count: 2) == Array("{}".utf8))
        try connection.write("GET /token/?u=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 6\r\n\r\nbell\u{7}\n")
        #expect(connection.readHead()?.hasPrefix("HTTP/1.1 201 Created\r\n") == true)
        #expect(Self.exitStatus(process) == 0)
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(printed == """
            ── request 1 (connection 1) ────────────────────────────────
            POST /push/register
            Host: 127.0.0.1
            User-Agent: pushreporter/0.1.0
            Content-Type: application/json
            Content-Length: 22

            {"username":"johndow"}

            ── request 2 (connection 1) ────────────────────────────────
            GET /token/?u=1
            Host: 127.0.0.1
            Content-Length: 6

            bell\\u{7}


            """)
    }

    @Test func sigtermEndsTheRunCleanly() async throws {
        let directory = TemporaryDirectory()
        let (process, _, port) = try Self.start([], in: directory)
        let served = try await curl(["-w", "%{http_code} %{content_type}", "http://127.0.0.1:\(port)/"])
        #expect(served.stdout == "{}200 application/json", "\(served.stderr)")
        process.terminate()
        #expect(Self.exitStatus(process) == 0)
        #expect(throws: RawConnection.Refused.self) { try RawConnection(port: port) }
    }

    @Test func anUnwritablePortFileIsOneLineAndExit1() async throws {
        let result = try await offThePool { try ProcessRunner.run(Self.receiver, ["--port-file", "/nonexistent/port"]) }
        #expect(result.status == 1)
        #expect(result.stderrLines.count == 1)
        #expect(result.stderr.hasPrefix("pushreporter-receiver: cannot write the port to /nonexistent/port: "))
    }

    @Test func helpSaysWhatEachFlagDoes() async throws {
        let result = try await offThePool { try ProcessRunner.run(Self.receiver, ["--help"]) }
        #expect(result.status == 0)
        #expect(result.stdout.hasPrefix("usage: pushreporter-receiver [--port N] [--port-file PATH] [--count N] [--status CODE]\n"))
        for flag in ["--port N", "--port-file P", "--count N", "--status CODE"] { #expect(result.stdout.contains("  \(flag) "), "\(flag)") }
        #expect(result.stderr.isEmpty)
    }

    @Test(arguments: [
        (["--nope"], "unknown argument '--nope'"),
        (["--count", "0"], "--count must be a number from 1 to \(Int.max), not '0'"),
        (["--status=99"], "--status must be a number from 200 to 599, not '99'"),
        (["--port", "70000"], "--port must be a number from 0 to 65535, not '70000'"),
        (["--port-file"], "--port-file needs a value"),
    ])
    func aBadArgumentIsOneLineAndExit64(arguments: [String], message: String) async throws {
        let result = try await offThePool { try ProcessRunner.run(Self.receiver, arguments) }
        #expect(result.status == 64)
        #expect(result.stderr == "pushreporter-receiver: \(message) (usage: pushreporter-receiver [--port N] "
            + "[--port-file PATH] [--count N] [--status CODE])\n")
        #expect(result.stdout.isEmpty)
    }
}

/// A server a handler can reach (set after the server exists).
final class ServerSlot: @unchecked Sendable {
    private let lock = NSLock()
    private var value: LoopbackHTTPServer?

    var server: LoopbackHTTPServer? {
        get { lock.withLock { value } }
        set { lock.withLock { value = newValue } }
    }
}

/// Runs `/usr/bin/curl` quietly (errors still shown), with no `.curlrc`, no proxy and at most
/// 10 s per transfer unless `arguments` say otherwise.
///
/// The wait is on a thread of its own: blocking one of the few threads Swift concurrency runs all
/// tests on (two on a two-core machine) would hold up the async transport tests in this process.
func curl(_ arguments: [String]) async throws -> ProcessOutput {
    try await offThePool {
        try ProcessRunner.run("/usr/bin/curl", ["-q", "--silent", "--show-error", "--noproxy", "*", "--max-time", "10"] + arguments)
    }
}

/// Runs blocking `work` on a thread of its own and waits for it without holding a thread of
/// Swift concurrency's pool.
func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}

/// A TCP connection to 127.0.0.1 that sends and reads raw bytes, each read waiting at most 5 s
/// (Linux socket constants).
final class RawConnection {
    /// The server refused the connection.
    struct Refused: Error {}
    struct Failed: Error {
        var call: String
        var code: Int32
    }

    /// How the stream ended.
    enum End: Equatable {
        case closed, reset, timedOut
    }

    private let fd: Int32
    private var pending: [UInt8] = []

    init(port: Int) throws {
        // The descriptor is stored only once connected: a throwing init of a fully initialised
        // class runs deinit, which would close it a second time (and maybe someone else's).
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failed(call: "socket", code: errno) }
        // A bound for a reply that never comes, not for a slow one: a loaded machine can take
        // seconds to produce a large body.
        var timeout = timeval(tv_sec: 60, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let code = errno
            close(fd)
            throw code == ECONNREFUSED ? Refused() as any Error : Failed(call: "connect", code: code)
        }
        self.fd = fd
    }

    deinit {
        close(fd)
    }

    func write(_ text: String) throws {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw Failed(call: "send", code: errno) }
            offset += sent
        }
    }

    /// Reads more into `pending`; how the stream ended if nothing came.
    private func fill() -> End? {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            pending += buffer[..<count]
            return nil
        }
        if count == 0 { return .closed }
        return errno == ECONNRESET ? .reset : .timedOut
    }

    /// Everything up to and including the next blank line, or `nil` if the stream ends first.
    func readHead() -> String? {
        let separator = Array("\r\n\r\n".utf8)
        while true {
            if let range = pending.firstRange(of: separator) {
                let head = pending[..<range.upperBound]
                pending.removeFirst(range.upperBound)
                return String(decoding: head, as: UTF8.self)
            }
            if fill() != nil { return nil }
        }
    }

    /// Exactly `count` bytes, or fewer if the stream ends first.
    func read(count: Int) -> [UInt8] {
        while pending.count < count, fill() == nil {}
        let bytes = Array(pending.prefix(count))
        pending.removeFirst(bytes.count)
        return bytes
    }

    /// Everything until the stream ends, and how it ended.
    func readToEnd() -> ([UInt8], End) {
        while true {
            if let end = fill() {
                defer { pending = [] }
                return (pending, end)
            }
        }
    }
}
