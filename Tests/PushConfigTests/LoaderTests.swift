import PushConfig
@testable import PushAcrobits
import PushBackend
import PushState
import PushTestSupport
import Testing
import PushTestThreads

@Suite("Loading: defaults, use:, aliases, agent, tags", .blockingThreads)
struct LoaderTests {
    @Test("defaults apply to the file's accounts only, and an account's own keys win")
    func defaultsPerFile() throws {
        let loaded = Loaded([
            ("a.yaml", "defaults:\n  x: from-a\n  y: from-a\naccounts:\n  - id: a1\n    y: own\n"),
            ("b.yaml", "accounts:\n  - id: b1\n"),
        ])
        #expect(loaded.account("a1")?["x"] == "from-a")
        #expect(loaded.account("a1")?["y"] == "own")
        #expect(loaded.account("b1")?["x"] == nil)
    }

    @Test("each web-service key is its reporter's name and its suffix, and the keys are distinct")
    func webServiceKeys() {
        var keys: Set<String> = []
        for reporter in Reporter.allCases {
            for suffix in WebServiceKey.allCases {
                #expect(reporter.key(suffix) == reporter.rawValue + suffix.rawValue)
                keys.insert(reporter.key(suffix))
            }
        }
        #expect(keys.count == Reporter.allCases.count * WebServiceKey.allCases.count)
    }

