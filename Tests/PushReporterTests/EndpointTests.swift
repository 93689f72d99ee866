import Crypto
import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// SPEC §9.5: the agent's HTTP endpoint, end to end through the binary.
@Suite(.serialized, .blockingThreads) struct EndpointTests {
    static let callback = "https://agent.example.com/journeys/journeys/%account[id]%"

    /// A running agent with `agent.listen` on a port the system chose, and that port.
    static func start(_ journeys: FakeJourneysServer, files: TemporaryDirectory, statusInterval: String = "off") throws
        -> (agent: RunningProcess, port: Int) {
        let config = files.write("accounts.yaml", """
            agent:
              listen: 127.0.0.1:0
            services:
              journeys:
                type: customer-insights-journeys
                publicEndpoint: \(journeys.baseURL)
                orgId: \(journeys.orgId)
                mobileAppId: \(journeys.mobileAppId)
                apiToken: \(journeys.apiToken)
                callbackUrl: \(callback)
                statusInterval: \(statusInterval)
            accounts:
              - id: dana
                pushTokenOther: token-dana
                services: {journeys: {userId: user-dana, platform: ios}}
              - id: eve
                pushTokenOther: token-eve
                services: {journeys: {userId: user-eve, platform: android}}

            """)
        let agent = try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", files.path + "/state"])
        #expect(agent.waitForStderr("serving /metrics, /livez, /readyz and webhooks on 127.0.0.1:"), "\(agent.stderr)")
        let line = agent.stderr.components(separatedBy: "\n").first { $0.contains("serving /metrics") } ?? ""
        let port = Int(line.split(separator: ":").last.map(String.init) ?? "") ?? 0
        return (agent, port)
    }

    /// Sends `method` `path` to the endpoint and returns the status and body.
    static func call(_ port: Int, _ method: String, _ path: String, body: [UInt8] = []) throws -> (status: Int, body: String) {
        let result = try ProcessRunner.run("/usr/bin/curl", ["-s", "-o", "-", "-w", "\n%{http_code}", "-X", method,
                                                            "--data-binary", "@-", "http://127.0.0.1:\(port)\(path)"],
                                           stdin: String(decoding: body, as: UTF8.self))
        let lines = result.stdout.components(separatedBy: "\n")
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }

