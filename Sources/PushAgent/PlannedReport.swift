import PushConfig
import PushTransport

/// One request the agent owes: an account's report (or removal), rendered and ready to send.
public struct PlannedReport: Sendable {
    public var rendered: RenderedRequest
    /// `host:port` of the URL, lowercased: the unit of `perHostConcurrency`.
    public var host: String
    /// How long an attempt may take: `<prefix>Timeout`, else `agent.timeout`.
    public var timeout: Duration

    public var account: String { rendered.account }
    public var reporter: Reporter { rendered.reporter }

    /// - Parameter defaultTimeout: `agent.timeout`, for requests without `<prefix>Timeout`.
    public init(_ rendered: RenderedRequest, defaultTimeout: Duration) {
        self.rendered = rendered
        host = Self.host(of: rendered.url)
        timeout = rendered.timeout ?? defaultTimeout
    }

    /// What the transport sends. Made for each attempt rather than kept: the agent holds a
    /// report for every account, and this would repeat most of it.
    public var request: TransportRequest {
        TransportRequest(
            method: rendered.method, url: rendered.url, headers: rendered.headers,
            body: rendered.body.map { Array($0.utf8) },
            credentials: rendered.credentials.map { .init(username: $0.username, password: $0.password) },
            timeout: timeout)
    }

    /// `host:port` (the scheme's port when none is written), lowercased; IPv6 in brackets.
    static func host(of url: String) -> String {
        guard let target = RequestBuilder.target(of: url) else { return url }
        let host = target.host.contains(":") ? "[\(target.host)]" : target.host
        return "\(host):\(target.port)"
    }
}
