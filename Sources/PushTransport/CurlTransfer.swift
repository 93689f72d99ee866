import CCurl

/// One request's life on the transport thread: its easy handle's options, the header list and
/// error buffer libcurl points into, and the response as it arrives. Only the transport thread
/// touches it after submission.
final class CurlTransfer: @unchecked Sendable {
    let id: UInt64
    private(set) var request: TransportRequest
    /// Whether a handle of this transfer was given credentials (it is not kept for another).
    private(set) var usedCredentials = false
    /// Who waits for the outcome: a task, or a sink that takes the outcomes of a turn together.
    private var waiter: Waiter?
    /// When it was handed to the transport (for a sink's ``TransportCompletion/took``).
    private let submittedAt: ContinuousClock.Instant

    enum Waiter {
        case task(CheckedContinuation<TransportResponse, any Error>)
        case sink(any TransportCompletionSink)
    }
    var handle: UnsafeMutableRawPointer?
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private var body: [UInt8] = []
    private var bodyTruncated = false
    private var responseHeaders: [(name: String, value: String)] = []
    /// The URL of this hop: the request's, then each redirect's.
    private var currentURL: String
    /// The URL of this hop.
    var url: String { currentURL }
    private var redirects = 0
    /// The request's method, upper-cased once.
    private let method: String

    init(id: UInt64, request: TransportRequest, waiter: Waiter) {
        self.id = id
        self.request = request
        self.waiter = waiter
        submittedAt = ContinuousClock.now
        currentURL = request.url
        method = request.method.uppercased()
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit {
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    /// Sets every option of `request` on `handle` (a fresh or reset easy handle).
    /// `caBundle` must outlive the transfer (libcurl does not copy it).
    /// `isLoopback` says whether the URL of this hop (``url``) names this machine (``isLoopbackURL(_:)``).
    func configure(_ handle: UnsafeMutableRawPointer, settings: TransportSettings, caBundle: UnsafeMutableRawBufferPointer?,
                   isLoopback: Bool) -> CURLcode {
        self.handle = handle
        let isHTTPS = Self.hasScheme(currentURL, "https://")
        var result = CURLE_OK
        func set(_ code: CURLcode) { if result == CURLE_OK { result = code } }

        set(pr_easy_setopt_string(handle, CURLOPT_URL, currentURL))
        set(pr_easy_setopt_pointer(handle, CURLOPT_PRIVATE, Unmanaged.passUnretained(self).toOpaque()))
        set(pr_easy_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer))
        set(pr_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
        set(pr_easy_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"))
        // A loopback address is never reached through a proxy: secrets are filled into requests to
        // it because they do not leave the machine (SPEC §12), and a proxy would take them away.
        if isLoopback {
            set(pr_easy_setopt_string(handle, CURLOPT_NOPROXY, "*"))
        }
        set(pr_easy_setopt_long(handle, CURLOPT_HTTP_VERSION, PR_CURL_HTTP_VERSION_2TLS))
        set(pr_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, Self.milliseconds(request.timeout)))
        set(pr_easy_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS,
                                Self.milliseconds(min(request.timeout, settings.connectTimeout))))
        if let caBundle {
            set(pr_easy_setopt_blob(handle, CURLOPT_CAINFO_BLOB, caBundle.baseAddress, caBundle.count))
        }

        // Method and body. A HEAD reads no body; a body goes with any other method that has one.
        switch method {
        case "GET": set(pr_easy_setopt_long(handle, CURLOPT_HTTPGET, 1))
        case "HEAD": set(pr_easy_setopt_long(handle, CURLOPT_NOBODY, 1))
        case "POST": set(pr_easy_setopt_long(handle, CURLOPT_POST, 1))
        default: set(pr_easy_setopt_string(handle, CURLOPT_CUSTOMREQUEST, method))
        }
        if let body = request.body, method != "GET", method != "HEAD" {
            set(pr_easy_setopt_offset(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)))
            set(body.withUnsafeBytes { bytes in
                // COPYPOSTFIELDS copies the bytes, so nothing here has to outlive the call.
                pr_easy_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, bytes.baseAddress ?? UnsafeRawPointer(errorBuffer))
            })
        } else if method == "POST" {
            set(pr_easy_setopt_offset(handle, CURLOPT_POSTFIELDSIZE_LARGE, 0))
            set(pr_easy_setopt_string(handle, CURLOPT_COPYPOSTFIELDS, ""))
        }

        // Headers in order; an empty `Expect:` stops libcurl's 100-continue round trip.
        for header in request.headers {
            headerList = curl_slist_append(headerList, "\(header.name): \(header.value)")
        }
        headerList = curl_slist_append(headerList, "Expect:")
        // A POST without a body carries no Content-Type unless the request gives one (libcurl
        // would add its form type, which `preview` does not show and the request never chose).
        if method == "POST", request.body == nil,
           !request.headers.contains(where: { $0.name.lowercased() == "content-type" }) {
            headerList = curl_slist_append(headerList, "Content-Type:")
        }
        set(pr_easy_setopt_pointer(handle, CURLOPT_HTTPHEADER, headerList))

