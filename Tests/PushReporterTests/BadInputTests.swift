import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// Bad input never crashes: each case gets one clear sentence and exit 78.
@Suite("Bad input: one clear sentence and exit 78", .blockingThreads)
struct BadInputTests {
    let directory = TemporaryDirectory()

    /// Runs validate and checks for exactly one error line, no trace, and exit 78.
    func expectOneError(_ path: String, containing fragment: String,
                        sourceLocation: SourceLocation = #_sourceLocation) throws {
        let output = try ProcessRunner.pushreporter(["validate", "--config", path])
        #expect(output.status == 78, sourceLocation: sourceLocation)
        let errors = output.stderrLines.filter { $0.contains(": error: ") }
        #expect(errors.count == 1, "\(output.stderr)", sourceLocation: sourceLocation)
        #expect(errors.first?.contains(fragment) == true, "\(output.stderr)", sourceLocation: sourceLocation)
        #expect(!output.stderr.contains("Fatal error"), sourceLocation: sourceLocation)
        #expect(!output.stderr.contains("Stack dump"), sourceLocation: sourceLocation)
        #expect(output.stderrLines.count <= 2, "\(output.stderr)", sourceLocation: sourceLocation)
    }

    @Test("a missing file")
    func missingFile() throws {
        try expectOneError(directory.path + "/nope.yaml", containing: "nope.yaml: error: cannot read the configuration: no such file or directory")
    }

    @Test("no --config and nothing at the default place: say how to name one",
          .enabled(if: !FileManager.default.fileExists(atPath: "/etc/pushreporter"), "the machine has a real /etc/pushreporter"))
    func noConfiguration() throws {
        let output = try ProcessRunner.pushreporter(["validate"])
        #expect(output.status == 78)
        #expect(output.stderrLines.first == "/etc/pushreporter: error: no configuration here (the default); give --config PATH or set PUSHREPORTER_CONFIG")
    }

    @Test("$PUSHREPORTER_CONFIG names the configuration when --config is not given")
    func configFromEnvironment() throws {
        let path = directory.write("env.yaml", "accounts:\n  - id: a\n    selector: s\n    pushTokenReporterUrl: https://h.example/?s=%selector%\n")
        let output = try ProcessRunner.pushreporter(["validate"], environment: ["PUSHREPORTER_CONFIG": path])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stderr.contains("1 file, 1 enabled account: 0 errors, 0 warnings"))
    }

    @Test("a directory without YAML")
    func directoryWithoutYAML() throws {
        let empty = directory.makeDirectory("conf.d")
        directory.write("conf.d/README.txt", "not yaml")
        try expectOneError(empty, containing: "conf.d: error: the directory holds no *.yaml or *.yml file")
    }

    @Test("an empty file, and one with only comments")
    func emptyFile() throws {
        try expectOneError(directory.write("empty.yaml", ""), containing: "empty.yaml: error: the file is empty; a configuration file is a YAML mapping")
        try expectOneError(directory.write("comments.yaml", "# nothing here\n\n"), containing: "comments.yaml: error: the file is empty")
    }

    @Test("a binary file")
    func binaryFile() throws {
        var rng = SeededGenerator(seed: 99)
        let bytes = (0..<4096).map { _ in UInt8.random(in: 0...255, using: &rng) }
        try expectOneError(directory.write("binary.yaml", bytes: bytes), containing: "binary.yaml:1:")
    }

    @Test("invalid UTF-8 is placed at its line and column")
    func invalidUTF8() throws {
        let bytes = Array("accounts:\n  - id: caf".utf8) + [0xC3, 0x28] + Array("\n".utf8)
        try expectOneError(directory.write("latin.yaml", bytes: bytes), containing: "latin.yaml:2:")
        let output = try ProcessRunner.pushreporter(["validate", "--config", directory.path + "/latin.yaml"])
        #expect(output.stderr.contains("UTF-8"))
    }

    @Test("a 50 MB file that is not a configuration")
    func hugeFile() throws {
        let line = "2026-11-21T12:00:00Z INFO request served in 3 ms for a client somewhere\n"
        let text = String(repeating: line, count: 50_000_000 / line.utf8.count)
        try expectOneError(directory.write("huge.yaml", text), containing: "huge.yaml:1:1: error: the file must hold a YAML mapping, not a scalar")
    }

    @Test("a template starting with '%' unquoted: YAML's error says to quote it")
    func unquotedPercent() throws {
        let text = "accounts:\n  - id: a\n    pushTokenReporterUrl: https://h.example/t\n    pushTokenReporterPostData: %account[username]%\n"
        try expectOneError(directory.write("pct.yaml", text), containing:
            "pct.yaml:4:32: error: YAML syntax error: a value cannot start with '%' unless it is quoted; put it in single quotes: '%account[username]%'")
        // In a flow mapping the value's end cannot be told from the line: an example instead.
        try expectOneError(directory.write("flow.yaml", "accounts:\n  - {id: a, pushTokenReporterUrl: %u%/x}\n"), containing:
            "flow.yaml:2:35: error: YAML syntax error: a value cannot start with '%' unless it is quoted; put it in single quotes, as in '%account[username]%:%selector%'")
        // Also where the collection began on a line above.
        try expectOneError(directory.write("flow2.yaml", "accounts:\n  - {id: a,\n     pushTokenReporterUrl: %u%/x,\n    }\n"), containing:
            "flow2.yaml:3:28: error: YAML syntax error: a value cannot start with '%' unless it is quoted; put it in single quotes, as in '%account[username]%:%selector%'")
    }

    @Test("a URL libcurl would refuse is an error at the place in it")
    func unsendableURL() throws {
        try expectOneError(directory.write("space.yaml", "accounts:\n  - id: a\n    pushTokenOther: T\n    pushTokenReporterUrl: https://h.example/a b?u=%account[id]%\n"),
                           containing: "space.yaml:4:46: error: pushTokenReporterUrl has a space here, which no URL may hold; "
                               + "write it percent-encoded (a space is %20)")
        try expectOneError(directory.write("port.yaml", "accounts:\n  - id: a\n    pushTokenOther: T\n    pushTokenReporterUrl: http://127.0.0.1:99999/x\n"),
                           containing: "port.yaml:4:44: error: pushTokenReporterUrl has port 99999, outside 1–65535")
    }

    @Test("a top level that is a list")
    func topLevelList() throws {
        try expectOneError(directory.write("list.yaml", "- id: a\n- id: b\n"),
                           containing: "list.yaml:1:1: error: the file must hold a YAML mapping, not a sequence")
    }

    @Test("deep nesting is refused, not a stack overflow")
    func deepNesting() throws {
        let text = "accounts: " + String(repeating: "[", count: 100_000)
        try expectOneError(directory.write("deep.yaml", text), containing: "deep.yaml:1:")
    }

    @Test("bad command-line usage exits 64")
    func usage() throws {
        let output = try ProcessRunner.pushreporter(["validate", "--format", "xml"])
        #expect(output.status == 64)
        #expect(output.stderr.contains("--format"))
        let unknown = try ProcessRunner.pushreporter(["frobnicate"])
        #expect(unknown.status == 64)
    }
}
