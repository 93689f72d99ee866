import Testing
import PushTestThreads
@testable import PushConfig

// MARK: - Helpers

private func parseYAML(_ text: String) -> YAMLParseResult {
    YAMLParser.parse(Array(text.utf8))
}

private func pos(_ line: Int, _ column: Int) -> SourcePosition {
    SourcePosition(line: line, column: column)
}

private extension YAMLNode {
    var parsedMapping: YAMLMapping? {
        if case .mapping(let mapping) = self { return mapping }
        return nil
    }

    var parsedSequence: YAMLSequence? {
        if case .sequence(let sequence) = self { return sequence }
        return nil
    }

    var parsedScalar: YAMLScalar? {
        if case .scalar(let scalar) = self { return scalar }
        return nil
    }
}

/// The root mapping of `text`, which must parse without errors.
private func rootMapping(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> YAMLMapping {
    let result = parseYAML(text)
    #expect(result.errors.isEmpty, "unexpected errors: \(result.errors)", sourceLocation: sourceLocation)
    return try #require(result.root?.parsedMapping, sourceLocation: sourceLocation)
}

/// Pseudo-random bytes, from the generator the suite's other tests use.
private struct ByteGenerator {
    var random: XorShift

    init(state: UInt64) {
        random = XorShift(state: state)
    }

    mutating func next() -> UInt8 {
        random.advance()
        return UInt8(truncatingIfNeeded: random.state >> 24)
    }
}

// MARK: - Scalars and positions

@Suite("YAMLParser scalars", .blockingThreads)
struct YAMLParserScalarTests {
    @Test func plainScalarPositions() throws {
        let mapping = try rootMapping("name: hello world\nport: 8080\n")
        let name = try #require(mapping.entries.first)
        #expect(name.key.value == "name")
        #expect(name.key.start == pos(1, 1))
        #expect(name.key.end == pos(1, 5))
        let value = try #require(name.value.parsedScalar)
        #expect(value.value == "hello world")
        #expect(value.style == .plain)
        #expect(value.tag == nil)
        #expect(value.start == pos(1, 7))
        #expect(value.end == pos(1, 18))
        #expect(mapping["port"]?.parsedScalar?.value == "8080")
        #expect(mapping["port"]?.start == pos(2, 7))
    }

    @Test func quotedScalarPositions() throws {
        let mapping = try rootMapping("a: 'it''s'\nb: \"tab\\there \\u00e9\"\n")
        let single = try #require(mapping["a"]?.parsedScalar)
        #expect(single.value == "it's")
        #expect(single.style == .singleQuoted)
        #expect(single.start == pos(1, 4))
        #expect(single.end == pos(1, 11))
        let double = try #require(mapping["b"]?.parsedScalar)
        #expect(double.value == "tab\there é")
        #expect(double.style == .doubleQuoted)
        #expect(double.start == pos(2, 4))
    }

    @Test func blockScalarPositions() throws {
        let text = """
            literal: |
              line one
              line two
            folded: >
              folded one
              folded two
            after: x

            """
        let mapping = try rootMapping(text)
        let literal = try #require(mapping["literal"]?.parsedScalar)
        #expect(literal.value == "line one\nline two\n")
        #expect(literal.style == .literal)
        #expect(literal.start == pos(1, 10))
        let folded = try #require(mapping["folded"]?.parsedScalar)
        #expect(folded.value == "folded one folded two\n")
        #expect(folded.style == .folded)
        #expect(folded.start == pos(4, 9))
        #expect(mapping["after"]?.start == pos(7, 8))
    }

    @Test("the value shown quoted when it must be: to the end of its line or to a comment, its quotes doubled",
          arguments: [
              ("k: %u%/x?y=1\n", "'%u%/x?y=1'"),
              ("k: %u%  \t\r\nnext: 1", "'%u%'"),
              ("k: %u%/it's # a comment\n", "'%u%/it''s'"),
              ("k: %u%#not-a-comment", "'%u%#not-a-comment'"),
              ("k: {a: %u%}\n", nil),
              ("k: [%u%]\n", nil),
              ("k: %" + String(repeating: "x", count: 100) + "\n", nil),
              // A key, not a value.
              ("%k: v\n", nil),
              ("%k:\n  v\n", nil),
              // Continued on the next line (after a blank line and a comment too).
              ("a:\n  k: %u%\n\n  # note\n    more\n", nil),
              ("a:\n  k: %u%\n\n  # note\n  next: 1\n", "'%u%'"),
              ("k: %u%", "'%u%'"),
              ("k: %u%\n\tmore\n", nil),
              ("k: %u%\n  \t\n", nil),
          ] as [(String, String?)])
    func quotedValue(text: String, expected: String?) {
        let bytes = Array(text.utf8)
        let offset = bytes.firstIndex(of: UInt8(ascii: "%"))!
        #expect(YAMLParser.quotedValue(at: offset, in: bytes) == expected)
    }

    @Test func multiByteCharactersCountAsOneColumn() throws {
        let mapping = try rootMapping("é: ü€x\n😀: !env A\n")
        #expect(mapping.entries[0].key.value == "é")
        #expect(mapping.entries[0].value.start == pos(1, 4))
        #expect(mapping.entries[0].value.parsedScalar?.end == pos(1, 7))
        #expect(mapping.entries[1].key.start == pos(2, 1))
        // A tagged scalar starts at its text, not at its tag.
        #expect(mapping.entries[1].value.start == pos(2, 9))
    }

    @Test func tags() throws {
        let mapping = try rootMapping("token: !env API_TOKEN\nkey: !file ./key.pem\nn: !!str 12\nm: !custom {a: 1}\n")
        #expect(mapping["token"]?.parsedScalar?.tag == "!env")
        #expect(mapping["token"]?.parsedScalar?.value == "API_TOKEN")
        // The scalar starts at its own text, past the tag (libyaml's event starts at the tag).
        #expect(mapping["token"]?.start == pos(1, 13))
        #expect(mapping["key"]?.parsedScalar?.tag == "!file")
        #expect(mapping["n"]?.parsedScalar?.tag == "tag:yaml.org,2002:str")
        #expect(mapping["m"]?.parsedMapping?.tag == "!custom")
    }

    @Test func propertiesBeforeScalarText() throws {
        let text = "a: !env\nb: &x # note\n  \"quoted\"\nc: [!env A, &y !t B]\nd: !<tag:x> |\n  block\ne: *x\n"
        let mapping = try rootMapping(text)
        // A tag without text: the (empty) scalar starts at the tag.
        #expect(mapping["a"]?.parsedScalar?.value == "")
        #expect(mapping["a"]?.parsedScalar?.tag == "!env")
        #expect(mapping["a"]?.start == pos(1, 4))
        // Anchor, comment and line break are skipped to reach the quote.
        #expect(mapping["b"]?.start == pos(3, 3))
        let items = try #require(mapping["c"]?.parsedSequence?.items)
        #expect(items[0].start == pos(4, 10))
        #expect(items[1].start == pos(4, 19))
        #expect(items[1].parsedScalar?.tag == "!t")
        #expect(mapping["d"]?.parsedScalar?.tag == "tag:x")
        #expect(mapping["d"]?.start == pos(5, 13))
        #expect(mapping["e"]?.parsedScalar?.value == "quoted")
        #expect(mapping["e"]?.start == pos(3, 3))
    }

    @Test func taggedScalarPositionsInLongMultiByteText() throws {
        // Many tagged scalars among multi-byte text and mixed line breaks: each start, mapped
        // through SourceText, must land on the scalar's own text.
        var generator = ByteGenerator(state: 42)
        let fillers = ["é", "😀", "ab", "€x", "z"]
        let breaks = ["\n", "\r\n", "\u{85}", "\u{2028}"]
        var text = ""
        for index in 0..<300 {
            let filler = (0..<Int(generator.next() % 12)).map { _ in fillers[Int(generator.next()) % fillers.count] }.joined()
            text += "k\(index): !env V\(index)\(filler) # \(filler)\(filler)\(breaks[index % breaks.count])"
        }
        let bytes = Array(text.utf8)
        let result = YAMLParser.parse(bytes)
        #expect(result.errors.isEmpty)
        let mapping = try #require(result.root?.parsedMapping)
        #expect(mapping.entries.count == 300)
        let source = SourceText(bytes: bytes)
        for entry in mapping.entries {
            let value = try #require(entry.value.parsedScalar)
            let offset = try #require(source.byteOffset(of: value.start))
            #expect(bytes[offset...].starts(with: Array(value.value.utf8)), "\(entry.key.value)")
        }
    }

    @Test func scalarsAreNotReinterpreted() throws {
        let mapping = try rootMapping("a: yes\nb: 0x1F\nc: ~\nd:\n")
        #expect(mapping["a"]?.parsedScalar?.value == "yes")
        #expect(mapping["b"]?.parsedScalar?.value == "0x1F")
        #expect(mapping["c"]?.parsedScalar?.value == "~")
        #expect(mapping["d"]?.parsedScalar?.value == "")
    }

    @Test func rootScalar() throws {
        let result = parseYAML("just text\n")
        #expect(result.errors.isEmpty)
        #expect(result.root?.parsedScalar?.value == "just text")
    }

    @Test func crlfLineEndings() throws {
        let mapping = try rootMapping("a: 1\r\nb:\r\n  - x\r\n  - 'y'\r\nc: |\r\n  text\r\n")
        #expect(mapping["a"]?.start == pos(1, 4))
        let items = try #require(mapping["b"]?.parsedSequence?.items)
        #expect(items.map { $0.parsedScalar?.value } == ["x", "y"])
        #expect(items[0].start == pos(3, 5))
        #expect(items[1].start == pos(4, 5))
        #expect(mapping["c"]?.parsedScalar?.value == "text\n")
        #expect(mapping["c"]?.start == pos(5, 4))
    }

    @Test func unicodeLineBreaksAgreeWithLibyaml() throws {
        // NEL, LS and PS are line breaks for libyaml; SourceText must count lines the same way.
        let text = "a: 1\u{85}b: 2 # note\u{2028}c: \"x\u{2029}y\"\rd: é\n"
        let bytes = Array(text.utf8)
        let result = YAMLParser.parse(bytes)
        #expect(result.errors.isEmpty)
        let mapping = try #require(result.root?.parsedMapping)
        #expect(mapping.entries.map(\.key.value) == ["a", "b", "c", "d"])
        #expect(mapping["b"]?.start == pos(2, 4))
        #expect(mapping["c"]?.start == pos(3, 4))
        // libyaml keeps an LS or PS line break in a quoted scalar instead of folding it.
        #expect(mapping["c"]?.parsedScalar?.value == "x\u{2029}y")
        #expect(mapping["d"]?.start == pos(5, 4))
        let source = SourceText(bytes: bytes)
        for entry in mapping.entries {
            let offset = try #require(source.byteOffset(of: entry.key.start))
            #expect(bytes[offset...].starts(with: Array(entry.key.value.utf8)))
        }
    }

    @Test func byteOrderMarkIsNotAColumn() throws {
        let bytes: [UInt8] = [0xEF, 0xBB, 0xBF] + Array("a: b\nc: d\n".utf8)
        let result = YAMLParser.parse(bytes)
        #expect(result.errors.isEmpty)
        let mapping = try #require(result.root?.parsedMapping)
        #expect(mapping.entries[0].key.start == pos(1, 1))
        #expect(mapping["a"]?.start == pos(1, 4))
        #expect(mapping["c"]?.start == pos(2, 4))
        #expect(SourceText(bytes: bytes).byteOffset(of: pos(1, 1)) == 3)
    }
}

// MARK: - Structure

@Suite("YAMLParser structure", .blockingThreads)
struct YAMLParserStructureTests {
    @Test func mappingKeepsFileOrder() throws {
        let keys = (0..<40).map { "key\(($0 * 7) % 40)" }
        let text = keys.map { "\($0): v" }.joined(separator: "\n")
        let mapping = try rootMapping(text)
        #expect(mapping.entries.map(\.key.value) == keys)
    }

    @Test func nestedStructures() throws {
        let text = """
            accounts:
              - name: first
                limits: {daily: 10, burst: [1, 2]}
              - name: second
            empty: []

            """
        let mapping = try rootMapping(text)
        let accounts = try #require(mapping["accounts"]?.parsedSequence)
        #expect(accounts.start == pos(2, 3))
        #expect(accounts.items.count == 2)
        let first = try #require(accounts.items[0].parsedMapping)
        #expect(first.start == pos(2, 5))
        #expect(first["name"]?.parsedScalar?.value == "first")
        let limits = try #require(first["limits"]?.parsedMapping)
        #expect(limits.start == pos(3, 13))
        #expect(limits["daily"]?.parsedScalar?.value == "10")
        #expect(limits["burst"]?.parsedSequence?.items.map { $0.parsedScalar?.value } == ["1", "2"])
        #expect(limits["burst"]?.start == pos(3, 32))
        #expect(accounts.items[1].parsedMapping?["name"]?.parsedScalar?.value == "second")
        #expect(mapping["empty"]?.parsedSequence?.items.isEmpty == true)
    }

    @Test func duplicateKeyIsReportedAndFirstKept() throws {
        let result = parseYAML("a: 1\nb: 2\na: 3\n")
        #expect(result.errors == [YAMLError(message: "duplicate key 'a' (first at line 1)", position: pos(3, 1))])
        let mapping = try #require(result.root?.parsedMapping)
        #expect(mapping.entries.map(\.key.value) == ["a", "b"])
        #expect(mapping["a"]?.parsedScalar?.value == "1")
    }

    @Test func duplicateKeyInLargeMapping() throws {
        // Past the linear-scan limit duplicates are found through a set.
        var lines = (0..<30).map { "k\($0): \($0)" }
        lines.append("k5: again")
        lines.append("'k29': quoted")
        let result = parseYAML(lines.joined(separator: "\n"))
        #expect(result.errors == [
            YAMLError(message: "duplicate key 'k5' (first at line 6)", position: pos(31, 1)),
            YAMLError(message: "duplicate key 'k29' (first at line 30)", position: pos(32, 1)),
        ])
        let mapping = try #require(result.root?.parsedMapping)
        #expect(mapping.entries.count == 30)
        #expect(mapping["k5"]?.parsedScalar?.value == "5")
    }

    @Test func nonScalarKeyIsReportedAndSkipped() throws {
        let result = parseYAML("? [a, b]\n: 1\nc: 2\n{x: y}: 3\n")
        #expect(result.errors == [
            YAMLError(message: "a mapping key must be a plain value", position: pos(1, 3)),
            YAMLError(message: "a mapping key must be a plain value", position: pos(4, 1)),
        ])
        let mapping = try #require(result.root?.parsedMapping)
        #expect(mapping.entries.map(\.key.value) == ["c"])
    }

    @Test func emptyAndCommentOnlyFilesHaveNoDocument() {
        for text in ["", "   \n\n", "# just a comment\n# another\n", "\u{FEFF}", "\u{FEFF}# c\n"] {
            let result = parseYAML(text)
            #expect(result.root == nil, "for \(text.debugDescription)")
            #expect(result.errors.isEmpty, "for \(text.debugDescription)")
        }
    }

    @Test func multipleDocumentsAreRejected() throws {
        let result = parseYAML("a: 1\n---\nb: 2\n")
        #expect(result.errors == [YAMLError(
            message: "the file holds more than one YAML document; put each in its own file", position: pos(2, 1))])
        #expect(result.root?.parsedMapping?["a"]?.parsedScalar?.value == "1")

        let explicit = parseYAML("--- \na: 1\n...\n")
        #expect(explicit.errors.isEmpty)
        #expect(explicit.root?.parsedMapping?["a"] != nil)
    }

    @Test func depthLimit() throws {
        let allowed = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(parseYAML(allowed).errors.isEmpty)
        #expect(parseYAML(allowed).root != nil)

        let tooDeep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        let result = parseYAML(tooDeep)
        #expect(result.root == nil)
        #expect(result.errors == [YAMLError(message: "nesting is deeper than 64 levels", position: pos(1, 65))])

        // Block nesting, and a hostile depth that must not exhaust anything.
        let block = (0..<70).map { String(repeating: "  ", count: $0) + "k\($0):" }.joined(separator: "\n") + " x\n"
        #expect(parseYAML(block).errors.map(\.message) == ["nesting is deeper than 64 levels"])
        let hostile = parseYAML(String(repeating: "[", count: 200_000))
        #expect(hostile.root == nil)
        #expect(hostile.errors.count == 1)
    }
}

