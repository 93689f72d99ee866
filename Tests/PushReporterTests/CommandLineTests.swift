import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// The CLI as a user runs it: the README's commands, output formats, exit codes.
@Suite("Command line, end to end", .blockingThreads)
struct CommandLineTests {
    @Test("every command in the README's sh blocks runs and exits 0")
    func readmeCommands() throws {
        let readme = try String(contentsOfFile: RepositoryPaths.root + "/README.md", encoding: .utf8)
        let commands = readme.split(separator: "\n").map(String.init).filter { $0.hasPrefix(".build/debug/pushreporter ") }
        #expect(commands.count >= 4)
        for command in commands {
            let arguments = command.dropFirst(".build/debug/pushreporter ".count).split(separator: " ").map(String.init)
            let output = try ProcessRunner.pushreporter(arguments, directory: RepositoryPaths.root)
            #expect(output.status == 0, "\(command)\n\(output.stderr)")
            #expect(!output.stdout.isEmpty || !output.stderr.isEmpty, "\(command)")
        }
    }

    @Test("validate --format json prints an array of diagnostics with account, and exits 78 on errors")
    func validateJSON() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", """
            accounts:
              - id: a
                selector: s
                pushTokenReporterUrl: https://h.example/?s=%selectr%
            """)
        let output = try ProcessRunner.pushreporter(["validate", "--config", path, "--format", "json"])
        #expect(output.status == 78)
        let array = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [[String: Any]])
        #expect(array.count == 1)
        #expect(array.first?["file"] as? String == path)
        #expect(array.first?["line"] as? Int == 4)
        #expect(array.first?["column"] as? Int == 48)
        #expect(array.first?["severity"] as? String == "error")
        #expect(array.first?["message"] as? String == "unknown variable 'selectr'; did you mean 'selector'?")
    }

    /// A configuration whose accounts send the installation id in a header, with a state
    /// directory in `directory` (`state/`, where `state/installid` is read), and `accounts`
    /// (lines of `accounts:`) after its defaults.
    static func installIDConfiguration(in directory: TemporaryDirectory, accounts: String) throws -> String {
        let state = directory.path + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        return """
            agent: {stateDirectory: \(state)}
            defaults:
              pushTokenReporterUrl: https://h.example/?s=%selector%
              pushTokenReporterCustomHeaders: "X-Install: %installid%"
            accounts:

