import Foundation
import PushTestSupport
import Synchronization
import Testing
import PushTestThreads

/// `pushreporter run --once`, the real binary, against a server on 127.0.0.1: what the server
/// received, the exit status and the summary.
@Suite(.blockingThreads) struct RunOnceTests {
    /// A one-account configuration reporting to `url`, with fast retries; `extra` adds account keys.
    static func config(url: String, extra: String = "", agent: String = "") -> String {
        """
        agent:
          retry: {initial: 100ms, multiplier: 2, max: 1s, maxRetryAfter: 5s}
        \(agent)
        accounts:
          - id: johndow
            username: johndow
            password: "s3cret-pass"
            selector: 12869E0E6E553673C54F29105A0647204C416A2A:7C3A0D14
            pushTokenOther: QVBBOTFiRzlhcVd2bW54bllCWldHOWh4dnRrZ3pUWFNvcGZpdWZ6bWM2dFAzS2J
            pushappid_other: com.cloudsoftphone.app
            pushTokenIncomingCall: Udl99X2JFP1bWwS5gR/wGeLE1hmAB2CMpr1Ej0wxkrY=
            pushappid_incoming_call: com.cloudsoftphone.app.pushkit
            pushTokenReporterUrl: "\(url)"
        \(extra)
        """
    }

    static func runOnce(_ config: String, _ arguments: [String] = [], environment: [String: String] = [:]) throws -> ProcessOutput {
        let state = TemporaryDirectory()
        return try withExtendedLifetime(state) {
            try ProcessRunner.pushreporter(config: config, ["run", "--once", "--state-dir", state.path] + arguments,
                                           environment: environment)
        }
    }

    static let acrobitsQuery = "/token/?username=johndow&password=%account[password]%&selector=%selector%"
        + "&token_msgs=%pushTokenOther%&appid_msgs=%pushappid_other%"
        + "&token_calls=%pushTokenIncomingCall%&appid_calls=%pushappid_incoming_call%"

