@testable import PushAcrobits
import PushBackend
import Testing
import PushTestThreads

/// The fingerprint is kept in the state database and compared after a restart or reload: the
/// bytes it hashes must not change, however it is computed. The expected values are SHA-256 of
/// the fields each followed by a NUL byte, computed independently (Python's hashlib).
@Suite(.blockingThreads) struct FingerprintTests {
    @Test func aPostWithEverySentFieldHashesTheFieldsEachEndedByANul() {
        let request = RenderedRequest(account: "johndow", reporter: "pushTokenReporter", method: "POST",
                                      url: "https://push.example.com/v1/token/johndow",
                                      headers: [("User-Agent", "pushreporter/1.0"), ("Content-Type", "application/json")],
                                      body: #"{"token":"Udl99X2JFP1bWwS5gR/wGeLE1hmAB2CMpr1Ej0wxkrY="}"#,
                                      credentials: .init(username: "digest-user", password: "s3cret"), timeout: .seconds(10))
        #expect(RequestBuilder.fingerprint(of: request) == "65c21033e2efe866873f2d82a17baf1becd60ed464ee65381331aed7e9e85d69")
    }

    @Test func aGetWithoutBodyCredentialsOrTimeoutHashesTheirPlaceholders() {
        let request = RenderedRequest(account: "johndow", reporter: "pushTokenReporter", method: "GET",
                                      url: "https://prov.example.com/token/?username=johndow",
                                      headers: [("User-Agent", "pushreporter/1.0")], body: nil)
        #expect(RequestBuilder.fingerprint(of: request) == "83d6651a807187c0a8d112e366a01f88f5ab4014ce5d59aab5fdb63ff0017b00")
    }

    @Test func everyBackendsFingerprintIsLowerCaseHexOfTheDigest() {
        // Python: hashlib.sha256(b'alice\x00journeys\x00').hexdigest(), and of b''.
        #expect(Fingerprint.sha256(["alice", "journeys"]) == "23e639f3fd9f2849d5654dad5a73a7974e4f54dc053eea151d460d26ad56fc05")
        #expect(Fingerprint.sha256([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Fingerprint.hex([0x00, 0x0f, 0xa0, 0xff]) == "000fa0ff")
        #expect(Fingerprint.hex([]) == "")
    }
}