// MARK: - Anchors, aliases and merge keys

@Suite("YAMLParser aliases", .blockingThreads)
struct YAMLParserAliasTests {
    @Test func aliasCopiesAnchoredNode() throws {
        let mapping = try rootMapping("base: &b\n  x: 1\ncopy: *b\nname: &n hello\nagain: *n\n")
        let copy = try #require(mapping["copy"]?.parsedMapping)
        #expect(copy["x"]?.parsedScalar?.value == "1")
        // The copy keeps the anchored node's positions.
        #expect(copy.start == pos(2, 3))
        #expect(copy["x"]?.start == pos(2, 6))
        #expect(mapping["again"]?.parsedScalar?.value == "hello")
        #expect(mapping["again"]?.start == pos(4, 10))
    }

    @Test func mergeKeys() throws {
        let text = """
            defaults: &defaults
              timeout: 30
              retries: 3
            extra: &extra
              retries: 9
              region: eu
            service:
              name: api
              <<: [*defaults, *extra]
              timeout: 5
            inline:
              <<: {a: 1}
              b: 2

            """
        let mapping = try rootMapping(text)
        let service = try #require(mapping["service"]?.parsedMapping)
        // Merged entries take the place of `<<`; explicit keys win even when written after it;
        // earlier merged mappings win over later ones.
        #expect(service.entries.map(\.key.value) == ["name", "retries", "region", "timeout"])
        #expect(service["timeout"]?.parsedScalar?.value == "5")
        #expect(service["retries"]?.parsedScalar?.value == "3")
        #expect(service["region"]?.parsedScalar?.value == "eu")
        #expect(service["<<"] == nil)
        #expect(service["retries"]?.start == pos(3, 12))
        let inline = try #require(mapping["inline"]?.parsedMapping)
        #expect(inline.entries.map(\.key.value) == ["a", "b"])
    }

