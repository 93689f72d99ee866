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
            logger.debug("\(service.displayEscaped): \(request.method) \(URLText.withoutCredentialsOrQuery(request.url)) answered \(response.status) in \(DurationText(took))")
            return response
        } catch {
            let took = start.duration(to: clock.now)
            // A request cancelled at shutdown was not answered slowly: it is not timed.
            if !(error is CancellationError) { metrics.requestTook(took, service: service) }
            logger.debug("\(service.displayEscaped): \(request.method) \(URLText.withoutCredentialsOrQuery(request.url)) got no answer after \(DurationText(took)): \(error)")
            throw error
        }
    }
}