    @Test func getIsSentExactlyAsTheAcrobitsExample() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(200) }
        let result = try Self.runOnce(Self.config(url: server.baseURL + Self.acrobitsQuery))
        #expect(result.status == 0, "\(result.stderr)")
        let received = try #require(server.requests.first)
        #expect(server.requests.count == 1)
        #expect(received.method == "GET")
        #expect(received.target == "/token/?username=johndow&password=s3cret-pass"
            + "&selector=12869E0E6E553673C54F29105A0647204C416A2A:7C3A0D14"
            + "&token_msgs=QVBBOTFiRzlhcVd2bW54bllCWldHOWh4dnRrZ3pUWFNvcGZpdWZ6bWM2dFAzS2J&appid_msgs=com.cloudsoftphone.app"
            + "&token_calls=Udl99X2JFP1bWwS5gR%2FwGeLE1hmAB2CMpr1Ej0wxkrY%3D&appid_calls=com.cloudsoftphone.app.pushkit")
        #expect(received.header("User-Agent") == "pushreporter/0.1.0")
        #expect(received.header("Content-Type") == nil)
        #expect(received.body.isEmpty)
        #expect(result.stdout.wholeMatch(of: /Delivered 1 of 1 report in (\d+ms|\d+(\.\d)?s)\.\n/) != nil, "\(result.stdout)")
    }

    @Test func postBodyAndHeadersAreSentByteForByte() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(200, contentType: "application/json", body: "{\"ok\":true}") }
        let extra = """
                pushTokenReporterPostData: '{"username":"%account[username]%","token":"%pushTokenIncomingCall%","note":"é \\" <&>"}'
                pushTokenReporterContentType: application/json; charset=utf-8
                pushTokenReporterCustomHeaders: |
                  X-Install: fixed-value
                  X-User: %account[username]%
            """
        let result = try Self.runOnce(Self.config(url: server.baseURL + "/push", extra: extra))
        #expect(result.status == 0, "\(result.stderr)")
        let received = try #require(server.requests.first)
        #expect(received.method == "POST")
        #expect(received.target == "/push")
        #expect(received.bodyText == #"{"username":"johndow","token":"Udl99X2JFP1bWwS5gR/wGeLE1hmAB2CMpr1Ej0wxkrY=","note":"é \" <&>"}"#)
        #expect(received.header("Content-Type") == "application/json; charset=utf-8")
        #expect(received.header("User-Agent") == "pushreporter/0.1.0")
        #expect(received.header("X-Install") == "fixed-value")
        #expect(received.header("X-User") == "johndow")
        #expect(received.header("Expect") == nil)
    }

    @Test func aWarningFromRenderingIsShownAsValidateShowsIt() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(200) }
        let extra = """
                pushTokenReporterPostData: 'token=%pushTokenOther%'
                pushTokenReporterContentType: text/plain
            """
        let result = try Self.runOnce(Self.config(url: server.baseURL + "/push", extra: extra))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("c.yaml:15:35: warning: Content-Type 'text/plain' has no encoding rule, so values go into the body as they are"))
        #expect(server.requests.first?.bodyText == "token=QVBBOTFiRzlhcVd2bW54bllCWldHOWh4dnRrZ3pUWFNvcGZpdWZ6bWM2dFAzS2J")
    }

    @Test func anEmptyJSONBodyIsRetriedUntilTheServerSendsJSON() throws {
        let server = try LoopbackHTTPServer { _, index in
            index < 2 ? .status(200, contentType: "application/json", body: "") : .status(200, contentType: "application/json", body: "{}")
        }
        let result = try Self.runOnce(Self.config(url: server.baseURL + "/push"))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(server.requests.count == 3)
        #expect(result.stderr.contains("johndow: pushTokenReporter to 127.0.0.1:\(server.port) failed: HTTP 200, but the body is empty while Content-Type says JSON (attempt 1)"))
        #expect(result.stderr.contains("delivered to 127.0.0.1:\(server.port) after 3 attempts"))
    }

    @Test func retryAfterIsWaited() throws {
        let times = Mutex<[ContinuousClock.Instant]>([])
        let server = try LoopbackHTTPServer { _, index in
            times.withLock { $0.append(.now) }
            return index == 0 ? .status(503, headers: [("Retry-After", "2")]) : .status(204)
        }
        let result = try Self.runOnce(Self.config(url: server.baseURL + "/push"))
        #expect(result.status == 0, "\(result.stderr)")
        let arrivals = times.withLock { $0 }
        #expect(arrivals.count == 2)
        if arrivals.count == 2 {
            // The backoff alone would be 50–100 ms; Retry-After says 2 s.
            #expect(arrivals[0].duration(to: arrivals[1]) >= .milliseconds(1950))
        }
        #expect(result.stderr.contains("failed: HTTP 503 (attempt 1); next attempt in 2"))
    }

    @Test func aServerErrorThenSuccess() throws {
        let server = try LoopbackHTTPServer { _, index in index == 0 ? .status(500) : .status(204) }
        let result = try Self.runOnce(Self.config(url: server.baseURL + "/push"))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(server.requests.count == 2)
        #expect(result.stderr.contains("failed: HTTP 500 (attempt 1)"))
    }

    @Test func aServerThatHangsTimesOutAndIsRetried() throws {
        let server = try LoopbackHTTPServer { _, index in index == 0 ? .hang : .status(204) }
        // Long enough for the second attempt's answer on a loaded machine; the first never comes.
        let result = try Self.runOnce(Self.config(url: server.baseURL + "/push", extra: "    pushTokenReporterTimeout: 5s"))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(server.requests.count == 2)
        #expect(result.stderr.contains("timed out"))
    }

    @Test func aResetConnectionIsRetried() throws {
        let server = try LoopbackHTTPServer { _, index in index == 0 ? .reset : .status(204) }
        let result = try Self.runOnce(Self.config(url: server.baseURL + "/push"))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(server.requests.count == 2)
        #expect(result.stderr.contains("(attempt 1)"))
    }

    @Test func aRedirectIsFollowedForGET() throws {
        let server = try LoopbackHTTPServer { request, _ in
            request.path == "/moved" ? .status(200) : .status(302, headers: [("Location", "/moved?x=1")])
        }
        let result = try Self.runOnce(Self.config(url: server.baseURL + "/push"))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(server.requests.map(\.target) == ["/push", "/moved?x=1"])
    }

    @Test func aDigestChallengeIsAnswered() throws {
        let server = try LoopbackHTTPServer { request, _ in
            LoopbackHTTPServer.isDigestAuthorized(request, username: "johndow", password: "digest-pass", realm: "pbx", nonce: "abc123")
                ? .status(204) : LoopbackHTTPServer.digestChallenge(realm: "pbx", nonce: "abc123")
        }
        let extra = """
                pushTokenReporterAuthUsername: johndow
                pushTokenReporterAuthPassword: digest-pass
            """
        let result = try Self.runOnce(Self.config(url: server.baseURL + "/push", extra: extra))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(server.requests.count == 2)
        #expect(server.requests.last?.header("Authorization")?.hasPrefix("Digest ") == true)
        #expect(!result.stderr.contains("digest-pass"))
    }

    @Test func aBodyOver64KiBIsReadOnlyInPart() throws {
        // 4 MiB of JSON that never closes: read whole, it would not parse and be retried until the
        // deadline; read up to 64 KiB, it is judged by how it starts and delivered.
        let big = Array("{\"pad\":\"".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 4 << 20)
        let server = try LoopbackHTTPServer { _, _ in .respond(status: 200, headers: [("Content-Type", "application/json")], body: big) }
        // A deadline far longer than one delivery takes: only the retries of a whole read reach it.
        let result = try Self.runOnce(Self.config(url: server.baseURL + "/push"), ["--deadline", "30s"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(server.requests.count == 1)
    }

    @Test func theDeadlineEndsTheRunWithASummary() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(503) }
        // Retries at most 1s apart: a 3s deadline leaves room for several however slow the machine.
        let result = try Self.runOnce(Self.config(url: server.baseURL + "/push" + Self.acrobitsQuery.dropFirst(6)),
                                      ["--deadline", "3s"])
        #expect(result.status == 1)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "Delivered 0 of 1 report; 1 not delivered within the deadline (3s):")
        #expect(lines.count == 2)
        #expect(lines.last?.hasPrefix("  johndow: pushTokenReporter to 127.0.0.1:\(server.port): HTTP 503 (") == true)
        #expect(server.requests.count >= 3)
        // Failures are logged at attempts 1, 2, 4, …, not each time: exactly the powers of two
        // among the attempts made, whatever their number (the last may be cut short unlogged),
        // and the one whose retry the deadline leaves no time for, which says so.
        let logged = result.stderrLines.compactMap { $0.firstMatch(of: /failed: HTTP 503 \(attempt (\d+)\)/).flatMap { Int($0.1) } }
        let last = result.stderrLines.compactMap { $0.firstMatch(of: /\(attempt (\d+)\); no time is left for another before the deadline/).flatMap { Int($0.1) } }
        #expect(last.count <= 1, "\(last)")
        let attempts = server.requests.count
        func expected(upTo n: Int) -> [Int] {
            (Set((0..<Int.bitWidth - 1).map { 1 << $0 }.filter { $0 <= n }).union(last)).sorted()
        }
        #expect(logged == expected(upTo: attempts) || logged == expected(upTo: attempts - 1), "\(attempts) attempts: \(logged)")
        // The password is in the query, but never in the log or the summary.
        #expect(!result.stderr.contains("s3cret-pass"))
        #expect(!result.stdout.contains("s3cret-pass"))
    }

    @Test func sigtermLetsTheRequestsInFlightFinishAndASecondCancelsThem() throws {
        // m1's answer waits for the gate, opened once the round has stopped: it comes within the
        // grace period, and is taken in. m2's never comes: the second SIGTERM cancels it.
        let gate = DispatchSemaphore(value: 0)
        defer { gate.signal() }
        let answering = try LoopbackHTTPServer { _, _ in
            gate.wait()
            return .status(200)
        }
        let silent = try LoopbackHTTPServer { _, _ in .hang }
        let files = TemporaryDirectory()
        let config = files.write("c.yaml", """
            accounts:
              - {username: m1, pushTokenOther: T1, pushTokenReporterUrl: "\(answering.baseURL)/r?t=%pushTokenOther%"}
              - {username: m2, pushTokenOther: T2, pushTokenReporterUrl: "\(silent.baseURL)/r?t=%pushTokenOther%"}
            """)
        let state = files.path + "/state"
        let round = try RunningProcess(pushreporter: ["run", "--once", "--config", config, "--state-dir", state, "--log-level", "debug"])
        #expect(answering.waitForRequests(1, timeout: Polling.generous) && silent.waitForRequests(1, timeout: Polling.generous))
        round.signal(SIGTERM)
        #expect(round.waitForStderr("stopping: no new requests; 2 in flight get 10s to finish"), "\(round.stderr)")
        #expect(round.stderr.contains("notice: SIGTERM: stopping the round; no new request starts, and the state is written "
                                      + "(a second SIGTERM cancels the requests in flight)"), "\(round.stderr)")
        gate.signal()
        // Logged once the round has settled it.
        #expect(round.waitForStderr("m1: pushTokenReporter delivered to 127.0.0.1:\(answering.port)"), "\(round.stderr)")
        round.signal(SIGTERM)
        #expect(round.waitForExit() == 1, "\(round.stderr)")
        #expect(round.stderr.contains("notice: SIGTERM again: the requests in flight are cancelled, and the state is written"))
        #expect(round.stdout == "Delivered 1 of 2 reports; 1 not delivered before SIGTERM stopped the round:\n"
                + "  m2: pushTokenReporter to 127.0.0.1:\(silent.port): no response before SIGTERM (0 attempts)\n", "\(round.stdout)")
        #expect(answering.requests.count == 1 && silent.requests.count == 1)
        // m1's delivery is in the state: the next run does not send it again.
        let status = try ProcessRunner.pushreporter(["status", "--state-dir", state, "--format", "json"])
        let rows = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(rows.first { $0["account"] as? String == "m1" }?["state"] as? String == "delivered", "\(status.stdout)")
        #expect(rows.first { $0["account"] as? String == "m2" }?["state"] as? String == "pending", "\(status.stdout)")
    }

    @Test func aJSONLogLineAboutAnAttemptNamesItsSubscriptionInFields() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(503) }
        let config = Self.config(url: server.baseURL + "/push" + Self.acrobitsQuery.dropFirst(6))
        let json = try Self.runOnce(config, ["--deadline", "3s", "--log-format", "json"])
        #expect(json.status == 1)
        let failures = json.stderrLines.compactMap { line in (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] }
            .filter { ($0["message"] as? String)?.contains("failed: HTTP 503") == true }
        #expect(!failures.isEmpty, "\(json.stderr)")
        #expect(failures.allSatisfy { $0["account"] as? String == "johndow" && $0["service"] as? String == "acrobits"
                                      && $0["host"] as? String == "127.0.0.1:\(server.port)" }, "\(json.stderr)")
        // In text the sentence names them; no fields are added to it.
        let text = try Self.runOnce(config, ["--deadline", "3s"])
        #expect(text.stderrLines.contains { $0.contains("johndow: pushTokenReporter to 127.0.0.1:\(server.port) failed: HTTP 503 (attempt 1)") },
                "\(text.stderr)")
        #expect(!text.stderr.contains("account="), "\(text.stderr)")
    }

    @Test func theConfigurationsWarningsAreLoggedInTheLogsFormat() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let directory = TemporaryDirectory()
        let config = directory.write("c.yaml", """
            defaults:
              pushTokenOthr: abc
            accounts:
              - username: alice
                pushTokenReporterUrl: \(server.baseURL)/r?tok=%pushTokenOther%
            """)
        let warning = "c.yaml:2:3: warning: 'pushTokenOthr' is not a key pushreporter acts on; did you mean 'pushTokenOther'?"
        // On a terminal or in a file: as validate prints it, for editors.
        let text = try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", directory.path + "/s1"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stderrLines.first == config.dropLast(6) + warning, "\(text.stderr)")
        // With --log-format json: a JSON object like every other line, its place as fields.
        let json = try ProcessRunner.pushreporter(["run", "--once", "--log-format", "json", "--config", config,
                                                   "--state-dir", directory.path + "/s2"])
        #expect(json.status == 0, "\(json.stderr)")
        let objects = json.stderrLines.map { line in (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] }
        #expect(!objects.isEmpty && objects.allSatisfy { $0 != nil }, "every line a JSON object: \(json.stderr)")
        let first = objects.first ?? nil
        #expect(first?["level"] as? String == "warning")
        #expect(first?["file"] as? String == config)
        // Numbers, as in validate --format json.
        #expect(first?["line"] as? Int == 2 && first?["column"] as? Int == 3 && first?["account"] == nil,
                "\(json.stderr)")
        // Under journald: with the priority of a warning, as every line has its own.
        let journal = try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", directory.path + "/s3"],
                                                     environment: ["JOURNAL_STREAM": "8:1234"])
        #expect(journal.status == 0, "\(journal.stderr)")
        #expect(journal.stderrLines.first == "<4>" + config.dropLast(6) + warning, "\(journal.stderr)")
        #expect(journal.stderrLines.allSatisfy { $0.wholeMatch(of: /<[0-7]>.*/) != nil }, "\(journal.stderr)")
    }

    @Test func proxiesFromTheEnvironmentAreUsed() throws {
        let proxy = try LoopbackHTTPServer { _, _ in .status(204) }
        let result = try Self.runOnce(Self.config(url: "http://push.invalid/register?u=%account[username]%"),
                                      environment: ["http_proxy": proxy.baseURL, "no_proxy": "", "NO_PROXY": ""])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(proxy.requests.first?.target == "http://push.invalid/register?u=johndow")
    }

    @Test func manyAccountsAreAllDelivered() throws {
        let server = try LoopbackHTTPServer { _, index in index % 3 == 0 ? .status(503) : .status(204) }
        var yaml = "agent:\n  concurrency: 8\n  perHostConcurrency: 4\n  retry: {initial: 50ms, max: 200ms}\naccounts:\n"
        for index in 0..<60 {
            yaml += "  - {id: a\(index), username: u\(index), selector: S\(index), pushTokenReporterUrl: '\(server.baseURL)/r/%account[username]%'}\n"
        }
        let result = try Self.runOnce(yaml)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("Delivered 60 of 60 reports in "))
        let delivered = Set(server.requests.enumerated().filter { $0.offset % 3 != 0 }.map(\.element.path))
        #expect(delivered == Set((0..<60).map { "/r/u\($0)" }))
    }

    @Test func anInvalidConfigurationSendsNothing() throws {
        let server = try LoopbackHTTPServer()
        let result = try Self.runOnce(Self.config(url: server.baseURL + "/%nosuchvariable%"))
        #expect(result.status == 78)
        #expect(result.stderr.contains("unknown variable"))
        #expect(server.requests.isEmpty)
        // An error found loading and one found rendering, both at once, as validate says them.
        let both = try Self.runOnce(Self.config(url: server.baseURL + "/r?u=%account[usrname]%", agent: "  reportIntervall: 1h"))
        #expect(both.status == 78)
        #expect(both.stderr.contains("error: unknown key 'reportIntervall' under agent; did you mean 'reportInterval'?"), "\(both.stderr)")
        #expect(both.stderr.contains("error: no account has a key 'usrname'"), "\(both.stderr)")
        #expect(server.requests.isEmpty)
    }

    @Test func anUnusableStateDirectoryIsOneSentence() throws {
        let directory = TemporaryDirectory()
        let file = directory.write("not-a-directory", "x")
        let result = try ProcessRunner.pushreporter(config: Self.config(url: "http://127.0.0.1:9/x"),
                                                    ["run", "--once", "--state-dir", file])
        #expect(result.status == 1)
        #expect(result.stderrLines.last?.hasSuffix("error: the state directory \(file) is not a directory") == true)
    }

    @Test func aStateDirectoryThatCannotBeCreatedSaysWhyInTheSystemsWords() throws {
        let directory = TemporaryDirectory()
        let file = directory.write("plain-file", "x")
        let result = try ProcessRunner.pushreporter(config: Self.config(url: "http://127.0.0.1:9/x"),
                                                    ["run", "--once", "--state-dir", file + "/state"])
        #expect(result.status == 1)
        #expect(result.stderrLines.last?.hasSuffix(
            "error: cannot create the state directory \(file)/state (Not a directory); give --state-dir DIR or agent.stateDirectory") == true,
            "\(result.stderr)")
    }

    @Test func theAgentDoesNotStartOnAMissingConfiguration() throws {
        let result = try ProcessRunner.pushreporter(["run", "--config", "/nonexistent"])
        #expect(result.status == 78)
        #expect(result.stderrLines.first == "/nonexistent: error: cannot read the configuration: no such file or directory")
    }

    @Test func watchIsNotForOnce() throws {
        let result = try ProcessRunner.pushreporter(["run", "--once", "--watch", "--config", "/nonexistent"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("--watch applies to the long-running agent, not to --once"))
    }

    @Test func deadlineIsNotForTheLongRunningAgent() throws {
        // A missing configuration: were the option accepted, the agent would end at once (78)
        // rather than run on.
        let result = try ProcessRunner.pushreporter(["run", "--deadline", "5s", "--config", "/nonexistent"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("--deadline applies to --once; the long-running agent retries for as long as it runs"))
    }

    @Test func theMakeRunDemoDeliversEveryExample() throws {
        let result = try ProcessRunner.run("/bin/bash", ["scripts/demo.sh"], environment: ["BIN": ProcessRunner.builtProducts],
                                           directory: RepositoryPaths.root)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("\nDelivered 10 of 10 reports in "))
        #expect(result.stdout.contains("\nPOST /token\n"))
        #expect(result.stdout.contains(#"{"operation":"create","notification_key_name":"frank","registration_ids":["#))
        #expect(result.stdout.contains("\nPOST /api/v1.0/orgs/0a1b2c3d-0000-0000-0000-000000000000/pushdeviceregistration/devices/batch\n"))
        #expect(result.stdout.contains("\nGET /token/?username=johndow&password=12345678&selector=12869E0E6E553673C54F29105A0647204C416A2A:7C3A0D14&"))
        #expect(result.stdout.contains("\nPOST /push/register\n"))
        #expect(result.stdout.contains("\n{ \"username\" : \"alice\", "))
    }
}
