/// How one inserted value is written into the output, decided by its position when compiling.
enum Encoding: UInt8, Sendable {
    /// As it is (plain templates, `raw(...)`, and bodies of an unknown type).
    case raw
    /// URL path segment: every byte outside RFC 3986 unreserved is percent-encoded.
    case urlPath
    /// URL query: unreserved, `:` and `@` stay; every other byte is percent-encoded.
    case urlQuery
    /// `application/x-www-form-urlencoded`: space is `+`, alphanumerics and `*-._` stay.
    case form
    /// Inside a JSON string: JSON string escaping.
    case jsonString
    /// In JSON, outside a string: the value becomes a JSON string (quotes added).
    case jsonValue
    /// XML text or attribute: `&<>"'` and line breaks as references.
    case xml
    /// HTTP header value: as it is; CR, LF and NUL are rejected after rendering.
    case header
}

/// A set of ASCII bytes that pass through unescaped, as two 64-bit masks.
struct ByteSet: Sendable {
    private var low: UInt64 = 0
    private var high: UInt64 = 0

    init(_ ascii: String) {
        for b in ascii.utf8 { insert(b) }
    }

    private mutating func insert(_ b: UInt8) {
        if b < 64 { low |= 1 << UInt64(b) } else if b < 128 { high |= 1 << UInt64(b - 64) }
    }

    @inline(__always)
    func contains(_ b: UInt8) -> Bool {
        if b < 64 { return low & (1 << UInt64(b)) != 0 }
        if b < 128 { return high & (1 << UInt64(b &- 64)) != 0 }
        return false
    }

    static let alphanumerics = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    /// RFC 3986 unreserved characters.
    static let unreserved = ByteSet(alphanumerics + "-._~")
    static let query = ByteSet(alphanumerics + "-._~:@")
    static let form = ByteSet(alphanumerics + "*-._")
}

