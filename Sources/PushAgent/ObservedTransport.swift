import Logging
import PushConfig
import PushBackend
import PushTransport

/// The agent's transport as the backends of one batch see it: each request is timed into
/// `pushreporter_request_duration_seconds` and, at debug level, logged with its service, status
/// and latency (SPEC §9.5, §8). The URL is logged without its query and user information, where
/// templates put secrets; headers and bodies are never logged.
struct ObservedTransport: HTTPTransport {
    let base: any HTTPTransport
    let service: String
    let metrics: AgentMetrics
    let logger: Logger

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let clock = ContinuousClock()
        let start = clock.now
        do {
            let response = try await base.send(request)
            let took = start.duration(to: clock.now)
            metrics.requestTook(took, service: service)
            logger.debug("\(service.displayEscaped): \(request.method) \(Self.shown(request.url)) answered \(response.status) in \(DurationText(took))")
            return response
        } catch {
            let took = start.duration(to: clock.now)
            // A request cancelled at shutdown was not answered slowly: it is not timed.
            if !(error is CancellationError) { metrics.requestTook(took, service: service) }
            logger.debug("\(service.displayEscaped): \(request.method) \(Self.shown(request.url)) got no answer after \(DurationText(took)): \(error)")
            throw error
        }
    }

    /// `url` without its user information and query (`?…` where there was one).
    static func shown(_ url: String) -> String {
        var bytes = Array(url.utf8)
        var query = ""
        if let mark = bytes.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) {
            query = bytes[mark] == UInt8(ascii: "?") ? "?…" : ""
            bytes.removeSubrange(mark...)
        }
        let separator = Array("://".utf8)
        if let scheme = bytes.indices.first(where: { bytes[$0...].starts(with: separator) }) {
            let authority = scheme + separator.count
            let authorityEnd = bytes[authority...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.endIndex
            if let at = bytes[authority..<authorityEnd].lastIndex(of: UInt8(ascii: "@")) {
                bytes.removeSubrange(authority...at)
            }
        }
        return String(decoding: bytes, as: UTF8.self).displayEscaped + query
    }
}
