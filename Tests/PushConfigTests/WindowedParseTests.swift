@testable import PushConfig
import PushTestSupport
import Testing
import PushTestThreads
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// A file read in chunks (``InputWindow``, for `preview`) must parse as its whole bytes parse:
/// the same tree, positions included, and the same problems. The windows here are a few bytes,
/// so that every text moves them many times, between any two bytes.
@Suite("Parsing a file read in chunks gives what a parse of its bytes gives", .blockingThreads)
struct WindowedParseTests {
    /// Texts with what the tree builder looks at in the bytes: tags and anchors before a
    /// node's text (over line breaks and comments), the end of the input without a line break,
    /// `key:` ending the file, line breaks of every kind, a byte order mark, multi-byte text.
    static let shapes: [String] = [
        "a: 1\nb: [x, y]\nc: {d: e}\n",
        "key: !env NAME\nother: &anchor\n  # a comment\n  !tag\n\n  value\nalias: *anchor\n",
        "a: !env   X\nb: &x [1, 2]\nc: !<tag:yaml.org,2002:str> v\nd: &y\n  e: f\ng: *y\nh: {<<: *y, i: j}\n",
        "last:", "last: value", "- a\n- b", "list:\n  -", "k: v\n\n\n", "k: 'two\n  lines'", "# only a comment",
        "a: 1\r\nb: !env Z\r\nc:\r\n", "a: 1\rb: 2\r", "a: \"x\u{85}y\"\nb: !t \u{2028}c\n", "\u{FEFF}a: 1\nb: !e x\n",
        "name: Zoë 🦊\nnote: |\n  two\n  lines\nfolded: >\n  one\n  line\nz: !env Ünï\n",
        "a: 1\n---\nb: 2\n", "%YAML 1.1\n---\na: 1\n", "a: 1\na: 2\n{x: 1}: y\n", "a:\n  b:\n    c: [1, {d: !env E}]\n",
        "", "\u{FEFF}", "!tag\n", "&a x", "key: !env\n", String(repeating: "k\(1): !e v\n", count: 3),
        "accounts:\n" + (0..<40).map { "  - {username: u\($0), token: !env T\($0), note: \"é\($0)\"}\n" }.joined() + "last: !x y",
        String(repeating: "x", count: 300) + ": " + String(repeating: "é", count: 200),
        // Errors libyaml stops on: worded from the whole bytes.
        "a: [1, 2\nb: 3\n", "a: b: c\n", "\ta: 1\n", "a: 'unclosed\n", "- a\nb: c\n", "a: \u{1}\n", "a: \"\\q\"\n",
    ]

    /// Every text of the suite's corpus: the shapes above, the split parse's texts, the fuzzing
    /// corpus and the example configurations.
    static func corpus() throws -> [(String, [UInt8])] {
        var texts = shapes.enumerated().map { ("shape \($0.offset)", Array($0.element.utf8)) }
        texts += SplitParseTests.kept.map { ($0.0, Array($0.1.utf8)) }
        texts += SplitParseTests.fallingBack.map { ($0.0, Array($0.1.utf8)) }
        for directory in ["fuzz/corpus/loader", "examples"] {
            let path = RepositoryPaths.root + "/" + directory
            for name in try FileSystem.list(path).get() where name.hasSuffix(".yaml") {
                texts.append((directory + "/" + name, try FileSystem.read(path + "/" + name).get()))
            }
        }
        #expect(texts.count > 50)
        return texts
    }

