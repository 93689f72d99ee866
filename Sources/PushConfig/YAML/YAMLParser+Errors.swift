import CYAML

/// What libyaml's errors mean to a person: where the mistake is, and how to mend it.
extension YAMLParser {

    /// Describes the error that made `yaml_parser_parse` fail.
    static func libyamlError(
        _ parser: UnsafePointer<yaml_parser_t>, bytes: [UInt8], bomLength: Int
    ) -> YAMLError {
        let state = parser.pointee
        let problem = state.problem.map { String(cString: $0) } ?? "unknown problem"
        switch state.error {
        case YAML_MEMORY_ERROR:
            return YAMLError(message: "there is not enough memory to read the file",
                             position: SourcePosition(line: 1, column: 1))
        case YAML_READER_ERROR:
            // Reader errors carry a byte offset into the input we passed, not a mark.
            let source = SourceText(bytes: bytes)
            let lonelyLastByte = problem == "incomplete UTF-8 octet sequence" && bytes.last.map { $0 >= 0xC0 } == true
            if problem.hasPrefix("invalid leading UTF-8") || problem.hasPrefix("invalid trailing UTF-8")
                || problem.hasPrefix("invalid length of a UTF-8") || lonelyLastByte, let offset = firstInvalidUTF8(bytes) {
                // libyaml names the byte after the bad one ("invalid trailing UTF-8 octet 0x0A"
                // for a Latin-1 é): say the one that is wrong, where it is. A lead byte alone at
                // the end is one too (a Latin-1 é as the file's last byte).
                let byte = "0x" + String(bytes[offset], radix: 16, uppercase: true)
                return YAMLError(message: "the file is not valid UTF-8 text: byte \(byte) does not begin a UTF-8 character here "
                                     + "(the file may be in Latin-1 or Windows-1252; save it as UTF-8)",
                                 position: position(ofInvalidByte: offset, in: bytes, line: source.position(ofByteOffset: offset).line))
            }
            let position = source.position(ofByteOffset: state.problem_offset + bomLength)
            return YAMLError(message: readerMessage(problem: problem, value: Int(state.problem_value)),
                             position: position)
        default:
            let source = SourceText(bytes: bytes)
            var position = sourcePosition(state.problem_mark)
            // At the end of a file without a final line break libyaml reports a line past the
            // last one; report the end of the last line instead.
            if source.byteOffset(of: position) == nil {
                position = source.position(ofByteOffset: bytes.count)
            }
            var message = "YAML syntax error: "
            var explained: String?
            var showContext = true
            if problem == "found character that cannot start any token",
               let offset = source.byteOffset(of: position), offset < bytes.count {
                switch bytes[offset] {
                case 0x09:
                    explained = "found a tab character, which cannot start any token (indent with spaces, not tabs)"
                    // libyaml's "(while scanning for the next token)" says nothing to a person.
                    showContext = false
                case UInt8(ascii: "%"), UInt8(ascii: "@"), UInt8(ascii: "`"):
                    // Templates often begin with a placeholder: the commonest mistake here.
                    let c = Character(Unicode.Scalar(bytes[offset]))
                    explained = "a value cannot start with '\(c)' unless it is quoted; put it in single quotes"
                        + ((state.flow_level > 0 ? nil : Self.quotedValue(at: offset, in: bytes)).map { ": \($0)" }
                           ?? ", as in '%account[username]%:%selector%'")
                    showContext = false
                default:
                    break
                }
            }
            if problem == "mapping values are not allowed in this context", let offset = source.byteOffset(of: position) {
                let (message, placed) = Self.explainMappingValue(at: offset, in: bytes)
                explained = message
                if let placed { position = source.position(ofByteOffset: placed) }
                showContext = false
            }
            if explained == nil, problem.hasPrefix("found a tab character") {
                // libyaml's other tab problems ("… that violates indentation", "… where an
                // indentation space is expected") say what, not what to do.
                explained = problem + " (indent with spaces, not tabs)"
            }
            // Something opened and never closed: libyaml says so at the end of the file, which
            // names nothing to mend; said where it was opened instead.
            if explained == nil, let contextPointer = state.context, let unclosed = Self.unclosed(problem: problem, context: String(cString: contextPointer)),
               source.byteOffset(of: position).map({ bytes[$0...].allSatisfy { [0x20, 0x09, 0x0A, 0x0D].contains($0) } }) ?? true {
                explained = unclosed
                position = sourcePosition(state.context_mark)
                showContext = false
            }
            message += explained ?? problem
            if showContext, let contextPointer = state.context {
                let context = String(cString: contextPointer)
                let contextPosition = sourcePosition(state.context_mark)
                if contextPosition < position {
                    message += " (\(context) that started at line \(contextPosition.line), column \(contextPosition.column))"
                } else {
                    message += " (\(context))"
                }
            }
            return YAMLError(message: message, position: position)
        }
    }

