import PushConfig
import Testing
import PushTestThreads

/// Golden diagnostics: exact file, line, column and message.
@Suite("Diagnostics carry the exact file:line:column", .blockingThreads)
struct DiagnosticsTests {
    static let device = """
        selector: 12869E0E6E553673C54F29105A0647204C416A2A:7C3A0D14
        pushTokenOther: QVBBOTFiRzlhcVd2bW54bllCWldHOWh4dnRrZ3pUWFNvcGZpdWZ6bWM2dFAzS2J
    """

    @Test("an unknown variable in a plain scalar")
    func unknownVariablePlain() {
        let loaded = Loaded("""
            accounts:
              - id: a
                selector: s
                pushTokenReporterUrl: https://h.example/t?sel=%selector%&tok=%pushTokenOthr%
            """)
        #expect(loaded.lines == ["config.yaml:4:66: error: unknown variable 'pushTokenOthr'; did you mean 'pushTokenOther'?"])
    }

    @Test("agent.statePassword that is not a tagged scalar is an error, a mapping too")
    func statePasswordMustBeATag() {
        for value in ["s3cret", "{x: 1}"] {
            let loaded = Loaded("""
                agent:
                  state: postgres://u@127.0.0.1/db
                  statePassword: \(value)
                accounts:
                  - id: a
                    selector: s
                    pushTokenReporterUrl: https://h.example/t?sel=%selector%
                """)
            #expect(loaded.lines == ["config.yaml:3:18: error: agent.statePassword must be given as !credential NAME, !file PATH or !env NAME, never written in the file"],
                    "\(value)")
        }
    }

    @Test("an unknown variable in a double-quoted scalar with escapes before it")
    func unknownVariableQuoted() {
        let loaded = Loaded("""
            accounts:
              - id: a
                selector: s
                pushTokenReporterUrl: "https://h.example/t?x=\\u00e9&sel=%selectr%"
            """)
        #expect(loaded.lines == ["config.yaml:4:61: error: unknown variable 'selectr'; did you mean 'selector'?"])
    }

    @Test("an unknown variable in a literal block scalar")
    func unknownVariableBlock() {
        let loaded = Loaded("""
            accounts:
              - id: a
                selector: s
                pushTokenReporterUrl: https://h.example/t
                pushTokenReporterContentType: application/json
                pushTokenReporterPostData: |
                  {
                    "selector": "%selector%",
                    "token": "%pushTokn%"
                  }
            """)
        #expect(loaded.lines == ["config.yaml:9:19: error: unknown variable 'pushTokn'; did you mean 'pushToken'?"])
    }

    @Test("the same placeholder twice in one scalar: the second occurrence is the one reported")
    func repeatedPlaceholder() {
        let loaded = Loaded("""
            accounts:
              - id: a
                selector: s
                pushTokenReporterUrl: https://h.example/t?a=%selector%&b=%nope%&c=%nope%
            """)
        #expect(loaded.lines == ["config.yaml:4:62: error: unknown variable 'nope'",
                                 "config.yaml:4:71: error: unknown variable 'nope'"])
    }

    @Test("an unknown top-level key, with a suggestion")
    func unknownTopLevelKey() {
        let loaded = Loaded("""
            agent:
              concurrency: 4
            acounts:
              - id: a
            """)
        #expect(loaded.lines.first == "config.yaml:3:1: error: unknown key 'acounts' at the top level; did you mean 'accounts'?")
    }

    @Test("an unknown agent key, with a suggestion")
    func unknownAgentKey() {
        let loaded = Loaded("""
            agent:
              perHostConcurency: 4
            """)
        #expect(loaded.lines.first == "config.yaml:2:3: error: unknown key 'perHostConcurency' under agent; did you mean 'perHostConcurrency'?")
    }

    @Test("a YAML syntax error")
    func syntaxError() {
        let loaded = Loaded("""
            accounts:
              - id: a
                selector: s: t
            """)
        #expect(loaded.lines.count == 1)
        #expect(loaded.lines.first?.hasPrefix("config.yaml:3:") == true)
        #expect(loaded.lines.first?.contains("error: ") == true)
        #expect(loaded.diagnostics.all.first?.line == 3)
        #expect(loaded.diagnostics.all.first?.column == 16)
    }

    @Test("duplicate ids across two files name the first place")
    func duplicateIDs() {
        let loaded = Loaded([
            ("a.yaml", """
                accounts:
                  - id: alice
                    pushTokenReporterUrl: https://h.example/t?s=%selector%
                """),
            ("b.yaml", """
                # another team's file
                accounts:
                  - username: bob
                    pushTokenReporterUrl: https://h.example/t?s=%selector%
                  - id: alice
                    pushTokenReporterUrl: https://h.example/t?s=%selector%
                """),
        ])
        let errors = loaded.lines.filter { $0.contains("error") }
        #expect(errors.count == 1)
        #expect(errors.first?.hasPrefix("b.yaml:5:5: error: account id 'alice' is already used at ") == true)
        #expect(errors.first?.hasSuffix("a.yaml:2:5; ids must be unique across all files (an account's id is its `id:`, else its username) [account alice]") == true)
    }

    @Test("an unset !env variable")
    func unsetEnv() {
        let loaded = Loaded("""
            accounts:
              - id: a
                password: !env JOHN_PASSWORD
            """, environment: [:])
        #expect(loaded.lines.contains("config.yaml:3:20: error: environment variable 'JOHN_PASSWORD' is not set (needed by !env for 'password') [account a]"))
        #expect(loaded.diagnostics.errorCount == 1)
    }

    @Test("a template naming a key whose !env is unset gets no second error, in the account or from defaults")
    func unsetEnvIsReportedOnce() {
        let loaded = Loaded("""
            defaults:
              pushTokenReporterUrl: https://h.example/t?p=%account[password]%&k=%account[apiKey]%&s=%selector%
              apiKey: !env API_KEY
            accounts:
              - id: a
                selector: S
                password: !env JOHN_PASSWORD
              - id: b
                selector: S
                apiKey: written
            """, environment: [:])
        #expect(loaded.lines.filter { $0.contains("error") } == [
            "config.yaml:3:16: error: environment variable 'API_KEY' is not set (needed by !env for 'apiKey')",
            "config.yaml:7:20: error: environment variable 'JOHN_PASSWORD' is not set (needed by !env for 'password') [account a]",
        ])
        // b wrote no password: that is still worth a warning, and only for b.
        #expect(loaded.lines.filter { $0.contains("warning") } == [
            "config.yaml:2:47: warning: the account has no key 'password', so %account[password]% renders empty [account b]",
        ])
    }

    @Test("a template naming a global whose !env is unset gets no second error")
    func unsetGlobalIsReportedOnce() {
        let loaded = Loaded("""
            globals:
              secret: !env MISSING_SECRET
            accounts:
              - id: a
                selector: S
                pushTokenReporterUrl: https://h.example/t?s=%selector%&sig=%hmac_sha256(%secret%,%selector%)%
            """, environment: [:])
        #expect(loaded.lines == [
            "config.yaml:2:16: error: environment variable 'MISSING_SECRET' is not set (needed by !env for 'secret')",
        ])
    }

    @Test("a custom header naming a key no account has is reported even when another header line is wrong")
    func headerReferencesBesideABadLine() {
        let loaded = Loaded("""
            accounts:
              - id: a
                selector: S
                pushTokenReporterUrl: https://h.example/t?s=%selector%
                pushTokenReporterCustomHeaders: |
                  no colon here
                  X-Key: %account[nokey]%
            """)
        #expect(loaded.lines == [
            "config.yaml:6:7: error: a custom header line must read 'Name: value', not 'no colon here'",
            "config.yaml:7:14: error: no account has a key 'nokey'",
        ])
    }

    @Test("a set !env variable is used and secret")
    func setEnv() throws {
        let loaded = Loaded("""
            accounts:
              - id: a
                password: !env JOHN_PASSWORD
            """, environment: ["JOHN_PASSWORD": "s3cret"])
        let account = try #require(loaded.account("a"))
        #expect(account["password"] == "s3cret")
        #expect(account.values["password"]?.isSecret == true)
    }

    @Test("%account[KEY]% no account has is an error; one some accounts lack is a warning for each")
    func accountKeys() {
        let loaded = Loaded("""
            defaults:
              pushTokenReporterUrl: https://h.example/t?u=%account[username]%&e=%account[extension]%&x=%account[emial]%
            accounts:
              - id: a
                username: alice
                extension: "100"
                email: a@example.com
              - id: b
                username: bob
            """)
        #expect(loaded.lines == [
            "config.yaml:2:69: warning: the account has no key 'extension', so %account[extension]% renders empty [account b]",
            "config.yaml:2:92: error: no account has a key 'emial'; did you mean 'email'?",
            "config.yaml:4:5: warning: the account has no device values (selector, pushTokenOther, pushTokenIncomingCall); its report carries no token [account a]",
            "config.yaml:8:5: warning: the account has no device values (selector, pushTokenOther, pushTokenIncomingCall); its report carries no token [account b]",
        ])
    }

    @Test("a key an account lacks, named in a custom header, is placed inside the CustomHeaders text")
    func accountKeyInHeader() {
        let loaded = Loaded("""
            accounts:
              - id: a
                selector: s
                extension: "7"
                pushTokenReporterUrl: https://h.example/t
              - id: b
                selector: s
                pushTokenReporterUrl: https://h.example/t
                pushTokenReporterCustomHeaders: "X-Tenant: t\\nX-Ext: %account[extension]%"
            """)
        #expect(loaded.lines == ["config.yaml:9:58: warning: the account has no key 'extension', so %account[extension]% renders empty [account b]"])
    }

    @Test("custom headers shared through defaults: each account's own lack is reported, at its place in the text")
    func sharedHeaders() {
        let loaded = Loaded("""
            defaults:
              pushTokenReporterUrl: https://h.example/t
              pushTokenReporterCustomHeaders: "X-Tenant: t\\nX-Ext: %account[extension]%"
            accounts:
              - id: a
                selector: s
                extension: "7"
              - id: b
                selector: s
              - id: c
                selector: s
                extension: "8"
              - id: d
                selector: s
            """)
        #expect(loaded.lines == [
            "config.yaml:3:56: warning: the account has no key 'extension', so %account[extension]% renders empty [account b]",
            "config.yaml:3:56: warning: the account has no key 'extension', so %account[extension]% renders empty [account d]",
        ])
    }

    @Test("a custom headers problem is reported where each file writes it, even after another account repeated it")
    func headerProblemInEachFile() {
        let defaults = "defaults:\n  pushTokenReporterUrl: https://h.example/t\n  pushTokenReporterCustomHeaders: \"X-A: 1\\nX-A: 2\"\n"
        let loaded = Loaded([
            ("a.yaml", defaults + "accounts:\n  - id: a1\n    selector: s\n  - id: a2\n    selector: s\n"),
            ("b.yaml", defaults + "accounts:\n  - id: b1\n    selector: s\n"),
        ])
        #expect(loaded.lines == [
            "a.yaml:3:44: warning: the header X-A is given twice; both lines are sent",
            "b.yaml:3:44: warning: the header X-A is given twice; both lines are sent",
        ])
    }

    @Test("a placeholder in the URL's host")
    func placeholderInHost() {
        let loaded = Loaded("""
            accounts:
              - id: a
                pushTokenReporterUrl: https://%account[server]%/t
                server: h.example
            """)
        #expect(loaded.lines.filter { $0.contains("error") } == ["config.yaml:3:35: error: a placeholder cannot stand in a URL's scheme or host; only the path and the query can hold values"])
    }

    @Test("a template problem in defaults is reported once, not once per account")
    func reportedOnce() {
        let accounts = (1...50).map { "  - id: a\($0)\n    selector: s" }.joined(separator: "\n")
        let loaded = Loaded("defaults:\n  pushTokenReporterUrl: https://h.example/?s=%selectorr%\naccounts:\n" + accounts)
        #expect(loaded.lines == ["config.yaml:2:46: error: unknown variable 'selectorr'; did you mean 'selector'?"])
    }

    @Test("one bad file does not hide the diagnostics of the others")
    func badFileDoesNotHideOthers() {
        let loaded = Loaded([
            ("a.yaml", "accounts: [ {id: x\n"),
            ("b.yaml", "accounts:\n  - id: y\n    pushTokenReporterUrl: https://h.example/?t=%nope%\n"),
        ])
        #expect(loaded.lines.contains { $0.hasPrefix("a.yaml:") && $0.contains("error") })
        #expect(loaded.lines.contains("b.yaml:3:48: error: unknown variable 'nope'"))
    }
}

