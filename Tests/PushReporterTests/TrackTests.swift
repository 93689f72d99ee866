import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// `pushreporter track`, the real binary, against a fake Adobe tracking server on 127.0.0.1
/// (SPEC §9.4): what the server received, what the command said, and its exit status.
@Suite(.blockingThreads) struct TrackTests {
    static let ecid = "48932011736589371820"

    /// An adobe-campaign service at `server`, an account `dana` with an ECID, and fast retries.
    static func config(_ server: String, extra: String = "") -> String {
        """
        agent:
          retry: {initial: 100ms, multiplier: 2, max: 500ms, maxRetryAfter: 5s}
        services:
          adobe:
            type: adobe-campaign
            trackingServer: \(server)
        \(extra)
        accounts:
          - username: dana
            ecid: "\(ecid)"
            services:
              adobe: {ecid: "%account[ecid]%"}
          - username: erin
            enabled: false
            services:
              adobe: {ecid: "erin-ecid"}
        """
    }

    /// The iOS sample of seed 003, as Adobe Campaign sends it.
    static let iosPayload = """
        {
        "aps":{
        "alert":{
        "body":"This is the content of my push notification",
        "title":"Push Notification Title"
        },
        "content-available":1,
        "category":"NEW_MESSAGE_CATEGORY",
        "badge":2,
        "mutable-content":1,
        "sound":"default"
        },
        "custom_field1":"custom_value1",
        "custom_field2":"custom_value2",
        "media-attachment-url":"https://2.img-dpreview.com/files/p/articles/9440145363/Creative_Cloud.jpeg",
        "uri":"https://mydeeplinkurl.com",
        "_dId":"56c4",
        "_mId":"h138a"}
        """

    /// The Android sample of seed 003; `wrapped` adds the FCM tester's `"to"`.
    static func androidPayload(wrapped: Bool = false) -> String {
        """
        {
        \(wrapped ? "\"to\": \"<==========ENTER your device token==============>\"," : "")
        "collapseKey": "1476005",
        "priority": "high",
        "data": {
        "_dId": "d57fd6",
        "_mId": "h1685a5",
        "body": "adobe body 123",
        "category": "adobe category 123",
        "custom key 1": "value 1",
        "media-attachment-url": "http://adobegiphy.com?test=123",
        "sound": "http://testcampaign.instance.com/r/?id=s1685a5,d57fd6,d57ff5",
        "title": "adobe title 123",
        "uri": "http://testcampaign.instance.com/r/?id=d1685a5,d57fd6,d57ff6",
        "badge": 1817
        }
        }
        """
    }

    /// Runs `track` with `config` and the payload files `payloads` (written as `p1.json`, …),
    /// or `stdin`; the files' paths in `arguments` are `$1`, `$2`, ….
    static func track(config: String, _ arguments: [String], payloads: [String] = [], stdin: String? = nil,
                      in directory: TemporaryDirectory = TemporaryDirectory()) throws -> ProcessOutput {
        let configPath = directory.write("c.yaml", config)
        let files = payloads.enumerated().map { directory.write("p\($0.offset + 1).json", $0.element) }
        return try ProcessRunner.pushreporter(["track", "--config", configPath] + arguments + files, stdin: stdin ?? "")
    }