enum Escaper {
    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)
    private static let lowerHexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `value` to `out` encoded for `encoding`.
    @inline(__always)
    static func append(_ value: String, as encoding: Encoding, to out: inout [UInt8]) throws(RenderError) {
        var value = value
        let failure = value.withUTF8 { bytes -> RenderError? in
            do throws(RenderError) {
                try append(bytes, as: encoding, to: &out)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    static func append(_ bytes: UnsafeBufferPointer<UInt8>, as encoding: Encoding, to out: inout [UInt8]) throws(RenderError) {
        switch encoding {
        case .raw, .header:
            out.append(contentsOf: bytes)
        case .urlPath:
            percentEncode(bytes, keeping: ByteSet.unreserved, spaceAsPlus: false, to: &out)
        case .urlQuery:
            percentEncode(bytes, keeping: ByteSet.query, spaceAsPlus: false, to: &out)
        case .form:
            percentEncode(bytes, keeping: ByteSet.form, spaceAsPlus: true, to: &out)
        case .jsonString:
            jsonEscape(bytes, to: &out)
        case .jsonValue:
            out.append(UInt8(ascii: "\""))
            jsonEscape(bytes, to: &out)
            out.append(UInt8(ascii: "\""))
        case .xml:
            try xmlEscape(bytes, to: &out)
        }
    }

    /// Appends a secret's replacement (`********`, or a preview's marker) unencoded, so it reads as
    /// written; outside a JSON string it is still made a JSON string, so the body stays JSON.
    static func appendReplacement(_ text: String, as encoding: Encoding, to out: inout [UInt8]) {
        if encoding == .jsonValue { out.append(UInt8(ascii: "\"")) }
        out.append(contentsOf: text.utf8)
        if encoding == .jsonValue { out.append(UInt8(ascii: "\"")) }
    }

    /// Percent-encoding. Runs of bytes that stay are copied at once: values are mostly such
    /// bytes, and appending them one at a time checked the array's capacity for each.
    @inline(__always)
    static func percentEncode(_ bytes: UnsafeBufferPointer<UInt8>, keeping keep: ByteSet, spaceAsPlus: Bool,
                              to out: inout [UInt8]) {
        var runStart = 0
        for (i, b) in bytes.enumerated() where !keep.contains(b) {
            if runStart < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i])) }
            runStart = i + 1
            if spaceAsPlus && b == UInt8(ascii: " ") {
                out.append(UInt8(ascii: "+"))
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(b >> 4)])
                out.append(hexDigits[Int(b & 0x0F)])
            }
        }
        if runStart < bytes.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...])) }
    }

    /// JSON string escaping. U+FEFF, U+2028 and U+2029 are written as `\u` escapes too: some
    /// parsers drop a byte-order mark inside strings, and JavaScript-based ones choke on the others.
    /// Runs of bytes that need no escape are copied at once.
    static func jsonEscape(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        var runStart = 0
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            // Fast test: printable ASCII other than the two escaped, and UTF-8 bytes that can
            // start none of the three escaped characters.
            if b >= 0x20 && b != UInt8(ascii: "\"") && b != UInt8(ascii: "\\") && b != 0xEF && b != 0xE2 {
                i += 1
                continue
            }
            if runStart < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i])) }
            i += 1
            switch b {
            case UInt8(ascii: "\""): out.append(UInt8(ascii: "\\")); out.append(b)
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\")); out.append(b)
            case 0x0A: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "t"))
            case 0x08: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "f"))
            case 0..<0x20:
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                out.append(lowerHexDigits[Int(b >> 4)])
                out.append(lowerHexDigits[Int(b & 0x0F)])
            case 0xEF where i + 1 < bytes.count && bytes[i] == 0xBB && bytes[i + 1] == 0xBF:
                out.append(contentsOf: #"\ufeff"#.utf8)
                i += 2
            case 0xE2 where i + 1 < bytes.count && bytes[i] == 0x80 && (bytes[i + 1] == 0xA8 || bytes[i + 1] == 0xA9):
                out.append(contentsOf: (bytes[i + 1] == 0xA8 ? #"\u2028"# : #"\u2029"#).utf8)
                i += 2
            default:
                out.append(b)
            }
            runStart = i
        }
        if runStart < bytes.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...])) }
    }

    /// XML escaping that survives attribute and text normalisation: CR, LF and TAB become
    /// character references so a parser gives them back unchanged.
    static func xmlEscape(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) throws(RenderError) {
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            switch b {
            case UInt8(ascii: "&"): out.append(contentsOf: "&amp;".utf8)
            case UInt8(ascii: "<"): out.append(contentsOf: "&lt;".utf8)
            case UInt8(ascii: ">"): out.append(contentsOf: "&gt;".utf8)
            case UInt8(ascii: "\""): out.append(contentsOf: "&quot;".utf8)
            case UInt8(ascii: "'"): out.append(contentsOf: "&apos;".utf8)
            case 0x09: out.append(contentsOf: "&#9;".utf8)
            case 0x0A: out.append(contentsOf: "&#10;".utf8)
            case 0x0D: out.append(contentsOf: "&#13;".utf8)
            case 0..<0x20:
                throw RenderError.xmlForbiddenCharacter(Unicode.Scalar(b))
            case 0xEF where i + 2 < bytes.count && bytes[i + 1] == 0xBF && (bytes[i + 2] == 0xBE || bytes[i + 2] == 0xBF):
                // U+FFFE and U+FFFF are not XML characters either.
                throw RenderError.xmlForbiddenCharacter(Unicode.Scalar(bytes[i + 2] == 0xBE ? 0xFFFE : 0xFFFF)!)
            default:
                out.append(b)
            }
            i += 1
        }
    }

    /// Lower-case hexadecimal of `bytes`.
    static func lowerHex<C: Sequence>(_ bytes: C) -> String where C.Element == UInt8 {
        var out = [UInt8]()
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for b in bytes {
            out.append(lowerHexDigits[Int(b >> 4)])
            out.append(lowerHexDigits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static let base64Alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Standard base64 (RFC 4648) with padding.
    static func base64(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 2 < bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(base64Alphabet[Int(n >> 18 & 63)])
            out.append(base64Alphabet[Int(n >> 12 & 63)])
            out.append(base64Alphabet[Int(n >> 6 & 63)])
            out.append(base64Alphabet[Int(n & 63)])
            i += 3
        }
        let rest = bytes.count - i
        if rest > 0 {
            let n = UInt32(bytes[i]) << 16 | (rest == 2 ? UInt32(bytes[i + 1]) << 8 : 0)
            out.append(base64Alphabet[Int(n >> 18 & 63)])
            out.append(base64Alphabet[Int(n >> 12 & 63)])
            out.append(rest == 2 ? base64Alphabet[Int(n >> 6 & 63)] : UInt8(ascii: "="))
            out.append(UInt8(ascii: "="))
        }
        return String(decoding: out, as: UTF8.self)
    }
}