            """ + accounts
    }

    /// validate keeps only the accounts it could not pass while they loaded; what it says of the
    /// others (their number, the duplicate ids among them) must not change.
    @Test("validate counts and checks the accounts it passed while they loaded, and checks them again with an installid that breaks a header")
    func validateAccountsPassedWhileLoading() throws {
        let directory = TemporaryDirectory()
        var accounts = ""
        for index in 0..<3_000 { accounts += "  - {id: a\(index), selector: s\(index)\(index % 1_000 == 7 ? ", enabled: no" : "")}\n" }
        accounts += "  - {id: a2999, selector: again}\n"
        let path = directory.write("c.yaml", try Self.installIDConfiguration(in: directory, accounts: accounts))
        let clean = try ProcessRunner.pushreporter(["validate", "--config", path])
        #expect(clean.status == 78)
        #expect(clean.stderr.contains("c.yaml:3006:5: error: account id 'a2999' is already used at \(path):3005:5"))
        #expect(clean.stderr.hasSuffix("1 file, 2997 enabled accounts: 1 error, 0 warnings\n"), "\(clean.stderr)")
        // The agent's installation id, as validate reads it: with a line break, every account's
        // header is broken, though each passed with `<installid>` while it loaded.
        _ = directory.write("state/installid", "id\nwith-a-break\n")
        let broken = try ProcessRunner.pushreporter(["validate", "--config", path])
        #expect(broken.status == 78)
        #expect(broken.stderr.hasSuffix("1 file, 2997 enabled accounts: 2998 errors, 0 warnings\n"), "\(broken.stderr.suffix(600))")
        // Every account's error, as a program reads them; a person reads three and one line for the rest.
        let listed = try ProcessRunner.pushreporter(["validate", "--config", path, "--format", "json"])
        #expect(listed.stdout.components(separatedBy: "line feed").count - 1 == 2_997, "\(listed.stdout.suffix(600))")
        #expect(broken.stderr.components(separatedBy: "line feed").count - 1 == 4, "\(broken.stderr.suffix(600))")
        #expect(broken.stderr.contains("(the same for 2994 accounts of this file from this line on; validate --format json lists every one)"))
    }

    @Test("--strict turns warnings into exit 78, but for a vendor's notice; without it they exit 0")
    func strict() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", "accounts:\n  - id: a\n    pushTokenReporterUrl: https://h.example/\n")
        #expect(try ProcessRunner.pushreporter(["validate", "--config", path]).status == 0)
        let strict = try ProcessRunner.pushreporter(["validate", "--config", path, "--strict"])
        #expect(strict.status == 78)
        #expect(strict.stderrLines.last == "1 file, 1 enabled account: 0 errors, 1 warning (they fail the check: --strict)", "\(strict.stderr)")
        // Google's deprecation of device groups is said, but no edit of the files removes it.
        let fcm = try ProcessRunner.pushreporter(["validate", "--config", "examples/06-fcm.yaml", "--strict"], directory: RepositoryPaths.root)
        #expect(fcm.status == 0, "\(fcm.stderr)")
        #expect(fcm.stderr.contains("warning: Google deprecates Firebase device group messaging"), "\(fcm.stderr)")
        #expect(fcm.stderrLines.last?.hasSuffix("0 errors, 1 warning (1 is a vendor's notice that no edit of the files can remove, which --strict does not fail on)") == true,
                "\(fcm.stderr)")
    }

    @Test("a file that cannot be parsed is not counted as holding no account")
    func anUnparsedFileIsNotCountedEmpty() throws {
        let directory = TemporaryDirectory()
        directory.write("a.yaml", "accounts:\n  - id: a\n    pushToken: T\n    pushTokenReporterUrl: https://h.example/t?t=%pushToken%\n")
        directory.write("b.yaml", "accounts:\n  - id: b\n    pushTokenReporterUrl: \"https://h.example/\n  - id: c\n")
        let output = try ProcessRunner.pushreporter(["validate", "--config", directory.path])
        #expect(output.status == 78)
        #expect(output.stderrLines.last == "2 files, 1 enabled account (not counting the file that could not be read): 1 error, 0 warnings",
                "\(output.stderr)")
    }

    @Test("a misspelt command gets its suggestion and exit 64")
    func aMisspeltCommand() throws {
        let output = try ProcessRunner.pushreporter(["validat", "--config", "examples"], directory: RepositoryPaths.root)
        #expect(output.status == 64)
        #expect(output.stderr.hasPrefix("Error: unknown command 'validat'; did you mean 'validate'?\n"), "\(output.stderr)")
        let unlike = try ProcessRunner.pushreporter(["xyzzy"])
        #expect(unlike.status == 64)
        #expect(!unlike.stderr.contains("did you mean"), "\(unlike.stderr)")
    }

    @Test("a misspelt account key no template uses is an error: a typo must not go live")
    func aTypoIsAnError() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", "accounts:\n  - id: a\n    pushTokenReporterURL: https://h.example/\n")
        let checked = try ProcessRunner.pushreporter(["validate", "--config", path])
        #expect(checked.status == 78)
        #expect(checked.stderr.contains("c.yaml:3:5: error: 'pushTokenReporterURL' is not a key pushreporter acts on, and no template of the account uses it; did you mean 'pushTokenReporterUrl'? [account a]"),
                "\(checked.stderr)")
        // The typo's error says why there is no URL: not a warning that there is none too.
        #expect(!checked.stderr.contains("no pushTokenReporterUrl"), "\(checked.stderr)")
        let sent = try ProcessRunner.pushreporter(["run", "--once", "--config", path, "--state-dir", directory.path + "/state"])
        #expect(sent.status == 78, "run --once no longer says 'Delivered 0 of 0 reports' and exits 0: \(sent.stdout)\(sent.stderr)")
    }

    @Test("preview --format json: the exact request, secrets masked")
    func previewJSON() throws {
        let output = try ProcessRunner.pushreporter(["preview", "--config", "examples/01-acrobits-get.yaml", "--format", "json"],
                                                    directory: RepositoryPaths.root)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout == """
            [
              {
                "account": "johndow",
                "service": "acrobits",
                "reporter": "pushTokenReporter",
                "kind": null,
                "cleanup": false,
                "method": "GET",
                "url": "https://example.com/token/?username=johndow&password=********&selector=12869E0E6E553673C54F29105A0647204C416A2A:7C3A0D14&token_msgs=QVBBOTFiRzlhcVd2bW54bllCWldHOWh4dnRrZ3pUWFNvcGZpdWZ6bWM2dFAzS2J&appid_msgs=com.cloudsoftphone.app&token_calls=Udl99X2JFP1bWwS5gR%2FwGeLE1hmAB2CMpr1Ej0wxkrY%3D&appid_calls=com.cloudsoftphone.app.pushkit",
                "headers": {
                  "User-Agent": "pushreporter/0.1.0"
                },
                "body": null
              }
            ]

