import CYAML

/// Result of parsing one file.
public struct YAMLParseResult: Sendable {
    /// The file's document, or nil when the file has no document (it is empty or holds only
    /// comments) or when a fatal error stopped parsing.
    public var root: YAMLNode?
    /// Fatal errors (then `root` is nil and this holds exactly that one error) and non-fatal
    /// structural ones (duplicate keys, non-scalar keys, bad merge values, extra documents),
    /// in the order they were found.
    public var errors: [YAMLError]
    /// When the items of a sequence were handed to a ``SequenceStream``, how many (with those
    /// of a split file's second part, streamed by another thread): they are not in `root`, where
    /// that sequence is empty (nil when nothing was streamed).
    var streamedItemCount: Int?

    public init(root: YAMLNode? = nil, errors: [YAMLError] = []) {
        self.root = root
        self.errors = errors
    }
}

/// Reads YAML files into `YAMLNode` trees using libyaml's event API, keeping the source
/// position of every node.
///
/// Beyond plain YAML parsing it:
/// - keeps mapping entries in file order and reports a duplicate key (keeping the first) or a
///   non-scalar key (dropping the entry) without stopping;
/// - expands aliases (`*a`) to a copy of the anchored node (`&a`), which keeps the anchored
///   node's positions, and resolves merge keys (`<<: *a`, `<<: [*a, *b]`);
/// - rejects a second document, nesting deeper than `maximumDepth`, and alias expansion that
///   produces more than `maximumNodeCount` nodes ("billion laughs").
///
/// Scalars are never reinterpreted: `value` is the text after YAML unescaping and folding.
/// Positions are libyaml's marks made 1-based, except that a node with a tag or anchor starts
/// at its own text (`NAME` in `!env NAME`), where libyaml would start it at the tag.
public enum YAMLParser {
    /// The deepest nesting of mappings and sequences accepted; the root collection is level 1.
    public static let maximumDepth = 64

    /// The most nodes a file may produce, counting every node an alias expands to. Checked
    /// when an alias is expanded, so only files using aliases can reach it.
    public static let maximumNodeCount = 10_000_000

    /// Parses a whole file's bytes (UTF-8 expected; a leading UTF-8 byte order mark is skipped).
    public static func parse(_ bytes: [UInt8]) -> YAMLParseResult {
        parse(bytes, streaming: nil)
    }

    /// Parses `bytes`, handing the items of the root's `stream.key` sequence to `stream` as they
    /// are read (see ``SequenceStream``).
    static func parse(_ bytes: [UInt8], streaming stream: SequenceStream?) -> YAMLParseResult {
        if bytes.count >= 2, (bytes[0] == 0xFF && bytes[1] == 0xFE) || (bytes[0] == 0xFE && bytes[1] == 0xFF) {
            return fatal("the file is not valid UTF-8 text (it starts with a UTF-16 byte order mark)",
                         at: SourcePosition(line: 1, column: 1))
        }
        // UTF-8 is forced below so UTF-16 input fails instead of yielding positions that match
        // no byte offsets; libyaml then no longer skips a byte order mark, so we do.
        let bomLength = bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF ? 3 : 0
        guard bytes.count > bomLength else { return YAMLParseResult() }

        let result = withParser { parser, event in bytes.withUnsafeBufferPointer { buffer in
            // Non-empty here, so `baseAddress` is non-nil.
            let input = UnsafeBufferPointer(rebasing: buffer[bomLength...])
            let feed = stream.flatMap { SplitFeed(stream: $0, bytes: bytes, input: input) }
            if let feed {
                yaml_parser_set_input(parser, TextFeed.readHandler, Unmanaged.passUnretained(feed.text).toOpaque())
            } else {
                yaml_parser_set_input_string(parser, input.baseAddress!, input.count)
            }
            var builder = TreeBuilder(input: input, stream: stream, feed: feed)
            defer { builder.deallocate() }
            while true {
                guard yaml_parser_parse(parser, event) != 0 else {
                    builder.fail(libyamlError(parser, bytes: bytes, bomLength: bomLength))
                    break
                }
                let proceed = builder.consume(event)
                yaml_event_delete(event)
                if !proceed { break }
            }
            feed?.cancel()
            if feed?.jump != nil, builder.isInDoubt {
                // Whatever went wrong after the jump, only a parse of the whole text tells what,
                // and where: the streamed items are not in it, which the loader notices.
                return parse(bytes)
            }
            return builder.result
        } }
        return result ?? fatal("there is not enough memory to read the file", at: SourcePosition(line: 1, column: 1))
    }

