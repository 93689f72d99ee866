import PushBackend
import PushConfig
import PushScheduler
import PushTransport

/// Sends Acrobits reports and removals (SPEC §4): each request alone, as the transport takes it,
/// judged by its status and body (``ResponseJudge``).
enum AcrobitsSender {
    static func send(_ requests: [SubscriptionRequest], transport: any HTTPTransport, defaultTimeout: Duration) async -> [Outcome] {
        var outcomes: [Outcome] = []
        for request in requests {
            guard let sent = transportRequest(request, defaultTimeout: defaultTimeout) else {
                outcomes.append(.rejected("the request was not prepared by the Acrobits backend"))
                continue
            }
            outcomes.append(await Self.send(sent, transport: transport))
        }
        return outcomes
    }

    /// The HTTP request of `request`, with its timeout.
    static func transportRequest(_ request: SubscriptionRequest, defaultTimeout: Duration) -> TransportRequest? {
        guard let payload = request.payload as? AcrobitsPayload else { return nil }
        var sent = payload.request
        sent.timeout = request.timeout ?? defaultTimeout
        return sent
    }

    /// One attempt: send the request, then judge the response by SPEC §4's success rule.
    static func send(_ request: TransportRequest, transport: any HTTPTransport) async -> Outcome {
        do {
            return outcome(of: .success(try await transport.send(request)), method: request.method)
        } catch let error as TransportError {
            return outcome(of: .failure(error), method: request.method)
        } catch {
            return .retry(.cancelled)
        }
    }

    /// What an answer, or the error that stopped the request, means (SPEC §4's success rule).
    static func outcome(of result: Result<TransportResponse, TransportError>, method: String) -> Outcome {
        switch result {
        case .success(let response):
            switch ResponseJudge.judge(response, method: method) {
            case .delivered: return .delivered
            case .failed(let failure): return .retry(failure)
            }
        case .failure(let error) where error.isPermanent:
            // Refused before it left (too large, not a URL): the same request fails every time.
            return .rejected(error.message)
        case .failure(let error) where !error.isCancellation:
            return .retry(ResponseJudge.failure(error))
        case .failure:
            return .retry(.cancelled)
        }
    }
}

/// Acrobits requests as the agent hands them to the transport many at once (``DirectSending``).
struct AcrobitsDirectSending: DirectSending {
    func transportRequest(_ request: SubscriptionRequest, defaultTimeout: Duration) -> TransportRequest? {
        AcrobitsSender.transportRequest(request, defaultTimeout: defaultTimeout)
    }

    func outcome(of result: Result<TransportResponse, TransportError>, for sent: TransportRequest) -> Outcome {
        AcrobitsSender.outcome(of: result, method: sent.method)
    }
}
