/// How the body of a request is delimited (RFC 9112 §6.3).
public enum HTTPBodyFraming: Equatable, Sendable {
    /// No body: neither `Content-Length` nor `Transfer-Encoding` was sent.
    case none
    /// `Content-Length: n`.
    case length(Int)
    /// `Transfer-Encoding: chunked`.
    case chunked

    /// Whether body bytes are still to come after the header section.
    public var expectsBody: Bool {
        switch self {
        case .none, .length(0): false
        case .length, .chunked: true
        }
    }
}

/// The request line and header section of one HTTP/1.x request.
public struct HTTPRequestHead: Sendable {
    public var method: String
    public var target: String
    /// `x` of `HTTP/1.x`.
    public var minorVersion: Int
    public var headers: [(name: String, value: String)]
    public var framing: HTTPBodyFraming = .none

    /// The comma-separated tokens of every `name` header, lowercased.
    public func tokens(_ name: String) -> [String] {
        headers.filter { $0.name.lowercased() == name.lowercased() }
            .flatMap { $0.value.split(separator: ",") }
            .map { $0.trimmingSpaces().lowercased() }
            .filter { !$0.isEmpty }
    }

    /// Whether the client lets the connection carry another request (RFC 9112 §9.3).
    public var keepAlive: Bool {
        let connection = tokens("Connection")
        if connection.contains("close") { return false }
        return minorVersion >= 1 || connection.contains("keep-alive")
    }

    /// Whether the client waits for `100 Continue` before it sends the body (RFC 9110 §10.1.1).
    public var expectsContinue: Bool {
        minorVersion >= 1 && tokens("Expect").contains("100-continue") && framing.expectsBody
    }
}

/// Why a request could not be parsed, and the status to answer with before closing.
public struct HTTPParseError: Error, Equatable, Sendable {
    /// 400, 413, 431, 501 or 505.
    public var status: Int
    public var reason: String
}

/// An incremental HTTP/1.x request parser: append bytes as they arrive, take events as they
/// complete. It never blocks and never reads past the request it is parsing, so pipelined
/// requests come out one at a time.
///
/// Lines may end in CRLF or a bare LF; empty lines before a request line are skipped (RFC 9112
/// §2.2). Obsolete line folding, a bare CR, both `Content-Length` and `Transfer-Encoding`,
/// conflicting lengths and codings other than `chunked` are errors. Chunk extensions and
/// trailer fields are read and dropped. After an error the parser stays failed.
public struct HTTPRequestParser {
    /// What `next()` found.
    public enum Event {
        /// The head is complete and the body (if any) follows; sent once per request, before `request`.
        case head(HTTPRequestHead)
        /// The whole request.
        case request(HTTPRequestHead, body: [UInt8])
    }

    private enum State {
        case requestLine
        case headerLines
        case headComplete
        case body(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailerLines
        case failed(HTTPParseError)
    }

    /// The most bytes a request line plus header section (or a trailer section) may take.
    public let maxHeadBytes: Int
    /// The most bytes a body may take.
    public let maxBodyBytes: Int

    private var buffer: [UInt8] = []
    /// The first byte not parsed yet.
    private var position = 0
    /// How many bytes from `position` on are known to hold no LF.
    private var scanned = 0
    /// Bytes taken so far by the current head or trailer section.
    private var sectionBytes = 0
    private var state = State.requestLine
    private var head = HTTPRequestHead(method: "", target: "", minorVersion: 1, headers: [])
    private var body: [UInt8] = []

    public init(maxHeadBytes: Int = 64 << 10, maxBodyBytes: Int = 16 << 20) {
        self.maxHeadBytes = maxHeadBytes
        self.maxBodyBytes = maxBodyBytes
    }

    /// Whether bytes were received that no event has accounted for yet.
    public var hasUnparsedBytes: Bool { position < buffer.count }