    /// A libyaml parser reading UTF-8, and an event to parse into, for `body`; nil when libyaml
    /// cannot make one (out of memory).
    private static func withParser<Result>(
        _ body: (UnsafeMutablePointer<yaml_parser_t>, UnsafeMutablePointer<yaml_event_t>) -> Result
    ) -> Result? {
        // libyaml keeps a pointer to the parser inside the parser, so it needs a stable address.
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        defer { parser.deallocate() }
        let event = UnsafeMutablePointer<yaml_event_t>.allocate(capacity: 1)
        defer { event.deallocate() }
        guard yaml_parser_initialize(parser) != 0 else { return nil }
        defer { yaml_parser_delete(parser) }
        yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)
        return body(parser, event)
    }

    /// Parses the file `window` reads, handing the items of the root's `stream.key` sequence to
    /// `stream` as they are read, as ``parse(_:streaming:)`` would parse its whole bytes; nil when
    /// only a parse of the whole bytes can tell the result: libyaml stopped on an error (worded
    /// from the bytes around it), reading failed, or the window let go of bytes still needed.
    static func parse(window: InputWindow, streaming stream: SequenceStream?) -> YAMLParseResult? {
        withParser { parser, event in withExtendedLifetime(window) { () -> YAMLParseResult? in
            yaml_parser_set_input(parser, InputWindow.readHandler, Unmanaged.passUnretained(window).toOpaque())
            var builder = TreeBuilder(window: window, stream: stream)
            defer { builder.deallocate() }
            while true {
                guard yaml_parser_parse(parser, event) != 0 else { return nil }
                let proceed = builder.consume(event)
                yaml_event_delete(event)
                if !proceed { break }
            }
            return window.isLost || window.failure != nil ? nil : builder.result
        } } ?? nil
    }

    /// Parses the items of a block sequence whose first item starts at byte `start` of `input`,
    /// at `column`, as the value of the root's `key`, as libyaml would read them in the whole
    /// file: the second part of a split file (see ``SplitFeed``). Its items go to `stream`. Nil
    /// when the part cannot be used as it is (a YAML error, an anchor or alias in it), or `stream` was
    /// cancelled.
    static func parseSection(
        of input: UnsafeBufferPointer<UInt8>, start: Int, column: Int, into stream: SequenceStream
    ) -> SplitSection? {
        // Whatever happens, whoever reads the section's items is told when there are no more.
        defer { stream.end() }
        guard let before = SplitFeed.count(input[..<start]) else { return nil }
        let key = stream.key
        // The part as the value of a mapping's first key, on the line before its own first
        // line: libyaml is fed that line, then the part where it is.
        let part = UnsafeBufferPointer(rebasing: input[start...])
        let prefix = Array(key.utf8) + [UInt8(ascii: ":"), 0x0A]
        let feed = TextFeed(part, after: prefix)
        return withParser { parser, event in withExtendedLifetime(feed) { () -> SplitSection? in
            yaml_parser_set_input(parser, TextFeed.readHandler, Unmanaged.passUnretained(feed).toOpaque())
            // The prefix is ASCII: its characters are its bytes.
            var builder = TreeBuilder(input: part, section: (key: key, column: column), stream: stream,
                                      lineShift: before.lines - 1, indexShift: prefix.count)
            defer { builder.deallocate() }
            var events = 0
            while true {
                guard yaml_parser_parse(parser, event) != 0 else { return nil }
                let proceed = builder.consume(event)
                yaml_event_delete(event)
                if !proceed { break }
                events += 1
                if events & 4095 == 0, stream.isCancelled { return nil }
            }
            guard let (items, nodes, end, errors) = builder.sectionResult, !stream.isCancelled else { return nil }
            // The sequence ends at the next root key, at a line's start, or at the end.
            let endOffset = builder.byteOffset(ofCharacterIndex: end.index)
            guard end.column == 0 || endOffset == part.count else { return nil }
            let endLine = end.line + before.lines - 1
            return SplitSection(itemCount: items, nodeCount: nodes, resumeOffset: start + endOffset,
                                characterIndex: before.characters, lineShift: endLine - before.lines, errors: errors)
        } } ?? nil
    }

    /// A result holding only the fatal error `message`.
    private static func fatal(_ message: String, at position: SourcePosition) -> YAMLParseResult {
        YAMLParseResult(root: nil, errors: [YAMLError(message: message, position: position)])
    }

    // MARK: - libyaml errors

    /// Describes the error that made `yaml_parser_parse` fail.
    private static func libyamlError(
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
    private static func lineStart(of offset: Int, in bytes: [UInt8]) -> Int {
        var start = offset
        while start > 0, bytes[start - 1] != 0x0A, bytes[start - 1] != 0x0D { start -= 1 }
        return start
    }

    /// The spaces that begin the line starting at `start`.
    private static func indentation(at start: Int, in bytes: [UInt8]) -> Int {
        var index = start
        while index < bytes.count, bytes[index] == 0x20 { index += 1 }
        return index - start
    }

    /// Whether the next line that is not blank nor a comment, after the line ending at
    /// `lineEnd`, is indented more than `indent`: a plain value goes on there.
    private static func continues(after lineEnd: Int, indentedMoreThan indent: Int, in bytes: [UInt8]) -> Bool {
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
    private static func sequenceLength(_ bytes: [UInt8], at index: Int) -> Int {
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
    private static func readerMessage(problem: String, value: Int) -> String {
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
    private static func hex(_ value: Int, unicode: Bool = false) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        let width = unicode ? 4 : 2
        let padded = String(repeating: "0", count: max(0, width - digits.count)) + digits
        return (unicode ? "U+" : "0x") + padded
    }
}

// MARK: - Tree building

/// Converts a libyaml mark (0-based line, 0-based column counted in characters) to a
/// 1-based `SourcePosition`.
@inline(__always)
private func sourcePosition(_ mark: yaml_mark_t) -> SourcePosition {
    SourcePosition(line: mark.line + 1, column: mark.column + 1)
}

/// A mapping entry as `YAMLMapping` stores it.
private typealias Entry = YAMLMapping.Entry

/// Builds the node tree from libyaml events with an explicit stack of open collections.
///
/// The children of an open collection at depth `d` (the root collection has depth 0) are
/// collected in `itemBuffers[d]` or `entryBuffers[d]` and moved into an exactly-sized array
/// when it closes; the buffers are reused by every later collection at that depth. Call
/// `deallocate()` when done.
private struct TreeBuilder {
    /// A node an anchor names, with the number of nodes in its subtree (for the alias budget).
    struct Anchored {
        var node: YAMLNode
        var size: Int
    }

    /// Open collections, outermost first.
    private var stack: [Frame] = []
    /// Item buffers of open sequences, indexed by depth.
    private var itemBuffers: [ScratchBuffer<YAMLNode>] = []
    /// Entry buffers of open mappings, indexed by depth.
    private var entryBuffers: [ScratchBuffer<Entry>] = []
    /// Completed anchored nodes by anchor name; a later anchor with the same name replaces one.
    private var anchors: [String: Anchored] = [:]
    private var root: YAMLNode?
    private var errors: [YAMLError] = []
    /// Nodes produced so far, counting each alias as the size of the subtree it copies.
    private var nodeCount = 0
    private var documentCount = 0
    private var failed = false
    /// The file after any byte order mark, valid while parsing; libyaml's character indexes
    /// are placed in it (past `indexShift` characters of its own for a split file's second
    /// part, over the jump for the first part, see ``SplitFeed``). Read through a `window`, the
    /// bytes it holds, `inputStart` being the first (refreshed at each event: reading moves them).
    private var input: UnsafeBufferPointer<UInt8>
    private var inputStart = 0
    /// The file fed in chunks, when it is (``InputWindow``).
    private let window: InputWindow?

    /// The byte at `offset` of the file (past any byte order mark).
    @inline(__always)
    private func byte(_ offset: Int) -> UInt8 {
        input[offset - inputStart]
    }

    /// The offset past the last byte read.
    private var inputEnd: Int { inputStart + input.count }
    /// A libyaml character index and the byte offset in `input` of that character. Only moves
    /// forward, so locating scalars costs one pass over the file at most.
    private var cursorIndex = 0
    private var cursorOffset = 0

    /// Mapping keys, shared between the mappings that repeat them.
    private var keys = KeyInterner()

    /// Where the items of the root's `stream.key` sequence go as they are read, if anywhere.
    private let stream: SequenceStream?

    /// Feeds libyaml when the streamed sequence may be split (see ``SplitFeed``).
    private let feed: SplitFeed?
    /// Whether the split was found not to match the whole file: the parse stops.
    private var splitFailed = false
    /// Whether the items of the other part were added to the stream.
    private var spliced = false
    /// Whether the document has no `%YAML` or `%TAG` directive, and its root is a block mapping
    /// at column 0: what a split assumes, since the other part is parsed without them.
    private var splittable = false

    /// Parsing the second part of a split file: the items of the root's `key` sequence, whose
    /// items start at `column`, go to `stream`; anything else makes the part unusable.
    private let section: (key: String, column: Int)?
    /// Where the section's sequence ended, and its node count, once it did.
    private var sectionEnd: (mark: yaml_mark_t, nodes: Int)?
    /// Whether the section holds something its parse cannot reproduce (an anchor or alias).
    private var sectionUnusable = false

    /// Lines added to libyaml's line numbers for marks at or after character `lineShiftFrom`:
    /// for the second part, all of them (its text starts with a line of its own); after the
    /// jump over the second part, the lines jumped over.
    private var lineShift = 0
    private var lineShiftFrom = 0

    init(input: UnsafeBufferPointer<UInt8>, stream: SequenceStream?, feed: SplitFeed? = nil) {
        self.input = input
        self.stream = stream
        self.feed = feed
        self.section = nil
        self.window = nil
    }

    /// A builder for a file fed through `window`.
    init(window: InputWindow, stream: SequenceStream?) {
        self.input = window.bytes
        self.window = window
        self.stream = stream
        self.feed = nil
        self.section = nil
    }

    /// A builder for the second part of a split file (see ``YAMLParser/parseSection``), whose
    /// `input` libyaml reads after `indexShift` characters of its own.
    init(input: UnsafeBufferPointer<UInt8>, section: (key: String, column: Int), stream: SequenceStream, lineShift: Int,
         indexShift: Int) {
        self.input = input
        self.stream = stream
        self.feed = nil
        self.window = nil
        self.section = section
        self.lineShift = lineShift
        self.indexShift = indexShift
    }

    /// Characters libyaml read before `input` (none but for the second part of a split file).
    private var indexShift = 0

    /// Whether the result of a parse that jumped over the second part may differ from that of
    /// the whole text: the split did not match, or libyaml stopped on an error (its marks are
    /// not shifted; the builder's own errors are placed with shifted positions).
    var isInDoubt: Bool {
        splitFailed || !spliced || failed
    }

    /// The second part's item and node counts, where its sequence ended, and the problems found
    /// in it (already placed as one parse of the whole text places them); nil when unusable.
    var sectionResult: (items: Int, nodes: Int, end: yaml_mark_t, errors: [YAMLError])? {
        guard let sectionEnd, !sectionUnusable, !failed else { return nil }
        return (streamedItemCount ?? 0, sectionEnd.nodes, sectionEnd.mark, errors)
    }

    /// The items handed to `stream`, once its sequence began.
    private var streamedItemCount: Int?

    var result: YAMLParseResult {
        var result = YAMLParseResult(root: failed ? nil : root, errors: errors)
        result.streamedItemCount = streamedItemCount
        return result
    }

    /// Frees the buffers, with any nodes still in them (after a fatal error).
    mutating func deallocate() {
        for index in itemBuffers.indices { itemBuffers[index].deallocate() }
        for index in entryBuffers.indices { entryBuffers[index].deallocate() }
        itemBuffers = []
        entryBuffers = []
    }

    /// A libyaml mark as a position in the file.
    @inline(__always)
    private func position(_ mark: yaml_mark_t) -> SourcePosition {
        SourcePosition(line: line(of: mark) + 1, column: mark.column + 1)
    }

    /// The 0-based line of a libyaml mark in the file.
    @inline(__always)
    private func line(of mark: yaml_mark_t) -> Int {
        mark.index >= lineShiftFrom ? mark.line + lineShift : mark.line
    }

    /// Stops with the fatal `error`, which replaces any errors collected so far.
    mutating func fail(_ error: YAMLError) {
        failed = true
        root = nil
        errors = [error]
    }

    /// Handles one event; returns false when parsing should stop.
    mutating func consume(_ event: UnsafePointer<yaml_event_t>) -> Bool {
        if let window {
            input = window.bytes
            inputStart = window.start
            // Every later event starts here or after (events come in file order): what is
            // before may go.
            _ = byteOffset(ofCharacterIndex: event.pointee.start_mark.index)
        }
        defer { window?.keepFrom = cursorOffset }
        if !spliced, let jump = feed?.jump, !continuesAcross(jump.characterIndex, event) {
            splitFailed = true
            return false
        }
        switch event.pointee.type {
        case YAML_SCALAR_EVENT:
            nodeCount += 1
            if let anchor = event.pointee.data.scalar.anchor {
                if section != nil {
                    sectionUnusable = true
                    return false
                }
                let scalar = makeScalar(event)
                anchors[String(cString: anchor)] = Anchored(node: .scalar(scalar), size: 1)
                attachScalar(scalar)
            } else {
                // Kept apart from the anchored case so the scalar is moved, never copied.
                attachScalar(makeScalar(event))
            }
        case YAML_MAPPING_START_EVENT:
            let data = event.pointee.data.mapping_start
            return open(.mapping, tag: data.tag, anchor: data.anchor, event: event)
        case YAML_SEQUENCE_START_EVENT:
            let data = event.pointee.data.sequence_start
            return open(.sequence, tag: data.tag, anchor: data.anchor, event: event)
        case YAML_MAPPING_END_EVENT, YAML_SEQUENCE_END_EVENT:
            return close(event)
        case YAML_ALIAS_EVENT:
            if section != nil {
                sectionUnusable = true
                return false
            }
            return alias(String(cString: event.pointee.data.alias.anchor),
                         at: position(event.pointee.start_mark))
        case YAML_DOCUMENT_START_EVENT:
            documentCount += 1
            if documentCount > 1 {
                errors.append(YAMLError(
                    message: "the file holds more than one YAML document; put each in its own file",
                    position: position(event.pointee.start_mark)))
                return false
            }
            let data = event.pointee.data.document_start
            splittable = data.version_directive == nil && data.tag_directives.start == nil
        case YAML_STREAM_END_EVENT:
            return false
        default:
            break // stream start, document end, no event
        }
        return true
    }

    /// Whether `event`, from a parse that jumped over the second part of the file at
    /// `jumpIndex`, is what the whole text would give there. Before the jump, nothing may run
    /// into it (a quoted scalar or flow collection on several lines would); after it, only the
    /// ends of the last item's collections may come before the streamed sequence ends (any
    /// other node would take its position, or more, from the text after the jump; an empty value
    /// is placed at its `:` or `-`, before it).
    private func continuesAcross(_ jumpIndex: Int, _ event: UnsafePointer<yaml_event_t>) -> Bool {
        guard event.pointee.start_mark.index >= jumpIndex else { return event.pointee.end_mark.index <= jumpIndex }
        let type = event.pointee.type
        return type == YAML_MAPPING_END_EVENT || type == YAML_SEQUENCE_END_EVENT
    }

    /// The scalar a scalar event describes.
    @inline(__always)
    private mutating func makeScalar(_ event: UnsafePointer<yaml_event_t>) -> YAMLScalar {
        let data = event.pointee.data.scalar
        if data.length == 0, event.pointee.start_mark.column == 0, event.pointee.start_mark.line > 0,
           let end = endOfInput(at: event.pointee.start_mark) {
            // An empty scalar libyaml placed past the last line (`key:` ending the file).
            return YAMLScalar(value: "", style: .plain, tag: data.tag.map { String(cString: $0) }, start: end, end: end)
        }
        let bytes = UnsafeBufferPointer(start: data.value, count: data.length)
        let isKey = !stack.isEmpty && stack[stack.count - 1].expectsKey
        let value = data.length == 0 ? "" : isKey ? keys.string(bytes) : String(decoding: bytes, as: UTF8.self)
        let style: YAMLScalar.Style = switch data.style {
        case YAML_SINGLE_QUOTED_SCALAR_STYLE: .singleQuoted
        case YAML_DOUBLE_QUOTED_SCALAR_STYLE: .doubleQuoted
        case YAML_LITERAL_SCALAR_STYLE: .literal
        case YAML_FOLDED_SCALAR_STYLE: .folded
        default: .plain
        }
        return YAMLScalar(
            value: value,
            style: style,
            tag: data.tag.map { String(cString: $0) },
            start: data.tag == nil && data.anchor == nil
                ? position(event.pointee.start_mark)
                : textStart(from: event.pointee.start_mark, before: event.pointee.end_mark),
            end: position(event.pointee.end_mark))
    }

    /// Where a node's own text starts: a scalar's quote, block indicator or first character; a
    /// collection's `{`, `[`, first `-` or first key.
    ///
    /// libyaml starts a node's event at its first property, so for `!env NAME` or `&a "text"`
    /// the event start is the `!` or `&`. This skips the properties and the space, line breaks
    /// and comments after them, stopping before `end` (the event's end, for a scalar). Tags and
    /// anchors are ASCII (libyaml requires it), so each byte skipped in them is one column.
    private mutating func textStart(from start: yaml_mark_t, before end: yaml_mark_t?) -> SourcePosition {
        // Start first: the cursor only moves forward cheaply.
        var offset = byteOffset(ofCharacterIndex: start.index)
        let endOffset = end.map { byteOffset(ofCharacterIndex: $0.index) } ?? inputEnd
        var line = line(of: start)
        var column = start.column
        while offset < endOffset, byte(offset) == UInt8(ascii: "!") || byte(offset) == UInt8(ascii: "&") {
            // The property. libyaml ends a tag only at a space or line break (`!<…>` at its
            // `>`), and an anchor name at the first character that is not alphanumeric, `-`
            // or `_` (so `&a[1]` is an anchored flow sequence).
            let isAnchor = byte(offset) == UInt8(ascii: "&")
            let verbatim = !isAnchor && offset + 1 < endOffset && byte(offset + 1) == UInt8(ascii: "<")
            offset += 1
            column += 1
            while offset < endOffset {
                let next = byte(offset)
                let ends = isAnchor ? !isAnchorCharacter(next)
                    : verbatim ? next == UInt8(ascii: ">")
                    : next == 0x20 || next == 0x09 || lineBreakLength(at: offset) > 0
                if ends { break }
                offset += 1
                column += 1
            }
            if verbatim, offset < endOffset {
                offset += 1
                column += 1
            }
            // The separation: spaces, tabs, line breaks and comments.
            while offset < endOffset {
                let next = byte(offset)
                if next == 0x20 || next == 0x09 {
                    offset += 1
                    column += 1
                } else if next == UInt8(ascii: "#") {
                    while offset < endOffset, lineBreakLength(at: offset) == 0 { offset += 1 }
                } else {
                    let length = lineBreakLength(at: offset)
                    guard length > 0 else { break }
                    offset += length
                    line += 1
                    column = 0
                }
            }
        }
        // A scalar with properties but no text (`key: !env`) starts at its properties.
        guard offset < endOffset else { return position(start) }
        return SourcePosition(line: line + 1, column: column + 1)
    }

    /// The position of the end of the input if `mark` is libyaml's end-of-stream mark placed on
    /// a line past the last one, or nil.
    ///
    /// At the end of the stream libyaml moves its mark to the start of a new line even when
    /// the file does not end with a line break, so the mark names a line that does not exist.
    private mutating func endOfInput(at mark: yaml_mark_t) -> SourcePosition? {
        guard mark.column == 0, byteOffset(ofCharacterIndex: mark.index) >= inputEnd else { return nil }
        // Find the start of the last line; if the input ends in a line break, the mark is real.
        var lineStart = inputEnd
        while lineStart > 0 {
            if lineStart == inputStart {
                // Read through a window that let the start of a long last line go: only the
                // whole file can tell.
                window?.isLost = true
                return nil
            }
            let last = byte(lineStart - 1)
            if last == 0x0A || last == 0x0D { break }
            if last == 0x85, lineStart - 2 >= inputStart, byte(lineStart - 2) == 0xC2 { break }
            if last == 0xA8 || last == 0xA9, lineStart - 3 >= inputStart, byte(lineStart - 2) == 0x80, byte(lineStart - 3) == 0xE2 {
                break
            }
            lineStart -= 1
        }
        guard lineStart < inputEnd else { return nil }
        var characters = 0
        for offset in lineStart..<inputEnd where byte(offset) & 0xC0 != 0x80 { characters += 1 }
        // `mark.line` is 0-based and one past the last line, so it is the last line 1-based.
        return SourcePosition(line: line(of: mark), column: characters + 1)
    }

    /// Whether libyaml allows `byte` in an anchor name: ASCII letters and digits, `-`, `_`.
    private func isAnchorCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default:
            false
        }
    }

    /// The length in bytes of the line break at `offset` (as libyaml counts breaks), or 0.
    private func lineBreakLength(at offset: Int) -> Int {
        switch byte(offset) {
        case 0x0A:
            return 1
        case 0x0D:
            return offset + 1 < inputEnd && byte(offset + 1) == 0x0A ? 2 : 1
        case 0xC2:
            return offset + 1 < inputEnd && byte(offset + 1) == 0x85 ? 2 : 0
        case 0xE2:
            return offset + 2 < inputEnd && byte(offset + 1) == 0x80
                && (byte(offset + 2) == 0xA8 || byte(offset + 2) == 0xA9) ? 3 : 0
        default:
            return 0
        }
    }

    /// The byte offset in `input` of the character at libyaml character index `index`
    /// (libyaml counts characters, a CR LF pair being two). Scans forward from the cursor.
    mutating func byteOffset(ofCharacterIndex index: Int) -> Int {
        let index = max(0, index - indexShift)
        if index < cursorIndex {
            // Events come in file order, so this does not happen; restart to stay correct
            // (through a window the start is gone: the file is parsed whole instead).
            if let window {
                window.isLost = true
                return cursorOffset
            }
            cursorIndex = 0
            cursorOffset = 0
        }
        if let jump = feed?.jump, index >= jump.characterIndex, cursorIndex < jump.characterIndex {
            // libyaml read the text after the second part right after the first.
            cursorIndex = jump.characterIndex
            cursorOffset = jump.resumeOffset
        }
        // Skip `remaining` characters, counting their lead (non-continuation) bytes.
        var remaining = index - cursorIndex
        // In `input`, whose first byte is at `inputStart` of the file.
        var offset = cursorOffset - inputStart
        let count = input.count
        if let base = input.baseAddress {
            // Eight bytes at a time: a word holds at most eight lead bytes, so while at least
            // eight characters remain the whole word can be skipped.
            while remaining >= 8, offset + 8 <= count {
                let word = UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self)
                // A continuation byte is 10xxxxxx: bit 7 set, bit 6 clear.
                let continuationBytes = (word & ~(word << 1) & 0x8080_8080_8080_8080).nonzeroBitCount
                remaining -= 8 - continuationBytes
                offset += 8
            }
        }
        while true {
            // Continuation bytes belong to a character already counted.
            while offset < count, input[offset] & 0xC0 == 0x80 { offset += 1 }
            guard remaining > 0, offset < count else { break }
            offset += 1
            remaining -= 1
        }
        cursorIndex = index
        cursorOffset = inputStart + offset
        return cursorOffset
    }

    /// Starts a mapping or sequence, enforcing the depth limit.
    private mutating func open(
        _ kind: Frame.Kind, tag: UnsafeMutablePointer<yaml_char_t>?,
        anchor: UnsafeMutablePointer<yaml_char_t>?, event: UnsafePointer<yaml_event_t>
    ) -> Bool {
        let start = tag == nil && anchor == nil
            ? position(event.pointee.start_mark)
            : textStart(from: event.pointee.start_mark, before: nil)
        let depth = stack.count
        if depth == 0 {
            splittable = splittable && kind == .mapping && event.pointee.start_mark.column == 0
                && event.pointee.data.mapping_start.style == YAML_BLOCK_MAPPING_STYLE
        }
        guard depth < YAMLParser.maximumDepth else {
            fail(YAMLError(message: "nesting is deeper than \(YAMLParser.maximumDepth) levels", position: start))
            return false
        }
        nodeCount += 1
        let anchorName = anchor.map { String(cString: $0) }
        if let anchorName {
            if section != nil {
                sectionUnusable = true
                return false
            }
            // An alias inside this collection must not resolve to an older node of the same
            // name: it would refer to this unfinished one, which is reported as recursive.
            anchors[anchorName] = nil
        }
        if depth == itemBuffers.count {
            itemBuffers.append(ScratchBuffer())
            entryBuffers.append(ScratchBuffer())
        }
        var frame = Frame(kind: kind, tag: tag.map { String(cString: $0) }, anchor: anchorName, start: start)
        if section == nil, let stream, kind == .sequence, depth == 1, tag == nil, anchorName == nil, documentCount == 1,
           stack[0].kind == .mapping, stack[0].tag == nil, stack[0].merges.isEmpty, stack[0].anchor == nil,
           stack[0].pendingKey?.value == stream.key, stack[0].pendingKey?.tag == nil {
            let entries = entryBuffers[0]
            // A second `accounts:` is dropped as a duplicate: only the first is streamed.
            if !(0..<entries.count).contains(where: { entries.base[$0].key.value == stream.key }) {
                frame.streams = true
                streamedItemCount = 0
                let section = splittable && event.pointee.data.sequence_start.style == YAML_BLOCK_SEQUENCE_STYLE
                    ? feed?.plan(column: event.pointee.start_mark.column, key: stream.key) : nil
                stream.begin(before: (0..<entries.count).map { entries.base[$0] }, section: section)
            }
        }
        if let section, depth == 1 {
            // The second part of a split file: its text starts with the sequence.
            guard kind == .sequence, tag == nil, stack[0].pendingKey?.value == section.key,
                  event.pointee.start_mark.column == section.column, event.pointee.start_mark.line == 1,
                  event.pointee.data.sequence_start.style == YAML_BLOCK_SEQUENCE_STYLE else {
                sectionUnusable = true
                return false
            }
            frame.streams = true
            streamedItemCount = 0
        }
        stack.append(frame)
        return true
    }

    /// Finishes the innermost collection and attaches it to its parent; false when parsing
    /// should stop.
    private mutating func close(_ event: UnsafePointer<yaml_event_t>) -> Bool {
        guard var frame = stack.popLast() else { return true }
        let depth = stack.count
        let node: YAMLNode
        switch frame.kind {
        case .sequence:
            if frame.streams {
                if section != nil {
                    // The second part ends with its sequence: the rest is the first part's.
                    sectionEnd = (event.pointee.start_mark, frame.size - 1)
                    return false
                }
                if let jump = feed?.jump {
                    // The sequence must end after the jump, or the second part was not its.
                    guard event.pointee.start_mark.index >= jump.characterIndex else {
                        splitFailed = true
                        return false
                    }
                    spliced = true
                    streamedItemCount! += jump.itemCount
                    // After the first part's, before what follows the sequence: where one parse
                    // finds them.
                    errors += jump.errors
                    nodeCount += jump.nodeCount
                    frame.size += jump.nodeCount
                    lineShiftFrom = jump.characterIndex
                    lineShift = jump.lineShift
                    stream?.end(spliced: true)
                } else {
                    // The split line, if any, is past the sequence.
                    feed?.cancel()
                    stream?.end()
                }
            }
            node = .sequence(YAMLSequence(items: itemBuffers[depth].takeAll(), tag: frame.tag, start: frame.start))
        case .mapping:
            var entries = entryBuffers[depth].takeAll()
            if !frame.merges.isEmpty { errors += applyMerges(frame.merges, to: &entries) }
            node = .mapping(YAMLMapping(entries: entries, tag: frame.tag, start: frame.start))
        }
        if let anchor = frame.anchor { anchors[anchor] = Anchored(node: node, size: frame.size) }
        attach(node, size: frame.size)
        return true
    }

    /// Expands an alias to a copy of its anchored node, enforcing the node budget.
    private mutating func alias(_ name: String, at position: SourcePosition) -> Bool {
        guard let anchored = anchors[name] else {
            let message = stack.contains(where: { $0.anchor == name })
                ? "the alias '*\(name)' refers to a node that contains it"
                : "the alias '*\(name)' does not refer to an earlier anchor '&\(name)'"
            fail(YAMLError(message: message, position: position))
            return false
        }
        nodeCount += anchored.size
        guard nodeCount <= YAMLParser.maximumNodeCount else {
            fail(YAMLError(message: "aliases expand to more than \(YAMLParser.maximumNodeCount) nodes",
                           position: position))
            return false
        }
        attach(anchored.node, size: anchored.size)
        return true
    }

    /// `attach` for a scalar, the hot path: a key is stored as is, without wrapping it in a node.
    private mutating func attachScalar(_ scalar: consuming YAMLScalar) {
        let top = stack.count - 1
        if top >= 0, stack[top].expectsKey {
            stack[top].size += 1
            stack[top].expectsKey = false
            stack[top].pendingKey = scalar
        } else {
            attach(.scalar(scalar), size: 1)
        }
    }

    /// Attaches a finished node (`size` nodes in all) to the innermost open collection, or
    /// makes it the root.
    private mutating func attach(_ node: consuming YAMLNode, size: Int) {
        let top = stack.count - 1
        guard top >= 0 else {
            root = node
            return
        }
        stack[top].size += size
        switch stack[top].kind {
        case .sequence:
            if stack[top].streams {
                // Handed over, not kept: the loader drops each item once read, so a file of
                // 100,000 accounts never holds them all twice.
                streamedItemCount! += 1
                stream?.add(node)
            } else {
                itemBuffers[top].append(node)
            }
        case .mapping:
            if let key = stack[top].pendingKey.take() {
                stack[top].expectsKey = true
                addEntry(key: key, value: node, depth: top)
            } else if stack[top].skipsValue {
                stack[top].skipsValue = false
                stack[top].expectsKey = true
            } else if case .scalar(let key) = node {
                stack[top].expectsKey = false
                stack[top].pendingKey = key
            } else {
                stack[top].expectsKey = false
                stack[top].skipsValue = true
                errors.append(YAMLError(message: "a mapping key must be a plain value", position: node.start))
            }
        }
    }

    /// Adds an entry to the mapping at `depth`, or records a merge; reports a duplicate key
    /// (keeping the first).
    private mutating func addEntry(key: consuming YAMLScalar, value: consuming YAMLNode, depth: Int) {
        if key.style == .plain, key.value == "<<", key.tag == nil || key.tag == "tag:yaml.org,2002:merge" {
            stack[depth].merges.append(Merge(source: value, keyPosition: key.start, index: entryBuffers[depth].count))
            return
        }
        // Read keys in place through the pointer: iterating entries would copy each one.
        let existing = entryBuffers[depth].base
        let count = entryBuffers[depth].count
        var duplicateIndex: Int?
        if count < Frame.linearScanLimit {
            // Lengths first: keys of one mapping mostly differ in length, and comparing two
            // different strings costs a call each (a tenth of building an account's mapping).
            let length = key.value.utf8.count
            for index in 0..<count where existing[index].key.value.utf8.count == length && existing[index].key.value == key.value {
                duplicateIndex = index
                break
            }
        } else {
            if stack[depth].keySet.isEmpty {
                stack[depth].keySet.reserveCapacity(count * 2)
                for index in 0..<count { stack[depth].keySet.insert(existing[index].key.value) }
            }
            if !stack[depth].keySet.insert(key.value).inserted {
                duplicateIndex = (0..<count).first { existing[$0].key.value == key.value }
            }
        }
        if let duplicateIndex {
            let first = existing[duplicateIndex].key
            errors.append(YAMLError(message: "duplicate key '\(key.value)' (first at line \(first.start.line))",
                                    position: key.start))
            return
        }
        entryBuffers[depth].append(Entry(key: key, value: value))
    }

    /// Merges the entries of the `<<` sources into `entries` where their keys are not already
    /// present: explicit keys win, then earlier sources over later ones. Merged entries take
    /// the place of their `<<` entry. Returns errors for sources that are not mappings.
    private func applyMerges(_ merges: [Merge], to entries: inout [Entry]) -> [YAMLError] {
        var errors: [YAMLError] = []
        var present = Set<String>(minimumCapacity: entries.count * 2)
        for entry in entries { present.insert(entry.key.value) }
        var merged: [Entry] = []
        merged.reserveCapacity(entries.count)
        var nextExplicit = 0

        func take(_ mapping: YAMLMapping) {
            for entry in mapping.entries where present.insert(entry.key.value).inserted {
                merged.append(entry)
            }
        }

        for merge in merges {
            merged.append(contentsOf: entries[nextExplicit..<merge.index])
            nextExplicit = merge.index
            switch merge.source {
            case .mapping(let mapping):
                take(mapping)
            case .sequence(let sequence):
                for item in sequence.items {
                    if case .mapping(let mapping) = item {
                        take(mapping)
                    } else {
                        errors.append(YAMLError(
                            message: "the merge key '<<' can only merge mappings, but its list holds \(item.kindDescription)",
                            position: merge.keyPosition))
                    }
                }
            case .scalar:
                errors.append(YAMLError(
                    message: "the value of the merge key '<<' must be a mapping or a list of mappings",
                    position: merge.keyPosition))
            }
        }
        merged.append(contentsOf: entries[nextExplicit...])
        entries = merged
        return errors
    }
}

