#if canImport(Glibc)
import Glibc
#endif

/// What ``URLText`` reads off a URL, kept for the next URLs with the same `scheme://authority`.
///
/// Requests are rendered one account after another, and the accounts of a file almost always
/// share their receiver, so reading each URL's scheme and host again (and making new strings of
/// them) was a good part of rendering one. A URL that starts with a recent one's
/// `scheme://authority`, followed by its end or by `/`, `?` or `#`, has the same target; its
/// answer is that one's, strings and all, so the requests to one host share one `host:port`
/// string instead of holding one each.
public struct URLTargetCache: Sendable {
    /// A URL's scheme, host and port, as ``URLText/target(of:)`` reads them, with what is asked of
    /// them for every request.
    public struct Target: Sendable {
        public var scheme: String
        /// Lowercased; an IPv6 address without brackets.
        public var host: String
        public var port: Int
        /// ``URLText/hostAndPort(of:)``.
        public var hostAndPort: String
        /// ``URLText/isLoopback(_:)`` of the host.
        public var isLoopback: Bool
    }

    /// The last targets read, newest last, each with the `scheme://authority` of its URL. More
    /// than one: an account's removal URL may go to another host than its report, and with the
    /// last one only, each account's URLs were read again in turns (21 % more instructions to
    /// check 10,000 such accounts, `callgrind`), and every request held a `host:port` of its own.
    private var recent = RecentAnswers<[UInt8], Target>(capacity: kept)
    /// How many targets are kept.
    public static let kept = 4

    public init() {}

    /// The target of `url`; nil without `scheme://host` (``URLText/target(of:)``).
    public mutating func target(of url: String) -> Target? {
        var url = url
        return url.withUTF8 { bytes -> Target? in
            if let known = recent.answer(where: { Self.starts(bytes, withAuthority: $0) }) { return known }
            guard let target = URLText.target(of: bytes) else { return nil }
            let host = target.host.contains(":") ? "[\(target.host)]" : target.host
            let found = Target(scheme: target.scheme, host: target.host, port: target.port, hostAndPort: "\(host):\(target.port)",
                               isLoopback: URLText.isLoopback(target.host))
            // `target(of:)` found `scheme://` at the first colon.
            let colon = bytes.firstIndex(of: UInt8(ascii: ":"))!
            recent.remember(found, for: Array(bytes[..<URLText.authorityEnd(of: bytes, afterScheme: colon)]))
            return found
        }
    }

    /// `host:port` of `url` (``URLText/hostAndPort(of:)``): the URL itself when it has no host.
    public mutating func hostAndPort(of url: String) -> String {
        target(of: url)?.hostAndPort ?? url
    }

    /// Whether `bytes` begins with `authority` and its authority ends there.
    private static func starts(_ bytes: UnsafeBufferPointer<UInt8>, withAuthority authority: [UInt8]) -> Bool {
        guard !authority.isEmpty, bytes.count >= authority.count else { return false }
        let same = authority.withUnsafeBytes { prefix in
            memcmp(bytes.baseAddress!, prefix.baseAddress!, prefix.count) == 0
        }
        guard same else { return false }
        guard bytes.count > authority.count else { return true }
        let next = bytes[authority.count]
        return next == UInt8(ascii: "/") || next == UInt8(ascii: "?") || next == UInt8(ascii: "#")
    }
}