            """)
        let shown = try ProcessRunner.pushreporter(["preview", "--config", "examples/01-acrobits-get.yaml", "--format", "json", "--show-secrets"],
                                                   directory: RepositoryPaths.root)
        #expect(shown.stdout.contains("password=12345678&"))
    }

    /// Without --account, preview keeps only the accounts it could not pass while they loaded,
    /// and reads the files again to print; with it, every account is kept. Both print the same.
    @Test("preview of every account prints what naming each account prints, in file order")
    func previewReadsTheFilesAgain() throws {
        let directory = TemporaryDirectory()
        _ = directory.write("secrets/token", "tok-123\n")
        var first = """
            services:
              journeys:
                type: customer-insights-journeys
                publicEndpoint: https://public-eur.mkt.dynamics.com
                orgId: 0a1b2c3d-0000-0000-0000-000000000000
                mobileAppId: 00000000-0000-0000-0000-000000000000
                apiToken: !file \(directory.path)/secrets/token
            defaults:
              pushTokenReporterUrl: https://h.example/?s=%selector%&t=%pushTokenOther%
            accounts:

            """
        for index in 0..<1_200 {
            first += "  - {id: a\(index), selector: s\(index), pushTokenOther: t\(index)"
            if index % 500 == 3 { first += ", enabled: no" }
            if index % 700 == 5 { first += ", crmContactId: c\(index), services: {journeys: {userId: \"%account[crmContactId]%\", platform: ios}}" }
            first += "}\n"
        }
        _ = directory.write("config/10-first.yaml", first)
        // Read again from its tree at the first load (a defaults: after its accounts).
        _ = directory.write("config/20-late.yaml", """
            accounts:
              - {id: late1, selector: L1}
              - {id: late2, selector: L2}
            defaults:
              pushTokenReporterUrl: https://late.example/?s=%selector%
            """)
        let config = directory.path + "/config"
        let all = try ProcessRunner.pushreporter(["preview", "--config", config, "--format", "json"])
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.stderr == "preview: skipped 3 disabled accounts\n")
        let ids = (0..<1_200).map { "a\($0)" } + ["late1", "late2"]
        let named = try ProcessRunner.pushreporter(["preview", "--config", config, "--format", "json"]
                                                   + ids.flatMap { ["--account", $0] })
        #expect(named.status == 0)
        #expect(all.stdout == named.stdout)
        let requests = try #require(try JSONSerialization.jsonObject(with: Data(all.stdout.utf8)) as? [[String: Any]])
        // 1,197 enabled accounts and 2 late ones; 2 of them also register with Journeys (its
        // registration and its cleanup).
        #expect(requests.count == 1_197 + 2 + 2 * 2)
        #expect((requests.last?["url"] as? String)?.hasPrefix("https://late.example/?s=L2") == true, "\(String(describing: requests.last))")
    }

    @Test("preview renders every account with an installid that breaks a header, though they passed with <installid>")
    func previewInstallIDWithALineBreak() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", try Self.installIDConfiguration(in: directory, accounts: """
              - {id: a1, selector: s1}
              - {id: a2, selector: s2}
            """))
        _ = directory.write("state/installid", "id\nwith-a-break\n")
        let output = try ProcessRunner.pushreporter(["preview", "--config", path])
        #expect(output.status == 78)
        #expect(output.stdout.isEmpty)
        #expect(output.stderr.components(separatedBy: "line feed").count - 1 == 2, "\(output.stderr)")
    }

    /// A pipe is read once: preview and validate keep every account then, instead of reading
    /// the configuration again.
    @Test("preview and validate of a configuration on a pipe (--config /dev/stdin)")
    func configurationOnAPipe() throws {
        let directory = TemporaryDirectory()
        let config = try Self.installIDConfiguration(in: directory, accounts: """
              - {id: a1, selector: s1}
              - {id: a2, selector: s2}
              - {id: a3, selector: s3}
            """)
        let preview = try ProcessRunner.pushreporter(["preview", "--config", "/dev/stdin", "--format", "json"], stdin: config)
        #expect(preview.status == 0, "\(preview.stderr)")
        #expect(preview.stdout.components(separatedBy: "\"url\": \"https://h.example/?s=").count - 1 == 3)
        // An installid that breaks a header: every account is checked again, from what was read.
        _ = directory.write("state/installid", "id\nwith-a-break\n")
        let validate = try ProcessRunner.pushreporter(["validate", "--config", "/dev/stdin"], stdin: config)
        #expect(validate.status == 78)
        #expect(validate.stderr.hasSuffix("1 file, 3 enabled accounts: 3 errors, 0 warnings\n"), "\(validate.stderr)")
    }

    @Test("preview --format http: the raw HTTP/1.1 request with Host and Content-Length")
    func previewHTTP() throws {
        let output = try ProcessRunner.pushreporter(["preview", "--config", "examples/03-form-get-templates.yaml", "--account", "desk-1001"],
                                                    directory: RepositoryPaths.root)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout == """
            ### desk-1001 pushTokenReporter
            POST /push/register HTTP/1.1
            Host: pbx.example.net
            Accept: */*
            User-Agent: pushreporter/0.1.0
            Content-Type: application/x-www-form-urlencoded
            Content-Length: 162

            username=1001&selector=ABCDEF0123456789ABCDEF0123456789ABCDEF01%3A89ABCDEF&token_calls=&appid_calls=&token_msgs=ZGVzay0xMDAxLW1zZ3M%3D&appid_msgs=com.example.desk

            """)
    }

    @Test("a POST without a body: Content-Length 0 and no Content-Type, as the transport sends it")
    func previewBodilessPost() throws {
        let config = """
            accounts:
              - id: a
                selector: s
                pushTokenReporterUrl: https://h.example/t?s=%selector%
                pushTokenReporterMethod: POST
            """
        let http = try ProcessRunner.pushreporter(config: config, ["preview", "--format", "http"])
        #expect(http.stdout == """
            ### a pushTokenReporter
            POST /t?s=s HTTP/1.1
            Host: h.example
            Accept: */*
            User-Agent: pushreporter/0.1.0
            Content-Length: 0

