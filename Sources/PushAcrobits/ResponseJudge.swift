import PushConfig
import PushScheduler
import PushTemplates
import PushTransport

/// The success rule of SPEC §4: a 2xx whose body matches its Content-Type.
///
/// A JSON type needs a body that parses (at least `{}`), an XML type a well-formed body; no
/// Content-Type, or an empty 2xx without one, is success; so is a 2xx to a HEAD, and a 204. Only the first 64 KiB are read: a longer
/// body is judged by how it starts. Everything else is a failure, and 429/503 carry `Retry-After`.
public enum ResponseJudge {
    /// Delivered, or the failure to retry. `method` is the request's: the answer to a HEAD, and
    /// a 204, carry no body, whatever their Content-Type says.
    public static func judge(_ response: TransportResponse, method: String = "GET") -> AttemptResult {
        let status = response.status
        guard (200..<300).contains(status) else {
            var retryAfter: RetryAfter?
            if status == 429 || status == 503, let header = response.header("Retry-After") {
                retryAfter = RetryAfter.parse(header)
            }
            return .failed(.http(status, retryAfter: retryAfter))
        }
        if method.uppercased() != "HEAD", status != 204, let problem = bodyProblem(response) {
            return .failed(AttemptFailure(status: status, retryAfter: nil, reason: "HTTP \(status), but \(problem)"))
        }
        return .delivered
    }

    /// The failure of a request that got no response.
    public static func failure(_ error: TransportError) -> AttemptFailure {
        AttemptFailure(status: nil, retryAfter: nil, reason: error.message)
    }

    /// Why a 2xx body does not match its Content-Type, or nil when it does.
    static func bodyProblem(_ response: TransportResponse) -> String? {
        guard let contentType = response.header("Content-Type") else { return nil }
        // The JSON and XML types of SPEC §3, read as the templates read a request's type.
        let kind = BodyFormat(contentType: contentType)
        guard kind == .json || kind == .xml else { return nil }
        let name = kind == .json ? "JSON" : "XML"
        let firstByte = response.body.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
        guard let firstByte else { return "the body is empty while Content-Type says \(name)" }
        if response.bodyTruncated {
            // Longer than we read: judge by its first character.
            let plausible = kind == .json ? Array("{[\"-0123456789tfn".utf8).contains(firstByte) : firstByte == UInt8(ascii: "<")
            return plausible ? nil : "the body does not start like \(name)"
        }
        if kind == .json {
            return JSONValidator.problem(in: response.body).map { "the body is not valid JSON (\($0))" }
        }
        return XMLChecker.problem(in: response.body).map { "the body is not well-formed XML (\($0))" }
    }
}
