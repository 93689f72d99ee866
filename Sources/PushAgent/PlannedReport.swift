import PushBackend
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
    public var reporter: String { rendered.reporter }

    /// - Parameter defaultTimeout: `agent.timeout`, for requests without `<prefix>Timeout`.
    public init(_ rendered: RenderedRequest, defaultTimeout: Duration) {
        self.rendered = rendered
        host = rendered.host
        timeout = rendered.timeout ?? defaultTimeout
    }

    /// What the transport sends. Made for each attempt rather than kept: the agent holds a
    /// report for every account, and this would repeat most of it.
    public var request: TransportRequest {
        rendered.transportRequest(defaultTimeout: timeout)
    }
}
