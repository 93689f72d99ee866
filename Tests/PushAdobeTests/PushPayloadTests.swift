import PushAdobe
import Testing
import PushTestThreads

/// Reading the tracking values of both shapes of seed 003 (and the spool's instructions).
@Suite(.blockingThreads) struct PushPayloadTests {
    static func payload(_ json: String) throws(PushPayload.Unreadable) -> PushPayload {
        try PushPayload(json: Array(json.utf8))
    }

    @Test func iOSHasThemBesideAps() throws {
        let payload = try Self.payload(#"{"aps":{"alert":"hi"},"_dId":"56c4","_mId":"h138a","_acsDeliveryTracking":"on"}"#)
        #expect(payload.shape == .ios)
        #expect(payload.messageId == "h138a" && payload.deliveryId == "56c4" && payload.deliveryTracking == "on")
        #expect(payload.whyNotTracked.isEmpty)
    }

    @Test(arguments: [
        #"{"collapseKey":"1","data":{"_dId":"d","_mId":"m","badge":1817}}"#,
        #"{"to":"token","priority":"high","data":{"_dId":"d","_mId":"m"}}"#,
        #"{"message":{"token":"t","data":{"_dId":"d","_mId":"m"}}}"#,
    ])
    func androidHasThemInData(json: String) throws {
        let payload = try Self.payload(json)
        #expect(payload.shape == .android)
        #expect(payload.messageId == "m" && payload.deliveryId == "d")
    }

    @Test func aSpoolFileCarriesItsInstructionsAndMayWrapThePayload() throws {
        let payload = try Self.payload(#"{"event":"open","service":"adobe","account":"dana","payload":{"data":{"_mId":"m","_dId":7}}}"#)
        #expect(payload.event == "open" && payload.service == "adobe" && payload.account == "dana" && payload.ecid == nil)
        #expect(payload.deliveryId == "7", "a whole number is read as its digits")
        #expect(payload.shape == .android)
    }

    @Test func whatIsNotTrackedSaysWhy() throws {
        #expect(try Self.payload(#"{"_mId":"m","_dId":"d","_acsDeliveryTracking":"Off"}"#).whyNotTracked
            == ["_acsDeliveryTracking is 'Off', not on"])
        #expect(try Self.payload(#"{"_mId":"m","_dId":"d","_acsDeliveryTracking":"oN"}"#).whyNotTracked.isEmpty, "on in any case")
        #expect(try Self.payload(#"{"_mId":"m","_dId":""}"#).whyNotTracked == ["the payload carries no _dId"])
        #expect(try Self.payload(#"{"_mId":{"a":1},"_dId":"d"}"#).whyNotTracked == ["_mId is an object, not text"])
        #expect(try Self.payload(#"{"aps":{}}"#).shape == .none)
    }

    @Test func whatIsNotAPayloadIsSaidAsASentence() {
        #expect(throws: PushPayload.Unreadable.self) { try Self.payload("[1, 2]") }
        do {
            _ = try Self.payload(#"{"a": }"#)
        } catch {
            #expect(error.reason == "is not JSON (unexpected character at byte 7)")
        }
    }

    @Test func aStreamIsSplitIntoItsDocumentsWhateverTheirLayout() {
        let text = """
            {"a":"}{"}
            {
              "b": [1, {"c": "\\""}]
            }

            {"d":1}{"e":2} 42
            """
        let documents = PushPayload.documents(in: Array(text.utf8))
        #expect(documents.map(\.line) == [1, 2, 6, 6, 6])
        #expect(documents.map { String(decoding: $0.bytes, as: UTF8.self) }
            == [#"{"a":"}{"}"#, "{\n  \"b\": [1, {\"c\": \"\\\"\"}]\n}", #"{"d":1}"#, #"{"e":2}"#, "42"])
    }

    @Test func aLineThatIsNotJSONIsOneDocument() {
        // `not json` was two documents, each said to be not JSON.
        let documents = PushPayload.documents(in: Array("not json at all\n{\"a\":1}\n".utf8))
        #expect(documents.map(\.line) == [1, 2])
        #expect(documents.map { String(decoding: $0.bytes, as: UTF8.self) } == ["not json at all", #"{"a":1}"#])
    }
}
