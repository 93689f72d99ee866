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
            guard let payload = request.payload as? AcrobitsPayload else {
                outcomes.append(.rejected("the request was not prepared by the Acrobits backend"))
                continue
            }
            var sent = payload.request
            sent.timeout = request.timeout ?? defaultTimeout
            outcomes.append(await Self.send(sent, transport: transport))
        }
        return outcomes
    }

    /// One attempt: send the request, then judge the response by SPEC §4's success rule.
    static func send(_ request: TransportRequest, transport: any HTTPTransport) async -> Outcome {
        let result: AttemptResult
        do {
            result = ResponseJudge.judge(try await transport.send(request), method: request.method)
        } catch let error as TransportError where error.isPermanent {
            // Refused before it left (too large, not a URL): the same request fails every time.
            return .rejected(error.message)
        } catch let error as TransportError where !error.isCancellation {
            result = .failed(ResponseJudge.failure(error))
        } catch {
            result = .failed(.cancelled)
        }
        switch result {
        case .delivered: return .delivered
        case .failed(let failure): return .retry(failure)
        }
    }
}