    /// `bytes` parsed through a window of `capacity` bytes read `chunk` at a time; nil when
    /// only a parse of the whole bytes can tell (libyaml stopped on an error).
    static func windowed(_ bytes: [UInt8], in directory: TemporaryDirectory, chunk: Int, capacity: Int,
                         longestLineKept: Int = 1 << 16, streaming: Bool = false) throws -> (result: SplitParseTests.Outcome?, lost: Bool) {
        let path = directory.write("windowed.yaml", bytes: bytes)
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        guard streaming else {
            let window = try #require(InputWindow(fd: fd, limit: 1 << 30, capacity: capacity, chunk: chunk, longestLineKept: longestLineKept))
            let result = YAMLParser.parse(window: window, streaming: nil)
            return (result.map { SplitParseTests.Outcome(tree: $0.root.map(SplitParseTests.dump) ?? "nil", errors: SplitParseTests.errors($0)) },
                    window.isLost)
        }
        // Streamed as the loader takes them: the items on another thread.
        let stream = SequenceStream(key: "accounts", splitAbove: .max)
        let parse = ThreadResult(named: "test-window") { () -> (YAMLParseResult?, Bool) in
            defer { stream.end() }
            guard let window = InputWindow(fd: fd, limit: 1 << 30, capacity: capacity, chunk: chunk, longestLineKept: longestLineKept)
            else { return (nil, true) }
            return (YAMLParser.parse(window: window, streaming: stream), window.isLost)
        }
        let items = if case .streaming = stream.start() { SplitParseTests.drain(stream) } else { [YAMLNode]() }
        let (result, lost) = parse!.take()
        guard let result else { return (nil, lost) }
        return (SplitParseTests.Outcome(tree: SplitParseTests.rejoined(result, items: items), errors: SplitParseTests.errors(result)), lost)
    }

    @Test("the same tree and problems, in windows of 1 to 64 bytes read 1 to 7 bytes at a time", arguments: [(1, 1), (7, 2), (64, 7)])
    func sameAsWhole(capacity: Int, chunk: Int) throws {
        let directory = TemporaryDirectory()
        for (name, bytes) in try Self.corpus() {
            let whole = YAMLParser.parse(bytes)
            let (windowed, lost) = try Self.windowed(bytes, in: directory, chunk: chunk, capacity: capacity)
            #expect(!lost, "\(name): the window let go of bytes the builder needed")
            if let windowed {
                #expect(windowed.tree == (whole.root.map(SplitParseTests.dump) ?? "nil"), "\(name)")
                #expect(windowed.errors == SplitParseTests.errors(whole), "\(name)")
            } else {
                // Only a libyaml error is left to the whole parse: one fatal problem.
                #expect(whole.root == nil && whole.errors.count == 1, "\(name): \(SplitParseTests.errors(whole))")
            }
        }
    }

    @Test("texts with random bytes changed, inserted and cut: the same tree and problems")
    func mutations() throws {
        let directory = TemporaryDirectory()
        let seeds = try Self.corpus().map(\.1).filter { $0.count > 20 }
        var random = XorShift(state: 0x9E37_79B9_7F4A_7C15)
        func next() -> Int { random.next() }
        let alphabet = Array(" \n\r\t:-#!&*'\"[]{},|>%@`?".utf8) + [0xC3, 0xA9, 0x85, 0xE2, 0x80, 0xA8, 0x00, 0xFF]
        var parsedWindowed = 0
        for round in 0..<400 {
            var bytes = seeds[round % seeds.count]
            for _ in 0..<(1 + next() % 4) {
                let at = next() % bytes.count
                switch next() % 3 {
                case 0: bytes[at] = alphabet[next() % alphabet.count]
                case 1: bytes.insert(alphabet[next() % alphabet.count], at: at)
                default: bytes.removeSubrange(at..<min(bytes.count, at + 1 + next() % 8))
                }
                if bytes.isEmpty { bytes = [0x61] }
            }
            let whole = YAMLParser.parse(bytes)
            let (windowed, lost) = try Self.windowed(bytes, in: directory, chunk: 1 + round % 5, capacity: 8 + round % 50)
            #expect(!lost, "round \(round)")
            guard let windowed else {
                #expect(whole.root == nil && whole.errors.count == 1, "round \(round): \(SplitParseTests.errors(whole))")
                continue
            }
            parsedWindowed += 1
            // libyaml checks the encoding of what it has read, and a whole parse gives it more
            // at once than these few bytes: a bad byte further on can stop the whole parse before
            // the problem the tree builder stops on here. Both are the file's problems (and fed
            // as a whole parse is fed, a file read in chunks gives the same one).
            if whole.root == nil, windowed.tree == "nil", whole.errors.count == 1, windowed.errors.count == 1,
               ["the file is not valid UTF-8", "the file contains a "].contains(where: whole.errors[0].message.hasPrefix) {
                continue
            }
            #expect(windowed.tree == (whole.root.map(SplitParseTests.dump) ?? "nil"), "round \(round)")
            #expect(windowed.errors == SplitParseTests.errors(whole), "round \(round)")
        }
        // Most mutations still parse, so the comparison is not only of errors.
        #expect(parsedWindowed > 100)
    }