    @Test("a global is accepted exactly when %name% can name it")
    func globalNames() {
        let loaded = Loaded("globals:\n  app_Id2: a\n  _x: b\n  2fa: c\n  x-y: d\n  é: e\naccounts:\n  - id: a\n")
        #expect(loaded.configuration.globals.keys.sorted() == ["_x", "app_Id2"])
        #expect(loaded.lines.filter { $0.contains("cannot be used as") } == [
            "config.yaml:4:3: error: global '2fa' cannot be used as %2fa%: a name is letters, digits and '_', not starting with a digit",
            "config.yaml:5:3: error: global 'x-y' cannot be used as %x-y%: a name is letters, digits and '_', not starting with a digit",
            "config.yaml:6:3: error: global 'é' cannot be used as %é%: a name is letters, digits and '_', not starting with a digit",
        ])
    }

    @Test("pushToken and pushTokenOther, pushappid and pushappid_other fill each other")
    func aliases() throws {
        let loaded = Loaded("""
            defaults:
              pushTokenOther: from-defaults
            accounts:
              - id: a
                pushToken: t
                pushappid_other: app
              - id: b
            """)
        let a = try #require(loaded.account("a"))
        #expect(a["pushTokenOther"] == "t")
        #expect(a["pushToken"] == "t")
        #expect(a["pushappid"] == "app")
        #expect(loaded.account("b")?["pushToken"] == "from-defaults")
    }

    @Test("an alias given twice with different values is an error")
    func aliasConflict() {
        let loaded = Loaded("accounts:\n  - id: a\n    pushToken: x\n    pushTokenOther: y\n")
        #expect(loaded.lines.contains("config.yaml:4:21: error: 'pushToken' and 'pushTokenOther' are two names of one value, but they differ here; give only one [account a]"))
    }

    @Test("precedence: defaults' template < defaults < account's template < account")
    func usePrecedence() throws {
        let loaded = Loaded([
            ("templates/t1.yaml", "k1: t1\nk2: t1\nk3: t1\nk4: t1\n"),
            ("templates/t2.yaml", "k2: t2\nk3: t2\nk4: t2\n"),
            ("c.yaml", "defaults:\n  use: t1\n  k2: defaults\naccounts:\n  - id: a\n    use: [t2]\n    k4: own\n"),
        ], load: ["c.yaml"])
        let a = try #require(loaded.account("a"))
        #expect([a["k1"], a["k2"], a["k3"], a["k4"]] == ["t1", "t2", "t2", "own"])
    }

    @Test("an unknown template is an error with a suggestion")
    func unknownTemplate() {
        let loaded = Loaded("accounts:\n  - id: a\n    use: acrobits-jsn\n")
        let error = loaded.lines.first { $0.contains("error") }
        #expect(error?.hasPrefix("config.yaml:3:10: error: no template named 'acrobits-jsn' in ") == true)
        #expect(error?.hasSuffix("; did you mean 'acrobits-json'? [account a]") == true)
    }

    @Test("with no template in any folder searched, the message says how to make them found")
    func noTemplateAnywhere() {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", "accounts:\n  - id: a\n    use: acrobits-json\n")
        let result = ConfigurationLoader(environment: LoaderEnvironment(variables: [:], templateSearchPath: [directory.path + "/none"]))
            .load(paths: [path])
        let message = result.diagnostics.all.first { $0.severity == .error }?.message ?? ""
        #expect(message.hasPrefix("no template named 'acrobits-json' in "))
        #expect(message.hasSuffix("; none of these folders holds a template: run 'make install', or set PUSHREPORTER_TEMPLATES to the templates folder of the source tree"))
    }

    @Test("a template's ${KEY} parameter comes from the account, and a missing one is an error")
    func templateParameters() throws {
        let loaded = Loaded("""
            accounts:
              - id: a
                use: acrobits-get
                pushTokenReporterBase: https://h.example/token/
                username: u
              - id: b
                use: acrobits-get
            """)
        #expect(loaded.lines.contains("config.yaml:6:5: error: template 'acrobits-get' needs 'pushTokenReporterBase' for pushTokenReporterUrl; set it in the account or in defaults [account b]"))
        let request = try #require(loaded.request("a"))
        #expect(request.url.hasPrefix("https://h.example/token/?username=u&selector="))
    }

    @Test("agent settings are read, and a key set in two files is an error naming the first")
    func agent() throws {
        let loaded = Loaded([
            ("a.yaml", "agent:\n  timeout: 1500ms\n  concurrency: 4\n  retry: {initial: 2s, multiplier: 3, max: 10m, maxRetryAfter: 2h}\n  reportInterval: 24h\n"),
            ("b.yaml", "agent:\n  concurrency: 8\n  reportInterval: off\n  timeout: soon\n"),
        ])
        let agent = loaded.configuration.agent
        #expect(agent.timeout == .milliseconds(1500))
        #expect(agent.concurrency == 4)
        #expect(agent.retry.initial == .seconds(2))
        #expect(agent.retry.multiplier == 3)
        #expect(agent.retry.max == .seconds(600))
        #expect(agent.retry.maxRetryAfter == .seconds(7200))
        #expect(agent.reportInterval == .seconds(86400))
        let errors = loaded.lines.filter { $0.contains("error") }
        #expect(errors.count == 3)
        #expect(errors.first?.hasPrefix("b.yaml:2:3: error: agent.concurrency is already set at ") == true)
        #expect(errors.contains { $0.hasSuffix("b.yaml:4:3: error: agent.timeout is already set at a.yaml:2; only one file may set it") })
    }

    @Test("a global set twice is an error naming the first, also when the first could not be read")
    func globalSetTwice() {
        let loaded = Loaded([
            ("a.yaml", "globals:\n  g: !env UNSET_G\n  h: 1\n"),
            ("b.yaml", "globals:\n  g: x\n  h: 2\n"),
        ])
        #expect(loaded.lines == [
            "a.yaml:2:11: error: environment variable 'UNSET_G' is not set (needed by !env for 'g')",
            "b.yaml:2:3: error: global 'g' is already set at a.yaml:2",
            "b.yaml:3:3: error: global 'h' is already set at a.yaml:3",
        ], "\(loaded.lines)")
    }

    @Test("bad agent values")
    func badAgentValues() {
        let loaded = Loaded("agent:\n  timeout: soon\n  concurrency: 0\n  retry: {multiplier: 0.5}\n")
        #expect(loaded.lines == [
            "config.yaml:2:12: error: agent.timeout must be a duration such as 500ms, 5s, 15m, 24h or 1h30m, not 'soon'",
            "config.yaml:3:16: error: agent.concurrency must be a whole number from 1 to 100000, not '0'",
            "config.yaml:4:23: error: agent.retry.multiplier must be a number from 1 to 100, not '0.5'",
        ])
    }

    @Test("a duration of zero is refused: a zero timeout gives up at once, a zero interval or retry sends without pause")
    func zeroDurations() {
        let loaded = Loaded("agent:\n  timeout: 0\n  reportInterval: 0s\n  retry: {initial: 0ms, max: 0m, maxRetryAfter: 0h}\n")
        #expect(loaded.lines == [
            "config.yaml:2:12: error: agent.timeout must be a duration such as 500ms, 5s, 15m, 24h or 1h30m, not '0'",
            "config.yaml:3:19: error: agent.reportInterval must be a duration such as 500ms, 5s, 15m, 24h or 1h30m, or off, not '0s'",
            "config.yaml:4:20: error: agent.retry.initial must be a duration such as 500ms, 5s, 15m, 24h or 1h30m, not '0ms'",
            "config.yaml:4:30: error: agent.retry.max must be a duration such as 500ms, 5s, 15m, 24h or 1h30m, not '0m'",
            "config.yaml:4:49: error: agent.retry.maxRetryAfter must be a duration such as 500ms, 5s, 15m, 24h or 1h30m, not '0h'",
        ], "\(loaded.lines)")
    }

    @Test("!file is read relative to the config file without its trailing newline; !credential from $CREDENTIALS_DIRECTORY")
    func fileAndCredential() throws {
        let credentials = TemporaryDirectory()
        credentials.write("api", "from-credential\n")
        let loaded = Loaded([("secrets/token", "from-file\n"), ("c.yaml", "accounts:\n  - id: a\n    t: !file secrets/token\n    c: !credential api\n")],
                            environment: ["CREDENTIALS_DIRECTORY": credentials.path], load: ["c.yaml"])
        let a = try #require(loaded.account("a"))
        #expect(a["t"] == "from-file")
        #expect(a["c"] == "from-credential")
        #expect(a.values["t"]?.isSecret == true)
        #expect(a.values["c"]?.isSecret == true)
    }

    @Test("a missing !file, an unset $CREDENTIALS_DIRECTORY and an unknown tag are errors")
    func badTags() {
        let loaded = Loaded("accounts:\n  - id: a\n    t: !file nope.txt\n    c: !credential api\n    e: !envv X\n")
        let errors = loaded.lines.filter { $0.contains("error") }
        #expect(errors.count == 3)
        #expect(errors[0].hasPrefix("config.yaml:3:14: error: cannot read '"))
        #expect(errors[1] == "config.yaml:4:20: error: !credential api needs $CREDENTIALS_DIRECTORY, which systemd sets for LoadCredential=; it is not set [account a]")
        #expect(errors[2] == "config.yaml:5:14: error: unknown tag '!envv'; did you mean '!env'? [account a]")
    }

    @Test("scalars are kept exactly as written: no number or boolean reformatting")
    func scalarsAsWritten() throws {
        let loaded = Loaded("accounts:\n  - id: a\n    v1: 1.10\n    v2: yes\n    v3: 0x1F\n    v4: ~\n    v5: 1e3\n")
        let a = try #require(loaded.account("a"))
        #expect([a["v1"], a["v2"], a["v3"], a["v4"], a["v5"]] == ["1.10", "yes", "0x1F", "~", "1e3"])
    }

    @Test("an account without id or username, a non-scalar value, and enabled: false")
    func accountShape() {
        let loaded = Loaded("accounts:\n  - selector: s\n  - id: b\n    nested: {a: 1}\n  - id: c\n    enabled: false\n  - id: d\n    enabled: maybe\n")
        #expect(loaded.lines.contains("config.yaml:2:5: error: the account has neither an id nor a username; one of them identifies it"))
        #expect(loaded.lines.contains("config.yaml:4:13: error: account key 'nested' must be a single value, not a mapping [account b]"))
        #expect(loaded.lines.contains("config.yaml:8:14: error: enabled must be true or false, not 'maybe' [account d]"))
        #expect(loaded.account("c")?.isEnabled == false)
    }

    @Test("services: a type is required and known; accounts must name a declared service")
    func services() {
        let loaded = Loaded("""
            services:
              groups:
                type: fcm-device-group
                endpoint: http://127.0.0.1:9/fcm/notification
              cij:
                type: customer-insights-journey
            accounts:
              - id: a
                services:
                  gropus: {notification_key_name: a}
            """)
        // Said once, by the backend, at the service's type (SPEC §10's dates).
        #expect(loaded.lines.filter { $0.contains("deprecates Firebase device group messaging") } == [
            "config.yaml:3:5: warning: Google deprecates Firebase device group messaging: new projects cannot onboard device groups after 2026-12-01, "
                + "and device groups will be removed on 2027-09-29 (https://firebase.google.com/docs/cloud-messaging/android/device-group)",
        ])
        #expect(!loaded.lines.contains { $0.contains("does not send to it yet") }, "this version sends to fcm-device-group")
        #expect(loaded.lines.contains("config.yaml:6:11: error: unknown service type 'customer-insights-journey'; did you mean 'customer-insights-journeys'?"))
        #expect(loaded.lines.contains("config.yaml:10:7: error: unknown service 'gropus'; did you mean 'groups'? [account a]"))
    }

    @Test("YAML anchors, aliases and merge keys")
    func anchorsAndMerge() throws {
        let loaded = Loaded("""
            accounts:
              - &base
                id: a
                pushappid: com.example.app
                region: eu
              - <<: *base
                id: b
                region: us
            """)
        #expect(loaded.account("b")?["pushappid_other"] == "com.example.app")
        #expect(loaded.account("b")?["region"] == "us")
    }
}

