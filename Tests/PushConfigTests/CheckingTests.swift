@testable import PushConfig
@testable import PushAcrobits
import PushBackend
import Testing
import PushTestThreads

/// `validate` renders a request only where values can matter (``ValueSensitivity``); its
/// diagnostics must be those of rendering every request.
@Suite("Checking requests: answers found once per template are given for every account", .blockingThreads)
struct CheckingTests {
    static let files: [(String, String)] = [
        ("a.yaml", """
        defaults:
          pushTokenReporterUrl: https://h.example/t?s=%selector%
          pushTokenReporterContentType: application/json
          pushTokenReporterPostData: '{"s": "%selector%",}'
          pushTokenReporterCustomHeaders: |
            X-Note: %account[note]%
            X-Sig: %hmac_sha256(%account[username]%,%selector%)%
        accounts:
          - id: a1
            username: ua1
            selector: S1
            note: fine
          - id: a2
            username: ua2
            selector: S2
            note: "two\\nlines"
          - id: a4
            username: ua4
            selector: S4-longer
            note: fine
          - id: a3
            username: ua3
            selector: S3
            note: fine too
            pushTokenReporterPostData: '{"s": "%selector%"}'
        """),
        ("c.yaml", """
        defaults:
          pushTokenReporterUrl: https://h.example/c
          pushTokenReporterContentType: application/json
          pushTokenReporterPostData: '{"v": "\\%account[v]%"}'
        accounts:
          - id: c1
            username: uc1
            selector: S
            v: n
          - id: c2
            username: uc2
            selector: S
            v: x
        """),
        ("b.yaml", """
        defaults:
          pushTokenReporterUrl: https:///t/%selector%
          accountRemovalReporterUrl: https://h.example/r/%selector%
          accountRemovalReporterMethod: DELETE
        accounts:
          - id: b1
            username: ub1
            selector: S4
          - id: b2
            username: ub2
            selector: S5
        """),
    ]

    /// What `request(for:…)` reports for every account and reporter, one after another.
    static func renderedDiagnostics(_ loaded: Loaded) -> [String] {
        var builder = RequestBuilder(configuration: loaded.result.configuration, sources: loaded.result.sources,
                                     installID: "install-1", hostname: "host1")
        var diagnostics = DiagnosticList()
        for account in loaded.result.configuration.accounts {
            for reporter in Reporter.allCases {
                _ = builder.request(for: account, reporter: reporter, fingerprinted: false, diagnostics: &diagnostics)
            }
        }
        return diagnostics.all.map { $0.formatted.replacingOccurrences(of: loaded.directory.path + "/", with: "") }
    }

    @Test("invalid JSON, a URL without a host and a line break in one account's header")
    func sameAsRenderingEveryRequest() {
        let loaded = Loaded(Self.files)
        let checked = loaded.lines
        // The same problem at the same place, without an account, is reported once.
        // The byte offset moves with the values: each account's own.
        #expect(checked == [
            "a.yaml:4:30: error: the rendered pushTokenReporterPostData is not valid JSON: expected a string key at byte 12 [account a1]",
            "a.yaml:4:30: error: the rendered pushTokenReporterPostData is not valid JSON: expected a string key at byte 19 [account a4]",
            "a.yaml:5:35: error: a header value may not contain a carriage return, line feed or NUL character (in the value at this position) [account a2]",
            "c.yaml:4:30: error: the rendered pushTokenReporterPostData is not valid JSON: bad escape at byte 9 [account c2]",
            "b.yaml:2:25: error: the rendered pushTokenReporterUrl has no host",
        ])
        #expect(checked.sorted() == Self.renderedDiagnostics(loaded).sorted())
    }

    @Test("each URL template's problem is its own, with the accounts' templates taken in turns")
    func urlProblemsPerTemplate() {
        let loaded = Loaded([("u.yaml", """
        defaults:
          pushTokenReporterUrl: https://h.example/t?s=%selector%
          accountRemovalReporterUrl: https://h.example/r /%selector%
        accounts:
          - {id: u1, username: uu1, selector: S1}
          - {id: u2, username: uu2, selector: S2, pushTokenReporterUrl: 'http://127.0.0.1:99999/%selector%'}
          - {id: u3, username: uu3, selector: S3}
        """)])
        let removal = "u.yaml:3:49: error: accountRemovalReporterUrl has a space here, which no URL may hold; write it percent-encoded (a space is %20)"
        let port = "u.yaml:6:83: error: pushTokenReporterUrl has port 99999, outside 1–65535"
        #expect(loaded.lines == [removal, port])
        // Rendered one after another with one builder: no template is given another's answer.
        #expect(Set(Self.renderedDiagnostics(loaded)) == [removal, port])
    }

    @Test("each reporter's custom headers are its own, with the accounts' reporters taken in turns")
    func headersPerReporter() {
        let loaded = Loaded([("h.yaml", """
        defaults:
          pushTokenReporterUrl: https://h.example/t
          pushTokenReporterCustomHeaders: |
            X-Key: report
            X-Who: %account[username]%
          accountRemovalReporterUrl: https://r.example/r
          accountRemovalReporterCustomHeaders: |
            X-Key: removal
            X-Who: %account[username]%
        accounts:
          - {id: h1, username: u1, selector: S1}
          - {id: h2, username: u2, selector: S2}
          - {id: h3, username: u3, selector: S3}
        """)])
        #expect(loaded.lines.isEmpty)
        for id in ["h1", "h2", "h3"] {
            for (reporter, key) in [(Reporter.pushTokenReporter, "report"), (.accountRemovalReporter, "removal")] {
                let headers = loaded.request(id, reporter)?.headers.filter { $0.name.hasPrefix("X-") }
                #expect(headers?.map { "\($0.name): \($0.value)" } == ["X-Key: \(key)", "X-Who: u\(id.dropFirst())"], "\(id) \(reporter)")
            }
        }
    }

    @Test("one run and many runs give the same diagnostics")
    func runsAgree() {
        let loaded = Loaded(Self.files)
        var one = DiagnosticList()
        var oneBuilder = loaded.builder
        oneBuilder.checkAll(into: &one, runs: 1)
        var many = DiagnosticList()
        var manyBuilder = loaded.builder
        manyBuilder.checkAll(into: &many, runs: 4)
        #expect(one.all.map(\.formatted) == many.all.map(\.formatted))
    }
}