    /// What was left open when libyaml's `problem` (in `context`) comes at the end of the file:
    /// a quoted value or a flow collection; nil for anything else.
    static func unclosed(problem: String, context: String) -> String? {
        switch (problem, context) {
        case ("found unexpected end of stream", "while scanning a quoted scalar"):
            "this quoted value is never closed: the file ends before its closing quote"
        case ("did not find expected ',' or '}'", "while parsing a flow mapping"):
            "this '{' is never closed: the file ends before its '}'"
        case ("did not find expected ',' or ']'", "while parsing a flow sequence"):
            "this '[' is never closed: the file ends before its ']'"
        default:
            nil
        }
    }

    /// libyaml's "mapping values are not allowed in this context", at the `:` at `offset`, said
    /// as what to mend: a line indented more than the one above it reads as the rest of that
    /// line's value, so its `key:` cannot be a key (placed at the line's first character, the
    /// byte offset returned); otherwise a value holds `: ` (placed where libyaml says).
    static func explainMappingValue(at offset: Int, in bytes: [UInt8]) -> (message: String, offset: Int?) {
        let holdsColon: (message: String, offset: Int?) = (
            "a ': ' where YAML cannot start a key here: if it is part of a value, put the value in quotes; "
                + "if it is a key, indent it as the keys beside it", nil)
        let start = lineStart(of: offset, in: bytes)
        let indent = indentation(at: start, in: bytes)
        // A ': ' before this one on the line: this line's key is read, and a value holds ': '.
        if bytes[start..<offset].indices.contains(where: { bytes[$0] == UInt8(ascii: ":") && [0x20, 0x09].contains(bytes[$0 + 1]) }) {
            return holdsColon
        }
        // The line above that is neither blank nor a comment.
        var end = start
        while end > 0 {
            while end > 0, bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D { end -= 1 }
            let above = lineStart(of: end, in: bytes)
            let spaces = indentation(at: above, in: bytes)
            let first = above + spaces
            if first < end, bytes[first] != UInt8(ascii: "#") {
                // A line that opens a block (`accounts:`, `- `) is followed by a deeper one.
                var last = end
                if let hash = bytes[first..<end].firstIndex(where: { $0 == UInt8(ascii: "#") }),
                   hash > first, bytes[hash - 1] == 0x20 || bytes[hash - 1] == 0x09 { last = hash }
                while last > first, bytes[last - 1] == 0x20 || bytes[last - 1] == 0x09 { last -= 1 }
                if last > first, bytes[last - 1] == UInt8(ascii: ":") || (bytes[last - 1] == UInt8(ascii: "-") && last - 1 == first) {
                    return holdsColon
                }
                // `- key: value` puts its keys at the column after "- ".
                var keyColumn = spaces
                var index = first
                while index + 1 < end, bytes[index] == UInt8(ascii: "-"), bytes[index + 1] == 0x20 {
                    index += 2
                    while index < end, bytes[index] == 0x20 { index += 1 }
                    keyColumn = index - above
                }
                if indent > keyColumn {
                    return ("this line is indented more than the line above (its keys are at column \(keyColumn + 1), this one at column \(indent + 1)), "
                            + "so it reads as more of that line's value, where 'key: value' cannot be; indent it as the keys beside it", start + indent)
                }
                break
            }
            end = above
        }
        return holdsColon
    }