@Suite("Requests: method, headers, secrets, fingerprint (SPEC §4)", .blockingThreads)
struct RequestBuildingTests {
    static let account = """
        accounts:
          - id: a
            username: alice
            password: pw&1
            selector: S1
            pushTokenOther: T/1=
        """

    func loaded(_ extra: String) -> Loaded {
        Loaded(Self.account + "\n" + extra.split(separator: "\n").map { "    " + $0 }.joined(separator: "\n") + "\n")
    }

    @Test("%account[id]% is every account's, so a misspelt id is told it")
    func theIdIsAKeyOfEveryAccount() {
        let fine = loaded("pushTokenReporterUrl: https://h.example/t?u=%account[id]%")
        #expect(!fine.lines.contains { $0.contains("error:") }, "\(fine.lines)")
        let misspelt = loaded("pushTokenReporterUrl: https://h.example/t?u=%account[idd]%")
        #expect(misspelt.lines.contains { $0.contains("error: no account has a key 'idd'; did you mean 'id'?") }, "\(misspelt.lines)")
    }

    @Test("a request that fails on one key still has its other problems reported")
    func everyProblemOfOneRequest() {
        let l = loaded("pushTokenReporterUrl: https://h.example/t?u=%account[usrname]%\npushTokenReporterMethod: PATCH")
        #expect(l.lines.contains { $0.contains("error: no account has a key 'usrname'; did you mean 'username'?") })
        #expect(l.lines.contains { $0.contains("error: pushTokenReporterMethod must be GET, POST, PUT, HEAD or DELETE, not 'PATCH'") })
    }