/// One copy of each mapping key too long for a small string.
///
/// Every account repeats the same keys, and keys such as `pushTokenIncomingCall` (21 bytes) are
/// too long to be stored inline in a String: without sharing, each account allocates its own
/// copies. A key pushreporter knows is given as the string literal the code uses, which is never
/// reference counted: a shared heap copy would be retained and released by every thread that
/// copies or looks up an account's values. Other keys share one heap copy per recent key (a key
/// that differs from the one in its slot replaces it).
private struct KeyInterner {
    private var slots: [String?] = Array(repeating: nil, count: 64)
    /// The keys made last, in order, and the one expected next: the items of a sequence repeat
    /// their keys in the same order, and comparing with the key expected costs a fifth of
    /// hashing and checking a key's bytes again.
    private var recent: [String] = []
    private var next = 0
    private static let recentCount = 32

    mutating func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        if next < recent.count, Self.equal(recent[next], bytes) {
            next += 1
            return recent[next - 1]
        }
        // A mapping's first key, after the last key of the mapping before; or another order.
        if let index = recent.firstIndex(where: { Self.equal($0, bytes) }) {
            next = index + 1
            return recent[index]
        }
        let made = make(bytes)
        if recent.count == Self.recentCount { recent.removeFirst() }
        recent.append(made)
        next = recent.count
        return made
    }

    private mutating func make(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        // Up to 15 UTF-8 bytes, a String holds its text inline: nothing to share.
        guard bytes.count > 15 else { return String(decoding: bytes, as: UTF8.self) }
        let hash = Self.hash(bytes)
        if let known = Self.known.first(hash: hash, matching: bytes) { return known }
        let slot = Int(hash & UInt32(slots.count - 1))
        if let cached = slots[slot], Self.equal(cached, bytes) { return cached }
        let made = String(decoding: bytes, as: UTF8.self)
        slots[slot] = made
        return made
    }

    /// FNV-1a.
    private static func hash<C: Sequence<UInt8>>(_ bytes: C) -> UInt32 {
        var hash: UInt32 = 2_166_136_261
        for byte in bytes { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return hash
    }

    private static func equal(_ string: String, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        string.utf8.count == bytes.count
            && string.utf8.withContiguousStorageIfAvailable({ memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }) == true
    }

    /// The account keys pushreporter acts on that are too long to be inline, by hash (open
    /// addressing over 128 slots).
    private static let known = KnownKeys(LoadSession.accountOwnKeys.filter { $0.utf8.count > 15 })

    private struct KnownKeys {
        private var slots: [(hash: UInt32, key: String)?] = Array(repeating: nil, count: 128)

        init(_ keys: [String]) {
            for key in keys {
                let hash = KeyInterner.hash(key.utf8)
                var slot = Int(hash) & (slots.count - 1)
                while slots[slot] != nil { slot = (slot + 1) & (slots.count - 1) }
                slots[slot] = (hash, key)
            }
        }

        func first(hash: UInt32, matching bytes: UnsafeBufferPointer<UInt8>) -> String? {
            var slot = Int(hash) & (slots.count - 1)
            while let entry = slots[slot] {
                if entry.hash == hash, KeyInterner.equal(entry.key, bytes) { return entry.key }
                slot = (slot + 1) & (slots.count - 1)
            }
            return nil
        }
    }
}

