import PushBackend
import PushTestThreads
import PushTransport
import Testing

/// SPEC §14: what `plan` names as changed, from the digests the state keeps of a delivery's
/// parts, never their values.
@Suite(.blockingThreads) struct DeliveredPartsTests {
    static func parts(_ url: String, headers: [(name: String, value: String)] = [], body: String? = nil) -> DeliveredParts {
        var request = TransportRequest(method: "POST", url: url, headers: headers, timeout: .zero)
        request.body = body.map { Array($0.utf8) }
        var parts = DeliveredParts()
        parts.add(request)
        return parts
    }

    /// The names of `parts`, from what the state would keep of them.
    static func names(_ parts: DeliveredParts) -> [String] {
        parts.signature(fingerprint: "f").split(separator: "\n").dropFirst().map { String($0.dropFirst(17)) }
    }

    @Test func eachQueryParameterHeaderAndJSONMemberIsAPartOfItsOwn() {
        let parts = Self.parts("https://r.example/p?u=alice&t=T1&t=T2&flag", headers: [("Authorization", "Bearer s3cret")],
                               body: #"{"token": "T1", "nested": {"a": [1, "}"]}, "n": 3}"#)
        #expect(Self.names(parts) == ["method", "url", "query u", "query t", "query t (2)", "query flag", "header authorization",
                                      "body.token", "body.nested", "body.n"])
        // Not one object: the body is one part; an empty object has none.
        #expect(Self.names(Self.parts("http://h/", body: "[1, 2]")).last == "body")
        #expect(Self.names(Self.parts("http://h/", body: #"{"a": 1"#)).last == "body")
        #expect(Self.names(Self.parts("http://h/", body: "{}")) == ["method", "url"])
    }

    @Test func changesNameWhatDiffersAndTheSignatureHoldsNoValue() {
        let before = Self.parts("https://r.example/p?u=alice&t=T1", headers: [("X-Key", "s3cret-value")], body: #"{"a":"x","b":1}"#)
        let stored = before.signature(fingerprint: "0123456789abcdef0123")
        #expect(!stored.contains("s3cret") && !stored.contains("T1") && !stored.contains("alice") && !stored.contains("\"x\""))
        #expect(stored.hasPrefix("0123456789abcdef\n"))

        let after = Self.parts("https://r.example/p?u=alice&t=T2&new=1", headers: [("x-key", "other")], body: #"{"a": "x", "b": 2}"#)
        #expect(DeliveredParts.changes(stored: stored, deliveredFingerprint: "0123456789abcdef0123", now: after)
            == ["body.b", "header x-key", "query new", "query t"])
        #expect(DeliveredParts.changes(stored: stored, deliveredFingerprint: "0123456789abcdef0123", now: before) == [])
        // Kept beside another delivery than the one delivered: not read.
        #expect(DeliveredParts.changes(stored: stored, deliveredFingerprint: "ffff456789abcdef0123", now: after) == nil)
        #expect(DeliveredParts.changes(stored: "0123456789abcdef\nnospace", deliveredFingerprint: "0123456789abcdef", now: after) == nil)
    }

    /// A fingerprint written now is 15 characters: the signature's first line is all of it, and
    /// read for that delivery only. (One an earlier version kept beside 64 hex digits is read in
    /// this form by the stores: `StateStoreConformanceTests`.)
    @Test func aSignatureBesideAFingerprintOf15CharactersIsReadForItsDelivery() {
        let before = Self.parts("https://r.example/p?u=alice&t=T1")
        let after = Self.parts("https://r.example/p?u=alice&t=T2")
        let now = before.signature(fingerprint: "g9ZlGoBxh8Co0RL")
        #expect(now.hasPrefix("g9ZlGoBxh8Co0RL\n"))
        #expect(DeliveredParts.changes(stored: now, deliveredFingerprint: "g9ZlGoBxh8Co0RL", now: after) == ["query t"])
        #expect(DeliveredParts.changes(stored: now, deliveredFingerprint: "I-Y58_2fKEnVZU2", now: after) == nil)
    }
}
