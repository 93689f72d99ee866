@testable import PushConfig
import Testing
import PushTestThreads
import PushSystem

/// A large `accounts:` is parsed in two parts at once (``SplitFeed``): the second part from a
/// guessed item line, by another parser. Whatever the text, the items and tree must be those
/// of one parse of the whole text, positions included; where the guess cannot be trusted the
/// parse falls back to reading the text in order.
@Suite("Parsing accounts in two parts gives what one parse gives", .blockingThreads)
struct SplitParseTests {
    /// What a streaming parse gave, with the streamed items put back into the tree.
    struct Outcome {
        var tree: String
        var errors: [String]
        /// Whether the second part's items were spliced after the first's.
        var spliced = false
        /// Whether the parse read the whole text again, without streaming.
        var reparsed = false
        /// Whether the parser streamed the sequence at all.
        var streamed = false
    }

    static func dump(_ node: YAMLNode) -> String {
        switch node {
        case .scalar(let scalar):
            "S(\(scalar.value)|\(scalar.style)|\(scalar.tag ?? "-")|\(at(scalar.start))-\(at(scalar.end)))"
        case .mapping(let mapping):
            "M(\(mapping.tag ?? "-")@\(at(mapping.start)){"
                + mapping.entries.map { dump(.scalar($0.key)) + ": " + dump($0.value) }.joined(separator: ", ") + "})"
        case .sequence(let sequence):
            "Q(\(sequence.tag ?? "-")@\(at(sequence.start))[" + sequence.items.map(dump).joined(separator: ", ") + "])"
        }
    }

    static func at(_ position: SourcePosition) -> String {
        "\(position.line):\(position.column)"
    }

    static func errors(_ result: YAMLParseResult) -> [String] {
        result.errors.map { "\(at($0.position)) \($0.message)" }
    }

    /// One parse of the whole text, as without streaming.
    static func whole(_ text: String) -> Outcome {
        let result = YAMLParser.parse(Array(text.utf8))
        return Outcome(tree: result.root.map(dump) ?? "nil", errors: errors(result))
    }

    /// Every item of `stream`, until it ends.
    static func drain(_ stream: SequenceStream) -> [YAMLNode] {
        var items: [YAMLNode] = []
        stream.forEachBatch { batch, _ in items += batch }
        return items
    }

    /// A streaming parse that may split from any size on, its items taken as the loader takes
    /// them: the parser's on one thread, the second part's on another. (Threads of their own, not
    /// Dispatch: these wait on each other, and with tests running beside them Dispatch's few
    /// threads could all be waiting.)
    static func split(_ text: String) -> Outcome {
        let stream = SequenceStream(key: "accounts", splitAbove: 0)
        let parse = ThreadResult(named: "test-parse") {
            // As `ParsedFile` does: the stream ends even when the parse stopped on an error.
            defer { stream.end() }
            return YAMLParser.parse(Array(text.utf8), streaming: stream)
        }
        var items: [YAMLNode] = []
        var streamed = false
        var spliced = false
        if case .streaming(_, let section) = stream.start() {
            streamed = true
            let sectionItems = section.flatMap { section in ThreadResult(named: "test-section") { drain(section) } }
            items = drain(stream)
            if let sectionItems, stream.isSpliced {
                spliced = true
                items += sectionItems.take()
            } else {
                section?.cancel()
            }
        }
        let result = parse!.take()
        var outcome = Outcome(tree: rejoined(result, items: items), errors: errors(result), spliced: spliced, streamed: streamed)
        outcome.reparsed = streamed && result.streamedItemCount == nil
        return outcome
    }

    /// The tree of `result` with the `items` streamed put back into its `accounts:`, dumped.
    static func rejoined(_ result: YAMLParseResult, items: [YAMLNode]) -> String {
        guard var root = result.root else { return "nil" }
        if result.streamedItemCount != nil, case .mapping(var mapping) = root,
           let index = mapping.entries.firstIndex(where: { $0.key.value == "accounts" }),
           case .sequence(var sequence) = mapping.entries[index].value {
            #expect(sequence.items.isEmpty, "the streamed sequence is empty in the tree")
            #expect(result.streamedItemCount == items.count, "the count of items streamed")
            sequence.items = items
            mapping.entries[index].value = .sequence(sequence)
            root = .mapping(mapping)
        }
        return dump(root)
    }

    /// An item with enough text that a few hundred make a file libyaml reads in several parts.
    static func item(_ index: Int, indent: String = "  ", newline: String = "\n") -> String {
        let token = String(repeating: "Tk+/\(index % 10)=", count: 30)
        return ["\(indent)- id: a\(index)", "\(indent)  username: user\(index)", "\(indent)  token: \(token)"]
            .map { $0 + newline }.joined()
    }

    static func items(_ range: Range<Int>, indent: String = "  ", newline: String = "\n") -> String {
        range.map { item($0, indent: indent, newline: newline) }.joined()
    }

