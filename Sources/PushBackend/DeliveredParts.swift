import PushTransport

/// What `plan` names when a subscription changed (SPEC §14): each named part of a delivery (its
/// method, its URL without the query, each query parameter, each header, each member of a JSON
/// body, the credentials) kept in the state as a short digest, never as its value, so that a
/// secret is never written there or shown. The state keeps the digests of the delivery last
/// delivered (``signature(fingerprint:)``); `plan` compares them with the parts of what would be
/// sent now (``changes(stored:deliveredFingerprint:now:)``).
///
/// Built as it is written: a line `DIGEST NAME` per part, appended as bytes, with no string per
/// part. The agent makes one with every delivery: made of strings and sorted, it was a sixth of
/// `run --once`'s CPU (perf, 10,000 accounts).
public struct DeliveredParts: Sendable {
    /// The lines, each `DIGEST NAME\n` (a 16-digit hex digest, a space, the name).
    private(set) var lines: [UInt8] = []
    /// The digests of the query parameters' names seen so far, to tell a parameter given twice.
    private var queryNames: [UInt64] = []

    public init() {
        lines.reserveCapacity(256)
    }

    /// A part named `name` whose value is `value`.
    public mutating func add(_ name: String, _ value: String) {
        var value = value
        value.withUTF8 { add(name: name, value: $0) }
    }

    /// The parts of an HTTP request: `method`, `url` (scheme, host and path), `query NAME` for
    /// each parameter (`query NAME (2)` for its second), `header NAME` (lower case) for each
    /// header, the body's (``addBody(_:)``), and `credentials`.
    public mutating func add(_ request: TransportRequest) {
        add("method", request.method)
        addURL(request.url)
        for header in request.headers { addHeader(header.name, header.value) }
        if let body = request.body { body.withUnsafeBufferPointer { addBody($0) } }
        if let credentials = request.credentials { add("credentials", credentials.username + "\u{0}" + credentials.password) }
    }

    /// `url` (before its query) and `query NAME` for each of its parameters.
    public mutating func addURL(_ url: String) {
        var url = url
        url.withUTF8 { bytes in
            guard let question = bytes.firstIndex(of: UInt8(ascii: "?")) else { return add(name: "url", value: bytes) }
            add(name: "url", value: UnsafeBufferPointer(rebasing: bytes[..<question]))
            var start = question + 1
            while start <= bytes.count {
                let end = bytes[start...].firstIndex(of: UInt8(ascii: "&")) ?? bytes.count
                if end > start {
                    let parameter = UnsafeBufferPointer(rebasing: bytes[start..<end])
                    let equals = parameter.firstIndex(of: UInt8(ascii: "=")) ?? parameter.count
                    let name = UnsafeBufferPointer(rebasing: parameter[..<equals])
                    let value = equals < parameter.count ? UnsafeBufferPointer(rebasing: parameter[(equals + 1)...])
                        : UnsafeBufferPointer(rebasing: parameter[parameter.count...])
                    let nameDigest = Self.digest(name)
                    let seen = queryNames.count { $0 == nameDigest }
                    queryNames.append(nameDigest)
                    appendLine(value: value) { lines in
                        lines.append(contentsOf: "query ".utf8)
                        Self.appendName(name, to: &lines)
                        if seen > 0 { lines.append(contentsOf: " (\(seen + 1))".utf8) }
                    }
                }
                start = end + 1
            }
        }
    }

    /// `header NAME`, the name in lower case.
    public mutating func addHeader(_ name: String, _ value: String) {
        var (name, value) = (name, value)
        name.withUTF8 { name in
            value.withUTF8 { value in
                appendLine(value: value) { lines in
                    lines.append(contentsOf: "header ".utf8)
                    for byte in name { lines.append(byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte == 0x0A ? 0x20 : byte) }
                }
            }
        }
    }

    /// `body.KEY` for each member of a JSON object, else `body`.
    public mutating func addBody(_ body: String) {
        var body = body
        body.withUTF8 { addBody($0) }
    }

    private mutating func addBody(_ body: UnsafeBufferPointer<UInt8>) {
        guard let members = Self.members(body) else { return add(name: "body", value: body) }
        for (name, value) in members {
            appendLine(value: UnsafeBufferPointer(rebasing: body[value])) { lines in
                lines.append(contentsOf: "body.".utf8)
                Self.appendName(UnsafeBufferPointer(rebasing: body[name]), to: &lines)
            }
        }
    }

    private mutating func add(name: String, value: UnsafeBufferPointer<UInt8>) {
        appendLine(value: value) { lines in lines.append(contentsOf: name.utf8) }
    }

