/// Checks that text is one well-formed JSON value (RFC 8259), without building it.
public enum JSONValidator {
    /// nil when valid, else a short reason with the byte offset.
    public static func problem(in text: String) -> String? {
        problem(in: Array(text.utf8))
    }

    /// nil when `bytes` hold one valid JSON value, else a short reason with the byte offset.
    public static func problem(in bytes: [UInt8]) -> String? {
        var scanner = Scanner(bytes: bytes)
        scanner.skipSpace()
        do throws(Failure) {
            try scanner.value(depth: 0)
            scanner.skipSpace()
            if scanner.index != scanner.bytes.count { throw Failure(reason: "unexpected text after the JSON value", at: scanner.index) }
            return nil
        } catch {
            return "\(error.reason) at byte \(error.at + 1)"
        }
    }

    struct Failure: Error {
        var reason: String
        var at: Int
    }

    struct Scanner {
        let bytes: [UInt8]
        var index = 0

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipSpace() {
            while let b = current, b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D { index += 1 }
        }

        mutating func expect(_ literal: String) throws(Failure) {
            for b in literal.utf8 {
                guard current == b else { throw Failure(reason: "expected '\(literal)'", at: index) }
                index += 1
            }
        }

        mutating func value(depth: Int) throws(Failure) {
            guard depth < 256 else { throw Failure(reason: "nesting is too deep", at: index) }
            guard let b = current else { throw Failure(reason: "the text ends where a value should start", at: index) }
            switch b {
            case UInt8(ascii: "{"):
                index += 1; skipSpace()
                if current == UInt8(ascii: "}") { index += 1; return }
                while true {
                    skipSpace()
                    guard current == UInt8(ascii: "\"") else { throw Failure(reason: "expected a string key", at: index) }
                    try string()
                    skipSpace()
                    try expect(":")
                    skipSpace()
                    try value(depth: depth + 1)
                    skipSpace()
                    if current == UInt8(ascii: ",") { index += 1; continue }
                    try expect("}")
                    return
                }
            case UInt8(ascii: "["):
                index += 1; skipSpace()
                if current == UInt8(ascii: "]") { index += 1; return }
                while true {
                    skipSpace()
                    try value(depth: depth + 1)
                    skipSpace()
                    if current == UInt8(ascii: ",") { index += 1; continue }
                    try expect("]")
                    return
                }
            case UInt8(ascii: "\""): try string()
            case UInt8(ascii: "t"): try expect("true")
            case UInt8(ascii: "f"): try expect("false")
            case UInt8(ascii: "n"): try expect("null")
            default: try number()
            }
        }

        mutating func string() throws(Failure) {
            let start = index
            index += 1
            while let b = current {
                index += 1
                switch b {
                case UInt8(ascii: "\""): return
                case UInt8(ascii: "\\"):
                    guard let e = current else { break }
                    index += 1
                    if e == UInt8(ascii: "u") {
                        for _ in 0..<4 {
                            guard let h = current, (h >= 0x30 && h <= 0x39) || (h | 0x20 >= 0x61 && h | 0x20 <= 0x66) else {
                                throw Failure(reason: "bad \\u escape", at: index)
                            }
                            index += 1
                        }
                    } else if !"\"\\/bfnrt".utf8.contains(e) {
                        throw Failure(reason: "bad escape", at: index - 1)
                    }
                case 0..<0x20: throw Failure(reason: "a control character inside a string", at: index - 1)
                default: break
                }
            }
            throw Failure(reason: "unterminated string", at: start)
        }

        mutating func number() throws(Failure) {
            let start = index
            if current == UInt8(ascii: "-") { index += 1 }
            var digits = 0
            while let b = current, b >= 0x30 && b <= 0x39 { index += 1; digits += 1 }
            guard digits > 0 else { throw Failure(reason: "unexpected character", at: start) }
            if current == UInt8(ascii: ".") {
                index += 1
                var fraction = 0
                while let b = current, b >= 0x30 && b <= 0x39 { index += 1; fraction += 1 }
                guard fraction > 0 else { throw Failure(reason: "bad number", at: start) }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                index += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
                var exponent = 0
                while let b = current, b >= 0x30 && b <= 0x39 { index += 1; exponent += 1 }
                guard exponent > 0 else { throw Failure(reason: "bad number", at: start) }
            }
        }
    }
}
