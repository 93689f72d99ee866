import Foundation

extension FakeFCMServer {
    /// The fake's two endpoints, for scripting.
    public enum Endpoint: Sendable, Hashable {
        /// `/fcm/notification`: create, add, remove and retrieve.
        case notification
        /// `/token`: the OAuth 2 token endpoint.
        case token
    }

    /// One device-group request as the fake answered it.
    public struct Operation: Sendable {
        /// `create`, `add`, `remove`, or `retrieve` (the GET by name).
        public var operation: String
        public var group: String
        /// The `notification_key` it named (add, remove); nil for create and retrieve.
        public var key: String?
        public var registrationIds: [String]
        /// The status answered, and the `error` of a 400 (or the reason of a 401, in the fake's words).
        public var status: Int
        public var error: String?
        /// The headers that authorised it.
        public var authorization: String?
        public var accessTokenAuth: String?
        public var projectIdHeader: String?
        /// The JSON keys of the body, in the order sent.
        public var keyOrder: [String]
        /// Its index among all requests the server received.
        public var requestIndex: Int
    }

    /// One request to the token endpoint.
    public struct TokenRequest: Sendable {
        /// The `assertion` form value: the JWT as sent.
        public var assertion: String
        /// The `grant_type` form value.
        public var grantType: String?
        /// The access token issued for it; nil when it was refused.
        public var issued: String?
        /// Why it was refused, in the fake's words.
        public var refusal: String?
        public var requestIndex: Int

        /// The JWT's three parts decoded: header and claims as JSON objects, and the signature.
        public var decoded: JWT? { JWT(assertion) }
    }

    /// A compact JWS (`header.claims.signature`, base64url), decoded.
    public struct JWT: @unchecked Sendable {
        /// The JSON object of the header, and the keys in the order sent.
        public var header: [String: Any]
        public var headerKeys: [String]
        /// The JSON object of the claims, and the keys in the order sent.
        public var claims: [String: Any]
        public var claimKeys: [String]
        /// What the signature covers: the first two parts with their dot, as sent.
        public var signedPart: String
        public var signature: [UInt8]

        public init?(_ text: String) {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3,
                  let header = Self.base64URL(parts[0]), let claims = Self.base64URL(parts[1]), let signature = Self.base64URL(parts[2]),
                  let headerObject = try? JSONSerialization.jsonObject(with: Data(header)) as? [String: Any],
                  let claimsObject = try? JSONSerialization.jsonObject(with: Data(claims)) as? [String: Any]
            else { return nil }
            self.header = headerObject
            self.headerKeys = JSONObjectKeys.outermost(in: header).first ?? []
            self.claims = claimsObject
            self.claimKeys = JSONObjectKeys.outermost(in: claims).first ?? []
            signedPart = parts[0] + "." + parts[1]
            self.signature = signature
        }

        /// Base64url without padding, strictly: nil for another alphabet or padding.
        public static func base64URL(_ text: Substring) -> [UInt8]? {
            guard !text.contains("="), !text.contains("+"), !text.contains("/") else { return nil }
            var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while standard.count % 4 != 0 { standard += "=" }
            return Data(base64Encoded: standard).map { Array($0) }
        }
    }
}
