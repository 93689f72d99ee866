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
        var url = url
        return url.withUTF8 { target(of: $0) }
    }

    /// `target(of:)` over the URL's bytes. It runs for every request rendered, so it reads the
    /// bytes in place and makes only the two strings it returns.
    static func target(of bytes: UnsafeBufferPointer<UInt8>) -> (scheme: String, host: String, port: Int)? {
        guard let parts = authority(of: bytes), !parts.host.isEmpty else { return nil }
        let scheme = lowercased(UnsafeBufferPointer(rebasing: bytes[..<parts.schemeColon]))
        var port = scheme == "https" ? 443 : 80
        if let written = parts.port, let number = Int(String(decoding: UnsafeBufferPointer(rebasing: bytes[written]), as: UTF8.self)) {
            port = number
        }
        return (scheme, lowercased(UnsafeBufferPointer(rebasing: bytes[parts.host])), port)
    }

    /// Where the parts of `scheme://[userinfo@]host[:port]` lie in `bytes`: the scheme's colon,
    /// the host (an IPv6 address without its brackets), and the port's text after its colon
    /// (nil when no colon follows the host). Nil without `scheme://`.
    private static func authority(of bytes: UnsafeBufferPointer<UInt8>) -> (schemeColon: Int, host: Range<Int>, port: Range<Int>?)? {
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon + 2 < bytes.count,
              bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/") else { return nil }
        var start = colon + 3
        let end = authorityEnd(of: bytes, afterScheme: colon)
        if let at = bytes[start..<end].lastIndex(of: UInt8(ascii: "@")) { start = at + 1 }
        let hostRange: Range<Int>
        let restStart: Int
        if start < end, bytes[start] == UInt8(ascii: "["), let close = bytes[start..<end].firstIndex(of: UInt8(ascii: "]")) {
            hostRange = (start + 1)..<close
            restStart = close + 1
        } else {
            let colon = bytes[start..<end].firstIndex(of: UInt8(ascii: ":")) ?? end
            hostRange = start..<colon
            restStart = colon
        }
        let port = restStart < end && bytes[restStart] == UInt8(ascii: ":") ? (restStart + 1)..<end : nil
        return (colon, hostRange, port)
    }

    /// `url` as a log line may show it: without its user information (`user:password@`) and its
    /// query (`?…` where there was one) or fragment, where templates put secrets.
    public static func withoutCredentialsOrQuery(_ url: String) -> String {
        var bytes = Array(url.utf8)
        var query = ""
        let end = bytes.withUnsafeBufferPointer { buffer in
            authority(of: buffer).map { authorityEnd(of: buffer, afterScheme: $0.schemeColon) } ?? 0
        }
        if let mark = bytes[end...].firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) {
            query = bytes[mark] == UInt8(ascii: "?") ? "?…" : ""
            bytes.removeSubrange(mark...)
        }
        if let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon + 3 <= end,
           let at = bytes[(colon + 3)..<end].lastIndex(of: UInt8(ascii: "@")) {
            bytes.removeSubrange((colon + 3)...at)
        }
        return String(decoding: bytes, as: UTF8.self).displayEscaped + query
    }

    /// Where the authority of a URL whose scheme is `schemeLength` bytes long ends: at the first
    /// `/`, `?` or `#` after `://`, or at the end.
    static func authorityEnd(of bytes: UnsafeBufferPointer<UInt8>, afterScheme schemeLength: Int) -> Int {
        var end = schemeLength + 3
        while end < bytes.count, bytes[end] != UInt8(ascii: "/"), bytes[end] != UInt8(ascii: "?"), bytes[end] != UInt8(ascii: "#") {
            end += 1
        }
        return end
    }

    /// The text of `bytes` lowercased, as `String.lowercased()` would; ASCII without a capital
    /// (almost every scheme and host) is taken as it is.
    private static func lowercased(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        var capitals = false
        for byte in bytes {
            if byte >= 0x80 { return String(decoding: bytes, as: UTF8.self).lowercased() }
            if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { capitals = true }
        }
        guard capitals else { return String(decoding: bytes, as: UTF8.self) }
        return String(unsafeUninitializedCapacity: bytes.count) { buffer in
            for (index, byte) in bytes.enumerated() {
                buffer[index] = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
            }
            return bytes.count
        }
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
        // Only digits, dots and the signs `UInt8("…")` takes can make four numbers: a name
        // (most hosts) is answered without splitting it.
        var signs = false
        for byte in host.utf8 where !(byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) && byte != UInt8(ascii: ".") {
            guard byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") else { return false }
            signs = true
        }
        if !signs { return isLoopbackIPv4(digitsAndDots: host.utf8) }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// `isLoopback` of a host of digits and dots: four numbers of at most 255, the first 127.
    private static func isLoopbackIPv4(digitsAndDots host: String.UTF8View) -> Bool {
        var parts = 0
        var value = 0
        var digits = 0
        for byte in host {
            if byte == UInt8(ascii: ".") {
                guard digits > 0, parts > 0 || (value == 127 && digits == 3) else { return false }
                parts += 1
                value = 0
                digits = 0
            } else {
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
                guard value <= 255 else { return false }
            }
        }
        return parts == 3 && digits > 0
    }

    /// Whether a request to `url` may carry secrets (SPEC §2): https, or a loopback address.
    public static func maySendSecrets(to url: String) -> Bool {
        guard let target = target(of: url) else { return false }
        return target.scheme == "https" || isLoopback(target.host)
    }

    /// What in the written text of a URL makes libcurl refuse it (``literalProblem(in:)``).
    public enum LiteralProblem: Equatable, Sendable {
        /// A space, a tab or another control character: which one.
        case unsendable(String)
        /// The same in the host, where no escape helps.
        case unsendableInHost(String)
        /// The text where the port goes, not a number.
        case portNotANumber(String)
        /// A port outside 1–65535.
        case portOutOfRange(String)

        /// What to say after the key's name, at the place.
        public var message: String {
            switch self {
            case .unsendable(let what): "has \(what) here, which no URL may hold; write it percent-encoded (a space is %20)"
            case .unsendableInHost(let what): "has \(what) in its host name, which no host name may hold"
            case .portNotANumber(let written): "has '\(written)' where the port goes, which is not a number"
            case .portOutOfRange(let written): "has port \(written), outside 1–65535"
            }
        }
    }

    /// What in the written text of a URL (`http://` or `https://` first) makes libcurl refuse it:
    /// a space or a control character outside `placeholders` (the UTF-8 spans of a template's
    /// placeholders, ``Template/placeholderSpans``: their values are percent-encoded, and their
    /// own text is not the URL's), or a written port outside 1–65535; with its UTF-8 offset in
    /// `text`. Nil when there is none.
    public static func literalProblem(in text: String, placeholders: [Range<Int>] = []) -> (offset: Int, problem: LiteralProblem)? {
        let bytes = Array(text.utf8)
        var spans = placeholders[...]
        var index = 0
        // Where the host (and port) are written, after `scheme://`: a percent-escape cannot help there.
        let (hostStart, hostEnd) = bytes.withUnsafeBufferPointer { buffer -> (Int, Int) in
            guard let colon = buffer.firstIndex(of: UInt8(ascii: ":")), colon + 2 < buffer.count,
                  buffer[colon + 1] == UInt8(ascii: "/"), buffer[colon + 2] == UInt8(ascii: "/") else { return (0, 0) }
            return (colon + 3, authorityEnd(of: buffer, afterScheme: colon))
        }
        while index < bytes.count {
            if let span = spans.first, index >= span.lowerBound {
                index = max(index, span.upperBound)
                spans = spans.dropFirst()
                continue
            }
            let byte = bytes[index]
            if byte <= 0x20 || byte == 0x7F {
                let what = switch byte {
                case 0x20: "a space"
                case 0x09: "a tab"
                case 0x0A, 0x0D: "a line break"
                default: "a control character"
                }
                return (index, hostStart > 0 && (hostStart..<hostEnd).contains(index) ? .unsendableInHost(what) : .unsendable(what))
            }
            index += 1
        }
        // A placeholder cannot stand in the authority (only the path and the query hold values).
        guard let parts = bytes.withUnsafeBufferPointer({ authority(of: $0) }), let port = parts.port, !port.isEmpty,
              !placeholders.contains(where: { $0.overlaps((parts.schemeColon + 3)..<port.upperBound) }) else { return nil }
        let written = String(decoding: bytes[port], as: UTF8.self)
        guard written.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return (port.lowerBound, .portNotANumber(written)) }
        guard let number = Int(written), (1...65535).contains(number) else { return (port.lowerBound, .portOutOfRange(written)) }
        return nil
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
        switch literalProblem(in: url)?.problem {
        case .unsendable(let what)?, .unsendableInHost(let what)?: return "must be a URL without \(what)"
        case .portNotANumber?, .portOutOfRange?: return "must have a port from 1 to 65535"
        case nil: return nil
        }
    }
}