            """)
        let curl = try ProcessRunner.pushreporter(config: config, ["preview", "--format", "curl"])
        #expect(curl.stdout == """
            # a pushTokenReporter
            curl --fail-with-body -sS -X POST -H 'User-Agent: pushreporter/0.1.0' -H 'Content-Type:' --data-binary '' --max-time 30.0 'https://h.example/t?s=s'

            """)
    }

    @Test("preview --format curl: secrets as shell variables, and the command runs in a shell as written")
    func previewCurl() throws {
        let output = try ProcessRunner.pushreporter(config: """
            accounts:
              - id: a
                password: !env DEMO_PASSWORD
                pushTokenReporterUrl: https://h.example/t?p=%account[password]%&q=it's&r=x'\u{301}y
                pushTokenReporterPostData: 'x=%account[password]%'
            """, ["preview", "--format", "curl"], environment: ["DEMO_PASSWORD": "pw 1"])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(!output.stdout.contains("pw 1"))
        #expect(output.stdout.contains(#"--data-binary 'x='"$DEMO_PASSWORD""#))
        // It says which variables to set, and how each must be held where it goes in as it is.
        #expect(output.stdout.hasPrefix("# a pushTokenReporter\n# set first: $DEMO_PASSWORD (URL-encoded in the URL and the body)\ncurl "),
                "\(output.stdout)")
        // The shell turns the command's URL word back into the URL, with the variable filled in.
        let url = try #require(output.stdout.split(separator: " ").last.map(String.init))
        let echoed = try ProcessRunner.run("/bin/sh", ["-c", "printf %s " + url.trimmingCharacters(in: .newlines)],
                                           environment: ["DEMO_PASSWORD": "pw"])
        // Literal template text is kept as written, so the quotes survive shell quoting, the one
        // that a combining accent follows (one character, two scalars) too.
        #expect(echoed.stdout == "https://h.example/t?p=pw&q=it's&r=x'\u{301}y")
    }

    @Test("preview with an unknown account says so and suggests the nearest")
    func previewUnknownAccount() throws {
        let output = try ProcessRunner.pushreporter(["preview", "--config", "examples", "--account", "alic"], directory: RepositoryPaths.root)
        #expect(output.status == 64)
        #expect(output.stderr == "preview: no account 'alic'; did you mean 'alice'?\n", "one sentence, no usage text: \(output.stderr)")
    }

    @Test("preview of a broken configuration exits 78 and points at validate")
    func previewBroken() throws {
        let output = try ProcessRunner.pushreporter(config: "accounts:\n  - id: a\n    pushTokenReporterUrl: https://h.example/?%nope%\n", ["preview"])
        #expect(output.status == 78)
        #expect(output.stderr.contains("c.yaml:3:46: error: unknown variable 'nope'"))
        #expect(output.stderr.contains("for every problem, run: pushreporter validate --config "), "\(output.stderr)")
        #expect(output.stderr.contains("/c.yaml\n"), "the same file, as given: \(output.stderr)")
    }

    @Test("preview names other services' requests as the log does, and --reporter picks their registrations or cleanups")
    func previewOfOtherServicesByReporter() throws {
        func titles(_ arguments: [String]) throws -> [String] {
            let output = try ProcessRunner.pushreporter(["preview", "--config", "examples", "--service", "journeys"] + arguments,
                                                        directory: RepositoryPaths.root)
            #expect(output.status == 0, "\(output.stderr)")
            return output.stdout.split(separator: "\n").filter { $0.hasPrefix("### ") }.map(String.init)
        }
        #expect(try titles([]) == ["### dana journeys registration", "### dana journeys cleanup",
                                   "### eve journeys registration", "### eve journeys cleanup"])
        #expect(try titles(["--reporter", "accountRemovalReporter"]) == ["### dana journeys cleanup", "### eve journeys cleanup"])
        #expect(try titles(["--reporter", "pushTokenReporter"]) == ["### dana journeys registration", "### eve journeys registration"])
        // In JSON the reporter is the service's name (SPEC §9.0).
        let json = try ProcessRunner.pushreporter(["preview", "--config", "examples", "--service", "journeys", "--format", "json"],
                                                  directory: RepositoryPaths.root)
        #expect(json.stdout.components(separatedBy: #""reporter": "journeys""#).count - 1 == 4, "\(json.stdout)")
        // Nothing said of the services not shown: not FCM's deprecation, not a disabled account without journeys.
        #expect(json.stderr.isEmpty, "\(json.stderr)")
        let all = try ProcessRunner.pushreporter(["preview", "--config", "examples", "--format", "json"], directory: RepositoryPaths.root)
        #expect(all.stderr.contains("warning: Google deprecates Firebase device group messaging"), "\(all.stderr)")
        #expect(all.stderr.contains("preview: skipped 1 disabled account"), "\(all.stderr)")
        // Nor of the services an account shown does not name.
        let desk = try ProcessRunner.pushreporter(["preview", "--config", "examples", "--account", "desk-1001"], directory: RepositoryPaths.root)
        #expect(desk.status == 0 && desk.stderr.isEmpty, "\(desk.stderr)")
        let frank = try ProcessRunner.pushreporter(["preview", "--config", "examples", "--account", "frank-phone"], directory: RepositoryPaths.root)
        #expect(frank.stderr.contains("warning: Google deprecates Firebase device group messaging"), "\(frank.stderr)")
    }

    @Test("preview with nothing to show points at validate, which says why")
    func previewWithNothingToShow() throws {
        let output = try ProcessRunner.pushreporter(config: "accounts:\n  - id: bob\n    pushToken: T\n",
                                                    ["preview"])
        #expect(output.status == 0)
        #expect(output.stderr.hasSuffix("preview: no request to show; pushreporter validate says why an account reports nothing\n"),
                "\(output.stderr)")
    }

    @Test("a file named twice, or in a directory named too, is read once")
    func aFileNamedTwiceIsReadOnce() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("conf/c.yaml", "accounts:\n  - id: a\n    pushToken: T\n    pushTokenReporterUrl: https://h.example/t?t=%pushToken%\n")
        for arguments in [["--config", path, "--config", path], ["--config", directory.path + "/conf", "--config", directory.path + "/conf/./c.yaml"]] {
            let output = try ProcessRunner.pushreporter(["validate"] + arguments)
            #expect(output.status == 0, "\(arguments): \(output.stderr)")
            #expect(output.stderr == "1 file, 1 enabled account: 0 errors, 0 warnings\n", "\(arguments)")
        }
    }

    @Test("preview stopped by a loading error also says what rendering finds, in one round")
    func previewSaysEveryErrorAtOnce() throws {
        let config = "accounts:\n  - id: a\n    enabled: maybe\n    pushTokenReporterUrl: https://h.example/a\n"
            + "  - id: b\n    pushTokenReporterUrl: https://h.example/t\n"
            + "    pushTokenReporterContentType: application/json\n    pushTokenReporterPostData: '{\"a\": 1,}'\n"
        let output = try ProcessRunner.pushreporter(config: config, ["preview"])
        #expect(output.status == 78)
        #expect(output.stderr.contains("c.yaml:3:14: error: enabled must be true or false, not 'maybe'"), "\(output.stderr)")
        #expect(output.stderr.contains("error: the rendered pushTokenReporterPostData is not valid JSON"), "\(output.stderr)")
        #expect(output.stdout.isEmpty)
    }

    @Test("preview shows the warnings of the accounts it shows, before their requests")
    func previewShowsWarnings() throws {
        let config = """
            accounts:
              - username: alice
                pushTokenReporterUrl: 'https://push.example.com/r?tok=%account[tenant]%'
              - username: bob
                pushTokenReporterUrl: 'https://push.example.com/r?tok=%account[tenant]%'
              - username: carol
                tenant: t3
                pushTokenReporterUrl: 'https://push.example.com/r?tok=%account[tenant]%'

