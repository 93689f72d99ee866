import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// SPEC §12: text from configuration is escaped wherever it is printed, so an account id or a
/// file name cannot forge a line, send a terminal an escape sequence, or run a command from
/// `preview --format curl`.
@Suite(.blockingThreads) struct ControlCharacterTests {
    /// An account id with a newline, a command after it and an ESC sequence, as YAML can write it.
    static let evilID = #"evil\ntouch PWNED #\e[31m"#
    /// The same id as pushreporter prints it.
    static let printedID = #"evil\ntouch PWNED #\x1b[31m"#

    /// A file whose name holds a newline, with the evil account (no device values: a warning
    /// names it) reporting to `base`, answered with Digest as a user whose name holds one too.
    static func write(in files: TemporaryDirectory, base: String) -> String {
        files.write("bad\nname.yaml", """
            agent:
              retry: {initial: 50ms, max: 200ms}
            accounts:
              - id: "\(evilID)"
                pushTokenReporterUrl: \(base)/r/%account[id]%
                pushTokenReporterAuthUsername: "bob\\nwhoami\\r"
                pushTokenReporterAuthPassword: pw

            """)
    }

    /// No raw control character but the newlines that end lines.
    static func isClean(_ text: String) -> Bool {
        !text.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value) }
    }

    @Test func validatePrintsOneLinePerDiagnostic() throws {
        let files = TemporaryDirectory()
        let config = Self.write(in: files, base: "https://push.example.com")
        let result = try ProcessRunner.pushreporter(["validate", "--config", config])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(Self.isClean(result.stderr), "\(result.stderr)")
        let name = files.path + #"/bad\nname.yaml"#
        #expect(result.stderrLines == [
            "\(name):4:5: warning: the account has no device values (selector, pushTokenOther, pushTokenIncomingCall); "
                + "its report carries no token [account \(Self.printedID)]",
            "1 file, 1 enabled account: 0 errors, 1 warning",
        ], "\(result.stderr)")
    }

    @Test func previewCommentsAreOneLineAndTheCurlScriptRunsOnlyCurl() throws {
        let files = TemporaryDirectory()
        let config = Self.write(in: files, base: "https://push.example.com")
        let http = try ProcessRunner.pushreporter(["preview", "--config", config, "--format", "http"])
        #expect(http.status == 0, "\(http.stderr)")
        #expect(http.stdout.hasPrefix("### \(Self.printedID) pushTokenReporter\n"
                                      + #"# answered with HTTP Digest (or Basic over https) as 'bob\nwhoami\r'"# + "\nGET /r/"),
                "\(http.stdout)")

        let curl = try ProcessRunner.pushreporter(["preview", "--config", config, "--format", "curl"])
        #expect(curl.status == 0, "\(curl.stderr)")
        #expect(curl.stdout.hasPrefix("# \(Self.printedID) pushTokenReporter\n# set first: $PUSHTOKENREPORTERAUTHPASSWORD\ncurl "), "\(curl.stdout)")
        let script = files.write("preview.sh", curl.stdout)
        #expect(try ProcessRunner.run("/bin/bash", ["-n", script]).status == 0)
        // Run with curl as a function that counts its calls: the script calls it once, and runs
        // nothing else (no PWNED file appears).
        let run = try ProcessRunner.run("/bin/bash", ["-c", "curl() { echo called >> calls; }; . " + script], directory: files.path)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try String(contentsOfFile: files.path + "/calls", encoding: .utf8) == "called\n")
        #expect(!FileManager.default.fileExists(atPath: files.path + "/PWNED"))
    }

    @Test func logLinesTheRunSummaryAndStatusRowsAreOneLineEach() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(503) }
        let files = TemporaryDirectory()
        let config = Self.write(in: files, base: server.baseURL)
        let state = files.path + "/state"
        let once = try ProcessRunner.pushreporter(["run", "--once", "--deadline", "3s", "--config", config, "--state-dir", state])
        #expect(once.status == 1)
        #expect(Self.isClean(once.stdout + once.stderr), "\(once.stdout)\(once.stderr)")
        let summary = once.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(summary.count == 3 && summary[2].isEmpty, "\(once.stdout)")
        #expect(summary.dropFirst().first?.hasPrefix("  \(Self.printedID): pushTokenReporter to 127.0.0.1:\(server.port): HTTP 503 (") == true,
                "\(once.stdout)")
        // Each log line is a diagnostic (the file name escaped) or starts with a timestamp.
        for line in once.stderrLines {
            #expect(line.hasPrefix(files.path + #"/bad\nname.yaml:"#) || line.wholeMatch(of: /\d{4}-\d\d-\d\dT[0-9:.]+Z \w+: .*/) != nil,
                    "\(line)")
        }
        #expect(once.stderr.contains(" warning: \(Self.printedID): pushTokenReporter to 127.0.0.1:\(server.port) failed: HTTP 503 (attempt 1)"),
                "\(once.stderr)")

        let json = try ProcessRunner.pushreporter(["run", "--once", "--deadline", "3s", "--log-format", "json",
                                                   "--config", config, "--state-dir", state])
        #expect(Self.isClean(json.stderr), "\(json.stderr)")
        let objects = json.stderrLines.map { line in (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] }
        #expect(!objects.isEmpty && objects.allSatisfy { $0 != nil }, "every line a JSON object: \(json.stderr)")

        let status = try ProcessRunner.pushreporter(["status", "--state-dir", state])
        #expect(status.status == 0)
        #expect(Self.isClean(status.stdout), "\(status.stdout)")
        let rows = status.stdout.split(separator: "\n").map(String.init)
        #expect(rows.count == 3, "\(status.stdout)")
        #expect(rows.last?.hasPrefix("\(Self.printedID)  acrobits  retrying  ") == true, "\(status.stdout)")
    }
}
