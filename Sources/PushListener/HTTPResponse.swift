/// HTTP/1.1 responses as bytes on a socket.
public enum HTTPResponse {
    /// The bytes of a response: `Content-Length` added unless `headers` has it or
    /// `Transfer-Encoding` (or the status has no body), `Connection: close` when `closing`, no
    /// body for a `HEAD`.
    public static func bytes(status: Int, headers: [(name: String, value: String)], body: [UInt8],
                         method: String, closing: Bool) -> [UInt8] {
        let bodyAllowed = !(100..<200).contains(status) && status != 204 && status != 304
        let names = Set(headers.map { $0.name.lowercased() })
        var head = "HTTP/1.1 \(status) \(reasonPhrase(status))\r\n"
        for field in headers { head += "\(field.name): \(field.value)\r\n" }
        if bodyAllowed && !names.contains("content-length") && !names.contains("transfer-encoding") {
            head += "Content-Length: \(body.count)\r\n"
        }
        if closing && !names.contains("connection") { head += "Connection: close\r\n" }
        head += "\r\n"
        var bytes = Array(head.utf8)
        if bodyAllowed && method != "HEAD" { bytes += body }
        return bytes
    }

    /// The reason phrase of `status`.
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 101: "Switching Protocols"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 422: "Unprocessable Content"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status \(status)"
        }
    }
}