    /// The signature Journeys computes: HMAC-SHA256 of the callback URL, keyed with the API token.
    static func signature(account: String, token: String) -> [UInt8] {
        let url = callback.replacingOccurrences(of: "%account[id]%", with: account)
        return Array(HMAC<SHA256>.authenticationCode(for: Array(url.utf8), using: SymmetricKey(data: Array(token.utf8))))
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test func metricsHealthAndTheWebhookSettleWhatPollingWouldNot() throws {
        let journeys = try FakeJourneysServer()
        journeys.defaultStatus = .pending
        let files = TemporaryDirectory()
        let (agent, port) = try Self.start(journeys, files: files)
        #expect(journeys.waitForRegistrations(2, timeout: .seconds(30)))
        #expect(agent.waitForStderr("all 2 accounts are reported (2 awaiting the backend's confirmation)"), "\(agent.stderr)")

        #expect(try Self.call(port, "GET", "/health").status == 200)
        let metrics = try Self.call(port, "GET", "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.body.contains("pushreporter_subscriptions{service=\"journeys\",state=\"accepted\"} 2"), "\(metrics.body)")
        #expect(try Self.call(port, "GET", "/nowhere").status == 404)
        #expect(try Self.call(port, "POST", "/metrics").status == 405)

        // A forged call: 401, and nothing changes.
        let forged = #"{"Status":"Success","Signature":"\#(Self.hex([UInt8](repeating: 7, count: 32)))","FailureReason":null}"#
        #expect(try Self.call(port, "POST", "/journeys/journeys/dana", body: Array(forged.utf8)).status == 401)
        #expect(try Self.call(port, "POST", "/journeys/journeys/dana", body: Array("not json".utf8)).status == 400)
        #expect(try Self.call(port, "POST", "/journeys/journeys/dana", body: [UInt8](repeating: 0x20, count: 70 << 10)).status == 413)
        #expect(try Self.call(port, "POST", "/journeys/journeys/nobody", body: Array(forged.utf8)).status == 404)
        #expect(try Self.call(port, "GET", "/metrics").body.contains("state=\"accepted\"} 2"))

        // Genuine calls, in upper-case hex and in base64, settle each registration at once.
        let dana = Self.hex(Self.signature(account: "dana", token: journeys.apiToken)).uppercased()
        let success = #"{"Status":"Success","Signature":"\#(dana)","FailureReason":null}"#
        #expect(try Self.call(port, "POST", "/journeys/journeys/dana", body: Array(success.utf8)).status == 202)
        let eve = Data(Self.signature(account: "eve", token: journeys.apiToken)).base64EncodedString()
        let failed = #"{"Status":"Failed","Signature":"\#(eve)","FailureReason":" DeviceTokenTooLong "}"#
        #expect(try Self.call(port, "POST", "/journeys/journeys/eve", body: Array(failed.utf8)).status == 202)
        let settled = try Self.call(port, "GET", "/metrics").body
        #expect(settled.contains("state=\"delivered\"} 1") && settled.contains("state=\"rejected\"} 1"), "\(settled)")
        #expect(agent.waitForStderr("eve: journeys registration rejected"), "\(agent.stderr)")
        // At info, where each confirmation is a debug line, the end of the wait is said too.
        #expect(agent.waitForStderr("info: no registration awaits the backend's confirmation any more (2 accounts: 1 reported, 0 retrying, 1 rejected)"), "\(agent.stderr)")

        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0)
        let status = try ProcessRunner.pushreporter(["status", "--state-dir", files.path + "/state", "--format", "json"])
        #expect(status.stdout.contains("\"state\": \"delivered\"") && status.stdout.contains("DeviceTokenTooLong"), "\(status.stdout)")
    }

    @Test func forgedWebhookCallsAreLoggedOncePerMinuteWithACount() throws {
        let journeys = try FakeJourneysServer()
        journeys.defaultStatus = .pending
        let files = TemporaryDirectory()
        let (agent, port) = try Self.start(journeys, files: files)
        #expect(agent.waitForStderr("all 2 accounts are reported"), "\(agent.stderr)")
        let forged = #"{"Status":"Success","Signature":"\#(Self.hex([UInt8](repeating: 7, count: 32)))","FailureReason":null}"#
        for _ in 0..<30 {
            #expect(try Self.call(port, "POST", "/journeys/journeys/dana", body: Array(forged.utf8)).status == 401)
        }
        #expect(agent.stderr.occurrences(of: "a webhook call was refused") == 1, "the first is said at once, the others counted")
        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0)
        // On stopping, what was counted is said in one line.
        #expect(agent.stderr.occurrences(of: "a webhook call was refused") == 2, "\(agent.stderr)")
        #expect(agent.stderr.contains("(and 28 more like it in the last 1m)"), "\(agent.stderr)")
    }

    @Test func aFloodOfBadRequestsNeverHoldsTheScheduler() throws {
        let journeys = try FakeJourneysServer()
        let files = TemporaryDirectory()
        let (agent, port) = try Self.start(journeys, files: files, statusInterval: "1s")
        // Clients that connect and send nothing, then many malformed requests.
        var idle: [Int32] = []
        for _ in 0..<40 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            idle.append(fd)
        }
        defer { for fd in idle { close(fd) } }
        for _ in 0..<20 { _ = try? Self.call(port, "BREW", "/%%%") }
        // The registrations still go out and are confirmed by polling.
        #expect(journeys.waitForStatusQueries(1, timeout: .seconds(30)))
        #expect(agent.waitForStderr("all 2 accounts are reported"), "\(agent.stderr)")
        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0, "\(agent.stderr)")
    }
}
