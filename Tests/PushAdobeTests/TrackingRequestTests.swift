@testable import PushAdobe
import PushScheduler
import PushTransport
import Testing
import PushTestThreads

/// The request the Adobe SDK sends for one action, and how its answer is judged (SPEC §9.4, §10).
@Suite(.blockingThreads) struct TrackingRequestTests {
    static func request(_ action: TrackingAction = .click, messageId: String = "h138a", ecid: String = "E1") -> TrackingRequest {
        TrackingRequest(service: "adobe", trackingServer: "https://track.example.com", timeout: .seconds(5), action: action,
                        messageId: messageId, deliveryId: "56c4", ecid: (ecid, ecid))
    }

    @Test func theURLIsTheCampaignExtensionsFormat() {
        #expect(Self.request(.impression).url == "https://track.example.com/r/?id=h138a,56c4,7&mcId=E1")
        #expect(Self.request(messageId: "a,b c", ecid: "x/y+z").url == "https://track.example.com/r/?id=a%2Cb%20c,56c4,2&mcId=x%2Fy%2Bz")
        let sent = Self.request().transportRequest
        #expect(sent.method == "GET" && sent.body == nil && sent.timeout == .seconds(5))
        #expect(sent.headers.map { "\($0.name): \($0.value)" } == ["User-Agent: pushreporter/0.1.0", "Accept: */*"])
    }

    @Test func aMaskedECIDIsShownAsItIsAndSentEncoded() {
        let request = TrackingRequest(service: "adobe", trackingServer: "https://t.example", timeout: .seconds(5), action: .open,
                                      messageId: "m", deliveryId: "d", ecid: ("s e", "********"))
        #expect(request.url == "https://t.example/r/?id=m,d,1&mcId=s%20e")
        #expect(request.shownURL == "https://t.example/r/?id=m,d,1&mcId=********")
        #expect(request.rendered(account: "dana").url == request.shownURL)
    }

    @Test func theKeyIdentifiesTheRequestWithoutKeepingTheECID() {
        let key = Self.request().key
        #expect(key == Self.request().key)
        #expect(key.count == 64 && !key.contains("E1"))
        #expect(key != Self.request(.open).key && key != Self.request(ecid: "E2").key && key != Self.request(messageId: "x").key)
    }

    @Test func exactly200IsDeliveredWhatTheSDKRetriesIsRetriedAndTheRestRejected() {
        #expect(AdobeSender.judge(TransportResponse(status: 200)) == .delivered)
        for status in [201, 204, 301, 400, 401, 403, 404, 410] {
            #expect(AdobeSender.judge(TransportResponse(status: status)) == .rejected("HTTP \(status)"))
        }
        for status in [408, 429, 500, 503, 504] {
            #expect(AdobeSender.judge(TransportResponse(status: status)) == .retry(.http(status)))
        }
        #expect(AdobeSender.judge(TransportResponse(status: 429, headers: [("Retry-After", "7")]))
            == .retry(.http(429, retryAfter: .seconds(7))))
        #expect(AdobeSender.judge(TransportResponse(status: 500, headers: [("Retry-After", "7")])) == .retry(.http(500)),
                "Retry-After is honoured with 429 and 503 only")
    }
}