    @Test func quotedMergeKeyIsAnOrdinaryKey() throws {
        let mapping = try rootMapping("'<<': {a: 1}\n")
        #expect(mapping["<<"]?.parsedMapping?["a"] != nil)
    }

    @Test func mergeOfNonMappingIsReported() throws {
        let result = parseYAML("a:\n  <<: text\n  b: 1\nc:\n  <<: [{x: 1}, [y]]\n")
        #expect(result.errors == [
            YAMLError(message: "the value of the merge key '<<' must be a mapping or a list of mappings",
                      position: pos(2, 3)),
            YAMLError(message: "the merge key '<<' can only merge mappings, but its list holds a sequence",
                      position: pos(5, 3)),
        ])
        let root = try #require(result.root?.parsedMapping)
        #expect(root["a"]?.parsedMapping?.entries.map(\.key.value) == ["b"])
        #expect(root["c"]?.parsedMapping?.entries.map(\.key.value) == ["x"])
    }

    @Test func unknownAndRecursiveAliases() {
        let unknown = parseYAML("a: 1\nb: *missing\n")
        #expect(unknown.root == nil)
        #expect(unknown.errors == [YAMLError(
            message: "the alias '*missing' does not refer to an earlier anchor '&missing'", position: pos(2, 4))])

        let recursive = parseYAML("a: &a\n  b: *a\n")
        #expect(recursive.root == nil)
        #expect(recursive.errors.map(\.message) == ["the alias '*a' refers to a node that contains it"])
    }

    @Test func aliasBombIsStopped() {
        var lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
        for level in 1...9 {
            let refs = Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ")
            lines.append("a\(level): &a\(level) [\(refs)]")
        }
        let result = parseYAML(lines.joined(separator: "\n"))
        #expect(result.root == nil)
        #expect(result.errors.count == 1)
        #expect(result.errors.first?.message == "aliases expand to more than 10000000 nodes")
        // a6 is the first level whose expansion passes the budget.
        #expect(result.errors.first?.position.line == 7)
    }
}