    /// The plain value that starts at `offset` and runs to the end of its line (or to a comment),
    /// in single quotes as YAML would read it: the fix to show for a value that must be quoted.
    /// Nil where that would not be the fix: inside a flow collection (`{…}`, `[…]`, which the
    /// caller knows from libyaml; a `{` or `[` earlier on the line is checked here too), for a
    /// key (`%a: b`), for a value continued on the next lines, and for one too long to show.
    static func quotedValue(at offset: Int, in bytes: [UInt8]) -> String? {
        let start = lineStart(of: offset, in: bytes)
        guard !bytes[start..<offset].contains(where: { $0 == UInt8(ascii: "{") || $0 == UInt8(ascii: "[") }) else { return nil }
        var end = offset
        while end < bytes.count, bytes[end] != 0x0A, bytes[end] != 0x0D {
            // " #" begins a comment.
            if bytes[end] == UInt8(ascii: "#"), end > offset, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { break }
            // ": " (or a colon at the end) makes it a key.
            if bytes[end] == UInt8(ascii: ":"), end + 1 == bytes.count || [0x20, 0x09, 0x0A, 0x0D].contains(bytes[end + 1]) { return nil }
            end += 1
        }
        let lineEnd = end
        while end > offset, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        guard end - offset <= 100, !continues(after: lineEnd, indentedMoreThan: indentation(at: start, in: bytes), in: bytes),
              let value = String(validating: bytes[offset..<end], as: UTF8.self) else { return nil }
        return "'" + value.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "''") + "'"
    }

    /// Where the line holding the byte at `offset` starts (after a CR or LF).
    static func lineStart(of offset: Int, in bytes: [UInt8]) -> Int {
        var start = offset
        while start > 0, bytes[start - 1] != 0x0A, bytes[start - 1] != 0x0D { start -= 1 }
        return start
    }

    /// The spaces that begin the line starting at `start`.
    static func indentation(at start: Int, in bytes: [UInt8]) -> Int {
        var index = start
        while index < bytes.count, bytes[index] == 0x20 { index += 1 }
        return index - start
    }

    /// Whether the next line that is not blank nor a comment, after the line ending at
    /// `lineEnd`, is indented more than `indent`: a plain value goes on there.
    static func continues(after lineEnd: Int, indentedMoreThan indent: Int, in bytes: [UInt8]) -> Bool {
        var index = lineEnd
        while index < bytes.count {
            while index < bytes.count, bytes[index] == 0x0A || bytes[index] == 0x0D { index += 1 }
            let start = index
            let spaces = indentation(at: start, in: bytes)
            index = start + spaces
            guard index < bytes.count else { return false }
            if bytes[index] == 0x0A || bytes[index] == 0x0D { continue }
            // A tab where the indentation goes on: no telling how YAML reads it.
            if bytes[index] == 0x09 { return true }
            if bytes[index] == UInt8(ascii: "#") {
                while index < bytes.count, bytes[index] != 0x0A, bytes[index] != 0x0D { index += 1 }
                continue
            }
            return spaces > indent
        }
        return false
    }

    /// The place of the byte at `offset` on `line`: the characters before it on its line count one
    /// column each, as do bytes that begin none (``SourceText`` counts a stray 0x80–0xBF byte, a
    /// Windows-1252 ’ say, with the character before it).
    static func position(ofInvalidByte offset: Int, in bytes: [UInt8], line: Int) -> SourcePosition {
        let start = lineStart(of: offset, in: bytes)
        var column = 1
        // A byte order mark is no column (as SourceText counts).
        var index = start == 0 && bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : start
        while index < offset {
            let length = sequenceLength(bytes, at: index)
            index += length > 0 ? length : 1
            column += 1
        }
        return SourcePosition(line: line, column: column)
    }

    /// The length of the well-formed UTF-8 character at `index`, or 0 when none begins there.
    static func sequenceLength(_ bytes: [UInt8], at index: Int) -> Int {
        let (length, low, high): (Int, UInt8, UInt8) = switch bytes[index] {
        case 0x00...0x7F: (1, 0x80, 0xBF)
        case 0xC2...0xDF: (2, 0x80, 0xBF)
        case 0xE0: (3, 0xA0, 0xBF)
        case 0xED: (3, 0x80, 0x9F)
        case 0xE1...0xEF: (3, 0x80, 0xBF)
        case 0xF0: (4, 0x90, 0xBF)
        case 0xF4: (4, 0x80, 0x8F)
        case 0xF1...0xF3: (4, 0x80, 0xBF)
        default: (0, 0, 0)
        }
        guard length > 0, index + length <= bytes.count else { return 0 }
        if length > 1 {
            guard (low...high).contains(bytes[index + 1]) else { return 0 }
            for next in index + 2 ..< index + length where !(0x80...0xBF).contains(bytes[next]) { return 0 }
        }
        return length
    }

    /// The offset of the first byte of `bytes` that does not begin a well-formed UTF-8
    /// character (as Unicode defines it: no overlong forms, surrogates or values past U+10FFFF),
    /// or nil when all of them are well-formed.
    static func firstInvalidUTF8(_ bytes: [UInt8]) -> Int? {
        var index = 0
        while index < bytes.count {
            let length = sequenceLength(bytes, at: index)
            guard length > 0 else { return index }
            index += length
        }
        return nil
    }

    /// A message for a libyaml reader error (bad encoding or a forbidden character).
    static func readerMessage(problem: String, value: Int) -> String {
        switch problem {
        case "control characters are not allowed":
            if value == 0 {
                return "the file contains a NUL byte (0x00), which YAML does not allow; it may be a binary file"
            }
            return "the file contains a control character (\(hex(value, unicode: value > 0x7F))), which YAML does not allow"
        case "incomplete UTF-8 octet sequence":
            return "the file is not valid UTF-8 text (it ends in the middle of a multi-byte character)"
        default:
            // "invalid leading/trailing UTF-8 octet" (value is the byte), "invalid Unicode
            // character" (value is the code point), "invalid length of a UTF-8 sequence".
            let detail = value < 0 ? problem
                : problem.hasSuffix("octet") ? "\(problem) \(hex(value))"
                : "\(problem) \(hex(value, unicode: true))"
            return "the file is not valid UTF-8 text (\(detail))"
        }
    }

    /// `0x1B` style for a byte, `U+0085` style for a Unicode code point.
    static func hex(_ value: Int, unicode: Bool = false) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        let width = unicode ? 4 : 2
        let padded = String(repeating: "0", count: max(0, width - digits.count)) + digits
        return (unicode ? "U+" : "0x") + padded
    }
}
