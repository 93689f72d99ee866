import PushBackend
import PushConfig
import PushTransport

/// Sends one example-webhook request and judges the answer: any 2xx is delivered; a 4xx other
/// than 408 and 429 will never succeed as it stands (rejected); anything else, or no answer, is
/// tried again after the backoff.
enum ExampleWebhookSender {
    static let headers: [(name: String, value: String)] = [("User-Agent", PushReporterVersion.userAgent),
                                                           ("Content-Type", "application/json")]

    static func send(_ item: ExampleWebhookItem, transport: any HTTPTransport, timeout: Duration) async -> Outcome {
        let request = TransportRequest(method: "POST", url: item.url, headers: headers, body: Array(item.body.utf8), timeout: timeout)
        do {
            let response = try await transport.send(request)
            switch response.status {
            case 200..<300: return .delivered
            case 408, 429: return .retry(ReceiverAnswer.failure(response))
            case 400..<500: return .rejected("HTTP \(response.status)")
            default: return .retry(ReceiverAnswer.failure(response))
            }
        } catch {
            return ReceiverAnswer.outcome(of: error)
        }
    }
}