    /// Texts the split must handle and keep.
    static let kept: [(String, String)] = [
        ("a block sequence, then more root keys",
         "globals: {g: 1}\naccounts:\n" + items(0..<300) + "services:\n  s: {type: acrobits}\nlast: 1\n"),
        ("a sequence at its key's column, the file ending without a line break",
         "accounts:\n" + items(0..<300, indent: "") + "- id: end"),
        ("CR LF line breaks",
         "globals: {g: 1}\r\naccounts:\r\n" + items(0..<300, newline: "\r\n") + "services: {}\r\n"),
        ("non-ASCII text, tags, comments, blank lines, block scalars and flow collections in items",
         "accounts:\n" + (0..<300).map { index in
            item(index) + "    name: \"Zoë 🦊 \(index)\"\n    password: !env SECRET_\(index)\n"
                + "    # a comment\n\n    note: |\n      two\n      lines\n    more: {a: [1, 2]}\n"
                + "    folded: >\n      one\n      line\n"
         }.joined() + "# the end\nservices: {}\n"),
        // libyaml places an empty value just after its `:` (or `-`), not at the next token.
        ("the last item before the split line ends with an empty value",
         "accounts:\n" + (0..<300).map { item($0) + "    extra:\n  -\n" }.joined() + "services: {}\n"),
    ]

    @Test("split and kept: the same tree, positions included", arguments: 0..<5)
    func keptSplits(case index: Int) {
        let (name, text) = Self.kept[index]
        let split = Self.split(text)
        #expect(split.spliced && !split.reparsed, "\(name): the split was not kept")
        #expect(split.tree == Self.whole(text).tree, "\(name)")
        #expect(split.errors.isEmpty, "\(name)")
    }

    /// A long run of lines at the items' column, inside a value: wherever the split line falls
    /// in it, it is not an item.
    static let fakeItems = String(repeating: "  - fake item line\n", count: 3_000)

    /// Texts where the guess is wrong or the second part cannot be used alone.
    static let fallingBack: [(String, String)] = [
        ("the split line is inside a quoted scalar",
         "accounts:\n" + items(0..<5) + "  - id: quoted\n    note: \"starts here\n" + fakeItems + "    ends here\"\n"
            + items(5..<10) + "services: {}\n"),
        // This one parses without error when the second part is jumped over: only the check of
        // the events around the jump tells it went wrong. The line after the accounts is a root
        // key to the second part's parse, and closes the value it was inside of to the first's
        // (in the first, `"` ends the quoted scalar and `#'` is a comment).
        ("the split line is inside a quoted scalar that the text after the accounts closes",
         "accounts:\n" + items(0..<5) + "  - id: quoted\n    note: \"starts here\n" + fakeItems + "k: 'x\" #'\n"),
        // `- ` is an error in a flow collection: libyaml stops there, before the split line.
        ("the split line is inside a flow sequence that the text after the accounts closes",
         "accounts:\n" + items(0..<5) + "  - id: flow\n    list: [a,\n" + fakeItems + "k: v]\n"),
        ("the split line is inside a flow sequence",
         "accounts:\n" + items(0..<5) + "  - id: flow\n    list: [a,\n" + fakeItems.replacingOccurrences(of: "line\n", with: "line,\n")
            + "    z]\n" + items(5..<10)),
        ("the accounts end before the split line, and a later sequence has items at their column",
         "accounts:\n" + items(0..<5) + "other:\n" + items(5..<300) + "last: 1\n"),
        ("the second part has aliases of an anchor in the first",
         "accounts:\n  - &first\n    id: a\n" + (0..<300).map { item($0) + "    copy: *first\n" }.joined()),
        ("a YAML syntax error in the second part",
         "accounts:\n" + items(0..<300) + "  - id: [unclosed\n"),
        ("a %TAG directive",
         "%TAG !e! tag:example.com,2026:\n---\naccounts:\n" + items(0..<300) + "  - !e!x tagged\n"),
        ("a next-line character in the first part",
         "accounts:\n  - id: nel\n    note: \"a\u{85}b\"\n" + items(0..<300)),
    ]

    @Test("a wrong or unusable guess: the tree and errors of one parse", arguments: 0..<9)
    func fallsBack(case index: Int) {
        let (name, text) = Self.fallingBack[index]
        let split = Self.split(text)
        let whole = Self.whole(text)
        #expect(split.tree == whole.tree, "\(name)")
        #expect(split.errors == whole.errors, "\(name)")
        #expect(!split.spliced || split.reparsed, "\(name): a split was kept")
    }

    @Test("the fallbacks are tested: the texts are long enough to split, and fail as intended")
    func fallbacksAreReal() {
        // Split from the same start, they would be kept: the texts are not too short to split.
        let plain = "accounts:\n" + Self.items(0..<5) + "  - id: quoted\n    note: starts here\n" + Self.items(5..<300)
        #expect(Self.split(plain).spliced)
        // The syntax error is reported once, where one parse reports it.
        let broken = Self.split(Self.fallingBack[6].1)
        #expect(broken.errors == ["\(300 * 3 + 2):9 YAML syntax error: this '[' is never closed: the file ends before its ']'"])
        // Jumped over the second part (a parse is read again only then), then found out by what
        // came next: libyaml's error, or the check of the events around the jump.
        for index in 0..<2 {
            let caught = Self.split(Self.fallingBack[index].1)
            #expect(caught.reparsed, "\(Self.fallingBack[index].0)")
        }
    }

