@testable import PushAcrobits
import PushBackend
import Testing
import PushState
import PushTestThreads

/// The fingerprint is kept in the state database and compared after a restart or reload: the
/// bytes it hashes must not change, however it is computed. The expected values are SHA-256 of
/// the fields each followed by a NUL byte, computed independently (Python's hashlib), written as
/// the first 15 characters of the base64url of its first 12 bytes (`FingerprintText`).
@Suite(.blockingThreads) struct FingerprintTests {
    @Test func aPostWithEverySentFieldHashesTheFieldsEachEndedByANul() {
        let request = RenderedRequest(account: "johndow", reporter: "pushTokenReporter", method: "POST",
                                      url: "https://push.example.com/v1/token/johndow",
                                      headers: [("User-Agent", "pushreporter/1.0"), ("Content-Type", "application/json")],
                                      body: #"{"token":"Udl99X2JFP1bWwS5gR/wGeLE1hmAB2CMpr1Ej0wxkrY="}"#,
                                      credentials: .init(username: "digest-user", password: "s3cret"), timeout: .seconds(10))
        // SHA-256 65c21033e2efe866873f2d82a17baf1becd60ed464ee65381331aed7e9e85d69
        #expect(RequestBuilder.fingerprint(of: request) == "ZcIQM-Lv6GaHPy2")
    }

    @Test func aGetWithoutBodyCredentialsOrTimeoutHashesTheirPlaceholders() {
        let request = RenderedRequest(account: "johndow", reporter: "pushTokenReporter", method: "GET",
                                      url: "https://prov.example.com/token/?username=johndow",
                                      headers: [("User-Agent", "pushreporter/1.0")], body: nil)
        // SHA-256 83d6651a807187c0a8d112e366a01f88f5ab4014ce5d59aab5fdb63ff0017b00
        #expect(RequestBuilder.fingerprint(of: request) == "g9ZlGoBxh8Co0RL")
    }

    @Test func everyBackendsFingerprintIsLowerCaseHexOfTheDigest() {
        // Python: hashlib.sha256(b'alice\x00journeys\x00').hexdigest(), and of b''.
        #expect(Fingerprint.sha256(["alice", "journeys"]) == "23e639f3fd9f2849d5654dad5a73a7974e4f54dc053eea151d460d26ad56fc05")
        #expect(Fingerprint.sha256([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Fingerprint.hex([0x00, 0x0f, 0xa0, 0xff]) == "000fa0ff")
        #expect(Fingerprint.hex([]) == "")
        // Python: base64.urlsafe_b64encode(hashlib.sha256(b'alice\x00journeys\x00').digest()[:12])[:15]
        #expect(Fingerprint.subscription(["alice", "journeys"]) == "I-Y58_2fKEnVZU2")
    }

    /// A state written before holds 64 hex digits of the digest: read in the form written now,
    /// it is the fingerprint the same request has now, so an upgrade sends nothing again.
    @Test func aFingerprintOfAnEarlierStateReadsAsTheSameFingerprintNow() {
        let legacy = Fingerprint.sha256(["alice", "journeys"])
        #expect(FingerprintText.current(legacy) == Fingerprint.subscription(["alice", "journeys"]))
        #expect(FingerprintText.current("83d6651a807187c0a8d112e366a01f88f5ab4014ce5d59aab5fdb63ff0017b00") == "g9ZlGoBxh8Co0RL")
        // Bytes that read as the last characters of the alphabet, '-' and '_', and as its first, 'A'.
        #expect(FingerprintText.current("fafbfcfdfeff000102030405" + String(repeating: "0", count: 40)) == "-vv8_f7_AAECAwQ")
        // Anything else is left as it is: a fingerprint written now, or not a digest at all.
        for other in ["I-Y58_2fKEnVZU2", "f-alice", "refused:" + legacy, String(repeating: "g", count: 64),
                      String(legacy.dropLast()) + "A"] {
            #expect(FingerprintText.current(other) == other)
        }
        #expect(FingerprintText.current(nil as String?) == nil)
    }
}
