/// The final response to a request (after redirects and authentication challenges).
public struct TransportResponse: Sendable {
    /// The largest body kept; the rest of a longer body is not read.
    public static let bodyLimit = 64 * 1024

    /// The HTTP status code.
    public var status: Int
    /// The final response's header lines, in order.
    public var headers: [(name: String, value: String)]
    /// At most `bodyLimit` bytes of the body.
    public var body: [UInt8]
    /// True when the body was longer than `bodyLimit` and reading stopped there.
    public var bodyTruncated: Bool
    /// The URL that answered, after redirects.
    public var effectiveURL: String

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
                bodyTruncated: Bool = false, effectiveURL: String = "") {
        self.status = status
        self.headers = headers
        self.body = body
        self.bodyTruncated = bodyTruncated
        self.effectiveURL = effectiveURL
    }

    /// The value of the first header called `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }
}
