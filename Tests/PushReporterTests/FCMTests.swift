import _CryptoExtras
import Crypto
import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// Firebase device groups (SPEC §9.3), the real binary against the fake FCM and its token
/// endpoint on 127.0.0.1: what the groups hold afterwards, what each request said, `status`.
@Suite(.serialized, .blockingThreads) struct FCMTests {
    /// The service account's key pair: made once, as making one takes a while.
    static let privateKey = try! _RSA.Signing.PrivateKey(keySize: .bits2048)

    /// A fake FCM, a service-account key file for it, and a state directory.
    final class Setup {
        let fcm: FakeFCMServer
        let files = TemporaryDirectory()
        var state: String { files.path + "/state" }

        init(serverKey: String? = nil) throws {
            fcm = try FakeFCMServer(publicKey: FCMTests.privateKey.publicKey, serverKey: serverKey)
            files.write("service-account.json", fcm.serviceAccountJSON(privateKey: FCMTests.privateKey))
        }

        /// A configuration of `accounts` (id, device token, group) with one fcm service.
        func config(_ accounts: [(id: String, token: String, group: String)],
                    credential: String = "serviceAccount: !file service-account.json", name: String = "accounts.yaml") -> String {
            let listed = accounts.map { account in
                "  - id: \(account.id)\n    username: \(account.id)\n    pushTokenOther: \(account.token)\n"
                    + "    services: {fcm: {group: \(account.group)}}\n"
            }.joined()
            return files.write(name, """
                agent:
                  retry: {initial: 100ms, multiplier: 2, max: 1s, maxRetryAfter: 5s}
                services:
                  fcm:
                    type: fcm-device-group
                    endpoint: \(fcm.endpoint)
                    projectId: \(fcm.projectId)
                    \(credential)
                accounts:
                \(listed.isEmpty ? "  []\n" : listed)
                """)
        }

        func runOnce(_ config: String, environment: [String: String] = [:]) throws -> ProcessOutput {
            try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", state], environment: environment)
        }

        func status(_ format: String = "text") throws -> String {
            try ProcessRunner.pushreporter(["status", "--state-dir", state, "--format", format]).stdout
        }

        /// The device-group requests answered since `from`, as `operation group [ids] status`.
        func operations(from: Int = 0) -> [String] {
            fcm.operations.dropFirst(from).map { "\($0.operation) \($0.group) \($0.registrationIds.sorted()) \($0.status)" }
        }
    }

    static func members(_ prefix: String, _ range: ClosedRange<Int>, group: String) -> [(id: String, token: String, group: String)] {
        range.map { (id: "\(prefix)\(String(format: "%02d", $0))", token: "token-\(prefix)\(String(format: "%02d", $0))", group: group) }
    }

