import PushBackend
import PushScheduler
import PushTransport

/// What became of one attempt of a tracking action.
public enum TrackingOutcome: Sendable, Equatable {
    /// The server answered exactly 200.
    case delivered
    /// 408, 429, a 5xx or no answer: tried again after the backoff of `agent.retry`
    /// (`Retry-After` honoured).
    case retry(AttemptFailure)
    /// Any other answer: the SDK drops the action, and so is it (never tried again).
    case rejected(String)
}

/// Sending a tracking action and judging the answer as the Adobe SDK does (SPEC §9.4, §10).
enum AdobeSender {
    static func send(_ request: TrackingRequest, transport: any HTTPTransport) async -> TrackingOutcome {
        let response: TransportResponse
        do {
            response = try await transport.send(request.transportRequest)
        } catch let error as TransportError where error.isPermanent {
            return .rejected(error.message)
        } catch let error as TransportError where !error.isCancellation {
            return .retry(AttemptFailure(status: nil, reason: error.message))
        } catch {
            return .retry(.cancelled)
        }
        return judge(response)
    }

    /// Exactly 200 is delivered; 408, 429 and 5xx are retried; anything else is rejected.
    static func judge(_ response: TransportResponse) -> TrackingOutcome {
        switch response.status {
        case 200:
            return .delivered
        case 408, 429, 500...599:
            let retryAfter = response.status == 429 || response.status == 503
                ? response.header("Retry-After").flatMap { RetryAfter.parse($0) } : nil
            return .retry(.http(response.status, retryAfter: retryAfter))
        default:
            return .rejected("HTTP \(response.status)")
        }
    }
}