// MARK: - Fatal errors

@Suite("YAMLParser errors", .blockingThreads)
struct YAMLParserErrorTests {
    @Test func syntaxErrorMessageAndPosition() {
        // libyaml's "mapping values are not allowed in this context", said as what to mend.
        let result = parseYAML("a: b: c\n")
        #expect(result.root == nil)
        #expect(result.errors == [YAMLError(
            message: "YAML syntax error: a ': ' where YAML cannot start a key here: if it is part of a value, put the value in quotes; "
                + "if it is a key, indent it as the keys beside it", position: pos(1, 5))])
    }

    @Test("a value holding ': ' under a line that opens a block is not called over-indented",
          arguments: ["accounts:\n  - username: jo: x\n", "agent:\n  timeout: a: b\n", "accounts:\n  - - a: b: c\n",
                      "a:\n  b: 1\n  c: d: e\n"])
    func aValueHoldingAColon(text: String) {
        let message = parseYAML(text).errors.first?.message ?? ""
        #expect(message.hasPrefix("YAML syntax error: a ': ' where YAML cannot start a key here"), "\(message)")
    }

    @Test("a key indented more than the keys above it is placed at its line's start",
          arguments: [
              ("a: b\n  c: d\n", pos(2, 3), 1, 3),
              ("accounts:\n  - username: bob\n     token: T\n", pos(3, 6), 5, 6),
          ] as [(String, SourcePosition, Int, Int)])
    func overIndentedKey(text: String, position: SourcePosition, keys: Int, line: Int) {
        let result = parseYAML(text)
        #expect(result.errors == [YAMLError(
            message: "YAML syntax error: this line is indented more than the line above (its keys are at column \(keys), this one at "
                + "column \(line)), so it reads as more of that line's value, where 'key: value' cannot be; indent it as the keys beside it",
            position: position)])
    }

    @Test func syntaxErrorWithContext() {
        let result = parseYAML("top:\n  a: 1\n b: 2\n")
        #expect(result.errors == [YAMLError(
            message: "YAML syntax error: did not find expected key (while parsing a block mapping that started at line 1, column 1)",
            position: pos(3, 2))])

        let unterminated = parseYAML("key: \"abc")
        #expect(unterminated.root == nil)
        // Never closed: said where it was opened, not at the end of the file.
        #expect(unterminated.errors == [YAMLError(
            message: "YAML syntax error: this quoted value is never closed: the file ends before its closing quote",
            position: pos(1, 6))])
        let unclosedMapping = parseYAML("a:\n  b: {x: 1,\n    y: 2\n")
        #expect(unclosedMapping.errors == [YAMLError(
            message: "YAML syntax error: this '{' is never closed: the file ends before its '}'", position: pos(2, 6))])
        // Before the end of the file, libyaml's own words, where it stopped.
        let missingComma = parseYAML("a: {x: 1 y: 2}\nb: 1\n")
        #expect(missingComma.errors == [YAMLError(
            message: "YAML syntax error: did not find expected ',' or '}' (while parsing a flow mapping that started at line 1, column 4)",
            position: pos(1, 11))])
    }

    @Test func endOfFileWithoutLineBreak() throws {
        // libyaml reports these on a line past the last one; they map to the end of the file.
        let error = parseYAML("a: 1\nkey2")
        #expect(error.errors == [YAMLError(
            message: "YAML syntax error: could not find expected ':' (while scanning a simple key that started at line 2, column 1)",
            position: pos(2, 5))])
        let unclosed = parseYAML("a: 1\nb: [x")
        #expect(unclosed.errors == [YAMLError(
            message: "YAML syntax error: this '[' is never closed: the file ends before its ']'", position: pos(2, 4))])
        let emptyValue = try #require(parseYAML("?").root?.parsedMapping)
        #expect(emptyValue.entries.first?.key.start == pos(1, 2))
        #expect(emptyValue.entries.first?.value.start == pos(1, 2))
    }

    @Test func tabIndentation() {
        let result = parseYAML("a:\n\tb: 1\n")
        #expect(result.errors == [YAMLError(
            message: "YAML syntax error: found a tab character, which cannot start any token (indent with spaces, not tabs)",
            position: pos(2, 1))])
    }

    @Test func everyTabProblemSaysToIndentWithSpaces() {
        // A continuation line of a plain scalar, and an indentation, each begun with a tab.
        for yaml in ["accounts:\n  - id: a\n    username: b\n\tselector: c\n", "a:\n  - b\n\t- c\n"] {
            let message = parseYAML(yaml).errors.first?.message ?? ""
            #expect(message.contains("tab character") && message.contains("(indent with spaces, not tabs)"), "\(message)")
        }
    }

    @Test func invalidUTF8() {
        let bytes = Array("a: b\nc: é ".utf8) + [0xFF] + Array("\n".utf8)
        let result = YAMLParser.parse(bytes)
        #expect(result.root == nil)
        #expect(result.errors == [YAMLError(
            message: "the file is not valid UTF-8 text: byte 0xFF does not begin a UTF-8 character here (the file may be in Latin-1 or Windows-1252; save it as UTF-8)", position: pos(2, 6))])

        // libyaml names the byte after the one that is wrong (0x28): the message names the lead byte.
        let trailing = YAMLParser.parse(Array("x: ".utf8) + [0xC3, 0x28])
        #expect(trailing.errors == [YAMLError(
            message: "the file is not valid UTF-8 text: byte 0xC3 does not begin a UTF-8 character here (the file may be in Latin-1 or Windows-1252; save it as UTF-8)", position: pos(1, 4))])
        // A Latin-1 é before a line break.
        let latin1 = YAMLParser.parse(Array("id: caf".utf8) + [0xE9] + Array("\nx: y\n".utf8))
        #expect(latin1.errors == [YAMLError(
            message: "the file is not valid UTF-8 text: byte 0xE9 does not begin a UTF-8 character here (the file may be in Latin-1 or Windows-1252; save it as UTF-8)", position: pos(1, 8))])

        // A stray Windows-1252 ’ (0x92) at its own column; a Latin-1 é as the file's last byte.
        let quote = YAMLParser.parse(Array("x: it".utf8) + [0x92] + Array("s\n".utf8))
        #expect(quote.errors == [YAMLError(message: "the file is not valid UTF-8 text: byte 0x92 does not begin a UTF-8 character here (the file may be in Latin-1 or Windows-1252; save it as UTF-8)", position: pos(1, 6))])
        let last = YAMLParser.parse(Array("name: Jos".utf8) + [0xE9])
        #expect(last.errors == [YAMLError(message: "the file is not valid UTF-8 text: byte 0xE9 does not begin a UTF-8 character here (the file may be in Latin-1 or Windows-1252; save it as UTF-8)", position: pos(1, 10))])

        let truncated = YAMLParser.parse(Array("x: ".utf8) + [0xE2, 0x82])
        #expect(truncated.errors == [YAMLError(
            message: "the file is not valid UTF-8 text (it ends in the middle of a multi-byte character)",
            position: pos(1, 4))])

        let surrogate = YAMLParser.parse(Array("x: ".utf8) + [0xED, 0xA0, 0x80])
        #expect(surrogate.errors == [YAMLError(
            message: "the file is not valid UTF-8 text (invalid Unicode character U+D800)", position: pos(1, 4))])

        // Offsets after a byte order mark still map to the right column.
        let afterMark = YAMLParser.parse([0xEF, 0xBB, 0xBF] + Array("a: ".utf8) + [0xFF])
        #expect(afterMark.errors == [YAMLError(
            message: "the file is not valid UTF-8 text: byte 0xFF does not begin a UTF-8 character here (the file may be in Latin-1 or Windows-1252; save it as UTF-8)", position: pos(1, 4))])

        let utf16 = YAMLParser.parse([0xFF, 0xFE, 0x61, 0x00])
        #expect(utf16.errors == [YAMLError(
            message: "the file is not valid UTF-8 text (it starts with a UTF-16 byte order mark)", position: pos(1, 1))])
    }

    @Test func nulAndControlCharacters() {
        let nul = YAMLParser.parse(Array("a: b\nc: x".utf8) + [0x00] + Array("y\n".utf8))
        #expect(nul.root == nil)
        #expect(nul.errors == [YAMLError(
            message: "the file contains a NUL byte (0x00), which YAML does not allow; it may be a binary file",
            position: pos(2, 5))])

        let control = parseYAML("a: \u{01}\n")
        #expect(control.errors == [YAMLError(
            message: "the file contains a control character (0x01), which YAML does not allow", position: pos(1, 4))])

        let c1 = parseYAML("a: \u{9B}\n")
        #expect(c1.errors.map(\.message) == [
            "the file contains a control character (U+009B), which YAML does not allow"])
    }

    @Test func binaryAndRandomInputGiveOneError() {
        // An ELF header, as a stray binary would start.
        let elf: [UInt8] = [0x7F, 0x45, 0x4C, 0x46, 0x02, 0x01, 0x01, 0x00] + Array(repeating: 0, count: 56)
        let binary = YAMLParser.parse(elf)
        #expect(binary.root == nil)
        #expect(binary.errors.count == 1)

        var generator = ByteGenerator(state: 0x9E37_79B9_7F4A_7C15)
        for length in [1, 2, 3, 7, 64, 1000, 20_000] {
            for _ in 0..<20 {
                let bytes = (0..<length).map { _ in generator.next() }
                let result = YAMLParser.parse(bytes)
                if result.root == nil && !result.errors.isEmpty {
                    #expect(result.errors.count == 1)
                }
            }
        }
        // Random printable text with YAML punctuation exercises the scanner and parser errors.
        let alphabet = Array("ab:- \n\t[]{},&*!|>'\"#?%@`".utf8)
        for _ in 0..<500 {
            let bytes = (0..<80).map { _ in alphabet[Int(generator.next()) % alphabet.count] }
            let result = YAMLParser.parse(bytes)
            if result.root == nil {
                #expect(result.errors.count <= 1)
            }
        }
    }

    @Test func truncatedFiles() {
        let full = "a:\n  b: [1, 2, {c: \"d\"}]\n  e: |\n    text\nf: 'g'\n"
        let bytes = Array(full.utf8)
        for length in 0...bytes.count {
            let result = YAMLParser.parse(Array(bytes[..<length]))
            // Either a document (possibly with errors) or exactly one fatal error.
            if result.root == nil {
                #expect(result.errors.count <= 1, "prefix of length \(length)")
            }
        }
        #expect(parseYAML("a: [1, 2").errors.count == 1)
        #expect(parseYAML("a: {b").errors.count == 1)
    }
}

