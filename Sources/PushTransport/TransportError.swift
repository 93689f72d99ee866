import CCurl
#if canImport(Glibc)
import Glibc
#endif

/// Why a request got no HTTP response. `label` is short and stable (a metric label);
/// `description` is a sentence for people.
public struct TransportError: Error, Sendable, CustomStringConvertible, Hashable {
    enum Code: String, Sendable {
        case timedOut = "timeout"
        case couldNotResolve = "dns"
        case couldNotConnect = "connect"
        case connectionReset = "reset"
        case tls = "tls"
        case tooManyRedirects = "redirects"
        case refusedRedirect = "redirect_refused"
        case badURL = "url"
        case protocolError = "protocol"
        case refusedRequest = "request_refused"
        case cancelled = "cancelled"
        case other = "other"
    }

    let code: Code
    /// What went wrong, in libcurl's words where it had some.
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A short stable name for the kind of failure: `timeout`, `dns`, `connect`, `reset`, `tls`, ….
    public var label: String { code.rawValue }
    /// The request was cancelled (the task was cancelled or the transport shut down).
    public var isCancellation: Bool { code == .cancelled }
    /// The request itself cannot be sent (larger than libcurl takes, not a URL): sending it
    /// again fails the same way, so it is not retried.
    public var isPermanent: Bool { code == .refusedRequest || code == .badURL }
    public var description: String { message }

    public static let cancelled = TransportError(.cancelled, "cancelled")

    /// Maps a libcurl result to an error, with libcurl's detailed message when it wrote one.
    /// libcurl's `detail` with the system's reason for `osError` in place of the code's own
    /// words at its end, which repeat what the sentence says ("Failed to connect to … port 1
    /// after 0 ms: Couldn't connect to server" becomes "…: Connection refused").
    static func naming(osError: Int32, in detail: String, for result: CURLcode) -> String {
        let repeated = ": " + String(cString: curl_easy_strerror(result))
        guard detail.hasSuffix(repeated), let reason = strerror(osError) else { return detail }
        return String(detail.dropLast(repeated.count)) + ": " + String(cString: reason)
    }

    static func curl(_ result: CURLcode, detail: String) -> TransportError {
        let fallback = String(cString: curl_easy_strerror(result))
        let text = detail.isEmpty ? fallback : detail
        switch result {
        case CURLE_OPERATION_TIMEDOUT:
            return TransportError(.timedOut, text)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return TransportError(.couldNotResolve, text)
        case CURLE_COULDNT_CONNECT:
            return TransportError(.couldNotConnect, text)
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE:
            return TransportError(.connectionReset, text)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
             CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR:
            return TransportError(.tls, text)
        // libcurl follows no redirect itself (CurlTransfer does, checking the scheme first), so
        // an unsupported protocol can only be the request's own URL.
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT:
            return TransportError(.badURL, text)
        case CURLE_WEIRD_SERVER_REPLY, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_BAD_CONTENT_ENCODING:
            return TransportError(.protocolError, text)
        // What libcurl answers for a request larger than it takes (an 8 MB option, a header line
        // it cannot hold): the same request always fails the same way.
        case CURLE_OUT_OF_MEMORY, CURLE_BAD_FUNCTION_ARGUMENT:
            return TransportError(.refusedRequest, "the request is larger than libcurl takes (\(text))")
        default:
            return TransportError(.other, text)
        }
    }
}
