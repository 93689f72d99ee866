import _CryptoExtras
import Crypto
import FoundationEssentials
import PushConfig

/// The JWT a service account signs to ask for an access token (SPEC §9.3, RFC 7523): RS256
/// (RSASSA-PKCS1-v1_5 with SHA-256) over `{"alg":"RS256","typ":"JWT"[,"kid"]}` and
/// `{"iss","scope","aud","iat","exp"}`, valid for one hour.
enum ServiceAccountAssertion {
    /// The scope FCM's device-group API takes.
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// How long an assertion is valid: the most Google accepts.
    static let lifetime: Int64 = 3600

    /// The signed assertion of `key` issued at `now` (Unix seconds); throws when the key cannot sign.
    static func make(_ key: ServiceAccountKey, now: Int64) throws -> String {
        var header: [(String, String)] = [("alg", JSONText.string("RS256")), ("typ", JSONText.string("JWT"))]
        if let kid = key.privateKeyId, !kid.isEmpty { header.append(("kid", JSONText.string(kid))) }
        let claims: [(String, String)] = [
            ("iss", JSONText.string(key.clientEmail)), ("scope", JSONText.string(scope)), ("aud", JSONText.string(key.tokenURI)),
            ("iat", String(now)), ("exp", String(now + lifetime)),
        ]
        let signed = base64URL(Array(JSONText.compactObject(header).utf8)) + "." + base64URL(Array(JSONText.compactObject(claims).utf8))
        let privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: key.privateKey)
        let signature = try privateKey.signature(for: SHA256.hash(data: Array(signed.utf8)), padding: .insecurePKCS1v1_5)
        return signed + "." + base64URL(signature.withUnsafeBytes { Array($0) })
    }

    /// Base64url without padding (RFC 7515 §2).
    static func base64URL(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        while text.hasSuffix("=") { text.removeLast() }
        return String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }
}
