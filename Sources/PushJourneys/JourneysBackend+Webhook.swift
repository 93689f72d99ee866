import Crypto
import FoundationEssentials
import PushBackend

extension JourneysBackend: WebhookReceiver {
    public var webhookPath: String { "journeys" }

    /// The status webhook (SPEC §9.2): `{"Status","Signature","FailureReason"}`, where `Signature`
    /// is HMAC-SHA256 of the exact callback URL the registration sent, keyed with the API token,
    /// as lower or upper hex or base64; compared in constant time. Anything else is refused and
    /// changes nothing.
    public func webhook(body: [UInt8], delivery: SubscriptionRequest) -> WebhookAnswer {
        struct Call: Decodable {
            var Status: String?
            var Signature: String?
            var FailureReason: String?
        }
        guard let item = delivery.payload as? JourneysItem,
              let callback = item.headers.first(where: { $0.name == "x-ms-callback-url" })?.value,
              let token = item.secrets.first else {
            return .refused(status: 401, reason: "this registration named no callback URL")
        }
        guard let call = try? JSONDecoder().decode(Call.self, from: Data(body)) else {
            return .refused(status: 400, reason: "the body is not the status webhook's JSON")
        }
        let expected = Array(HMAC<SHA256>.authenticationCode(for: Array(callback.utf8), using: SymmetricKey(data: Array(token.utf8))))
        guard let given = call.Signature.flatMap(Self.signatureBytes), Self.equalInConstantTime(given, expected) else {
            return .refused(status: 401, reason: "the signature does not match")
        }
        return .settled(JourneysPoller.outcome(.init(Status: call.Status, FailureReason: call.FailureReason)))
    }

    /// The 32 bytes a signature written as hex (either case) or base64 stands for; nil otherwise.
    static func signatureBytes(_ text: String) -> [UInt8]? {
        let trimmed = text.trimmingSpaces
        if trimmed.utf8.count == 64, let bytes = hexBytes(trimmed) { return bytes }
        if let decoded = Data(base64Encoded: trimmed), decoded.count == 32 { return Array(decoded) }
        return nil
    }

    private static func hexBytes(_ text: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        var high: UInt8?
        for byte in text.utf8 {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let first = high {
                bytes.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return bytes
    }

    /// Whether `a` and `b` are equal, in a time that depends on their length only.
    static func equalInConstantTime(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