            """
        let all = try ProcessRunner.pushreporter(config: config, ["preview"])
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.stdout.contains("GET /r?tok= HTTP/1.1"))
        #expect(all.stderr.contains("c.yaml:3:59: warning: the account has no key 'tenant', so %account[tenant]% renders empty [account alice]"),
                "\(all.stderr)")
        #expect(all.stderr.contains("[account bob]"))
        let one = try ProcessRunner.pushreporter(config: config, ["preview", "--account", "alice"])
        #expect(one.status == 0, "\(one.stderr)")
        #expect(one.stderr.contains("[account alice]"))
        #expect(!one.stderr.contains("[account bob]"), "only the accounts shown: \(one.stderr)")
    }

    @Test("the validate command preview points at can be pasted, a path with a space and a quote included")
    func previewPointsAtAPastableValidate() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("it's mine/c.yaml", "accounts:\n  - id: a\n    pushTokenReporterUrl: https://h.example/?%nope%\n")
        let output = try ProcessRunner.pushreporter(["preview", "--config", path])
        #expect(output.status == 78)
        let quoted = "'" + path.replacingOccurrences(of: "'", with: "'\\''") + "'"
        #expect(output.stderr.contains("for every problem, run: pushreporter validate --config \(quoted)\n"), "\(output.stderr)")
        // What it says to run works as said.
        let binary: String = ProcessRunner.pushreporter
        let shell = try ProcessRunner.run("/bin/sh", ["-c", "exec \"$PUSHREPORTER_BIN\" validate --config \(quoted)"],
                                          environment: ["PUSHREPORTER_BIN": binary])
        #expect(shell.status == 78)
        #expect(shell.stderr.contains("unknown variable 'nope'"), "\(shell.stderr)")
    }

    @Test("preview of a request that cannot be rendered exits 78 and points at validate too")
    func previewUnrenderable() throws {
        let config = "accounts:\n  - id: a\n    pushTokenReporterUrl: https://h.example/t\n"
            + "    pushTokenReporterContentType: application/json\n    pushTokenReporterPostData: '{\"a\": 1,}'\n"
        let output = try ProcessRunner.pushreporter(config: config, ["preview"])
        #expect(output.status == 78)
        #expect(output.stderr.contains("error: the rendered pushTokenReporterPostData is not valid JSON"))
        #expect(output.stderr.contains("for every problem, run: pushreporter validate --config "), "\(output.stderr)")
        #expect(output.stderr.contains("/c.yaml\n"), "the same file, as given: \(output.stderr)")
    }

    @Test("secrets never appear in validate's output")
    func secretsNotInDiagnostics() throws {
        let output = try ProcessRunner.pushreporter(config: """
            accounts:
              - id: a
                password: !env DEMO_PASSWORD
                pushTokenReporterUrl: https://h.example/t?p=%account[password]%
                pushTokenReporterCustomHeaders: "X-A: %account[password]%"
            """, ["validate", "--format", "json"], environment: ["DEMO_PASSWORD": "hunter2\nx"])
        #expect(!output.stdout.contains("hunter2"))
        #expect(!output.stderr.contains("hunter2"))
        #expect(output.stdout.contains("a header value may not contain a carriage return, line feed or NUL character"))
    }
}

@Suite("Preview formats keep what is sent", .blockingThreads)
struct PreviewFormatTests {
    @Test("--format http prints the body byte for byte, CRLF included, and Content-Length matches it")
    func httpBodyBytes() throws {
        let output = try ProcessRunner.pushreporter(config: """
            accounts:
              - id: a
                pushTokenReporterUrl: https://h.example/t
                pushTokenReporterContentType: text/plain
                pushTokenReporterPostData: "line1\\r\\nline2"
            """, ["preview"])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.hasSuffix("Content-Length: 12\n\nline1\r\nline2\n"))
    }

    @Test("--format curl gives an !env secret whose name no shell can expand a name it can")
    func previewCurlSecretWithoutAShellName() throws {
        let output = try ProcessRunner.pushreporter(config: """
            accounts:
              - id: a
                password: !env demo-pass
                pushTokenReporterUrl: https://h.example/t?p=%account[password]%
            """, ["preview", "--format", "curl"], environment: ["demo-pass": "pw"])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(!output.stdout.contains("pw"))
        #expect(!output.stdout.contains("$demo"))
        #expect(output.stdout.contains(#"'https://h.example/t?p='"$DEMO_PASS""#))
    }

    @Test("--format curl never turns a secret withheld over plain http into a variable")
    func curlWithheld() throws {
        let output = try ProcessRunner.pushreporter(config: """
            accounts:
              - id: a
                password: !env DEMO_PASSWORD
                pushTokenReporterUrl: http://h.example/t?p=%account[password]%
            """, ["preview", "--format", "curl"], environment: ["DEMO_PASSWORD": "pw"])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.contains("'http://h.example/t?p=********'"))
        #expect(!output.stdout.contains("$DEMO_PASSWORD"))
    }

    @Test("--format curl never expands a U+0001 of the request's own text as a variable")
    func curlStrayMarkerCharacter() throws {
        let output = try ProcessRunner.pushreporter(config: """
            accounts:
              - id: a
                password: !env DEMO_PASSWORD
                pushTokenReporterUrl: https://h.example/t?p=%account[password]%
                pushTokenReporterPostData: "x=\\x01HOME\\x01"
            """, ["preview", "--format", "curl"], environment: ["DEMO_PASSWORD": "pw"])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(!output.stdout.contains("$HOME"))
        #expect(!output.stdout.contains("pw"))
        #expect(output.stdout.contains("--data-binary 'x=\u{1}HOME\u{1}'"))
        #expect(output.stdout.contains("'https://h.example/t?p=********'"))
    }
}

/// `preview` reads the files a second time to print; a file written meanwhile must stop it.
@Suite("preview of a file written while it prints", .blockingThreads)
struct PreviewChangedFileTests {
    @Test("a file written in place during preview's second reading stops it with exit 78, after what it printed")
    func writtenDuringTheSecondReading() throws {
        let directory = TemporaryDirectory()
        // Lines of one length, so that a parse reading in part the old and in part the new
        // text still finds accounts: only the file's identity tells the change.
        func text(_ selector: String, count: Int) -> String {
            "defaults:\n  pushTokenReporterUrl: https://h.example/?u=%account[username]%&s=%selector%\naccounts:\n"
                + (0..<count).map { "  - {username: u\(1_000_000 + $0), selector: \(selector)\(1_000_000 + $0)}\n" }.joined()
        }
        let original = text("S", count: 30_000)
        #expect(original.utf8.count > 1 << 20, "read in pieces only above 1 MiB")
        let path = directory.write("c.yaml", original)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ProcessRunner.pushreporter)
        process.arguments = ["preview", "--config", path, "--format", "json"]
        process.environment = ProcessRunner.childEnvironment(adding: [:])
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // Not read yet: once the pipe is full preview waits in its second reading (it prints
        // only then), which has read at most a couple of thousand accounts ahead of what it printed.
        let readEnd = output.fileHandleForReading.fileDescriptor
        let full = Polling.until {
            var buffered: Int32 = 0
            let status = withUnsafeMutablePointer(to: &buffered) { ioctl(readEnd, UInt(FIONREAD), $0) }
            return status == 0 && buffered >= 60_000
        }
        try #require(full, "preview never filled its output")
        let replacement = Array(text("X", count: 29_000).utf8)
        let fd = open(path, O_WRONLY)
        #expect(replacement.withUnsafeBytes { pwrite(fd, $0.baseAddress!, $0.count, 0) } == replacement.count)
        #expect(ftruncate(fd, off_t(replacement.count)) == 0)
        close(fd)
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 78)
        #expect(stderr.contains("c.yaml: error: the file changed while preview read it; run preview again"), "\(stderr)")
        #expect(printed.count > 60_000)
    }
}
