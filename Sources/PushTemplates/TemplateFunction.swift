import Crypto

/// The functions a placeholder may call: `%sha1(%account[password]%)%`.
///
/// `sha1`, `sha256`, `md5` and `hmac_sha256` give lower-case hex. `raw`, `urlencode`, `json` and
/// `xml` are encoding overrides: their result is inserted as it is, instead of being encoded for
/// its position.
enum TemplateFunction: String, CaseIterable, Sendable {
    case sha1, sha256, md5
    case hmac_sha256
    case base64, upper, lower, trim
    case `default`
    case raw, urlencode, json, xml

    /// How many arguments the function takes.
    var arity: Int {
        switch self {
        case .hmac_sha256, .default: 2
        default: 1
        }
    }

    /// Whether the result replaces the position's encoding.
    var isEncodingOverride: Bool {
        switch self {
        case .raw, .urlencode, .json, .xml: true
        default: false
        }
    }

    /// The signature as users write it, for messages: `hmac_sha256(key, message)`.
    var signature: String {
        switch self {
        case .hmac_sha256: "hmac_sha256(key,message)"
        case .default: "default(value,fallback)"
        default: "\(rawValue)(value)"
        }
    }

    func apply(_ args: [String]) throws(RenderError) -> String {
        switch self {
        case .sha1: return Escaper.lowerHex(Insecure.SHA1.hash(data: Array(args[0].utf8)))
        case .sha256: return Escaper.lowerHex(SHA256.hash(data: Array(args[0].utf8)))
        case .md5: return Escaper.lowerHex(Insecure.MD5.hash(data: Array(args[0].utf8)))
        case .hmac_sha256:
            let key = SymmetricKey(data: Array(args[0].utf8))
            let code = HMAC<SHA256>.authenticationCode(for: Array(args[1].utf8), using: key)
            return Escaper.lowerHex(code)
        case .base64: return Escaper.base64(Array(args[0].utf8))
        case .upper: return args[0].uppercased()
        case .lower: return args[0].lowercased()
        case .trim:
            let scalars = args[0].unicodeScalars
            guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
                  let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
            return String(scalars[first...last])
        case .default: return args[0].isEmpty ? args[1] : args[0]
        case .raw: return args[0]
        case .urlencode: return Self.encode(args[0], .urlPath)
        case .json: return Self.encode(args[0], .jsonString)
        case .xml: return try Self.encodeThrowing(args[0], .xml)
        }
    }

    private static func encode(_ value: String, _ encoding: Encoding) -> String {
        (try? encodeThrowing(value, encoding)) ?? ""
    }

    private static func encodeThrowing(_ value: String, _ encoding: Encoding) throws(RenderError) -> String {
        var out = [UInt8]()
        out.reserveCapacity(value.utf8.count + 8)
        try Escaper.append(value, as: encoding, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