    @Test("a problem the tree builder finds after the jump keeps the split, placed as one parse places it")
    func keptWithAnError() {
        let text = "services: {}\naccounts:\n" + Self.items(0..<300) + "services: {}\n"
        let split = Self.split(text)
        #expect(split.spliced && !split.reparsed)
        #expect(split.tree == Self.whole(text).tree)
        #expect(split.errors == Self.whole(text).errors)
        #expect(split.errors == ["\(300 * 3 + 3):1 duplicate key 'services' (first at line 1)"])
    }

    @Test("problems the tree builder finds in the second part keep the split, in one parse's order and places")
    func keptWithErrorsInTheSecondPart() {
        // A duplicate key in item 250 (second part), one in item 3 (first part), one after.
        let late = Self.item(250).replacingOccurrences(of: "    token:", with: "    id: again\n    token:")
        let early = Self.item(3).replacingOccurrences(of: "    token:", with: "    username: again\n    token:")
        let text = "services: {}\naccounts:\n" + Self.items(0..<3) + early + Self.items(4..<250) + late
            + Self.items(251..<300) + "services: {}\n"
        let split = Self.split(text)
        #expect(split.spliced && !split.reparsed)
        #expect(split.tree == Self.whole(text).tree)
        #expect(split.errors == Self.whole(text).errors)
        #expect(split.errors.count == 3)
    }

    @Test("a cancelled stream takes items without waiting, and its reader sees the end")
    func cancelledStream() {
        let stream = SequenceStream(key: "accounts")
        stream.cancel()
        let position = SourcePosition(line: 1, column: 1)
        // Past the 1,024 items that wait for a reader, `add` would wait forever without the cancel.
        for index in 0..<3_000 { stream.add(.scalar(YAMLScalar(value: "\(index)", start: position, end: position))) }
        stream.end()
        let (items, isLast) = stream.next()
        #expect(items.isEmpty && isLast && stream.isCancelled)
    }

    @Test("line and character counts as libyaml keeps them")
    func counts() {
        func count(_ text: String) -> (lines: Int, characters: Int)? {
            let bytes = Array(text.utf8)
            return bytes.withUnsafeBufferPointer { SplitFeed.count($0[...]) }
        }
        #expect(count("")! == (0, 0))
        #expect(count("ab\ncd\r\nef\rgh\n")! == (4, 13))
        // Eight-byte words and their tails alike; a multi-byte character counts once.
        #expect(count(String(repeating: "abcdefg\n", count: 9) + "é\n")! == (10, 74))
        #expect(count("1234567\r\n")! == (1, 9))
        #expect(count("x\u{85}y") == nil)
        #expect(count("x\u{2028}y") == nil)
        #expect(count("x\u{2029}y") == nil)
        #expect(count("é\u{A9}")! == (0, 2))
    }

    @Test("counts of long texts, in 16-byte blocks or not, are those of one byte at a time")
    func countsAgreeWithBytes() {
        /// The rules one byte at a time: a character per byte that does not continue one; a line
        /// per LF, and per CR not followed by LF; nil at NEL, LS or PS.
        func reference(_ bytes: ArraySlice<UInt8>) -> (lines: Int, characters: Int)? {
            let text = String(decoding: bytes, as: UTF8.self)
            if text.unicodeScalars.contains(where: { [0x85, 0x2028, 0x2029].contains($0.value) }) { return nil }
            let lines = bytes.indices.filter { i in
                bytes[i] == 0x0A || (bytes[i] == 0x0D && (i + 1 == bytes.endIndex || bytes[i + 1] != 0x0A))
            }.count
            return (lines, bytes.filter { $0 & 0xC0 != 0x80 }.count)
        }
        let pieces = ["abcdefgh", "\n", "\r\n", "\r", "é", "€", "  - id: u\n", String(repeating: "x", count: 15), "\u{85}", "\u{2028}"]
        var generator = SystemRandomNumberGenerator()
        for round in 0..<400 {
            // Long runs of ASCII lines (the blocks, more than 255 of them), then anything.
            var text = round % 4 == 0 ? String(repeating: "0123456789abcde\n", count: Int.random(in: 250...600, using: &generator)) : ""
            for _ in 0..<Int.random(in: 0...40, using: &generator) {
                let piece = pieces.randomElement(using: &generator)!
                if piece.unicodeScalars.first!.value >= 0x85, Int.random(in: 0..<8, using: &generator) != 0 { continue }
                text += piece
            }
            let bytes = Array(text.utf8)
            let start = bytes.isEmpty ? 0 : Int.random(in: 0..<min(bytes.count, 20), using: &generator)
            let counted = bytes.withUnsafeBufferPointer { SplitFeed.count($0[start...]) }
            let expected = reference(bytes[start...])
            #expect(counted?.lines == expected?.lines && counted?.characters == expected?.characters, "\(Array(text.utf8)) from \(start)")
        }
    }
}