    /// Adds received bytes.
    public mutating func append(_ bytes: some Collection<UInt8>) {
        if position > 0 && position == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            position = 0
        } else if position >= 64 << 10 && position * 2 >= buffer.count {
            buffer.removeFirst(position)
            position = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete event, or `nil` when more bytes are needed.
    public mutating func next() throws(HTTPParseError) -> Event? {
        do {
            return try step()
        } catch {
            state = .failed(error)
            throw error
        }
    }

    private mutating func step() throws(HTTPParseError) -> Event? {
        while true {
            switch state {
            case .failed(let error):
                throw error
            case .requestLine:
                guard let line = try takeLine(limit: maxHeadBytes, tooLong: Self.headTooLarge) else { return nil }
                if line.isEmpty { continue }  // RFC 9112 §2.2: ignore empty lines before a request.
                head = try Self.parseRequestLine(line)
                state = .headerLines
            case .headerLines:
                guard let line = try takeLine(limit: maxHeadBytes, tooLong: Self.headTooLarge) else { return nil }
                if line.isEmpty {
                    head.framing = try framing(of: head)
                    state = .headComplete
                    return .head(head)
                }
                head.headers.append(try Self.parseField(line))
            case .headComplete:
                switch head.framing {
                case .none, .length(0): return finish()
                case .length(let length): state = .body(remaining: length)
                case .chunked: state = .chunkSize
                }
            case .body(let remaining):
                let left = takeBody(remaining)
                if left > 0 {
                    state = .body(remaining: left)
                    return nil
                }
                return finish()
            case .chunkSize:
                sectionBytes = 0  // The chunk size line is capped on its own; the trailers count from it.
                guard let line = try takeLine(limit: 1024, tooLong: HTTPParseError(status: 400, reason: "chunk size line too long")) else {
                    return nil
                }
                let size = try chunkSize(line)
                state = size == 0 ? .trailerLines : .chunkData(remaining: size)
            case .chunkData(let remaining):
                let left = takeBody(remaining)
                state = left > 0 ? .chunkData(remaining: left) : .chunkDataEnd
                if left > 0 { return nil }
            case .chunkDataEnd:
                sectionBytes = 0
                let overrun = HTTPParseError(status: 400, reason: "chunk data longer than its size")
                guard let line = try takeLine(limit: 2, tooLong: overrun) else { return nil }
                guard line.isEmpty else { throw overrun }
                state = .chunkSize
            case .trailerLines:
                guard let line = try takeLine(limit: maxHeadBytes, tooLong: Self.headTooLarge) else { return nil }
                if line.isEmpty { return finish() }
                _ = try Self.parseField(line)
            }
        }
    }

    private mutating func finish() -> Event {
        let event = Event.request(head, body: body)
        head = HTTPRequestHead(method: "", target: "", minorVersion: 1, headers: [])
        body = []
        sectionBytes = 0
        state = .requestLine
        return event
    }

    /// Moves up to `remaining` buffered bytes into the body; returns how many are still to come.
    private mutating func takeBody(_ remaining: Int) -> Int {
        let count = min(remaining, buffer.count - position)
        body.append(contentsOf: buffer[position..<position + count])
        position += count
        return remaining - count
    }

    /// The next line without its CRLF or LF, or `nil` if it has not all arrived. `limit` caps the
    /// bytes of the current section (`sectionBytes` plus this line, its line ending included);
    /// beyond it the request fails with `tooLong`.
    private mutating func takeLine(limit: Int, tooLong: HTTPParseError) throws(HTTPParseError) -> ArraySlice<UInt8>? {
        let searchStart = position + scanned
        guard let newline = buffer[searchStart...].firstIndex(of: UInt8(ascii: "\n")) else {
            scanned = buffer.count - position
            if sectionBytes + scanned > limit { throw tooLong }
            return nil
        }
        let length = newline + 1 - position
        sectionBytes += length
        if sectionBytes > limit { throw tooLong }
        var line = buffer[position..<newline]
        position = newline + 1
        scanned = 0
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        if line.contains(UInt8(ascii: "\r")) { throw HTTPParseError(status: 400, reason: "bare CR in a line") }
        return line
    }

    private static let headTooLarge = HTTPParseError(status: 431, reason: "request header section too large")

    private static func parseRequestLine(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> HTTPRequestHead {
        let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw HTTPParseError(status: 400, reason: "malformed request line")
        }
        guard parts[0].allSatisfy(isTokenByte) else { throw HTTPParseError(status: 400, reason: "malformed method") }
        guard parts[1].allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else {
            throw HTTPParseError(status: 400, reason: "malformed request target")
        }
        let version = Array(parts[2])
        guard version.count == 8, version.starts(with: Array("HTTP/".utf8)), version[6] == UInt8(ascii: "."),
              isDigit(version[5]), isDigit(version[7]) else {
            throw HTTPParseError(status: 400, reason: "malformed HTTP version")
        }
        guard version[5] == UInt8(ascii: "1") else { throw HTTPParseError(status: 505, reason: "only HTTP/1.x is supported") }
        return HTTPRequestHead(method: String(decoding: parts[0], as: UTF8.self),
                               target: String(decoding: parts[1], as: UTF8.self),
                               minorVersion: Int(version[7] - UInt8(ascii: "0")), headers: [])
    }

    /// `name: value` with the value's surrounding spaces and tabs removed (RFC 9112 §5).
    private static func parseField(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> (name: String, value: String) {
        if line.first == UInt8(ascii: " ") || line.first == UInt8(ascii: "\t") {
            throw HTTPParseError(status: 400, reason: "obsolete line folding")
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
              line[..<colon].allSatisfy(isTokenByte) else {
            throw HTTPParseError(status: 400, reason: "malformed header field")
        }
        var value = line[(colon + 1)...]
        while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
        guard value.allSatisfy({ ($0 >= 0x20 || $0 == 0x09) && $0 != 0x7F }) else {
            throw HTTPParseError(status: 400, reason: "control character in a header value")
        }
        return (String(decoding: line[..<colon], as: UTF8.self), String(decoding: value, as: UTF8.self))
    }

    private func framing(of head: HTTPRequestHead) throws(HTTPParseError) -> HTTPBodyFraming {
        let codings = head.tokens("Transfer-Encoding")
        let lengths = head.headers.filter { $0.name.lowercased() == "content-length" }
        if !codings.isEmpty {
            guard lengths.isEmpty else {
                throw HTTPParseError(status: 400, reason: "both Content-Length and Transfer-Encoding")
            }
            guard codings.last == "chunked" else {
                throw HTTPParseError(status: 400, reason: "Transfer-Encoding does not end in chunked")
            }
            guard codings.count == 1 else { throw HTTPParseError(status: 501, reason: "unsupported transfer coding") }
            return .chunked
        }
        guard !lengths.isEmpty else { return .none }
        let values = Set(lengths.flatMap { $0.value.split(separator: ",", omittingEmptySubsequences: false) }
            .map { $0.trimmingSpaces() })
        guard values.count == 1, let text = values.first, !text.isEmpty, text.utf8.allSatisfy(Self.isDigit) else {
            throw HTTPParseError(status: 400, reason: "malformed Content-Length")
        }
        guard let length = Int(text), length <= maxBodyBytes else {
            throw HTTPParseError(status: 413, reason: "request body too large")
        }
        return .length(length)
    }

    /// The size of the chunk whose size line is `line`; extensions after `;` are ignored.
    private func chunkSize(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> Int {
        let digits = line.prefix { Self.hexValue($0) != nil }
        let rest = line[digits.endIndex...].drop { $0 == 0x20 || $0 == 0x09 }
        guard !digits.isEmpty, rest.isEmpty || rest.first == UInt8(ascii: ";") else {
            throw HTTPParseError(status: 400, reason: "malformed chunk size")
        }
        var size = 0
        for digit in digits {
            size = size * 16 + Int(Self.hexValue(digit)!)
            if body.count + size > maxBodyBytes { throw HTTPParseError(status: 413, reason: "request body too large") }
        }
        return size
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }

    /// RFC 9110 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs.
    public func trimmingSpaces() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
