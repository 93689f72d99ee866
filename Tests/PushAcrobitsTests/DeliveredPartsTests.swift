import PushBackend
import PushTestThreads
import PushTransport
import Testing

/// SPEC §14: what `plan` names as changed, from the digests the state keeps of a delivery's
/// parts, never their values.
@Suite(.blockingThreads) struct DeliveredPartsTests {
    static func request(_ url: String, headers: [(name: String, value: String)] = [], body: String? = nil) -> TransportRequest {
        var request = TransportRequest(method: "POST", url: url, headers: headers, timeout: .zero)
        request.body = body.map { Array($0.utf8) }
        return request
    }

    @Test func eachQueryParameterHeaderAndJSONMemberIsAPartOfItsOwn() {
        let parts = DeliveredParts.parts(of: Self.request(
            "https://r.example/p?u=alice&t=T1&t=T2", headers: [("Authorization", "Bearer s3cret")],
            body: #"{"token": "T1", "nested": {"a": [1, 2]}, "n": 3}"#))
        #expect(parts.map(\.name) == ["method", "url", "query u", "query t", "query t (2)", "header authorization",
                                      "body.token", "body.nested", "body.n"])
        #expect(parts.map(\.value) == ["POST", "https://r.example/p", "alice", "T1", "T2", "Bearer s3cret",
                                       #""T1""#, #"{"a": [1, 2]}"#, "3"])
        // Not one object: the body is one part.
        #expect(DeliveredParts.bodyParts("[1, 2]").map(\.name) == ["body"])
        #expect(DeliveredParts.bodyParts(#"{"a": 1"#).map(\.name) == ["body"])
        #expect(DeliveredParts.bodyParts("{}").isEmpty)
    }

    @Test func changesNameWhatDiffersAndTheSignatureHoldsNoValue() {
        let before = DeliveredParts.parts(of: Self.request("https://r.example/p?u=alice&t=T1", headers: [("X-Key", "s3cret-value")]))
        let stored = DeliveredParts.signature(before, fingerprint: "0123456789abcdef0123")
        #expect(!stored.contains("s3cret") && !stored.contains("T1") && !stored.contains("alice"))
        #expect(stored.hasPrefix("0123456789abcdef\n"))

        let after = DeliveredParts.parts(of: Self.request("https://r.example/p?u=alice&t=T2&new=1", headers: [("X-Key", "other")]))
        #expect(DeliveredParts.changes(stored: stored, deliveredFingerprint: "0123456789abcdef0123", now: after)
            == ["header x-key", "query new", "query t"])
        #expect(DeliveredParts.changes(stored: stored, deliveredFingerprint: "0123456789abcdef0123", now: before) == [])
        // Kept beside another delivery than the one delivered: not read.
        #expect(DeliveredParts.changes(stored: stored, deliveredFingerprint: "ffff456789abcdef0123", now: after) == nil)
        #expect(DeliveredParts.changes(stored: "0123456789abcdef\nnospace", deliveredFingerprint: "0123456789abcdef", now: after) == nil)
    }
}