/// What a person reads of one problem many accounts share (``Swift/Array/collapsingRepeats(shown:)``).
@Suite(.blockingThreads) struct CollapsedRepeatsTests {
    static func warning(_ line: Int, _ message: String, file: String = "a.yaml", account: String? = "u\(Int.random(in: 0..<1_000_000))") -> Diagnostic {
        Diagnostic(file: file, line: line, column: 5, severity: .warning, message: message, account: account)
    }

    @Test("the first three of six accounts with the same problem, then one line for the rest; other problems untouched")
    func collapses() {
        let same = "the account has no pushTokenReporterUrl and no services, so nothing is reported for it"
        var diagnostics = (1...6).map { Self.warning($0 * 10, same, account: "u\($0)") }
        diagnostics.insert(Self.warning(25, "something else", account: "x"), at: 2)
        diagnostics.append(Self.warning(5, same, file: "b.yaml", account: "v"))
        diagnostics.append(Self.warning(1, "a file-wide warning", account: nil))
        let shown = diagnostics.collapsingRepeats()
        #expect(shown.map(\.formatted) == [
            "a.yaml:10:5: warning: \(same) [account u1]",
            "a.yaml:20:5: warning: \(same) [account u2]",
            "a.yaml:25:5: warning: something else [account x]",
            "a.yaml:30:5: warning: \(same) [account u3]",
            "a.yaml:40:5: warning: \(same) (the same for 3 accounts of this file from this line on; validate --format json lists every one)",
            "b.yaml:5:5: warning: \(same) [account v]",
            "a.yaml:1:5: warning: a file-wide warning",
        ])
    }

    @Test("four of the same are all shown: a line for one more would save nothing")
    func fewAreKept() {
        let diagnostics = (1...4).map { Self.warning($0, "same", account: "u\($0)") }
        #expect(diagnostics.collapsingRepeats() == diagnostics)
    }
}
