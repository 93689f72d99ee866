import PushAcrobits
import PushBackend
import PushConfig
import PushScheduler
import PushTransport

extension PlannedReport {
    /// One attempt: send the request, then judge the response by SPEC §4's success rule. An
    /// attempt whose task is cancelled ends as ``AttemptFailure/cancelled``.
    func send(using transport: any HTTPTransport) async -> AttemptResult {
        do {
            return ResponseJudge.judge(try await transport.send(request), method: rendered.method)
        } catch let error as TransportError where !error.isCancellation {
            return .failed(ResponseJudge.failure(error))
        } catch {
            return .failed(.cancelled)
        }
    }
}
