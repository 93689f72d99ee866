import Foundation
@testable import PushConfig
import PushTestSupport
import Testing
import PushTestThreads

/// A large load lets each file's bytes go once it is parsed (``SourceText/releaseBytes()``) and
/// reads them back when a diagnostic needs them, but only from the file it read.
@Suite("A source's bytes, let go and read back", .blockingThreads)
struct SourceTextReleaseTests {
    @Test("bytes let go are read back from the unchanged file, positions and all")
    func readBack() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", "accounts:\n  - id: a\n    selector: s\n")
        let parsed = ParsedFile(path: path)
        let source = try parsed.contents.get().source
        source.releaseBytes()
        #expect(source.bytes == Array("accounts:\n  - id: a\n    selector: s\n".utf8))
        #expect(source.byteOffset(of: SourcePosition(line: 3, column: 5)) == 24)
    }

    @Test("bytes let go are not read back from a file that changed since: a position falls back")
    func changedFile() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", "accounts:\n  - id: a\n    selector: s\n")
        let source = try ParsedFile(path: path).contents.get().source
        source.releaseBytes()
        // Another file renamed over it, as editors and config management write.
        _ = directory.write("c.yaml.new", "accounts:\n  - id: b\n    selector: t\n")
        #expect(rename(path + ".new", path) == 0)
        #expect(source.bytes.isEmpty)
        #expect(source.byteOffset(of: SourcePosition(line: 3, column: 5)) == nil)
    }

    @Test("a file parsed again after its bytes were let go and it changed is an error, not an empty file")
    func reparsingAChangedFile() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", "accounts:\n  - id: a\n")
        let contents = try ParsedFile(path: path).contents.get()
        contents.source.releaseBytes()
        _ = directory.write("c.yaml.new", "accounts:\n  - id: b\n")
        #expect(rename(path + ".new", path) == 0)
        let again = ParsedFile(reparsing: contents)
        guard case .failure(let error) = again.contents else {
            Issue.record("parsed a file that changed as if it had not")
            return
        }
        #expect(error.message == "it changed while it was read; read it again")
    }

    @Test("two readings of one file are the same file until it changes")
    func sameFile() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", "accounts:\n  - id: a\n")
        let first = try ParsedFile(path: path).contents.get().source
        let second = try ParsedFile(path: path).contents.get().source
        #expect(first.isSameFile(as: second))
        _ = directory.write("c.yaml.new", "accounts:\n  - id: b\n")
        #expect(rename(path + ".new", path) == 0)
        let third = try ParsedFile(path: path).contents.get().source
        #expect(!first.isSameFile(as: third))
        #expect(!SourceText(bytes: []).isSameFile(as: SourceText(bytes: [])))
    }

    @Test("bytes read from what cannot be read again are never let go")
    func notAFile() {
        let source = SourceText(bytes: Array("a: 1\n".utf8))
        source.releaseBytes()
        #expect(source.bytes == Array("a: 1\n".utf8))
    }
}
