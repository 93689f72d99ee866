import PushTransport

/// What `plan` names when a subscription changed (SPEC §14): each named part of a delivery (its
/// method, its URL without the query, each query parameter, each header, the body, the
/// credentials) kept in the state as a short digest, never as its value, so that a secret is
/// never written there or shown. The state keeps the digests of the delivery last delivered;
/// `plan` compares them with the parts of what would be sent now.
public enum DeliveredParts {
    /// A part's name and its value.
    public typealias Part = (name: String, value: String)

    /// The parts of an HTTP request: `method`, `url` (scheme, host and path), `query NAME` for
    /// each parameter, `header NAME` (lower case) for each header, `body`, and `credentials`.
    public static func parts(of request: TransportRequest) -> [Part] {
        var parts: [Part] = [("method", request.method)]
        let url = request.url
        if let question = url.firstIndex(of: "?") {
            parts.append(("url", String(url[..<question])))
            var counts: [String: Int] = [:]
            for parameter in url[url.index(after: question)...].split(separator: "&", omittingEmptySubsequences: true) {
                let name = parameter.firstIndex(of: "=").map { String(parameter[..<$0]) } ?? String(parameter)
                let value = parameter.firstIndex(of: "=").map { String(parameter[parameter.index(after: $0)...]) } ?? ""
                // A parameter given twice is two parts.
                counts[name, default: 0] += 1
                parts.append(("query " + name + (counts[name]! > 1 ? " (\(counts[name]!))" : ""), value))
            }
        } else {
            parts.append(("url", url))
        }
        for header in request.headers { parts.append(("header " + header.name.lowercased(), header.value)) }
        if let body = request.body { parts += bodyParts(String(decoding: body, as: UTF8.self)) }
        if let credentials = request.credentials { parts.append(("credentials", credentials.username + "\u{0}" + credentials.password)) }
        return parts
    }

    /// A body's parts: `body.KEY` for each member of a JSON object, else `body`.
    public static func bodyParts(_ body: String) -> [Part] {
        members(body).map { $0.map { ("body." + $0.name, $0.value) } } ?? [("body", body)]
    }

    /// The members of the JSON object `text` (a key's escapes left as written, each value's
    /// text as written); nil when it is not one object.
    static func members(_ text: String) -> [Part]? {
        let bytes = Array(text.utf8)
        var index = 0
        func skipSpace() { while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 } }
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
        var members: [Part] = []
        while true {
            skipSpace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "}") && members.isEmpty { index += 1; break }
            guard bytes[index] == UInt8(ascii: "\""), let end = stringEnd() else { return nil }
            let name = String(decoding: bytes[(index + 1)..<(end - 1)], as: UTF8.self)
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
            while valueEnd > start, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[valueEnd - 1]) { valueEnd -= 1 }
            members.append((name, String(decoding: bytes[start..<valueEnd], as: UTF8.self)))
            if bytes[index] == UInt8(ascii: "}") { index += 1; break }
            index += 1
        }
        skipSpace()
        return index == bytes.count ? members : nil
    }

    /// What the state keeps of `parts`, delivered as `fingerprint`: its first line the
    /// fingerprint's first 16 characters (a digest kept beside another delivery is not read),
    /// then a line per part, `DIGEST NAME`, sorted by name.
    public static func signature(_ parts: [Part], fingerprint: String) -> String {
        var lines = parts.map { digest($0.value) + " " + $0.name.replacing("\n", with: " ") }
        lines.sort { $0.dropFirst(17) < $1.dropFirst(17) }
        return ([String(fingerprint.prefix(16))] + lines).joined(separator: "\n")
    }

    /// The names of the parts that differ between `stored` (a ``signature(_:fingerprint:)`` of
    /// the delivery of `deliveredFingerprint`) and `parts`: changed, added or gone, in name
    /// order. Nil when `stored` is not of that delivery, or cannot be read.
    public static func changes(stored: String, deliveredFingerprint: String, now parts: [Part]) -> [String]? {
        var lines = stored.split(separator: "\n", omittingEmptySubsequences: false)
        guard let first = lines.first, first == deliveredFingerprint.prefix(16) else { return nil }
        lines.removeFirst()
        var before: [String: Substring] = [:]
        for line in lines {
            guard let space = line.firstIndex(of: " ") else { return nil }
            before[String(line[line.index(after: space)...])] = line[..<space]
        }
        var after: [String: String] = [:]
        for part in parts { after[part.name.replacing("\n", with: " ")] = digest(part.value) }
        let names = Set(before.keys).union(after.keys)
        return names.filter { name in before[name].map(String.init) != after[name] }.sorted()
    }

    /// 64-bit FNV-1a of `value`, in hex: enough to tell a change, too short to stand for a
    /// secret's value.
    static func digest(_ value: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in value.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let text = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - text.count) + text
    }
}
