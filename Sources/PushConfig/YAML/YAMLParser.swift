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
}