    @Test func groupsAreCreatedWithOneRequestEachAndTheAccessTokenIsASignedServiceAccountJWT() throws {
        let setup = try Setup()
        let accounts = Self.members("a", 1...5, group: "family") + Self.members("b", 1...3, group: "office")
        let once = try setup.runOnce(setup.config(accounts))
        #expect(once.status == 0, "\(once.stdout)\(once.stderr)")
        #expect(setup.operations().sorted() == [
            "create family [\"token-a01\", \"token-a02\", \"token-a03\", \"token-a04\", \"token-a05\"] 200",
            "create office [\"token-b01\", \"token-b02\", \"token-b03\"] 200",
        ])
        #expect(setup.fcm.members(of: "family")?.count == 5)
        #expect(setup.fcm.members(of: "office")?.sorted() == ["token-b01", "token-b02", "token-b03"])
        let create = try #require(setup.fcm.operations.first)
        #expect(create.keyOrder == ["operation", "notification_key_name", "registration_ids"])
        #expect(create.authorization == "Bearer ya29.fake-access-token-1")
        #expect(create.accessTokenAuth == "true")
        #expect(create.projectIdHeader == FakeFCMServer.defaultProjectId)

        // One access token for every request, from one signed assertion.
        let tokenRequests = setup.fcm.tokenRequests
        #expect(tokenRequests.count == 1)
        let request = try #require(tokenRequests.first)
        #expect(request.grantType == "urn:ietf:params:oauth:grant-type:jwt-bearer")
        let jwt = try #require(request.decoded)
        let signature = _RSA.Signing.RSASignature(rawRepresentation: jwt.signature)
        #expect(Self.privateKey.publicKey.isValidSignature(signature, for: SHA256.hash(data: Array(jwt.signedPart.utf8)),
                                                            padding: .insecurePKCS1v1_5), "RS256: PKCS#1 v1.5 with SHA-256")
        #expect(jwt.headerKeys == ["alg", "typ", "kid"])
        #expect(jwt.header["alg"] as? String == "RS256")
        #expect(jwt.header["kid"] as? String == "0123456789abcdef")
        #expect(jwt.claimKeys == ["iss", "scope", "aud", "iat", "exp"])
        #expect(jwt.claims["iss"] as? String == FakeFCMServer.defaultClientEmail)
        #expect(jwt.claims["scope"] as? String == "https://www.googleapis.com/auth/firebase.messaging")
        #expect(jwt.claims["aud"] as? String == setup.fcm.tokenURL)
        let iat = try #require((jwt.claims["iat"] as? NSNumber)?.int64Value)
        let exp = try #require((jwt.claims["exp"] as? NSNumber)?.int64Value)
        #expect(exp - iat == 3600)
        #expect(abs(iat - Int64(Date().timeIntervalSince1970)) < 600)
        var tampered = jwt.signature
        tampered[0] ^= 1
        #expect(!Self.privateKey.publicKey.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: tampered),
                                                             for: SHA256.hash(data: Array(jwt.signedPart.utf8)), padding: .insecurePKCS1v1_5),
                "the check can fail")

        // status: every subscription, then each group with its members and the start of its key.
        let status = try setup.status()
        let familyKey = try #require(setup.fcm.key(of: "family"))
        let officeKey = try #require(setup.fcm.key(of: "office"))
        #expect(status.contains("""
            Firebase device groups:
            SERVICE  GROUP   MEMBERS  KEY
            fcm      family  5        \(familyKey.prefix(8))…
            fcm      office  3        \(officeKey.prefix(8))…
            """), "\(status)")
        #expect(!status.contains(familyKey), "only the start of a key is shown")
    }

    @Test func aGroupThatExistsAlreadyIsRetrievedAndAddedTo() throws {
        let setup = try Setup()
        setup.fcm.addGroup("family", members: ["token-elsewhere"])
        let once = try setup.runOnce(setup.config(Self.members("a", 1...2, group: "family")))
        #expect(once.status == 0, "\(once.stdout)\(once.stderr)")
        #expect(setup.operations() == [
            "create family [\"token-a01\", \"token-a02\"] 400",
            "retrieve family [] 200",
            "add family [\"token-a01\", \"token-a02\"] 200",
        ])
        #expect(setup.fcm.operations.first?.error == "notification_key already exists")
        #expect(setup.fcm.members(of: "family") == ["token-elsewhere", "token-a01", "token-a02"])
    }

    @Test func aChangedTokenIsAddedThenTheOldOneRemovedAndAnAccountThatLeftIsRemoved() throws {
        let setup = try Setup()
        #expect(try setup.runOnce(setup.config([("alice", "token-old", "family"), ("bob", "token-bob", "family")])).status == 0)
        #expect(setup.fcm.members(of: "family")?.sorted() == ["token-bob", "token-old"])

        // alice's phone has a new token: it joins (with bob's, both due at start: one request),
        // then the old one leaves. The key comes from the state: no create.
        let changed = try setup.runOnce(setup.config([("alice", "token-new", "family"), ("bob", "token-bob", "family")]))
        #expect(changed.status == 0, "\(changed.stdout)\(changed.stderr)")
        #expect(setup.operations(from: 1) == [
            "add family [\"token-bob\", \"token-new\"] 200",
            "remove family [\"token-old\"] 200",
        ])
        #expect(setup.fcm.operations.dropFirst().allSatisfy { $0.key == setup.fcm.key(of: "family") })
        #expect(setup.fcm.members(of: "family") == ["token-bob", "token-new"])

        // bob leaves: his token is removed.
        let left = try setup.runOnce(setup.config([("alice", "token-new", "family")]))
        #expect(left.status == 0, "\(left.stdout)\(left.stderr)")
        #expect(setup.operations(from: 3).sorted() == [
            "add family [\"token-new\"] 200",
            "remove family [\"token-bob\"] 200",
        ])
        #expect(setup.fcm.members(of: "family") == ["token-new"])
        let status = try setup.status()
        #expect(status.contains("fcm      family  1        "), "\(status)")
    }

    @Test func aTokenTwoAccountsShareStaysWhenOneOfThemLeaves() throws {
        let setup = try Setup()
        #expect(try setup.runOnce(setup.config([("alice", "token-shared", "family"), ("alice2", "token-shared", "family")])).status == 0)
        #expect(setup.operations() == ["create family [\"token-shared\"] 200"], "a token two accounts share is sent once")
        let left = try setup.runOnce(setup.config([("alice", "token-shared", "family")]))
        #expect(left.status == 0, "\(left.stdout)\(left.stderr)")
        #expect(setup.operations(from: 1) == ["add family [\"token-shared\"] 200"], "alice still has it: nothing is removed")
        #expect(setup.fcm.members(of: "family") == ["token-shared"])
    }

    @Test func aGroupFCMNoLongerFindsIsCreatedAgain() throws {
        let setup = try Setup()
        let config = setup.config(Self.members("a", 1...2, group: "family"))
        #expect(try setup.runOnce(config).status == 0)
        let firstKey = try #require(setup.fcm.key(of: "family"))
        setup.fcm.deleteGroup("family")
        let again = try setup.runOnce(config)
        #expect(again.status == 0, "\(again.stdout)\(again.stderr)")
        #expect(setup.operations(from: 1) == [
            "add family [\"token-a01\", \"token-a02\"] 400",
            "create family [\"token-a01\", \"token-a02\"] 200",
        ])
        #expect(setup.fcm.operations[1].error == "notification_key not found")
        let newKey = try #require(setup.fcm.key(of: "family"))
        #expect(newKey != firstKey)
        #expect(try setup.status().contains("fcm      family  2        \(newKey.prefix(8))…"))
    }

    @Test func moreThanTwentyMembersIsAValidateErrorAndTheTwentyFirstIsRejected() throws {
        let setup = try Setup()
        let config = setup.config(Self.members("m", 1...21, group: "big") + [("solo", "token-solo", "small")])
        let validate = try ProcessRunner.pushreporter(["validate", "--config", config])
        #expect(validate.status == 78)
        let accounts = (1...21).map { "m" + String(format: "%02d", $0) }.joined(separator: ", ")
        let message = "the device group 'big' of service 'fcm' would have 21 members, more than the 20 FCM allows (accounts \(accounts)); "
            + "the first 20 by account id are kept, so m21 is not added"
        #expect(validate.stderr.contains("\(config):93:16: error: \(message)"), "\(validate.stderr)")

        let once = try setup.runOnce(config)
        #expect(once.status == 1, "\(once.stdout)\(once.stderr)")
        #expect(once.stdout.contains("m21"), "\(once.stdout)")
        #expect(setup.fcm.members(of: "big")?.count == 20)
        #expect(setup.fcm.members(of: "big")?.contains("token-m21") == false)
        #expect(setup.fcm.members(of: "small") == ["token-solo"])
        let status = try setup.status("json")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(status.utf8)) as? [[String: Any]])
        let refused = try #require(rows.first { $0["account"] as? String == "m21" })
        #expect(refused["state"] as? String == "rejected")
        #expect(refused["detail"] as? String == message)
        #expect(rows.filter { $0["state"] as? String == "delivered" }.count == 21)
    }

    @Test func aTokenWithNoValidRegistrationIdIsRejectedAlone() throws {
        let setup = try Setup()
        setup.fcm.rejectRegistrationIds(["token-bad-1", "token-bad-2"])
        let once = try setup.runOnce(setup.config([("alice", "token-good", "family"), ("bad1", "token-bad-1", "broken"),
                                                   ("bad2", "token-bad-2", "broken")]))
        #expect(once.status == 1, "\(once.stdout)\(once.stderr)")
        // Both bad in one request: halved until each stands alone.
        #expect(setup.operations().filter { $0.contains("broken") } == [
            "create broken [\"token-bad-1\", \"token-bad-2\"] 400",
            "create broken [\"token-bad-1\"] 400",
            "create broken [\"token-bad-2\"] 400",
        ])
        let status = try setup.status()
        #expect(status.contains("bad1     fcm      rejected"), "\(status)")
        #expect(status.contains("FCM: no valid registration ids"), "\(status)")
        #expect(setup.fcm.members(of: "family") == ["token-good"])
    }

    @Test func aRefusedAccessTokenIsFetchedAgainOnce() throws {
        let setup = try Setup()
        setup.fcm.answerNext(1, of: .notification, with: .status(401, contentType: "application/json", body: #"{"error":"UNAUTHENTICATED"}"#))
        let once = try setup.runOnce(setup.config([("alice", "token-alice", "family")]))
        #expect(once.status == 0, "\(once.stdout)\(once.stderr)")
        #expect(setup.fcm.tokenRequests.map(\.issued) == ["ya29.fake-access-token-1", "ya29.fake-access-token-2"])
        let sent = setup.fcm.requests.filter { $0.path == FakeFCMServer.notificationPath }.map { $0.header("Authorization") }
        #expect(sent == ["Bearer ya29.fake-access-token-1", "Bearer ya29.fake-access-token-2"])
        #expect(setup.fcm.members(of: "family") == ["token-alice"])
    }

    @Test func anAccessTokenRefusedTwiceStopsTheService() throws {
        let setup = try Setup()
        setup.fcm.answerNext(2, of: .notification, with: .status(401))
        let once = try setup.runOnce(setup.config([("alice", "token-alice", "family"), ("bob", "token-bob", "family")]))
        #expect(once.status == 1, "\(once.stdout)\(once.stderr)")
        #expect(once.stderr.contains("refused the service's credentials (HTTP 401: FCM refused a freshly fetched access token too)"),
                "\(once.stderr)")
        #expect(setup.fcm.requests.filter { $0.path == FakeFCMServer.notificationPath }.count == 2,
                "once stopped, nothing more of the service is sent")
        #expect(setup.fcm.tokenRequests.count == 2)
        let status = try setup.status()
        #expect(status.contains("stopped"), "\(status)")
        #expect(!status.contains("ya29."), "the access token is never shown")
    }

    @Test func aKeyTheTokenEndpointRefusesStopsTheServiceAndABusyOneIsRetried() throws {
        let setup = try Setup()
        // Busy once: retried. Then signed with a key that is not the service account's.
        setup.fcm.answerNext(1, of: .token, with: .status(503, headers: [("Retry-After", "1")]))
        let stranger = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        setup.files.write("service-account.json", setup.fcm.serviceAccountJSON(privateKey: stranger))
        let once = try setup.runOnce(setup.config([("alice", "token-alice", "family")]))
        #expect(once.status == 1, "\(once.stdout)\(once.stderr)")
        #expect(once.stderr.contains("the token endpoint 127.0.0.1:\(setup.fcm.port) answered HTTP 503 (attempt 1)"), "\(once.stderr)")
        #expect(once.stderr.contains("the token endpoint 127.0.0.1:\(setup.fcm.port) refused the service account "
                                     + "\(FakeFCMServer.defaultClientEmail) (HTTP 400: invalid_grant: Invalid JWT Signature.)"), "\(once.stderr)")
        #expect(setup.fcm.tokenRequests.map(\.refusal) == ["Invalid JWT Signature."])
        #expect(setup.fcm.operations.isEmpty, "nothing reaches FCM without a token")
        #expect(try setup.status().contains("stopped"))
    }

    @Test func theLegacyServerKeyIsSentAsKeyWithAWarning() throws {
        let setup = try Setup(serverKey: "legacy-server-key-1")
        let config = setup.config([("alice", "token-alice", "family")], credential: "serverKey: !env FCM_SERVER_KEY")
        let environment = ["FCM_SERVER_KEY": "legacy-server-key-1"]
        let validate = try ProcessRunner.pushreporter(["validate", "--config", config], environment: environment)
        #expect(validate.status == 0, "\(validate.stderr)")
        #expect(validate.stderr.contains("\(config):8:21: warning: service 'fcm': Google has shut the legacy FCM server keys down"),
                "\(validate.stderr)")
        #expect(validate.stderr.contains("\(config):5:5: warning: Google deprecates Firebase device group messaging: new projects cannot onboard device groups after 2026-12-01, and device groups will be removed on 2027-09-29"),
                "\(validate.stderr)")
        #expect(!validate.stderr.contains("legacy-server-key-1"))
        let once = try setup.runOnce(config, environment: environment)
        #expect(once.status == 0, "\(once.stdout)\(once.stderr)")
        let create = try #require(setup.fcm.operations.first)
        #expect(create.authorization == "key=legacy-server-key-1")
        #expect(create.accessTokenAuth == nil)
        #expect(create.projectIdHeader == FakeFCMServer.defaultProjectId)
        #expect(setup.fcm.tokenRequests.isEmpty)
        #expect(!(once.stdout + once.stderr).contains("legacy-server-key-1"))
    }

    @Test func theRunningAgentFollowsReloadsAndKeepsOneAccessToken() throws {
        let setup = try Setup()
        let config = setup.config([("alice", "token-old", "family"), ("bob", "token-bob", "family"), ("carol", "token-carol", "family")])
        let agent = try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", setup.state])
        #expect(agent.waitForStderr("all 3 accounts are reported"), "\(agent.stderr)")
        #expect(setup.operations() == [#"create family ["token-bob", "token-carol", "token-old"] 200"#])

        // alice's token changes and carol leaves: only they are sent.
        _ = setup.config([("alice", "token-new", "family"), ("bob", "token-bob", "family")])
        agent.signal(SIGHUP)
        #expect(agent.waitForStderr("reloaded: 0 new, 1 changed, 1 unchanged, 1 removed"), "\(agent.stderr)")
        #expect(Polling.until { setup.fcm.members(of: "family")?.sorted() == ["token-bob", "token-new"] }, "\(setup.operations())")
        #expect(agent.waitForStderr("all 2 accounts are reported", count: 1), "\(agent.stderr)")
        let reloaded = setup.operations(from: 1)
        let add = reloaded.firstIndex(of: #"add family ["token-new"] 200"#)
        let removeOld = reloaded.firstIndex { $0.hasPrefix("remove") && $0.contains("token-old") }
        #expect(add != nil && removeOld != nil && add! < removeOld!, "the new token joins before the old one leaves: \(reloaded)")
        #expect(Set(reloaded) == [#"add family ["token-new"] 200"#, #"remove family ["token-old"] 200"#, #"remove family ["token-carol"] 200"#]
                || Set(reloaded) == [#"add family ["token-new"] 200"#, #"remove family ["token-carol", "token-old"] 200"#], "\(reloaded)")
        #expect(setup.fcm.tokenRequests.count == 1, "the access token is kept while it lasts")

        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0, "\(agent.stderr)")
        #expect(!agent.stderr.contains("ya29."), "no access token in the log")
    }

    @Test func aBusyFCMPausesTheServiceForItsRetryAfter() throws {
        let setup = try Setup()
        setup.fcm.answerNext(1, of: .notification, with: .status(429, headers: [("Retry-After", "1")]))
        let once = try setup.runOnce(setup.config([("alice", "token-alice", "family")]))
        #expect(once.status == 0, "\(once.stdout)\(once.stderr)")
        #expect(once.stderr.contains("failed: HTTP 429 (attempt 1); next attempt in 1"), "\(once.stderr)")
        #expect(setup.fcm.members(of: "family") == ["token-alice"])
    }
}