        // Redirects are followed by the loop, hop by hop (see `redirect(result:)`), so that no hop
        // of a chain goes from https to http.

        // Digest always; Basic too over https (libcurl picks the safest the server offers).
        if let credentials = request.credentials {
            usedCredentials = true
            // Neither the connection nor the handle serves another request afterwards: libcurl
            // keeps the state of an authentication exchange with them, and a POST that reused
            // a connection whose Digest exchange had held its body back went out with no body.
            set(pr_easy_setopt_long(handle, CURLOPT_FORBID_REUSE, 1))
            set(pr_easy_setopt_string(handle, CURLOPT_USERNAME, credentials.username))
            set(pr_easy_setopt_string(handle, CURLOPT_PASSWORD, credentials.password))
            set(pr_easy_setopt_long(handle, CURLOPT_HTTPAUTH,
                                    isHTTPS ? (PR_CURLAUTH_DIGEST | PR_CURLAUTH_BASIC) : PR_CURLAUTH_DIGEST))
        }

        let context = Unmanaged.passUnretained(self).toOpaque()
        set(pr_easy_setopt_callback(handle, CURLOPT_WRITEFUNCTION, curlTransferWriteBody))
        set(pr_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, context))
        set(pr_easy_setopt_callback(handle, CURLOPT_HEADERFUNCTION, curlTransferWriteHeader))
        set(pr_easy_setopt_pointer(handle, CURLOPT_HEADERDATA, context))
        return result
    }

    /// Appends body bytes up to the limit; returning fewer than given stops the transfer there.
    func receiveBody(_ data: UnsafeBufferPointer<UInt8>) -> Int {
        let room = TransportResponse.bodyLimit - body.count
        if data.count <= room {
            body.append(contentsOf: data)
            return data.count
        }
        body.append(contentsOf: data.prefix(room))
        bodyTruncated = true
        return 0
    }

    /// Keeps the header lines of the latest response (a redirect or a 401 starts a new block).
    func receiveHeader(_ data: UnsafeBufferPointer<UInt8>) {
        if data.starts(with: Self.statusLinePrefix) {
            responseHeaders.removeAll(keepingCapacity: true)
            return
        }
        guard let colon = data.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = String(decoding: data[..<colon], as: UTF8.self)
        var value = data[(colon + 1)...]
        while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
        while let last = value.last, last == 0x0D || last == 0x0A || last == 0x20 || last == 0x09 {
            value = value.dropLast()
        }
        responseHeaders.append((name, String(decoding: value, as: UTF8.self)))
    }

    /// True when libcurl held the body back for an authentication round trip that never came:
    /// with credentials it sends a POST's first request with an empty body, expecting a 401, and a
    /// server that needs no authentication answers that empty request. The caller sends the
    /// request again without credentials (the server takes it without), so the body arrives.
    func bodyWasHeldBack(result: CURLcode) -> Bool {
        guard result == CURLE_OK, request.credentials != nil, let handle, let body = request.body, !body.isEmpty else {
            return false
        }
        var status = 0
        var uploaded: curl_off_t = 0
        _ = pr_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        _ = pr_easy_getinfo_offset(handle, CURLINFO_SIZE_UPLOAD_T, &uploaded)
        return status != 401 && uploaded < body.count
    }

    /// Prepares a second attempt without credentials (see `bodyWasHeldBack`).
    func dropCredentials() {
        request.credentials = nil
        resetResponse()
    }

    /// What to do with a redirect (SPEC §4): nil when the response is not one to follow, else the
    /// next hop, or the error that ends the exchange. Only GET and HEAD follow, at most 5 hops,
    /// only to http or https, and never from https to http.
    func redirect(result: CURLcode) -> Result<String, TransportError>? {
        guard result == CURLE_OK, method == "GET" || method == "HEAD", let handle else { return nil }
        var status = 0
        var location: UnsafeMutablePointer<CChar>?
        _ = pr_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        guard [301, 302, 303, 307, 308].contains(status),
              pr_easy_getinfo_string(handle, CURLINFO_REDIRECT_URL, &location) == CURLE_OK, let location else { return nil }
        let next = String(cString: location)
        guard redirects < 5 else {
            return .failure(TransportError(.tooManyRedirects, "more than 5 redirects (the last to \(Self.authority(of: next)))"))
        }
        let toHTTP = Self.hasScheme(next, "http://")
        guard toHTTP || Self.hasScheme(next, "https://") else {
            return .failure(TransportError(.refusedRedirect, "refused a redirect to a URL that is not http or https"))
        }
        if Self.hasScheme(currentURL, "https://"), toHTTP {
            return .failure(TransportError(.refusedRedirect, "refused a redirect from https to plain http (\(Self.authority(of: next)))"))
        }
        return .success(next)
    }

    /// Moves to the next hop. Credentials, `Authorization`, `Cookie` and every header that
    /// carries a secret go only to the host they were meant for (SPEC §12).
    func follow(_ next: String) {
        if Self.authority(of: next) != Self.authority(of: currentURL) {
            request.credentials = nil
            let secret = request.secretHeaders
            request.headers.removeAll { ["authorization", "cookie"].contains($0.name.lowercased()) || secret.contains($0.name.lowercased()) }
        }
        currentURL = next
        redirects += 1
        resetResponse()
    }

    /// Whether `url`'s host is `localhost`, in 127.0.0.0/8 or `::1`.
    static func isLoopbackURL(_ url: String) -> Bool {
        guard let parsed = curl_url() else { return false }
        defer { curl_url_cleanup(parsed) }
        var text: UnsafeMutablePointer<CChar>?
        guard curl_url_set(parsed, CURLUPART_URL, url, 0) == CURLUE_OK,
              curl_url_get(parsed, CURLUPART_HOST, &text, 0) == CURLUE_OK, let text else { return false }
        defer { curl_free(text) }
        let host = String(cString: text).lowercased()
        if host == "[::1]" || host == "localhost" || host.hasSuffix(".localhost") { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    private func resetResponse() {
        curl_slist_free_all(headerList)
        headerList = nil
        body.removeAll()
        bodyTruncated = false
        responseHeaders.removeAll()
    }

    /// `scheme://host:port` of a URL as libcurl parses it (the scheme's port when none is written).
    static func authority(of url: String) -> String {
        guard let parsed = curl_url() else { return url }
        defer { curl_url_cleanup(parsed) }
        guard curl_url_set(parsed, CURLUPART_URL, url, 0) == CURLUE_OK else { return url }
        func part(_ which: CURLUPart, _ flags: UInt32 = 0) -> String {
            var text: UnsafeMutablePointer<CChar>?
            guard curl_url_get(parsed, which, &text, flags) == CURLUE_OK, let text else { return "" }
            defer { curl_free(text) }
            return String(cString: text).lowercased()
        }
        return part(CURLUPART_SCHEME) + "://" + part(CURLUPART_HOST) + ":" + part(CURLUPART_PORT, UInt32(CURLU_DEFAULT_PORT))
    }

    /// The transfer's outcome, for whoever waits: a task is resumed now; a sink's completion is
    /// added to `turn`, which the transport thread hands over once its turn is done. Called
    /// once, on the transport thread.
    func complete(_ result: CURLcode, turn: inout TurnCompletions) {
        guard let handle else { return }
        if result == CURLE_OK || (result == CURLE_WRITE_ERROR && bodyTruncated) {
            var status = 0
            var effective: UnsafeMutablePointer<CChar>?
            _ = pr_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
            _ = pr_easy_getinfo_string(handle, CURLINFO_EFFECTIVE_URL, &effective)
            resolve(.success(TransportResponse(
                status: status, headers: responseHeaders, body: body, bodyTruncated: bodyTruncated,
                effectiveURL: effective.map { String(cString: $0) } ?? request.url)), turn: &turn)
        } else {
            var detail = String(cString: errorBuffer)
            var osError = 0
            if pr_easy_getinfo_long(handle, CURLINFO_OS_ERRNO, &osError) == CURLE_OK, osError != 0 {
                detail = TransportError.naming(osError: Int32(osError), in: detail, for: result)
            }
            resolve(.failure(TransportError.curl(result, detail: detail)), turn: &turn)
        }
    }

    /// Ends the transfer with `error` (cancellation or shutdown), on the transport thread.
    func fail(_ error: TransportError, turn: inout TurnCompletions) {
        resolve(.failure(error), turn: &turn)
    }

    /// Ends the transfer with `error` off the transport thread (it was never started): a sink
    /// is told at once.
    func fail(_ error: TransportError) {
        var turn = TurnCompletions()
        resolve(.failure(error), turn: &turn)
        turn.deliver()
    }

    private func resolve(_ result: Result<TransportResponse, TransportError>, turn: inout TurnCompletions) {
        guard let waiter else { return }
        self.waiter = nil
        switch waiter {
        case .task(let continuation):
            continuation.resume(with: result.mapError { $0 as any Error })
        case .sink(let sink):
            turn.add(TransportCompletion(id: id, result: result, took: submittedAt.duration(to: .now)), for: sink)
        }
    }

    private static let statusLinePrefix = Array("HTTP/".utf8)

    /// Whether `url` starts with `scheme` (written in lower case), in any case, without
    /// lower-casing the whole URL.
    private static func hasScheme(_ url: String, _ scheme: StaticString) -> Bool {
        let count = scheme.utf8CodeUnitCount
        guard url.utf8.count >= count else { return false }
        return scheme.withUTF8Buffer { expected in
            zip(url.utf8.prefix(count), expected).allSatisfy { byte, wanted in
                (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) == wanted
            }
        }
    }

    private static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return max(1, Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000))
    }
}

private func curlTransferWriteBody(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                                   _ context: UnsafeMutableRawPointer?) -> Int {
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let bytes = UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self)
    return transfer.receiveBody(UnsafeBufferPointer(start: bytes, count: size * count))
}

private func curlTransferWriteHeader(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                                     _ context: UnsafeMutableRawPointer?) -> Int {
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let bytes = UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self)
    transfer.receiveHeader(UnsafeBufferPointer(start: bytes, count: size * count))
    return size * count
}
