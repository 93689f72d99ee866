import Foundation
import PushTestSupport
import PushTransport
import Testing
import PushTestThreads

/// https on 127.0.0.1 with a private CA: the system store alone refuses it, `caFile` adds it,
/// and an https origin may not redirect to plain http. The server is Python's, with a
/// certificate made by the openssl command for this test.
@Suite(.serialized, .blockingThreads) struct TLSTests {
    /// A Python https server on 127.0.0.1 and the certificate that signs it.
    final class TLSServer {
        let directory = TemporaryDirectory()
        let process = Process()
        let port: Int
        var certificate: String { directory.path + "/cert.pem" }
        var baseURL: String { "https://127.0.0.1:\(port)" }

        init(redirectTo location: String) throws {
            let generated = try ProcessRunner.run("/usr/bin/openssl", [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", directory.path + "/key.pem", "-out", directory.path + "/cert.pem", "-days", "1",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            ])
            guard generated.status == 0 else { throw TLSServerError(message: "openssl: " + generated.stderr) }
            let script = directory.write("server.py", Self.script)
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script, directory.path + "/cert.pem", directory.path + "/key.pem", location]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let line = output.fileHandleForReading.readLine()
            guard let port = Int(line) else {
                process.terminate()
                throw TLSServerError(message: "the Python https server did not start")
            }
            self.port = port
        }

        deinit {
            // SIGKILL: a SIGTERM that the environment ignores is inherited as ignored.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }

        static let script = """
            import http.server, signal, ssl, sys
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            class Handler(http.server.BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                def do_GET(self):
                    if self.path.startswith("/redirect"):
                        self.send_response(302)
                        self.send_header("Location", sys.argv[3])
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                    else:
                        body = b"{}"
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                def log_message(self, *args):
                    pass
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(sys.argv[1], sys.argv[2])
            server.socket = context.wrap_socket(server.socket, server_side=True)
            print(server.server_address[1], flush=True)
            server.serve_forever()
            """
    }

    struct TLSServerError: Error { var message: String }

    @Test func aPrivateCAIsRefusedWithoutCAFileAndTrustedWithIt() async throws {
        let server = try TLSServer(redirectTo: "/")
        let plain = try CurlTransport()
        let error = await #expect(throws: TransportError.self) {
            _ = try await plain.send(TransportRequest(method: "GET", url: server.baseURL + "/ok"))
        }
        #expect(error?.label == "tls")

        let trusting = try CurlTransport(settings: TransportSettings(caFile: server.certificate))
        let response = try await trusting.send(TransportRequest(method: "GET", url: server.baseURL + "/ok"))
        #expect(response.status == 200)
        #expect(response.body == Array("{}".utf8))
    }

    @Test func httpsNeverRedirectsToPlainHTTP() async throws {
        let plainServer = try LoopbackHTTPServer { _, _ in .status(200) }
        let server = try TLSServer(redirectTo: plainServer.baseURL + "/downgraded")
        let transport = try CurlTransport(settings: TransportSettings(caFile: server.certificate))
        let error = await #expect(throws: TransportError.self) {
            _ = try await transport.send(TransportRequest(method: "GET", url: server.baseURL + "/redirect"))
        }
        #expect(error?.label == "redirect_refused")
        #expect(plainServer.requests.isEmpty)
    }

    @Test func noHopOfAChainGoesFromHTTPSToHTTP() async throws {
        // http → https is allowed; that https hop may not then go back to http.
        let landing = try LoopbackHTTPServer { _, _ in .status(200) }
        let server = try TLSServer(redirectTo: landing.baseURL + "/downgraded")
        let secureHop = server.baseURL + "/redirect"
        let start = try LoopbackHTTPServer { _, _ in .status(302, headers: [("Location", secureHop)]) }
        let transport = try CurlTransport(settings: TransportSettings(caFile: server.certificate))
        let error = await #expect(throws: TransportError.self) {
            _ = try await transport.send(TransportRequest(method: "GET", url: start.baseURL + "/start"))
        }
        #expect(error?.label == "redirect_refused")
        #expect(start.requests.count == 1)
        #expect(landing.requests.isEmpty)
    }

    @Test func anUnreadableCAFileIsASentence() {
        do {
            _ = try CurlTransport(settings: TransportSettings(caFile: "/nonexistent/ca.pem"))
            Issue.record("a missing CA file was accepted")
        } catch {
            #expect("\(error)" == "cannot read the CA file /nonexistent/ca.pem (agent.tls.caFile): No such file or directory")
        }
    }
}

extension FileHandle {
    /// One line (without its newline), read a byte at a time so nothing after it is consumed.
    func readLine() -> String {
        var bytes: [UInt8] = []
        while true {
            let chunk = readData(ofLength: 1)
            guard let byte = chunk.first, byte != 0x0A else { break }
            bytes.append(byte)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