    /// Appends `DIGEST ` for `value`, the name `writeName` writes, and a line feed.
    private mutating func appendLine(value: UnsafeBufferPointer<UInt8>, writeName: (inout [UInt8]) -> Void) {
        var hash = Self.digest(value)
        let start = lines.count
        lines.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: 16))
        let digits: StaticString = "0123456789abcdef"
        digits.withUTF8Buffer { digits in
            for index in (0..<16).reversed() {
                lines[start + index] = digits[Int(hash & 0xF)]
                hash >>= 4
            }
        }
        lines.append(UInt8(ascii: " "))
        writeName(&lines)
        lines.append(0x0A)
    }

    /// A name as written, a line feed in it (none in a URL, a header or a JSON key) as a space.
    private static func appendName(_ name: UnsafeBufferPointer<UInt8>, to lines: inout [UInt8]) {
        for byte in name { lines.append(byte == 0x0A ? 0x20 : byte) }
    }

    /// What the state keeps of these parts, delivered as `fingerprint`: its first line the
    /// fingerprint's first 16 characters, the whole of one written now (digests kept beside
    /// another delivery are not read), then the parts' lines.
    public func signature(fingerprint: String) -> String {
        String(fingerprint.prefix(16)) + "\n" + String(decoding: lines.dropLast(lines.last == 0x0A ? 1 : 0), as: UTF8.self)
    }

    /// The names of the parts that differ between `stored` (a ``signature(fingerprint:)`` of the
    /// delivery of `deliveredFingerprint`) and `now`: changed, added or gone, in name order.
    /// Nil when `stored` is not of that delivery, or cannot be read.
    public static func changes(stored: String, deliveredFingerprint: String, now: DeliveredParts) -> [String]? {
        var storedLines = stored.split(separator: "\n", omittingEmptySubsequences: false)
        guard let first = storedLines.first, first == deliveredFingerprint.prefix(16) else { return nil }
        storedLines.removeFirst()
        guard let before = digestsByName(storedLines) else { return nil }
        let nowLines = String(decoding: now.lines, as: UTF8.self).split(separator: "\n")
        guard let after = digestsByName(nowLines) else { return nil }
        return Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }.sorted()
    }

    /// Each line's name and digest; nil when a line is not `DIGEST NAME`.
    private static func digestsByName(_ lines: [Substring]) -> [String: Substring]? {
        var digests: [String: Substring] = [:]
        for line in lines {
            guard let space = line.firstIndex(of: " ") else { return nil }
            digests[String(line[line.index(after: space)...])] = line[..<space]
        }
        return digests
    }

    /// 64-bit FNV-1a of `bytes`: enough to tell a change, too short to stand for a secret's value.
    static func digest(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// The members of the JSON object `text`: each key's bytes (inside its quotes, escapes as
    /// written) and its value's (as written); nil when it is not one object.
    static func members(_ bytes: UnsafeBufferPointer<UInt8>) -> [(name: Range<Int>, value: Range<Int>)]? {
        var index = 0
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        func skipSpace() { while index < bytes.count, isSpace(bytes[index]) { index += 1 } }
        /// The end of the string that starts at `index` (its closing quote's index + 1).
        func stringEnd() -> Int? {
            var at = index + 1
            while at < bytes.count {
                if bytes[at] == UInt8(ascii: "\\") { at += 2; continue }
                if bytes[at] == UInt8(ascii: "\"") { return at + 1 }
                at += 1
            }
            return nil
        }
        skipSpace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return nil }
        index += 1
        var members: [(name: Range<Int>, value: Range<Int>)] = []
        while true {
            skipSpace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "}"), members.isEmpty {
                index += 1
                break
            }
            guard bytes[index] == UInt8(ascii: "\""), let end = stringEnd() else { return nil }
            let name = (index + 1)..<(end - 1)
            index = end
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            skipSpace()
            let start = index
            var depth = 0
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    guard let end = stringEnd() else { return nil }
                    index = end
                    continue
                }
                if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") { depth += 1 }
                if byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") {
                    if depth == 0 { break }
                    depth -= 1
                }
                if byte == UInt8(ascii: ","), depth == 0 { break }
                index += 1
            }
            guard index < bytes.count, index > start else { return nil }
            var valueEnd = index
            while valueEnd > start, isSpace(bytes[valueEnd - 1]) { valueEnd -= 1 }
            members.append((name, start..<valueEnd))
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                break
            }
            index += 1
        }
        skipSpace()
        return index == bytes.count ? members : nil
    }
}
