/// What the agent reads off a rendered URL's text, byte by byte (it runs for every request).
public enum URLText {
    /// Whether `text` starts with `http://` or `https://` (any case).
    public static func hasHTTPPrefix(_ text: String) -> Bool {
        var bytes = text.utf8.makeIterator()
        for expected in "http".utf8 {
            guard let byte = bytes.next(), byte | 0x20 == expected else { return false }
        }
        var next = bytes.next()
        if next.map({ $0 | 0x20 }) == UInt8(ascii: "s") { next = bytes.next() }
        return next == UInt8(ascii: ":") && bytes.next() == UInt8(ascii: "/") && bytes.next() == UInt8(ascii: "/")
    }

    /// The scheme, host (lowercased, IPv6 without brackets) and port (the scheme's when none is
    /// written) of a rendered URL; nil without `scheme://host`.
    public static func target(of url: String) -> (scheme: String, host: String, port: Int)? {
        let bytes = url.utf8
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
              bytes[colon...].starts(with: "://".utf8) else { return nil }
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
        let authorityStart = bytes.index(colon, offsetBy: 3)
        var authority = bytes[authorityStart...].prefix {
            $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#")
        }
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) { authority = authority[authority.index(after: at)...] }
        var host: Substring.UTF8View
        var rest: Substring.UTF8View
        if authority.first == UInt8(ascii: "["), let close = authority.firstIndex(of: UInt8(ascii: "]")) {
            host = authority[authority.index(after: authority.startIndex)..<close]
            rest = authority[authority.index(after: close)...]
        } else {
            host = authority.prefix { $0 != UInt8(ascii: ":") }
            rest = authority[host.endIndex...]
        }
        guard !host.isEmpty else { return nil }
        var port = scheme == "https" ? 443 : 80
        if rest.first == UInt8(ascii: ":"), let written = Int(String(decoding: rest.dropFirst(), as: UTF8.self)) {
            port = written
        }
        return (scheme, String(decoding: host, as: UTF8.self).lowercased(), port)
    }

    /// `host:port` of a URL (the scheme's port when none is written), lowercased, IPv6 in
    /// brackets: the unit of `perHostConcurrency` and what logs name. The URL itself when it
    /// has no host.
    public static func hostAndPort(of url: String) -> String {
        guard let target = target(of: url) else { return url }
        let host = target.host.contains(":") ? "[\(target.host)]" : target.host
        return "\(host):\(target.port)"
    }

    /// Whether `host` is a loopback name or address (`localhost`, `127.0.0.0/8`, `::1`).
    public static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host.hasSuffix(".localhost") || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// Whether a request to `url` may carry secrets (SPEC §2): https, or a loopback address.
    public static func maySendSecrets(to url: String) -> Bool {
        guard let target = target(of: url) else { return false }
        return target.scheme == "https" || isLoopback(target.host)
    }

    /// Why `url` cannot be a backend's endpoint setting (SPEC §9.0: https, plain http only to a
    /// loopback address; a base URL, as requests add their own path or query), or nil.
    public static func endpointProblem(_ url: String) -> String? {
        guard hasHTTPPrefix(url), let target = target(of: url) else {
            return "must be an https:// URL"
        }
        if target.scheme != "https" && !isLoopback(target.host) {
            return "must be https (plain http only to a loopback address)"
        }
        if url.dropFirst(target.scheme.count + 3).contains(where: { $0 == "?" || $0 == "#" }) {
            return "must be a base URL without a query or fragment"
        }
        return nil
    }
}
