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
            Self.observe(request, .success(response), took: start.duration(to: clock.now), service: service, metrics: metrics, logger: logger)
            return response
        } catch {
            Self.observe(request, .failure(error), took: start.duration(to: clock.now), service: service, metrics: metrics, logger: logger)
            throw error
        }
    }

    /// Times one answer (or its absence) into the histogram and writes its debug line: for the
    /// requests sent through this transport and those sent directly (``AgentCore/settleFlights(_:)``).
    static func observe(_ request: TransportRequest, _ result: Result<TransportResponse, any Error>, took: Duration,
                        service: String, metrics: AgentMetrics, logger: Logger) {
        // Made only when the line is written (a message is an autoclosure): not per request at info.
        func what() -> String { "\(service.displayEscaped): \(request.method) \(URLText.withoutCredentialsOrQuery(request.url))" }
        switch result {
        case .success(let response):
            metrics.requestTook(took, service: service)
            logger.debug("\(what()) answered \(response.status) in \(DurationText(took))")
        case .failure(let error):
            // A request cancelled at shutdown was not answered slowly: it is not timed.
            let cancelled = error is CancellationError || (error as? TransportError)?.isCancellation == true
            if !cancelled { metrics.requestTook(took, service: service) }
            logger.debug("\(what()) got no answer after \(DurationText(took)): \(error)")
        }
    }
}