    @Test func anIOSImpressionIsTheGETTheAdobeSDKSends() throws {
        let adobe = try FakeAdobeServer()
        let result = try Self.track(config: Self.config(adobe.baseURL), ["--service", "adobe", "--event", "impression", "--account", "dana"],
                                    payloads: [Self.iosPayload])
        #expect(result.status == 0, "\(result.stderr)")
        let hit = try #require(adobe.hits.first)
        #expect(adobe.hits.count == 1)
        #expect(hit.target == "/r/?id=h138a,56c4,7&mcId=\(Self.ecid)")
        #expect(hit.valid && hit.status == 200)
        #expect(hit.accept == "*/*")
        #expect(hit.userAgent == "pushreporter/0.1.0")
        #expect(adobe.requests.first?.method == "GET" && adobe.requests.first?.body.isEmpty == true)
        let file = try #require(result.stdout.split(separator: ":").first)
        #expect(result.stdout == """
            \(file): action 7 (impression) delivered to 127.0.0.1:\(adobe.port)
            Delivered 1 of 1 action.

            """)
    }

    @Test func androidPayloadsAreReadInsideDataAlsoWrappedWithTo() throws {
        let adobe = try FakeAdobeServer()
        let result = try Self.track(config: Self.config(adobe.baseURL), ["--service", "adobe", "--event", "click", "--ecid", "E-1"],
                                    payloads: [Self.androidPayload(), Self.androidPayload(wrapped: true)])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(adobe.hits.map(\.target) == ["/r/?id=h1685a5,d57fd6,2&mcId=E-1", "/r/?id=h1685a5,d57fd6,2&mcId=E-1"])
        #expect(adobe.hits.allSatisfy { $0.valid })
        #expect(result.stdout.hasSuffix("Delivered 2 of 2 actions.\n"))
    }

    @Test(arguments: [("impression", ["7"]), ("click", ["2"]), ("open", ["2", "1"]), ("dismiss", ["2"])])
    func eachEventSendsItsActionsInTheSDKsOrder(event: String, actions: [String]) throws {
        let adobe = try FakeAdobeServer()
        let result = try Self.track(config: Self.config(adobe.baseURL), ["--service", "adobe", "--event", event, "--account", "dana"],
                                    payloads: [Self.iosPayload])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(adobe.hits.map(\.action) == actions)
        #expect(adobe.hits.allSatisfy { $0.messageId == "h138a" && $0.deliveryId == "56c4" && $0.ecid == Self.ecid && $0.valid })
    }

    @Test func valuesAreQueryEncodedAndTheCommasLiteral() throws {
        let adobe = try FakeAdobeServer()
        let payload = #"{"aps":{},"_mId":"m 1,2","_dId":"d/é","_acsDeliveryTracking":"ON"}"#
        let result = try Self.track(config: Self.config(adobe.baseURL), ["--service", "adobe", "--event", "click", "--ecid", "a+b=c:d@e"],
                                    payloads: [payload])
        #expect(result.status == 0, "\(result.stderr)")
        let hit = try #require(adobe.hits.first)
        #expect(hit.target == "/r/?id=m%201%2C2,d%2F%C3%A9,2&mcId=a%2Bb%3Dc:d@e")
        #expect(hit.messageId == "m 1,2" && hit.deliveryId == "d/é" && hit.ecid == "a+b=c:d@e")
    }

    @Test func aPayloadThatIsNotTrackedSaysWhyAndNothingIsSent() throws {
        let adobe = try FakeAdobeServer()
        let lines = """
            {"aps":{},"_mId":"m1","_dId":"d1","_acsDeliveryTracking":"off"}
            {"data":{"_mId":"m2"}}
            {"aps":{"alert":"hello"}}
            """
        let result = try Self.track(config: Self.config(adobe.baseURL), ["--service", "adobe", "--event", "open", "--account", "dana"],
                                    stdin: lines)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == """
            stdin:1: not tracked: _acsDeliveryTracking is 'off', not on; nothing is sent
            stdin:2: not tracked: the payload carries no _dId; nothing is sent
            stdin:3: not tracked: the payload carries no _mId and no _dId (neither at the top level, as iOS has them, nor in data, as Android has them); nothing is sent
            Nothing to track: 3 payloads not tracked.

            """)
        #expect(adobe.requests.isEmpty)
    }

    @Test func withoutAnECIDNothingIsSentAndTheCommandSaysWhich() throws {
        let adobe = try FakeAdobeServer()
        let config = Self.config(adobe.baseURL)
        let none = try Self.track(config: config, ["--service", "adobe", "--event", "impression"], payloads: [Self.iosPayload])
        #expect(none.status == 0, "\(none.stderr)")
        #expect(none.stdout.contains(": not tracked: no ECID is known (give --account ID or --ecid ECID); nothing is sent\n"))
        let disabled = try Self.track(config: config, ["--service", "adobe", "--event", "impression", "--account", "erin"],
                                      payloads: [Self.iosPayload])
        #expect(disabled.status == 0, "\(disabled.stderr)")
        #expect(disabled.stdout.contains(": not tracked: the account 'erin' is disabled; nothing is sent\n"))
        #expect(adobe.requests.isEmpty)
    }

    @Test func a404IsRejectedAndNotRetried() throws {
        let adobe = try FakeAdobeServer()
        adobe.answer(.status(404), forMessage: "h138a")
        let result = try Self.track(config: Self.config(adobe.baseURL), ["--service", "adobe", "--event", "click", "--account", "dana"],
                                    payloads: [Self.iosPayload])
        #expect(result.status == 1)
        #expect(adobe.hits.count == 1)
        #expect(result.stdout.contains(": action 2 (click) rejected by 127.0.0.1:\(adobe.port): HTTP 404\n"))
        #expect(result.stdout.hasSuffix("Delivered 0 of 1 action; 1 not delivered.\n"))
        #expect(result.stderr.contains("error: "))
        #expect(result.stderr.contains(": action 2 (click) rejected by 127.0.0.1:\(adobe.port): HTTP 404; it is not sent again"))
    }

    @Test func a503IsRetriedUntilItIsDelivered() throws {
        let adobe = try FakeAdobeServer()
        adobe.answerNext(2, with: .status(503))
        let result = try Self.track(config: Self.config(adobe.baseURL), ["--service", "adobe", "--event", "impression", "--account", "dana"],
                                    payloads: [Self.iosPayload])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(adobe.hits.map(\.status) == [503, 503, 200])
        #expect(result.stderr.contains(": action 7 (impression) to 127.0.0.1:\(adobe.port) failed: HTTP 503 (attempt 1); next attempt in "))
        #expect(result.stdout.contains("delivered to 127.0.0.1:\(adobe.port) after 3 attempts\n"))
    }

    @Test func anActionStillFailingAtTheDeadlineExits1() throws {
        let adobe = try FakeAdobeServer()
        adobe.answer(.status(500), forMessage: "h138a")
        let result = try Self.track(config: Self.config(adobe.baseURL),
                                    ["--service", "adobe", "--event", "open", "--account", "dana", "--deadline", "4s"],
                                    payloads: [Self.iosPayload])
        #expect(result.status == 1)
        #expect(adobe.hits.count >= 1)
        #expect(adobe.hits.allSatisfy { $0.action == "2" }, "the open waits for its click")
        #expect(result.stdout.contains(": action 2 (click) not delivered within the deadline (4s): HTTP 500\n"))
        #expect(result.stdout.contains(": action 1 (open) not delivered within the deadline (4s): it waits for the action before it\n"))
    }

    @Test func dryRunPrintsTheRequestsAndSendsNothing() throws {
        let adobe = try FakeAdobeServer()
        let result = try Self.track(config: Self.config(adobe.baseURL), ["--service", "adobe", "--event", "open", "--account", "dana", "--dry-run"],
                                    stdin: Self.androidPayload(wrapped: true))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == """
            ### stdin:1 adobe
            GET /r/?id=h1685a5,d57fd6,2&mcId=\(Self.ecid) HTTP/1.1
            Host: 127.0.0.1:\(adobe.port)
            User-Agent: pushreporter/0.1.0
            Accept: */*

            ### stdin:1 adobe
            GET /r/?id=h1685a5,d57fd6,1&mcId=\(Self.ecid) HTTP/1.1
            Host: 127.0.0.1:\(adobe.port)
            User-Agent: pushreporter/0.1.0
            Accept: */*


            """)
        #expect(result.stderr == "track: dry run: 2 requests shown, nothing sent\n")
        #expect(adobe.requests.isEmpty)
    }

    @Test func withAStateDirectoryEachActionIsSentOnce() throws {
        let adobe = try FakeAdobeServer()
        let files = TemporaryDirectory()
        let state = files.path + "/state"
        let arguments = ["--service", "adobe", "--event", "open", "--account", "dana"]
        let first = try Self.track(config: Self.config(adobe.baseURL), arguments + ["--state-dir", state], payloads: [Self.iosPayload], in: files)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(adobe.hits.map(\.action) == ["2", "1"])
        let again = try Self.track(config: Self.config(adobe.baseURL), arguments + ["--state-dir", state], payloads: [Self.iosPayload], in: files)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(adobe.hits.count == 2, "nothing is sent again")
        #expect(again.stdout.contains(": action 2 (click) already sent (remembered in \(state)); not sent again\n"))
        #expect(again.stdout.hasSuffix("Delivered 0 of 2 actions; 2 already sent.\n"))
        // Without it there is no such memory.
        let forgetful = try Self.track(config: Self.config(adobe.baseURL), arguments, payloads: [Self.iosPayload], in: files)
        #expect(forgetful.status == 0)
        #expect(adobe.hits.count == 4)
    }

    @Test func anOpenWhoseClickWasDeliveredSendsOnlyItsOpenNextTime() throws {
        let adobe = try FakeAdobeServer()
        adobe.answer(.status(404), forMessage: "h138a", action: "1")
        let files = TemporaryDirectory()
        let arguments = ["--service", "adobe", "--event", "open", "--account", "dana", "--state-dir", files.path + "/state"]
        let first = try Self.track(config: Self.config(adobe.baseURL), arguments, payloads: [Self.iosPayload], in: files)
        #expect(first.status == 1)
        #expect(adobe.hits.map { "\($0.action):\($0.status)" } == ["2:200", "1:404"])
        adobe.clearAnswers()
        let second = try Self.track(config: Self.config(adobe.baseURL), arguments, payloads: [Self.iosPayload], in: files)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(adobe.hits.map { "\($0.action):\($0.status)" } == ["2:200", "1:404", "1:200"])
    }

    @Test func aServiceOrAccountThatDoesNotExistIsAUsageError() throws {
        let adobe = try FakeAdobeServer()
        let config = Self.config(adobe.baseURL, extra: """
              journeys:
                type: customer-insights-journeys
                publicEndpoint: https://public-eur.mkt.dynamics.com
                orgId: o
                mobileAppId: m
                apiToken: t
            """)
        let misspelt = try Self.track(config: config, ["--service", "adbe", "--event", "click", "--account", "dana"], payloads: [Self.iosPayload])
        #expect(misspelt.status == 64)
        #expect(misspelt.stderr == "track: no service 'adbe' in the configuration; did you mean 'adobe'?\n")
        let other = try Self.track(config: config, ["--service", "journeys", "--event", "click", "--account", "dana"], payloads: [Self.iosPayload])
        #expect(other.status == 64)
        #expect(other.stderr == "track: the service 'journeys' is of type customer-insights-journeys; tracking needs an adobe-campaign service\n")
        let account = try Self.track(config: config, ["--service", "adobe", "--event", "click", "--account", "dan"], payloads: [Self.iosPayload])
        #expect(account.status == 64)
        #expect(account.stderr == "track: no account 'dan' in the configuration; did you mean 'dana'?\n")
        let both = try Self.track(config: config, ["--service", "adobe", "--event", "click", "--account", "dana", "--ecid", "e"],
                                  payloads: [Self.iosPayload])
        #expect(both.status == 64)
        #expect(both.stderr.contains("give --account or --ecid, not both"))
        #expect(adobe.requests.isEmpty)
    }

    @Test func aPayloadThatCannotBeReadStopsEverything() throws {
        let adobe = try FakeAdobeServer()
        let result = try Self.track(config: Self.config(adobe.baseURL), ["--service", "adobe", "--event", "click", "--account", "dana"],
                                    payloads: [Self.iosPayload, #"{"_mId": "m", "_dId": }"#, "[1]"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("p2.json is not JSON (unexpected character at byte 23)\n"), "\(result.stderr)")
        #expect(result.stderr.contains("p3.json is not a JSON object (a push payload is one)\n"))
        #expect(result.stderr.hasSuffix("track: nothing was sent\n"))
        #expect(adobe.requests.isEmpty)
    }

    @Test func anECIDMadeOfASecretIsMaskedWhereverItIsShownAndSentAsItIs() throws {
        let adobe = try FakeAdobeServer()
        let config = Self.config(adobe.baseURL).replacingOccurrences(of: """
              - username: erin
            """, with: """
              - username: hank
                secretEcid: s3cret-ecid
                services:
                  adobe: {ecid: "%account[secretEcid]%"}
              - username: erin
            """)
        let arguments = ["--service", "adobe", "--event", "click", "--account", "hank"]
        let dry = try Self.track(config: config, arguments + ["--dry-run"], payloads: [Self.iosPayload])
        #expect(dry.stdout.contains("GET /r/?id=h138a,56c4,2&mcId=******** HTTP/1.1\n"), "\(dry.stdout)")
        let directory = TemporaryDirectory()
        let preview = try ProcessRunner.pushreporter(["preview", "--config", directory.write("c.yaml", config), "--account", "hank"])
        #expect(preview.stdout.contains("mcId=********"))
        let sent = try Self.track(config: config, arguments, payloads: [Self.iosPayload])
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(adobe.hits.first?.ecid == "s3cret-ecid")
        for output in [dry.stdout, dry.stderr, preview.stdout, preview.stderr, sent.stdout, sent.stderr] {
            #expect(!output.contains("s3cret"))
        }
    }
}
