/// Checks that bytes are one well-formed XML document (XML 1.0 §2.1), without building it:
/// a prolog, one root element with matching tags and quoted, unique attributes, then only
/// comments, processing instructions and space. Entity references must be the predefined five,
/// character references, or names (a DOCTYPE may declare them; they are not expanded).
enum XMLChecker {
    /// nil when well-formed, else a short reason with the byte offset.
    static func problem(in bytes: [UInt8]) -> String? {
        var scanner = Scanner(bytes: bytes)
        do throws(Failure) {
            try scanner.document()
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

        func fail(_ reason: String) -> Failure { Failure(reason: reason, at: index) }

        /// Whether the input continues with `text` (no allocation: it is called at every byte of
        /// comments and text).
        func looking(at text: StaticString) -> Bool {
            let count = text.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            return text.withUTF8Buffer { expected in
                expected.indices.allSatisfy { expected[$0] == bytes[index + $0] }
            }
        }

        mutating func skipSpace() {
            while let b = current, b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D { index += 1 }
        }

        /// Moves past the next `terminator`; fails with `reason` when there is none.
        mutating func skip(past terminator: StaticString, _ reason: String) throws(Failure) {
            while index < bytes.count {
                if looking(at: terminator) {
                    index += terminator.utf8CodeUnitCount
                    return
                }
                index += 1
            }
            throw fail(reason)
        }

        mutating func document() throws(Failure) {
            if looking(at: "\u{FEFF}") { index += 3 }
            var sawRoot = false
            while true {
                skipSpace()
                guard current != nil else { break }
                if looking(at: "<?") {
                    try skip(past: "?>", "unterminated processing instruction")
                } else if looking(at: "<!--") {
                    try comment()
                } else if looking(at: "<!DOCTYPE") {
                    guard !sawRoot else { throw fail("DOCTYPE after the root element") }
                    try doctype()
                } else if current == UInt8(ascii: "<") {
                    guard !sawRoot else { throw fail("a second root element") }
                    try element()
                    sawRoot = true
                } else {
                    throw fail("text outside the root element")
                }
            }
            if !sawRoot { throw fail("no root element") }
        }

        mutating func comment() throws(Failure) {
            index += 4
            while index < bytes.count {
                if looking(at: "--") {
                    guard looking(at: "-->") else { throw fail("'--' inside a comment") }
                    index += 3
                    return
                }
                index += 1
            }
            throw fail("unterminated comment")
        }

        mutating func doctype() throws(Failure) {
            var depth = 0
            while let b = current {
                index += 1
                if b == UInt8(ascii: "[") { depth += 1 }
                if b == UInt8(ascii: "]") { depth -= 1 }
                if b == UInt8(ascii: ">"), depth <= 0 { return }
            }
            throw fail("unterminated DOCTYPE")
        }

        mutating func name() throws(Failure) -> ArraySlice<UInt8> {
            let start = index
            while let b = current, Self.isNameByte(b, first: index == start) { index += 1 }
            guard index > start else { throw fail("a name was expected") }
            return bytes[start..<index]
        }

        static func isNameByte(_ b: UInt8, first: Bool) -> Bool {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "_"), UInt8(ascii: ":"), 0x80...0xFF:
                return true
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."):
                return !first
            default:
                return false
            }
        }

        /// The root element and everything inside it, with an explicit stack (no recursion).
        mutating func element() throws(Failure) {
            guard index + 1 < bytes.count, Self.isNameByte(bytes[index + 1], first: true) else {
                throw fail("a start tag was expected")
            }
            var open: [ArraySlice<UInt8>] = []
            repeat {
                if looking(at: "</") {
                    index += 2
                    let closing = try name()
                    skipSpace()
                    guard current == UInt8(ascii: ">") else { throw fail("'>' expected") }
                    index += 1
                    guard let expected = open.popLast(), expected.elementsEqual(closing) else {
                        throw fail("a closing tag that matches no open element")
                    }
                } else if looking(at: "<!--") {
                    try comment()
                } else if looking(at: "<![CDATA[") {
                    try skip(past: "]]>", "unterminated CDATA section")
                } else if looking(at: "<?") {
                    try skip(past: "?>", "unterminated processing instruction")
                } else if current == UInt8(ascii: "<") {
                    index += 1
                    let tag = try name()
                    if try attributes() { open.append(tag) }
                } else if current != nil {
                    try text()
                } else {
                    throw fail("the document ends inside an element")
                }
            } while !open.isEmpty
        }

        /// Attributes up to `>` (true: the element has content) or `/>` (false: it is empty).
        mutating func attributes() throws(Failure) -> Bool {
            var seen: [ArraySlice<UInt8>] = []
            while true {
                let before = index
                skipSpace()
                if looking(at: "/>") {
                    index += 2
                    return false
                }
                if current == UInt8(ascii: ">") {
                    index += 1
                    return true
                }
                guard index > before else { throw fail("space expected before an attribute") }
                let attribute = try name()
                if seen.contains(where: { $0.elementsEqual(attribute) }) { throw fail("a repeated attribute") }
                seen.append(attribute)
                skipSpace()
                guard current == UInt8(ascii: "=") else { throw fail("'=' expected after an attribute name") }
                index += 1
                skipSpace()
                guard let quote = current, quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") else {
                    throw fail("an attribute value must be quoted")
                }
                index += 1
                while let b = current, b != quote {
                    if b == UInt8(ascii: "<") { throw fail("'<' inside an attribute value") }
                    if b == UInt8(ascii: "&") { try reference() } else { index += 1 }
                }
                guard current == quote else { throw fail("unterminated attribute value") }
                index += 1
            }
        }

        mutating func text() throws(Failure) {
            while let b = current, b != UInt8(ascii: "<") {
                if b == UInt8(ascii: "&") {
                    try reference()
                } else if looking(at: "]]>") {
                    throw fail("']]>' in text")
                } else {
                    index += 1
                }
            }
        }

        /// `&name;`, `&#123;` or `&#x1F;`.
        mutating func reference() throws(Failure) {
            index += 1
            if current == UInt8(ascii: "#") {
                index += 1
                let hex = current == UInt8(ascii: "x")
                if hex { index += 1 }
                let start = index
                while let b = current, Self.isDigit(b, hex: hex) { index += 1 }
                guard index > start else { throw fail("a character reference needs digits") }
            } else {
                _ = try name()
            }
            guard current == UInt8(ascii: ";") else { throw fail("';' expected after a reference") }
            index += 1
        }

        static func isDigit(_ b: UInt8, hex: Bool) -> Bool {
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return true
            case UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): return hex
            default: return false
            }
        }
    }
}