/// A `<<` entry, resolved when its mapping closes.
private struct Merge {
    var source: YAMLNode
    /// Where the `<<` key is written (the source may be an alias to a node far away).
    var keyPosition: SourcePosition
    /// How many explicit entries precede it; merged entries are placed there.
    var index: Int
}

/// The state of one open mapping or sequence (its children are in the builder's buffers).
private struct Frame {
    enum Kind { case mapping, sequence }

    /// Mappings up to this size detect duplicate keys by a linear scan, larger ones by a set.
    /// Comparing short keys is a few instructions each, so scanning up to 16 of them costs
    /// less than hashing every key and allocating a set for each mid-sized mapping.
    static let linearScanLimit = 16

    let kind: Kind
    let tag: String?
    let anchor: String?
    let start: SourcePosition
    /// In a mapping, whether the next node is a key.
    var expectsKey: Bool
    /// In a mapping, the key just read, whose value comes next.
    var pendingKey: YAMLScalar?
    /// In a mapping, whether the next node is the value of a non-scalar key, to be dropped.
    var skipsValue = false
    /// The keys of a mapping's entries, filled only once it outgrows `linearScanLimit`.
    var keySet: Set<String> = []
    var merges: [Merge] = []
    /// In a sequence, whether its items go to the builder's stream (and not into the tree).
    var streams = false
    /// Nodes in this subtree so far, this collection included.
    var size = 1

