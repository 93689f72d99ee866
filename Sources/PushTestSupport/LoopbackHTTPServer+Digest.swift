import Crypto
import Foundation
import PushListener

/// HTTP authentication for handlers: challenges to answer with, and checks of what a client sent.
///
/// ```swift
/// let server = try LoopbackHTTPServer { request, _ in
///     LoopbackHTTPServer.isDigestAuthorized(request, username: "bob", password: "secret", realm: "push", nonce: "n0nce")
///         ? .status(204) : LoopbackHTTPServer.digestChallenge(realm: "push", nonce: "n0nce")
/// }
/// ```
extension LoopbackHTTPServer {
    /// A 401 with `WWW-Authenticate: Digest realm="…", qop="auth", nonce="…", algorithm=MD5`
    /// (RFC 7616 with MD5, as RFC 2617 clients such as curl answer it) and an empty body.
    public static func digestChallenge(realm: String, nonce: String) -> Reply {
        .status(401, headers: [("WWW-Authenticate",
                                "Digest realm=\(quoted(realm)), qop=\"auth\", nonce=\(quoted(nonce)), algorithm=MD5")])
    }

    /// Whether `request` has an `Authorization: Digest …` answer to `digestChallenge(realm:nonce:)`
    /// that proves `username` knows `password`.
    ///
    /// The answer must name `username`, `realm` and `nonce`, have `uri` equal to the request
    /// target, `qop=auth` with an 8-hex-digit `nc` and a `cnonce`, algorithm MD5 (or none), and
    /// `response` = MD5(HA1:nonce:nc:cnonce:auth:HA2) with HA1 = MD5(username:realm:password)
    /// and HA2 = MD5(method:uri), in lowercase hex. Nonce counts are not tracked.
    public static func isDigestAuthorized(_ request: Request, username: String, password: String,
                                          realm: String, nonce: String) -> Bool {
        guard let credentials = request.header("Authorization").flatMap({ authorization($0, scheme: "Digest") }),
              let parameters = authParameters(credentials),
              parameters["username"] == username, parameters["realm"] == realm, parameters["nonce"] == nonce,
              let uri = parameters["uri"], uri == request.target,
              (parameters["algorithm"] ?? "MD5").uppercased() == "MD5",
              parameters["qop"]?.lowercased() == "auth",
              let count = parameters["nc"], count.count == 8, count.allSatisfy(\.isHexDigit),
              let clientNonce = parameters["cnonce"], !clientNonce.isEmpty,
              let response = parameters["response"] else { return false }
        let ha1 = md5Hex("\(username):\(realm):\(password)")
        let ha2 = md5Hex("\(request.method):\(uri)")
        return response.lowercased() == md5Hex("\(ha1):\(nonce):\(count):\(clientNonce):auth:\(ha2)")
    }

    /// A 401 with `WWW-Authenticate: Basic realm="…", charset="UTF-8"` and an empty body.
    public static func basicChallenge(realm: String) -> Reply {
        .status(401, headers: [("WWW-Authenticate", "Basic realm=\(quoted(realm)), charset=\"UTF-8\"")])
    }

    /// Whether `request` has `Authorization: Basic <base64 of username:password>` (RFC 7617).
    public static func isBasicAuthorized(_ request: Request, username: String, password: String) -> Bool {
        guard let credentials = request.header("Authorization").flatMap({ authorization($0, scheme: "Basic") }),
              let decoded = Data(base64Encoded: credentials.trimmingSpaces()) else { return false }
        return Array(decoded) == Array("\(username):\(password)".utf8)
    }

    /// What follows `scheme` (compared case-insensitively) and a space in an `Authorization` value.
    private static func authorization(_ value: String, scheme: String) -> Substring? {
        guard let space = value.firstIndex(of: " "), value[..<space].lowercased() == scheme.lowercased() else { return nil }
        return value[value.index(after: space)...]
    }

    /// The `name=token` and `name="quoted string"` pairs of an auth-param list, names lowercased;
    /// `nil` if the list is malformed or names a parameter twice.
    static func authParameters(_ text: Substring) -> [String: String]? {
        var parameters: [String: String] = [:]
        var rest = text[...]
        func skip(_ characters: Set<Character>) { rest = rest.drop { characters.contains($0) } }
        while true {
            skip([" ", "\t", ","])
            guard !rest.isEmpty else { return parameters }
            let name = rest.prefix { $0 != "=" && $0 != " " && $0 != "\t" && $0 != "," }
            rest = rest[name.endIndex...]
            skip([" ", "\t"])
            guard !name.isEmpty, rest.first == "=" else { return nil }
            rest = rest.dropFirst()
            skip([" ", "\t"])
            var value = ""
            if rest.first == "\"" {
                rest = rest.dropFirst()
                var closed = false
                while let character = rest.popFirst() {
                    if character == "\"" {
                        closed = true
                        break
                    }
                    if character == "\\" {
                        guard let escaped = rest.popFirst() else { return nil }
                        value.append(escaped)
                    } else {
                        value.append(character)
                    }
                }
                guard closed else { return nil }
            } else {
                let token = rest.prefix { $0 != "," && $0 != " " && $0 != "\t" }
                value = String(token)
                rest = rest[token.endIndex...]
            }
            skip([" ", "\t"])
            guard rest.isEmpty || rest.first == ",",
                  parameters.updateValue(value, forKey: name.lowercased()) == nil else { return nil }
        }
    }

    private static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    private static func md5Hex(_ text: String) -> String {
        Insecure.MD5.hash(data: Array(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