// MARK: - SourceText

@Suite("SourceText", .blockingThreads)
struct SourceTextTests {
    @Test func roundTripsEveryCharacter() throws {
        let text = "ab\r\né😀x\rz\u{85}q\u{2028}r\u{2029}s\n\nlast"
        let bytes = Array(text.utf8)
        let source = SourceText(bytes: bytes)
        #expect(source.bytes == bytes)
        #expect(source.lineCount == 8)
        // Every offset that starts a character maps to a position and back.
        var offset = 0
        while offset <= bytes.count {
            let position = source.position(ofByteOffset: offset)
            #expect(source.byteOffset(of: position) == offset, "offset \(offset) -> \(position)")
            if offset == bytes.count { break }
            offset += 1
            while offset < bytes.count, bytes[offset] & 0xC0 == 0x80 { offset += 1 }
            // The LF of CRLF is part of one break; it is not a position of its own.
            if offset > 0, bytes[offset - 1] == 0x0D, offset < bytes.count, bytes[offset] == 0x0A { offset += 1 }
        }
    }

    @Test func knownPositions() {
        let bytes = Array("ab\r\né😀x\rz\n".utf8)
        let source = SourceText(bytes: bytes)
        #expect(source.position(ofByteOffset: 0) == pos(1, 1))
        #expect(source.position(ofByteOffset: 2) == pos(1, 3))   // the CR
        #expect(source.position(ofByteOffset: 4) == pos(2, 1))   // é
        #expect(source.position(ofByteOffset: 6) == pos(2, 2))   // 😀
        #expect(source.position(ofByteOffset: 10) == pos(2, 3))  // x
        #expect(source.position(ofByteOffset: 12) == pos(3, 1))  // z after a lone CR
        #expect(source.byteOffset(of: pos(2, 3)) == 10)
        #expect(source.byteOffset(of: pos(2, 4)) == 11)          // at the line break
        #expect(source.byteOffset(of: pos(2, 5)) == nil)         // past the line
        #expect(source.byteOffset(of: pos(4, 1)) == bytes.count) // the empty last line
        #expect(source.byteOffset(of: pos(5, 1)) == nil)
        #expect(source.byteOffset(of: pos(0, 1)) == nil)
        #expect(source.byteOffset(of: pos(1, 0)) == nil)
        #expect(source.position(ofByteOffset: 3) == pos(1, 3))   // the LF of CRLF: end of line 1
        #expect(source.position(ofByteOffset: 5) == pos(2, 1))   // inside é
        #expect(source.position(ofByteOffset: 8) == pos(2, 2))   // inside 😀
        #expect(source.position(ofByteOffset: -5) == pos(1, 1))
        #expect(source.position(ofByteOffset: 1000) == pos(4, 1))
    }