    @Test("a file on one line is not held whole, and a long last line the end of the input is placed in asks for the whole file")
    func longLines() throws {
        let directory = TemporaryDirectory()
        let items = (0..<20_000).map { "{username: u\($0), token: !env T\($0)}" }.joined(separator: ", ")
        let oneLine = Array(("{accounts: [" + items + "]}").utf8)
        let path = directory.write("one-line.yaml", bytes: oneLine)
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        let window = try #require(InputWindow(fd: fd, limit: 1 << 30, capacity: 64, chunk: 4_096, longestLineKept: 1_024))
        let parsed = try #require(YAMLParser.parse(window: window, streaming: nil))
        #expect(SplitParseTests.dump(try #require(parsed.root)) == SplitParseTests.dump(try #require(YAMLParser.parse(oneLine).root)))
        #expect(oneLine.count > 700_000)
        #expect(window.capacity <= 16_384, "\(window.capacity)")

        // A key with no value ends the file: its empty value is placed at the end of the last
        // line, whose start the window let go.
        let lastLine = Array(("a: 1\n? [" + (0..<500).map { "item\($0)" }.joined(separator: ", ") + "]").utf8)
        let (windowed, lost) = try Self.windowed(lastLine, in: directory, chunk: 7, capacity: 16, longestLineKept: 16)
        #expect(lost && windowed == nil)
        let (kept, keptLost) = try Self.windowed(lastLine, in: directory, chunk: 7, capacity: 16)
        #expect(!keptLost)
        #expect(kept?.errors == SplitParseTests.errors(YAMLParser.parse(lastLine)))
        #expect(kept?.errors.isEmpty == false)
    }

    @Test("streamed: the accounts' items handed over as they are read, the rest of the tree as a whole parse")
    func streamed() throws {
        let directory = TemporaryDirectory()
        var compared = 0
        for (name, bytes) in try Self.corpus() {
            let whole = YAMLParser.parse(bytes)
            let (windowed, lost) = try Self.windowed(bytes, in: directory, chunk: 5, capacity: 16, streaming: true)
            #expect(!lost, "\(name)")
            guard let windowed else { continue }
            #expect(windowed.tree == (whole.root.map(SplitParseTests.dump) ?? "nil"), "\(name)")
            #expect(windowed.errors == SplitParseTests.errors(whole), "\(name)")
            compared += 1
        }
        #expect(compared > 40)
    }

    @Test("a file read through a window: a YAML error is worded from the bytes read again, and a diagnostic reads them back")
    func parsedFile() throws {
        let directory = TemporaryDirectory()
        let broken = directory.write("broken.yaml", "accounts:\n  - {username: a}\n  - [unclosed\n")
        let file = ParsedFile(path: broken, windowAbove: 0)
        let contents = try file.contents.get()
        #expect(SplitParseTests.errors(contents.parsed) == SplitParseTests.errors(YAMLParser.parse(try FileSystem.read(broken).get())))
        #expect(contents.parsed.errors.count == 1)
        let fine = directory.write("fine.yaml", "agent: {timeout: 5s}\naccounts:\n  - {username: é, token: x}\n")
        let read = try ParsedFile(path: fine, windowAbove: 0).contents.get()
        #expect(read.parsed.errors.isEmpty)
        // Not held, but read back when needed.
        #expect(read.source.bytesIfAvailable == Array("agent: {timeout: 5s}\naccounts:\n  - {username: é, token: x}\n".utf8))
        // Below the size given, the file is read whole, as before.
        #expect(try ParsedFile(path: fine, windowAbove: 1 << 20).contents.get().source.bytes.count == 60)
    }

