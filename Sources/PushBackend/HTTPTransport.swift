import PushTransport

/// What the agent needs from HTTP: send one request, get the final response or an error.
/// `CurlTransport` is the real one; tests use fakes.
public protocol HTTPTransport: Sendable {
    /// Sends `request`; throws `TransportError` (or `CancellationError`) when no response came.
    func send(_ request: TransportRequest) async throws -> TransportResponse
}

extension CurlTransport: HTTPTransport {}