    @Test func everyOffsetMapsToAValidPosition() {
        let bytes = Array("a\r\nb\u{85}é\u{2028}😀\u{2029}\rc".utf8) + [0xFF, 0xC3, 0x0A, 0x80]
        let source = SourceText(bytes: bytes)
        for offset in -1...(bytes.count + 1) {
            let position = source.position(ofByteOffset: offset)
            #expect(source.byteOffset(of: position) != nil, "offset \(offset) -> \(position)")
        }
    }

    @Test func emptyFile() {
        let source = SourceText(bytes: [])
        #expect(source.lineCount == 1)
        #expect(source.byteOffset(of: pos(1, 1)) == 0)
        #expect(source.byteOffset(of: pos(1, 2)) == nil)
        #expect(source.position(ofByteOffset: 0) == pos(1, 1))
    }

    @Test func scalarPositionsPointAtTheirText() throws {
        // Every plain scalar's start, mapped through SourceText, must land on its text.
        let text = "é1: v1\r\nlist:\r\n  - 😀x\r\n  - {k: 'v', m: &a n}\u{2028}  - !t\r\n    # c\u{2029}    'w'\rnested:\n  deeper: ünï\u{85}z: end\n"
        let bytes = Array(text.utf8)
        let result = YAMLParser.parse(bytes)
        #expect(result.errors.isEmpty)
        let source = SourceText(bytes: bytes)
        var pending = [try #require(result.root)]
        var checked = 0
        while let node = pending.popLast() {
            switch node {
            case .scalar(let scalar):
                let offset = try #require(source.byteOffset(of: scalar.start))
                let expected = scalar.style == .plain ? Array(scalar.value.utf8) : Array("'".utf8)
                #expect(bytes[offset...].starts(with: expected), "\(scalar.value) at \(scalar.start)")
                checked += 1
            case .mapping(let mapping):
                for entry in mapping.entries {
                    pending.append(.scalar(entry.key))
                    pending.append(entry.value)
                }
            case .sequence(let sequence):
                pending.append(contentsOf: sequence.items)
            }
        }
        #expect(checked == 14)
    }
}
