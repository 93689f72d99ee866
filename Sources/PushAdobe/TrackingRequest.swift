import Crypto
import PushBackend
import PushConfig
import PushTransport

/// One tracking action as the Adobe mobile SDK sends it (SPEC §9.4, §10: the Campaign
/// extension's `CAMPAIGN_TRACKING_URL`): `GET {trackingServer}/r/?id={_mId},{_dId},{action}&mcId={ecid}`
/// with `Accept: */*`, the values query-encoded and the commas literal.
public struct TrackingRequest: Sendable {
    /// The service it is sent for.
    public var service: String
    public var action: TrackingAction
    public var messageId: String
    public var deliveryId: String
    /// The request as sent.
    public var url: String
    /// The request with a secret ECID as `********` (what `--dry-run` and logs may show).
    public var shownURL: String
    public var timeout: Duration

    /// - Parameters:
    ///   - ecid: the Experience Cloud id as sent, and as shown: the same text, or where it holds
    ///     a secret, the text a masked rendering gave (written into the shown URL as it is).
    public init(service: String, trackingServer: String, timeout: Duration, action: TrackingAction,
                messageId: String, deliveryId: String, ecid: (sent: String, shown: String)) {
        self.service = service
        self.action = action
        self.messageId = messageId
        self.deliveryId = deliveryId
        self.timeout = timeout
        let ids = [messageId, deliveryId, action.rawValue].map(Self.queryEncoded).joined(separator: ",")
        let base = Self.base(trackingServer, ids: ids)
        url = base + Self.queryEncoded(ecid.sent)
        shownURL = ecid.shown == ecid.sent ? url : base + ecid.shown
    }

    /// `{trackingServer}/r/?id={ids}&mcId=`.
    static func base(_ trackingServer: String, ids: String) -> String {
        trackingServer + "/r/?id=" + ids + "&mcId="
    }

    /// `host:port`: what logs name, and the unit of `perHostConcurrency`.
    public var host: String { URLText.hostAndPort(of: url) }

    /// What identifies the action for sending it once: a digest of the request (server, ids,
    /// action and ECID), so that no ECID is kept in the clear.
    public var key: String {
        SHA256.hash(data: Array(("GET " + url).utf8)).map { byte in
            let digits = Array("0123456789abcdef".utf8)
            return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]], as: UTF8.self)
        }.joined()
    }

    /// The headers, in sending order.
    static let headers: [(name: String, value: String)] = [("User-Agent", PushReporterVersion.userAgent), ("Accept", "*/*")]

    /// What the transport sends.
    public var transportRequest: TransportRequest {
        TransportRequest(method: "GET", url: url, headers: Self.headers, timeout: timeout)
    }

    /// The request as `preview` and `track --dry-run` print it, secrets masked.
    public func rendered(account: String) -> RenderedRequest {
        RenderedRequest(account: account, service: service, reporter: service, method: "GET", url: shownURL,
                        headers: Self.headers, body: nil, timeout: timeout)
    }

    /// `text` for a URL query (SPEC §3): every byte but the unreserved ones, `:` and `@`
    /// percent-encoded.
    static func queryEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            if Self.keptInQuery(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0x0F, radix: 16, uppercase: true)
            }
        }
        return out
    }

    private static func keptInQuery(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            "-._~:@".utf8.contains(byte)
        }
    }
}
