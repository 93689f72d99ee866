import PushScheduler
import PushTransport

/// Reading a receiver's answer, as every backend does: what of it a log line or `status` may
/// quote, the failure a busy or refusing answer is, and the outcome of no answer at all.
public enum ReceiverAnswer {
    /// The first line of `body`, at most 200 characters, control characters shown as `?`; nil
    /// when there is none, or when the body repeats one of `secrets` (an answer that echoes the
    /// request).
    public static func excerpt(_ body: [UInt8], hiding secrets: [String]) -> String? {
        let text = String(decoding: body.prefix(400), as: UTF8.self)
        if secrets.contains(where: { !$0.isEmpty && String(decoding: body, as: UTF8.self).contains($0) }) { return nil }
        let line = text.split(whereSeparator: \.isNewline).first.map { trimmed($0) } ?? ""
        guard !line.isEmpty else { return nil }
        let short = line.count > 200 ? String(line.prefix(200)) + "…" : line
        return String(short.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) })
    }

    /// `text` without the spaces and tabs around it.
    public static func trimmed(_ text: some StringProtocol) -> String {
        let scalars = text.unicodeScalars
        guard let first = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }),
              let last = scalars.lastIndex(where: { $0 != " " && $0 != "\t" }) else { return "" }
        return String(String.UnicodeScalarView(scalars[first...last]))
    }

    /// The failure an answer of `status` is, with its `Retry-After` when a 429 or 503 has one.
    public static func failure(_ response: TransportResponse, reason: String? = nil) -> AttemptFailure {
        var retryAfter: RetryAfter?
        if response.status == 429 || response.status == 503, let header = response.header("Retry-After") {
            retryAfter = RetryAfter.parse(header)
        }
        var failure = AttemptFailure.http(response.status, retryAfter: retryAfter)
        if let reason { failure.reason = reason }
        return failure
    }

    /// What a transport error means for an attempt: rejected when sending it again fails the
    /// same way, a retry otherwise (a cancelled one says nothing about the request).
    public static func outcome(of error: any Error) -> Outcome {
        guard let error = error as? TransportError else { return .retry(.cancelled) }
        if error.isPermanent { return .rejected(error.message) }
        if error.isCancellation { return .retry(.cancelled) }
        return .retry(AttemptFailure(status: nil, reason: error.message))
    }
}
