import PushBackend
import PushTestThreads
import PushTransport
import PushState
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

    /// Digests an earlier version kept (beside 64 hex digits of the fingerprint) are read for the
    /// same delivery's fingerprint as it is written now, and for no other.
    @Test func digestsKeptBeforeFingerprintsWereShortenedAreRead() {
        let before = Self.parts("https://r.example/p?u=alice&t=T1")
        let after = Self.parts("https://r.example/p?u=alice&t=T2")
        let legacy = "83d6651a807187c0a8d112e366a01f88f5ab4014ce5d59aab5fdb63ff0017b00"
        let stored = before.signature(fingerprint: legacy)
        #expect(DeliveredParts.changes(stored: stored, deliveredFingerprint: FingerprintText.current(legacy), now: after) == ["query t"])
        #expect(DeliveredParts.changes(stored: stored, deliveredFingerprint: "I-Y58_2fKEnVZU2", now: after) == nil)
        // Written now, beside the fingerprint's own 15 characters.
        let now = before.signature(fingerprint: "g9ZlGoBxh8Co0RL")
        #expect(DeliveredParts.changes(stored: now, deliveredFingerprint: "g9ZlGoBxh8Co0RL", now: after) == ["query t"])
    }
}