    @Test("a file written in place while it is read through a window is the same file as no other, and is not read back")
    func writtenWhileRead() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", "accounts:\n" + (0..<5_000).map { "  - {username: u\($0), selector: s\($0)}\n" }.joined())
        // As preview's first reading, before the write.
        let before = try ParsedFile(path: path, windowAbove: 0).contents.get()
        let stream = SequenceStream(key: "accounts", splitAbove: .max)
        // The parser cannot finish before the items are taken: it waits once a thousand are ready.
        let parse = ThreadResult(named: "test-written") { ParsedFile(path: path, streaming: stream, windowAbove: 0) }
        guard case .streaming = stream.start() else {
            Issue.record("the accounts were not streamed")
            return
        }
        // Written over in place, then cut shorter: lines of the same length, so that whatever
        // mix of the two the parser reads is still a list of accounts.
        let replacement = Array(("accounts:\n" + (0..<4_000).map { "  - {username: w\($0), selector: s\($0)}\n" }.joined()).utf8)
        let fd = open(path, O_WRONLY)
        #expect(replacement.withUnsafeBytes { pwrite(fd, $0.baseAddress!, $0.count, 0) } == replacement.count)
        #expect(ftruncate(fd, off_t(replacement.count)) == 0)
        close(fd)
        var items = 0
        stream.forEachBatch { batch, _ in items += batch.count }
        let contents = try parse!.take().contents.get()
        #expect(contents.parsed.errors.isEmpty)
        #expect(contents.parsed.streamedItemCount == items)
        #expect(items >= 4_000 && items <= 5_000)
        // Opened before the write, it is not the file read before either.
        #expect(!contents.source.isSameFile(as: before.source))
        let readBack = contents.source.bytesIfAvailable != nil
        #expect(!readBack)
        let again = try ParsedFile(path: path, windowAbove: 0).contents.get()
        #expect(!contents.source.isSameFile(as: again.source))
        // Read unchanged, the file is the same as itself, and read back when needed.
        let twice = try ParsedFile(path: path, windowAbove: 0).contents.get()
        #expect(again.source.isSameFile(as: twice.source))
        #expect(twice.source.bytesIfAvailable?.count == replacement.count)
    }

    @Test("a configuration loaded with its files read in chunks is the one loaded from their bytes")
    func loads() throws {
        let directory = TemporaryDirectory()
        var text = "defaults:\n  pushTokenReporterUrl: https://h.example/?u=%account[username]%\naccounts:\n"
        for index in 0..<3_000 { text += "  - {username: user\(index), selector: 's\(index)', pushTokenOther: \"t\(index)\"}\n" }
        text += "  - {username: user7, selector: dup}\n"
        let path = directory.write("big.yaml", text)
        var whole = ConfigurationLoader(environment: LoaderEnvironment(variables: [:], templateSearchPath: []))
        whole.splitAbove = .max
        var windowed = whole
        windowed.windowAbove = 1_000
        let (a, b) = (whole.load(paths: [path]), windowed.load(paths: [path]))
        #expect(a.configuration.accounts.map(\.id) == b.configuration.accounts.map(\.id))
        #expect(b.configuration.accounts.count == 3_000)
        #expect(a.diagnostics.all == b.diagnostics.all)
        #expect(b.diagnostics.all.count == 1 && b.diagnostics.all.first.map { ($0.line, $0.column) } ?? (0, 0) == (3004, 5),
                "\(b.diagnostics.all)")
        #expect(b.diagnostics.all.first?.message.contains("already used") == true)
    }
}
