import _CryptoExtras
import Crypto
import FoundationEssentials
import PushBackend
@testable import PushFCM
import PushTestSupport
import PushTransport
import Testing
import PushTestThreads

/// What FCM's answers mean (SPEC §9.3, §10), the signed assertion, and what `status` shows.
@Suite(.blockingThreads) struct FCMAnswerTests {
    static func judge(_ status: Int, _ body: String, headers: [(name: String, value: String)] = []) -> String {
        let exchange = FCMSender(target: FCMTarget(service: "fcm", endpoint: "https://f.example/fcm/notification", projectId: "p",
                                                     credential: .serverKey("k")),
                                   group: "g", memory: FCMMemory(), transport: ScriptedTransport(numbered: { _ in 500 }), timeout: .seconds(1), wallClock: { 0 })
        switch exchange.judge(TransportResponse(status: status, headers: headers, body: Array(body.utf8)), secrets: ["k-secret"]) {
        case .key(let key): return "key \(key)"
        case .alreadyExists: return "already exists"
        case .notFound: return "not found"
        case .noValidIDs: return "no valid ids"
        case .outcome(.retry(let failure)): return "retry: \(failure.reason)\(failure.retryAfter == nil ? "" : " (Retry-After)")"
        case .outcome(let other): return "\(other)"
        }
    }

    @Test func onlyA200WithAKeyIsSuccessAndFCMsErrorsAreMatchedWithoutCase() {
        #expect(Self.judge(200, #"{"notification_key":"APA91bK"}"#) == "key APA91bK")
        #expect(Self.judge(200, "{}") == "retry: HTTP 200, but the answer has no notification_key")
        #expect(Self.judge(200, #"{"notification_key":""}"#) == "retry: HTTP 200, but the answer has no notification_key")
        #expect(Self.judge(400, #"{"error":"Notification_Key Already Exists"}"#) == "already exists")
        #expect(Self.judge(400, #"{"error":" notification_key not found "}"#) == "not found")
        #expect(Self.judge(400, #"{"error":"NO VALID REGISTRATION IDS"}"#) == "no valid ids")
        #expect(Self.judge(400, #"{"error":"something else"}"#) == #"retry: HTTP 400: {"error":"something else"}"#)
        #expect(Self.judge(400, #"{"error":"echoes k-secret"}"#) == "retry: HTTP 400", "an answer repeating a secret is not quoted")
        #expect(Self.judge(429, "", headers: [("Retry-After", "7")]) == "retry: HTTP 429 (Retry-After)")
        #expect(Self.judge(503, "") == "retry: HTTP 503")
        #expect(Self.judge(500, #"{"notification_key":"x"}"#) == "retry: HTTP 500")
    }

    @Test func theAssertionIsRS256OverTheClaimsAndVerifiesWithThePublicKey() throws {
        let key = try ServiceAccountKey.parse(LoadedFCM.serviceAccount(tokenURI: "https://oauth2.googleapis.com/token"), tokenURI: nil)
        let assertion = try ServiceAccountAssertion.make(key, now: 1_800_000_000)
        #expect(!assertion.contains("=") && !assertion.contains("+") && !assertion.contains("/"), "base64url without padding")
        let jwt = try #require(FakeFCMServer.JWT(assertion))
        #expect(jwt.headerKeys == ["alg", "typ", "kid"])
        #expect(jwt.header["kid"] as? String == "kid-1")
        #expect(jwt.claims["iss"] as? String == "agent@p-1.iam.gserviceaccount.com")
        #expect(jwt.claims["aud"] as? String == "https://oauth2.googleapis.com/token")
        #expect(jwt.claims["iat"] as? Int == 1_800_000_000)
        #expect(jwt.claims["exp"] as? Int == 1_800_003_600)
        let publicKey = LoadedFCM.privateKey.publicKey
        #expect(publicKey.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: jwt.signature),
                                           for: SHA256.hash(data: Array(jwt.signedPart.utf8)), padding: .insecurePKCS1v1_5))
        let overridden = try ServiceAccountKey.parse(LoadedFCM.serviceAccount(tokenURI: "https://o.example/t"), tokenURI: "http://127.0.0.1:1/t")
        #expect(overridden.tokenURI == "http://127.0.0.1:1/t", "tokenUri goes over the key file's token_uri")
    }

    @Test func statusShowsEachGroupWithItsMembersAndTheStartOfItsMostKeptKey() throws {
        let backend = FCMBackend()
        let family = GroupID(endpoint: "https://e", projectId: "p", group: "family")
        let kept = [
            KeptData(account: "a", service: "fcm", data: KeptGroup(family, key: "APA91bOLDKEY-1").text),
            KeptData(account: "b", service: "fcm", data: KeptGroup(family, key: "APA91bNEWKEY-2").text),
            KeptData(account: "c", service: "fcm", data: KeptGroup(family, key: "APA91bNEWKEY-2").text),
            KeptData(account: "d", service: "other", data: #"{"backend":"customer-insights-journeys"}"#),
        ]
        let table = try #require(backend.statusTable(kept))
        #expect(table.header == ["SERVICE", "GROUP", "MEMBERS", "KEY"])
        #expect(table.rows == [["fcm", "family", "3", "APA91bNE…"]])
        #expect(backend.statusTable([kept[3]]) == nil)
        backend.restore(kept)
        #expect(backend.memory.key(family) == "APA91bOLDKEY-1" || backend.memory.key(family) == "APA91bNEWKEY-2")
    }
}