    @Test("a body that is not JSON is reported beside a URL that cannot be compiled")
    func invalidJSONBesideBrokenURL() {
        let l = loaded("""
            pushTokenReporterUrl: https://h.example/t?x=%nosuch%
            pushTokenReporterContentType: application/json
            pushTokenReporterPostData: '{"u": "%account[username]%"'
            """)
        #expect(l.lines.contains { $0.contains("error: unknown variable 'nosuch'") }, "\(l.lines)")
        #expect(l.lines.contains { $0.contains("error: the rendered pushTokenReporterPostData is not valid JSON: expected '}' at byte 14 [account a]") },
                "\(l.lines)")
    }

    @Test("a misspelt account key is reported beside an unknown variable of the same template")
    func everyProblemOfOneTemplate() {
        let l = loaded("pushTokenReporterUrl: https://h.example/t?u=%account[usrname]%&t=%pushTokenOthr%")
        #expect(l.lines.contains { $0.contains("error: no account has a key 'usrname'; did you mean 'username'?") }, "\(l.lines)")
        #expect(l.lines.contains { $0.contains("error: unknown variable 'pushTokenOthr'; did you mean 'pushTokenOther'?") }, "\(l.lines)")
    }

    @Test("a service without a type is told so at its name; a space in a URL's host is not told to be %20")
    func aServiceWithoutATypeAndASpaceInAHost() {
        let l = Loaded("services:\n  j:\n    orgId: x\naccounts:\n  - id: a\n    pushTokenOther: T\n    pushTokenReporterUrl: 'https://my host.example/x'\n")
        #expect(l.lines.contains("config.yaml:2:3: error: service 'j' needs a type"), "\(l.lines)")
        #expect(l.lines.contains { $0.hasSuffix("error: pushTokenReporterUrl has a space in its host name, which no host name may hold") },
                "\(l.lines)")
        let path = Loaded("accounts:\n  - id: a\n    pushTokenOther: T\n    pushTokenReporterUrl: 'https://h.example/my path'\n")
        #expect(path.lines.contains { $0.hasSuffix("write it percent-encoded (a space is %20)") }, "\(path.lines)")
    }

    @Test("a use: template that cannot be read is said once, not again as what the account lacks")
    func aMissingTemplateIsSaidOnce() {
        let l = Loaded("accounts:\n" + (0..<3).map { "  - id: a\($0)\n    use: acrobits-jsn\n    pushTokenOther: T\n" }.joined())
        #expect(l.lines.count == 3, "\(l.lines)")
        #expect(l.lines.allSatisfy { $0.contains("error: no template named 'acrobits-jsn'") }, "\(l.lines)")
        #expect(!l.lines.contains { $0.contains("warning:") }, "\(l.lines)")
    }

    @Test("an unknown variable near an account key suggests %account[KEY]%")
    func anUnknownVariableNearAnAccountKey() {
        let l = loaded("username: bob\npushTokenReporterUrl: https://h.example/t?u=%usrname%")
        #expect(l.lines.contains { $0.hasSuffix("error: unknown variable 'usrname'; did you mean '%account[username]%'?") }, "\(l.lines)")
        // A variable that is near one of the variables keeps that suggestion.
        let near = loaded("pushTokenReporterUrl: https://h.example/t?u=%pushTokenOthr%")
        #expect(near.lines.contains { $0.contains("error: unknown variable 'pushTokenOthr'; did you mean 'pushTokenOther'?") }, "\(near.lines)")
    }

    @Test("a near miss of a device value is an error unless a template uses it; a key of the user's own is not")
    func misspeltDeviceValue() {
        let l = loaded("pushTokenReporterUrl: https://h.example/t\nselctor: ABC\nextension: 1001")
        #expect(l.lines.contains { $0.hasSuffix("error: 'selctor' is not a key pushreporter acts on, and no template of the account uses it; did you mean 'selector'? [account a]") },
                "\(l.lines)")
        #expect(!l.lines.contains { $0.contains("'extension'") }, "\(l.lines)")
        // The same for the account's own keys of five letters or more, not for short keys.
        let own = loaded("pushTokenReporterUrl: https://h.example/t\nusernme: bob\nuser: x\nip: 10.0.0.1")
        #expect(own.lines.contains { $0.hasSuffix("error: 'usernme' is not a key pushreporter acts on, and no template of the account uses it; did you mean 'username'? [account a]") },
                "\(own.lines)")
        // A template of the account that uses it makes it the author's own key: nothing to say.
        let used = loaded("pushTokenReporterUrl: https://h.example/t?s=%account[selctor]%\nselctor: ABC")
        #expect(!used.lines.contains { $0.contains("'selctor'") }, "\(used.lines)")
        // In defaults, which the accounts' templates may use, it stays a warning.
        let defaults = Loaded("defaults:\n  selctor: ABC\naccounts:\n  - id: a\n    pushTokenReporterUrl: https://h.example/t\n").lines
        #expect(defaults.contains { $0.hasSuffix("config.yaml:2:3: warning: 'selctor' is not a key pushreporter acts on; did you mean 'selector'?") },
                "\(defaults)")
        #expect(!own.lines.contains { $0.contains("'user'") || $0.contains("'ip'") }, "\(own.lines)")
    }

    @Test("GET without a body, POST with one, explicit methods upper-cased")
    func methods() throws {
        let get = loaded("pushTokenReporterUrl: https://h.example/t?u=%account[username]%")
        #expect(get.request("a")?.method == "GET")
        #expect(get.request("a")?.body == nil)
        #expect(get.request("a")?.header("Content-Type") == nil)
        let post = loaded("pushTokenReporterUrl: https://h.example/t\npushTokenReporterPostData: u=%account[username]%&t=%pushToken%")
        let request = try #require(post.request("a"))
        #expect(request.method == "POST")
        #expect(request.body == "u=alice&t=T%2F1%3D")
        #expect(request.headers.map(\.name) == ["User-Agent", "Content-Type"])
        #expect(request.header("content-type") == "application/x-www-form-urlencoded")
        #expect(request.header("User-Agent") == "pushreporter/0.1.0")
        let put = loaded("pushTokenReporterUrl: https://h.example/t\npushTokenReporterMethod: put")
        #expect(put.request("a")?.method == "PUT")
    }

    @Test("a bad method and a bad timeout are errors")
    func badMethod() {
        let l = loaded("pushTokenReporterUrl: https://h.example/t\npushTokenReporterMethod: PATCH\npushTokenReporterTimeout: never")
        #expect(l.lines.contains("config.yaml:8:30: error: pushTokenReporterMethod must be GET, POST, PUT, HEAD or DELETE, not 'PATCH'"))
        #expect(l.lines.contains("config.yaml:9:31: error: pushTokenReporterTimeout must be a duration such as 10s, not 'never'"))
    }

    @Test("custom headers: templates per line, LF or CRLF; User-Agent stays pushreporter's")
    func customHeaders() throws {
        let l = loaded("""
            pushTokenReporterUrl: https://h.example/t
            pushTokenReporterCustomHeaders: "X-User: %account[username]%\\r\\nUser-Agent: softphone/1.0\\n\\nX-Sel: <%selector%>"
            """)
        let request = try #require(l.request("a"))
        #expect(request.headers.map(\.name) == ["User-Agent", "X-User", "X-Sel"])
        #expect(request.header("User-Agent") == "pushreporter/0.1.0")
        #expect(request.header("X-User") == "alice")
        #expect(request.header("X-Sel") == "<S1>")
        #expect(l.lines.contains("config.yaml:8:69: warning: User-Agent is always pushreporter/0.1.0; this header is not sent"))
    }

    @Test("a placeholder in a header name, and a line without a colon")
    func badHeaders() {
        let l = loaded("""
            pushTokenReporterUrl: https://h.example/t
            pushTokenReporterCustomHeaders: |
              X-%account[username]%: 1
              just text
            """)
        #expect(l.lines.contains("config.yaml:9:9: error: a placeholder cannot stand in a header name"))
        #expect(l.lines.contains("config.yaml:10:7: error: a custom header line must read 'Name: value', not 'just text'"))
    }

    @Test("a rendered JSON body that does not parse is an error")
    func invalidJSON() {
        let l = loaded("""
            pushTokenReporterUrl: https://h.example/t
            pushTokenReporterContentType: application/json
            pushTokenReporterPostData: '{"u": "%account[username]%",}'
            """)
        #expect(l.lines.contains { $0.hasPrefix("config.yaml:9:32: error: the rendered pushTokenReporterPostData is not valid JSON: ") })
    }

    @Test("agent.tls.caFile is read relative to its file, and must be a readable CA bundle")
    func caFile() throws {
        let directory = TemporaryDirectory()
        directory.write("ca.pem", "-----BEGIN CERTIFICATE-----\n")
        let good = directory.write("good.yaml", "agent:\n  tls: {caFile: ca.pem}\n")
        let loader = ConfigurationLoader(environment: LoaderEnvironment(variables: [:], templateSearchPath: []))
        let loaded = loader.load(paths: [good])
        #expect(loaded.configuration.agent.tlsCAFile == directory.path + "/ca.pem")
        #expect(!loaded.diagnostics.hasErrors)
        let bad = directory.write("bad.yaml", "agent:\n  tls: {caFile: missing.pem}\n")
        #expect(loader.load(paths: [bad]).diagnostics.all.map(\.formatted)
            == ["\(bad):2:17: error: agent.tls.caFile: cannot read \(directory.path)/missing.pem: no such file or directory"])
        // A file that is not a CA bundle: said now, not at the first https request.
        directory.write("garbage.pem", "garbage\n")
        let garbage = directory.write("garbage.yaml", "agent:\n  tls: {caFile: garbage.pem}\n")
        #expect(loader.load(paths: [garbage]).diagnostics.all.map(\.formatted)
            == ["\(garbage):2:17: error: agent.tls.caFile: \(directory.path)/garbage.pem holds no PEM certificate "
                + "(a CA bundle is -----BEGIN CERTIFICATE----- blocks)"])
    }

    @Test("secrets are filled over https and to loopback, withheld over plain http elsewhere")
    func secretsByScheme() throws {
        for (url, expected, withheld) in [("https://h.example/t", "pw%261", false), ("http://127.0.0.1:8080/t", "pw%261", false),
                                          ("http://localhost/t", "pw%261", false), ("http://[::1]/t", "pw%261", false),
                                          ("http://h.example/t", "********", true)] {
            let l = loaded("pushTokenReporterUrl: \(url)?p=%account[password]%")
            let request = try #require(l.request("a"))
            #expect(request.url == url + "?p=" + expected)
            #expect(request.secretsWithheld == withheld)
        }
        // No secret in the request: nothing is withheld, whatever the scheme.
        let plain = try #require(loaded("pushTokenReporterUrl: http://h.example/t?u=%account[username]%").request("a"))
        #expect(plain.url == "http://h.example/t?u=alice")
        #expect(!plain.secretsWithheld)
    }

    @Test("preview masking: stars, and shell-variable markers for curl (never for a request that withholds secrets)")
    func displayMasking() throws {
        let l = loaded("pushTokenReporterUrl: https://h.example/t?p=%account[password]%&h=%md5(%account[password]%)%")
        #expect(l.request("a", display: .stars)?.url == "https://h.example/t?p=********&h=********")
        #expect(l.request("a", display: .shellVariables)?.url == "https://h.example/t?p=\u{1}PASSWORD\u{1}&h=********")
        let plain = loaded("pushTokenReporterUrl: http://h.example/t?p=%account[password]%")
        #expect(plain.request("a", display: .shellVariables)?.url == "http://h.example/t?p=********")
        // A U+0001 of the request's own could be read as a marker (`$HOME` here): stars instead.
        let stray = loaded("pushTokenReporterUrl: https://h.example/t?p=%account[password]%\n"
                           + "pushTokenReporterPostData: \"x=\\x01HOME\\x01\"")
        let shown = try #require(stray.request("a", display: .shellVariables))
        #expect(shown.url == "https://h.example/t?p=********")
        #expect(shown.body == "x=\u{1}HOME\u{1}")
        #expect(!shown.hasSecretMarkers)
        #expect(l.request("a", display: .shellVariables)?.hasSecretMarkers == true)
        #expect(plain.request("a", display: .shellVariables)?.hasSecretMarkers == false)
    }

    @Test("a ${KEY} parameter whose value cannot be read is reported once, where it is written")
    func unreadableTemplateParameter() {
        let l = Loaded([("templates/t.yaml", "pushTokenReporterUrl: ${base}x\n"),
                        ("c.yaml", "accounts:\n  - id: a\n    use: t\n    base: !env UNSET_BASE\n")], load: ["c.yaml"])
        #expect(l.lines == ["c.yaml:4:16: error: environment variable 'UNSET_BASE' is not set (needed by !env for 'base') [account a]"])
        // Nor is a URL that cannot be read reported again as missing.
        let direct = Loaded("accounts:\n  - id: a\n    selector: S\n    pushTokenReporterUrl: !env UNSET_URL\n")
        #expect(direct.lines == ["config.yaml:4:32: error: environment variable 'UNSET_URL' is not set (needed by !env for 'pushTokenReporterUrl') [account a]"])
        // Nor a device value, under either name of an alias pair, as the account having none.
        for key in ["selector", "pushToken"] {
            let device = Loaded("accounts:\n  - id: a\n    pushTokenReporterUrl: https://h.example/\n    \(key): !env UNSET_TOKEN\n")
            #expect(device.lines.count == 1, "\(device.lines)")
            #expect(device.lines.first?.contains("environment variable 'UNSET_TOKEN' is not set") == true, "\(device.lines)")
        }
    }

    @Test("a ${KEY} parameter filled from a secret makes the value secret")
    func secretTemplateParameter() throws {
        let l = Loaded([("templates/t.yaml", "pushTokenReporterUrl: ${base}x\n"),
                        ("c.yaml", "accounts:\n  - id: a\n    use: t\n    base: !env BASE\n")],
                       environment: ["BASE": "https://h.example/k3y/"], load: ["c.yaml"])
        let url = try #require(l.account("a")?.values["pushTokenReporterUrl"])
        #expect(url.text == "https://h.example/k3y/x")
        #expect(url.isSecret)
        #expect(url.secretName == "BASE")
    }

    @Test("the fingerprint follows what is sent: stable, changed by a value, and the same whatever the display")
    func fingerprint() throws {
        let l1 = loaded("pushTokenReporterUrl: https://h.example/t?p=%account[password]%")
        let l2 = loaded("pushTokenReporterUrl: https://h.example/t?p=%account[password]%")
        let l3 = Loaded(Self.account.replacingOccurrences(of: "pw&1", with: "pw&2")
                        + "\n    pushTokenReporterUrl: https://h.example/t?p=%account[password]%\n")
        let f1 = try #require(l1.request("a")?.fingerprint)
        #expect(f1.count == FingerprintText.length)
        #expect(l2.request("a")?.fingerprint == f1)
        #expect(l1.request("a", display: .stars)?.fingerprint == f1)
        #expect(l3.request("a")?.fingerprint != f1)
    }

    @Test("Digest credentials are rendered and kept even over plain http")
    func credentials() throws {
        let l = loaded("pushTokenReporterUrl: http://h.example/t\npushTokenReporterAuthUsername: \"%account[username]%\"\npushTokenReporterAuthPassword: \"%account[password]%\"")
        let request = try #require(l.request("a"))
        #expect(request.credentials == RenderedRequest.Credentials(username: "alice", password: "pw&1"))
        #expect(l.request("a", display: .stars)?.credentials?.password == "********")
    }

    @Test("a URL that is not http or https")
    func notHTTP() {
        let l = loaded("pushTokenReporterUrl: ftp://h.example/t")
        #expect(l.lines.contains("config.yaml:7:27: error: pushTokenReporterUrl must start with http:// or https://"))
    }

    @Test("a URL without its scheme is told so once, its placeholders not said to stand in a host")
    func noScheme() {
        let l = loaded("pushTokenReporterUrl: push.example.com/t?token=%pushTokenOther%&u=%nosuch%")
        let errors = l.lines.filter { $0.contains("error") }
        #expect(errors.contains("config.yaml:7:27: error: pushTokenReporterUrl must start with http:// or https://"))
        #expect(!errors.contains { $0.contains("scheme or host") }, "the placeholders are in the path and the query: \(errors)")
        #expect(errors.contains { $0.contains("'nosuch'") }, "an unknown variable is still reported: \(errors)")
        #expect(errors.count == 2, "\(errors)")
    }
}