    init(kind: Kind, tag: String?, anchor: String?, start: SourcePosition) {
        self.kind = kind
        self.tag = tag
        self.anchor = anchor
        self.start = start
        self.expectsKey = kind == .mapping
    }
}

/// A growable buffer that hands all its elements over to an exactly-sized array by moving
/// them, then is reused for the next collection at the same depth.
///
/// Arrays grown by doubling waste a third of their memory on average, which on a large file
/// means hundreds of MB of extra page faults; copying into an exact array would instead cost a
/// retain and release per string. Moving avoids both. The buffer owns manually managed memory:
/// it lives in exactly one place and must be freed with `deallocate()`.
private struct ScratchBuffer<Element> {
    /// The storage; `base[0..<count]` are the elements held. Valid until the next `append`.
    private(set) var base: UnsafeMutablePointer<Element>
    /// The number of elements held.
    private(set) var count = 0
    private var capacity: Int

    init() {
        capacity = 16
        base = UnsafeMutablePointer<Element>.allocate(capacity: capacity)
    }

    /// Destroys the elements held and frees the storage; the buffer must not be used again.
    mutating func deallocate() {
        base.deinitialize(count: count)
        base.deallocate()
        count = 0
        capacity = 0
    }

    @inline(__always)
    mutating func append(_ element: consuming Element) {
        if count == capacity { grow() }
        (base + count).initialize(to: element)
        count += 1
    }

    /// Moves every element into a new array of exactly that size, leaving the buffer empty.
    mutating func takeAll() -> [Element] {
        let taken = count
        let source = base
        count = 0
        return [Element](unsafeUninitializedCapacity: taken) { buffer, initialized in
            if taken > 0 { buffer.baseAddress!.moveInitialize(from: source, count: taken) }
            initialized = taken
        }
    }

    private mutating func grow() {
        let newCapacity = capacity * 2
        let newBase = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        newBase.moveInitialize(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }
}
