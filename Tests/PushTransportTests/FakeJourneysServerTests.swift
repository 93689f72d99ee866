import Foundation
import PushTestSupport
import PushTransport
import Testing
import PushTestThreads

/// The fake Customer Insights – Journeys server, driven over loopback with the libcurl transport:
/// what it answers, what it records, and what it can be scripted to do.
@Suite(.timeLimit(.minutes(10)), .blockingThreads) struct FakeJourneysServerTests {
    typealias Endpoint = FakeJourneysServer.Endpoint
    let transport: CurlTransport
    let fake: FakeJourneysServer

    init() throws {
        transport = try CurlTransport()
        fake = try FakeJourneysServer()
    }

    // MARK: Registration

    @Test func aSingleRegistrationWithoutTrackingIsAcceptedWithAnEmptyBody() async throws {
        let response = try await post(.register, registration("apns-1", user: "u1"))
        #expect(response.status == 202)
        #expect(response.body.isEmpty)
        let registration = try #require(fake.registrations.first)
        #expect(fake.registrations.count == 1)
        #expect(registration.userId == "u1")
        #expect(registration.deviceToken == "apns-1")
        #expect(registration.platform == .ios)
        #expect(registration.mobileAppId == fake.mobileAppId)
        #expect(registration.requestId == nil)
        #expect(registration.batchSize == nil)
        #expect(registration.keyOrder == ["MobileAppId", "UserId", "ApiToken", "ApnsDeviceToken"])
        #expect(registration.callbackURL == nil)
        #expect(fake.requests[registration.requestIndex].path.hasSuffix("/pushdeviceregistration/devices"))
    }

    @Test func aTrackedRegistrationAnswersItsRequestIdAndKeepsTheCallbackHeaders() async throws {
        let response = try await post(.register, registration("fcm-1", user: "u2", platform: .android), headers: [
            ("x-ms-track-registration", "true"),
            ("x-ms-callback-url", "https://agent.example.com/journeys/j/7"),
            ("x-ms-status-callback-url", "https://agent.example.com/journeys/j/7"),
            ("x-ms-callback-url-headers", #"{"X-Key":"k","A":"b"}"#),
        ])
        #expect(response.status == 202)
        #expect(response.header("Content-Type")?.hasPrefix("application/json") == true)
        let answer = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        let id = try #require(answer["RegistrationRequestId"] as? String)
        #expect(answer.count == 1)
        #expect(UUID(uuidString: id) != nil)
        let registration = try #require(fake.registrations(forToken: "fcm-1").first)
        #expect(registration.requestId == id)
        #expect(registration.platform == .android)
        #expect(registration.keyOrder.last == "FcmDeviceToken")
        #expect(registration.callbackURL == "https://agent.example.com/journeys/j/7")
        #expect(registration.statusCallbackURL == "https://agent.example.com/journeys/j/7")
        #expect(registration.callbackHeaders == #"{"X-Key":"k","A":"b"}"#)
        #expect(fake.registrations(forToken: "other").isEmpty)
    }

    @Test func aTrackedBatchAnswersOneIdPerObjectInRequestOrder() async throws {
        let tokens = ["t-c", "t-a", "t-b"]
        let body = "[" + tokens.enumerated().map { registration($1, user: "u\($0)", platform: $0 == 1 ? .android : .ios) }
            .joined(separator: ",") + "]"
        let response = try await post(.registerBatch, body, headers: [("x-ms-track-registration", "TRUE")])
        #expect(response.status == 202)
        let answers = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [[String: String]])
        let registrations = fake.registrations
        #expect(registrations.map(\.deviceToken) == tokens)
        #expect(answers.map { $0["RegistrationRequestId"] } == registrations.map(\.requestId))
        #expect(Set(answers.compactMap { $0["RegistrationRequestId"] }).count == 3)
        #expect(registrations.map(\.platform) == [.ios, .android, .ios])
        #expect(registrations.allSatisfy { $0.batchSize == 3 && $0.requestIndex == 0 })
    }

    @Test func aBatchTakesAHundredObjectsAndRefusesMoreOrNone() async throws {
        func batch(_ count: Int) -> String {
            "[" + (0..<count).map { registration("tok-\($0)", user: "u") }.joined(separator: ",") + "]"
        }
        #expect(try await post(.registerBatch, batch(101)).status == 400)
        #expect(try await post(.registerBatch, "[]").status == 400)
        #expect(fake.registrations.count == 0)
        #expect(try await post(.registerBatch, batch(100)).status == 202)
        #expect(fake.registrations.count == 100)
        #expect(fake.registrations.last?.deviceToken == "tok-99")
    }

    @Test func theKeyOrderIsRecordedAsSentEvenWhenItIsNotTheSeeds() async throws {
        let body = #"{"ApiToken":"\#(fake.apiToken)","User\u0049d":"u","ApnsDeviceToken":"x","MobileAppId":"\#(fake.mobileAppId)"}"#
        #expect(try await post(.register, body).status == 202)
        #expect(fake.registrations.first?.keyOrder == ["ApiToken", "UserId", "ApnsDeviceToken", "MobileAppId"])
    }

    @Test(arguments: [
        ("wrong Content-Type", "text/plain", #"{"MobileAppId":"A","UserId":"u","ApiToken":"T","ApnsDeviceToken":"x"}"#, []),
        ("not JSON", "application/json", #"{"MobileAppId":"A","#, []),
        ("missing key", "application/json", #"{"MobileAppId":"A","ApiToken":"T","ApnsDeviceToken":"x"}"#, []),
        ("unknown key", "application/json", #"{"MobileAppId":"A","UserID":"u","ApiToken":"T","ApnsDeviceToken":"x"}"#, []),
        ("both tokens", "application/json", #"{"MobileAppId":"A","UserId":"u","ApiToken":"T","ApnsDeviceToken":"x","FcmDeviceToken":"y"}"#, []),
        ("no token", "application/json", #"{"MobileAppId":"A","UserId":"u","ApiToken":"T"}"#, []),
        ("empty token", "application/json", #"{"MobileAppId":"A","UserId":"u","ApiToken":"T","ApnsDeviceToken":""}"#, []),
        ("number", "application/json", #"{"MobileAppId":"A","UserId":7,"ApiToken":"T","ApnsDeviceToken":"x"}"#, []),
        ("repeated key", "application/json", #"{"MobileAppId":"A","UserId":"u","UserId":"v","ApiToken":"T","ApnsDeviceToken":"x"}"#, []),
        ("array", "application/json", #"[{"MobileAppId":"A","UserId":"u","ApiToken":"T","ApnsDeviceToken":"x"}]"#, []),
        ("wrong app", "application/json", #"{"MobileAppId":"other","UserId":"u","ApiToken":"T","ApnsDeviceToken":"x"}"#, []),
        ("bad callback headers", "application/json", #"{"MobileAppId":"A","UserId":"u","ApiToken":"T","ApnsDeviceToken":"x"}"#,
         ["x-ms-callback-url-headers: {\"n\":1}"]),
    ])
    func aMalformedRegistrationIs400AndNotRecorded(what: String, contentType: String, body: String, extra: [String]) async throws {
        let resolved = body.replacingOccurrences(of: #""A""#, with: "\"\(fake.mobileAppId)\"")
            .replacingOccurrences(of: #""T""#, with: "\"\(fake.apiToken)\"")
        let headers = [("Content-Type", contentType)] + extra.map { line in
            let colon = line.firstIndex(of: ":")!
            return (String(line[..<colon]), String(line[line.index(colon, offsetBy: 2)...]))
        }
        let response = try await post(.register, resolved, headers: headers, contentType: nil)
        #expect(response.status == 400, "\(what)")
        #expect(!response.body.isEmpty, "a 400 says why")
        #expect(fake.registrations.isEmpty, "\(what)")
        // The same object, well formed, is taken: the 400 was the flaw's.
        #expect(try await post(.register, registration("x", user: "u")).status == 202)
    }

    // MARK: Status

    @Test func statusAnswersEachIdInOrderWithTheScriptedStatusesAndTheSeedsSpaces() async throws {
        // A reason this client does not know, with what JSON must escape.
        let unknown = #"Something "New"/1\"#
        fake.setStatus(.failed(.duplicateExists), forToken: "dup")
        fake.setStatus(.failed(FailureReason(unknown)), forToken: "new")
        let ids = try await registerTracked(["ok", "dup", "pending", "new"])
        fake.setStatus(.pending, forRequestId: ids[2])
        let asked = [ids[3], ids[0], "00000000-aaaa-bbbb-cccc-000000000000", ids[1], ids[2]]
        let response = try await post(.status, statusBody(asked))
        #expect(response.status == 200)
        let answers = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [[String: Any]])
        #expect(answers.map { $0["Status"] as? String } == ["Failed", "Success", "Pending", "Failed", "Pending"])
        #expect(answers.map { $0["FailureReason"] as? String } == [unknown, nil, nil, " DuplicateExists ", nil])
        #expect(answers[1]["FailureReason"] is NSNull)
        let query = try #require(fake.statusQueries.first)
        #expect(query.requestIds == asked)
        #expect(query.answers == [.failed(FailureReason(unknown)), .success, .pending, .failed(.duplicateExists), .pending])
    }

    @Test func statusIsServedWithoutTheTrailingSlashAndFollowsAChangedScript() async throws {
        let ids = try await registerTracked(["later"])
        fake.defaultStatus = .pending
        let withoutSlash = fake.url(.status).replacingOccurrences(of: "status/", with: "status")
        let first = try await transport.send(TransportRequest(method: "POST", url: withoutSlash, headers: [("Content-Type", "application/json")],
                                                              body: Array(statusBody(ids).utf8)))
        #expect(first.status == 200)
        #expect(String(decoding: first.body, as: UTF8.self) == #"[{"Status":"Pending","FailureReason":null}]"#)
        fake.setStatus(.failed(.deviceTokenTooLong), forToken: "later")
        let second = try await post(.status, statusBody(ids))
        #expect(String(decoding: second.body, as: UTF8.self) == #"[{"Status":"Failed","FailureReason":" DeviceTokenTooLong "}]"#)
        #expect(fake.waitForStatusQueries(2, timeout: Polling.generous))
        #expect(try await post(.status, statusBody([])).status == 400)
        #expect(try await post(.status, statusBody((0...100).map { "id-\($0)" })).status == 400)
        #expect(fake.statusQueries.count == 2)
    }

    // MARK: Credentials and scripting

    @Test func aWrongApiTokenIs401OnEveryEndpointAnd403WhenScripted() async throws {
        let token = fake.apiToken
        func wrong(_ text: String) -> String { text.replacingOccurrences(of: token, with: "not-the-token") }
        let bodies: [(Endpoint, String)] = [
            (.register, wrong(registration("a", user: "u"))),
            (.registerBatch, "[" + registration("b", user: "u") + "," + wrong(registration("c", user: "u")) + "]"),
            (.status, wrong(statusBody(["id"]))),
            (.cleanup, wrong(cleanupBody("u", token: "a"))),
            (.cleanupBatch, "[" + wrong(cleanupBody("u", token: "a")) + "]"),
        ]
        for (endpoint, body) in bodies {
            #expect(try await post(endpoint, body).status == 401, "\(endpoint)")
        }
        fake.wrongApiTokenStatus = 403
        #expect(try await post(.register, wrong(registration("a", user: "u"))).status == 403)
        #expect(fake.registrations.isEmpty && fake.cleanups.isEmpty && fake.statusQueries.isEmpty)
    }

    @Test func aRejectedTokenRefusesItsWholeBatchSoTheClientMustBisect() async throws {
        fake.rejectRequests(containing: "bad")
        func batch(_ tokens: [String]) -> String { "[" + tokens.map { registration($0, user: "u") }.joined(separator: ",") + "]" }
        #expect(try await post(.registerBatch, batch(["a", "bad", "c", "d"])).status == 400)
        #expect(fake.registrations.isEmpty)
        #expect(try await post(.registerBatch, batch(["a", "bad"])).status == 400)
        #expect(try await post(.registerBatch, batch(["c", "d"])).status == 202)
        #expect(try await post(.register, registration("a", user: "u")).status == 202)
        #expect(try await post(.register, registration("bad", user: "u")).status == 400)
        #expect(fake.registrations.map(\.deviceToken) == ["c", "d", "a"])
        #expect(try await post(.cleanupBatch, "[" + cleanupBody("u", token: "bad") + "]").status == 400)
        #expect(fake.cleanups.isEmpty)
    }

    @Test func scriptedRepliesComeFirstForTheirEndpointThenTheFakeAnswersAgain() async throws {
        fake.answerNext(1, of: .registerBatch, with: .status(429, headers: [("Retry-After", "1")]))
        fake.answerNext(2, with: .status(503))
        // The batch-only script is passed over for a single registration.
        #expect(try await post(.register, registration("b", user: "u")).status == 503)
        let body = "[" + registration("a", user: "u") + "]"
        let limited = try await post(.registerBatch, body)
        #expect(limited.status == 429)
        #expect(limited.header("Retry-After") == "1")
        #expect(try await post(.status, statusBody(["id"])).status == 503)
        #expect(try await post(.registerBatch, body).status == 202)
        #expect(fake.registrations.map(\.deviceToken) == ["a"])
        #expect(fake.requests.count == 4)
    }

    @Test func aHangingScriptTimesTheClientOut() async throws {
        fake.answerNext(of: .register, with: .hang)
        let started = ContinuousClock.now
        await #expect(throws: TransportError.self) {
            try await transport.send(TransportRequest(method: "POST", url: fake.url(.register), headers: [("Content-Type", "application/json")],
                                                      body: Array(registration("h", user: "u").utf8), timeout: .seconds(5)))
        }
        // Far longer than the 5s timeout (long enough for the request to reach the fake however
        // loaded the machine), far shorter than the hang.
        #expect(ContinuousClock.now - started < .seconds(60))
        #expect(fake.waitForRequests(1, timeout: Polling.generous))
        #expect(try await post(.register, registration("h", user: "u")).status == 202)
    }

    // MARK: Cleanup

    @Test func cleanupsAreRecordedSingleAndBatched() async throws {
        #expect(try await post(.cleanup, cleanupBody("u1", token: "old-1")).status == 202)
        let batch = "[" + cleanupBody("u2", token: "old-2") + "," + cleanupBody("u3", token: nil) + "]"
        #expect(try await post(.cleanupBatch, batch).status == 202)
        #expect(try await post(.cleanupBatch, cleanupBody("u4", token: "old-4")).status == 400, "the batch is an array")
        #expect(fake.waitForCleanups(3, timeout: Polling.generous))
        let cleanups = fake.cleanups
        #expect(cleanups.map(\.userId) == ["u1", "u2", "u3"])
        #expect(cleanups.map(\.deviceToken) == ["old-1", "old-2", nil])
        #expect(cleanups.map(\.batchSize) == [nil, 2, 2])
        #expect(cleanups[0].keyOrder == ["MobileAppId", "ApiToken", "UserId", "DeviceToken"])
        #expect(fake.registrations.isEmpty)
    }

    // MARK: Paths and waits

    @Test func otherPathsAndOrganizationsAre404AndOtherMethods405() async throws {
        let base = fake.baseURL + "/api/v1.0/orgs/"
        for url in [fake.baseURL + "/", base + "other-org/pushdeviceregistration/devices",
                    base + fake.orgId + "/pushdeviceregistration/devices/unknown", base + fake.orgId + "/pushdeviceregistration"] {
            let response = try await transport.send(TransportRequest(method: "POST", url: url, headers: [("Content-Type", "application/json")],
                                                                     body: Array(registration("a", user: "u").utf8)))
            #expect(response.status == 404, "\(url)")
        }
        let get = try await transport.send(TransportRequest(method: "GET", url: fake.url(.register)))
        #expect(get.status == 405)
        #expect(get.header("Allow") == "POST")
        #expect(fake.registrations.isEmpty)
        #expect(fake.requests.count == 5)
    }

    @Test func waitsAreBoundedAndEndWhenTheFakeStops() async throws {
        #expect(!fake.waitForRegistrations(1, timeout: .milliseconds(50)))
        _ = try await post(.register, registration("w", user: "u"))
        #expect(fake.waitForRegistrations(1, timeout: .zero))
        let fake = self.fake
        async let waited = offThePool {
            let started = ContinuousClock.now
            let arrived = fake.waitForCleanups(1, timeout: .seconds(120))
            return (arrived, ContinuousClock.now - started)
        }
        // Stopping before the wait begins ends it at once too; the pause makes the usual case a wake-up.
        try await Task.sleep(for: .milliseconds(100))
        fake.stop()
        let (arrived, took) = try await waited
        #expect(!arrived)
        // Ended by the stop, long before its bound, however slow the machine.
        #expect(took < .seconds(60))
    }

    // MARK: Helpers

    /// A registration object in the seed's key order with the fake's credentials.
    func registration(_ token: String, user: String, platform: FakeJourneysServer.Platform = .ios) -> String {
        #"{"MobileAppId":"\#(fake.mobileAppId)","UserId":"\#(user)","ApiToken":"\#(fake.apiToken)","\#(platform.tokenKey)":"\#(token)"}"#
    }

    /// A cleanup object in the seed's key order; without `DeviceToken` when `token` is nil.
    func cleanupBody(_ user: String, token: String?) -> String {
        #"{"MobileAppId":"\#(fake.mobileAppId)","ApiToken":"\#(fake.apiToken)","UserId":"\#(user)""#
            + (token.map { #","DeviceToken":"\#($0)"}"# } ?? "}")
    }

    func statusBody(_ ids: [String]) -> String {
        #"{"RegistrationRequestIds":[\#(ids.map { "\"\($0)\"" }.joined(separator: ","))],"MobileAppId":"\#(fake.mobileAppId)","ApiToken":"\#(fake.apiToken)"}"#
    }

    /// Registers `tokens` one by one with tracking and returns their request ids.
    func registerTracked(_ tokens: [String]) async throws -> [String] {
        var ids: [String] = []
        for token in tokens {
            let response = try await post(.register, registration(token, user: "u"), headers: [("x-ms-track-registration", "true")])
            let answer = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: String]
            ids.append(try #require(answer?["RegistrationRequestId"]))
        }
        return ids
    }

    /// POSTs `body` to `endpoint` with `Content-Type: contentType` (none when nil) and `headers`.
    func post(_ endpoint: Endpoint, _ body: String, headers: [(String, String)] = [],
              contentType: String? = "application/json") async throws -> TransportResponse {
        let type = contentType.map { [(name: "Content-Type", value: $0)] } ?? []
        return try await transport.send(TransportRequest(method: "POST", url: fake.url(endpoint),
                                                         headers: type + headers.map { (name: $0.0, value: $0.1) },
                                                         body: Array(body.utf8), timeout: .seconds(10)))
    }
}

typealias FailureReason = FakeJourneysServer.FailureReason

/// The demo receiver answers the Journeys paths with the fake's handling, for any organization
/// and credentials, and every other path as before.
@Suite(.timeLimit(.minutes(10)), .blockingThreads) struct FakeJourneysReceiverTests {
    @Test func theReceiverPlaysJourneysAndPrintsWhatItGets() async throws {
        let directory = TemporaryDirectory()
        let (process, output, port) = try ReceiverTests.start(["--count", "3", "--status", "201"], in: directory)
        let transport = try CurlTransport()
        let base = "http://127.0.0.1:\(port)/api/v1.0/orgs/any-org/pushdeviceregistration/devices"
        let registration = #"{"MobileAppId":"app","UserId":"u","ApiToken":"whatever","FcmDeviceToken":"fcm-9"}"#
        let registered = try await transport.send(TransportRequest(
            method: "POST", url: base, headers: [("Content-Type", "application/json"), ("x-ms-track-registration", "true")],
            body: Array(registration.utf8)))
        #expect(registered.status == 202)
        let id = try #require((try JSONSerialization.jsonObject(with: Data(registered.body)) as? [String: String])?["RegistrationRequestId"])
        let status = try await transport.send(TransportRequest(
            method: "POST", url: base + "/status/", headers: [("Content-Type", "application/json")],
            body: Array(#"{"RegistrationRequestIds":["\#(id)"],"MobileAppId":"app","ApiToken":"whatever"}"#.utf8)))
        #expect(String(decoding: status.body, as: UTF8.self) == #"[{"Status":"Success","FailureReason":null}]"#)
        let other = try await transport.send(TransportRequest(method: "POST", url: "http://127.0.0.1:\(port)/push",
                                                              headers: [("Content-Type", "application/json")], body: Array("{}".utf8)))
        #expect(other.status == 201)
        #expect(other.body == Array("{}".utf8))
        #expect(ReceiverTests.exitStatus(process) == 0)
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(printed.contains("── request 1 (connection "))
        #expect(printed.contains("POST /api/v1.0/orgs/any-org/pushdeviceregistration/devices\n"))
        #expect(printed.contains(registration + "\n"))
        #expect(printed.contains("POST /api/v1.0/orgs/any-org/pushdeviceregistration/devices/status/\n"))
        #expect(printed.contains("── request 3 (connection "))
        #expect(printed.contains("POST /push\n"))
    }
}
