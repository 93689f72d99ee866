import _CryptoExtras
import Foundation
@testable import PushState
import PushTestSupport
import Testing
import PushTestThreads

/// SPEC §12: a secret never appears in any output `--show-secrets` does not unlock. One
/// configuration puts a distinctive secret in every place a secret can be — every web-service
/// key, each tag, key names, globals, the Journeys API token and a callback header, FCM's
/// service-account key, its access tokens and a legacy server key — and every command runs in
/// every format; none of them may print one. A new backend adds its credentials here.
@Suite(.serialized, .blockingThreads) struct SecretLeakTests {
    /// FCM's service account: its private key is a secret, as are the access tokens it gets.
    static let fcmKey = try! _RSA.Signing.PrivateKey(keySize: .bits2048)

    /// Each secret, written where its name says.
    static let secrets = [
        "global": "CANARY-GLOBAL-61f0",           // a global named like a secret
        "env": "CANARY-ENV-2b9c",                 // !env, used through a placeholder
        "password": "CANARY-PASSWORD-77a1",       // an account key named password
        "digest": "CANARY-DIGEST-0c4e",           // …AuthPassword, given directly
        "url": "CANARY-URL-5d21",                 // a whole …Url from !env
        "body": "CANARY-BODY-93fe",               // a whole …PostData from !env
        "header": "CANARY-HEADER-4a8b",           // whole …CustomHeaders from !env
        "journeys": "CANARY-JOURNEYS-e1d7",       // the Journeys apiToken, from !file
        "hook": "CANARY-HOOK-36c2",               // a callback header value, from !credential
        "fcmkey": privateKeyLine,                 // a line of FCM's service-account private key, from !file
        "access": "CANARY-ACCESS-5e0b-",          // each access token the fake token endpoint gives
        "serverkey": "CANARY-SERVERKEY-8d3f",     // FCM's legacy server key, from !env
    ]

    /// A line from the middle of the private key's PEM: in the key file, never on the wire.
    static let privateKeyLine = String(fcmKey.pkcs8PEMRepresentation.split(separator: "\n")[3])

    static func config(_ base: String, fcm: String) -> String {
        """
        globals:
          receiverSecret: \(secrets["global"]!)
          fromEnv: !env LEAK_ENV
        services:
          journeys:
            type: customer-insights-journeys
            publicEndpoint: \(base)
            orgId: \(FakeJourneysServer.defaultOrgId)
            mobileAppId: \(FakeJourneysServer.defaultMobileAppId)
            apiToken: !file journeys-token
            callbackUrl: \(base)/hook/%account[id]%
            callbackHeaders: {X-Hook-Secret: !credential hook}
          fcm:
            type: fcm-device-group
            endpoint: \(fcm)
            projectId: \(FakeFCMServer.defaultProjectId)
            serviceAccount: !file service-account.json
          fcm-legacy:
            type: fcm-device-group
            endpoint: \(fcm)
            projectId: \(FakeFCMServer.defaultProjectId)
            serverKey: !env LEAK_FCM_KEY
        accounts:
          - id: alice
            username: alice
            password: \(secrets["password"]!)
            pushTokenOther: token-a
            pushTokenReporterUrl: \(base)/report?u=%account[username]%&p=%account[password]%&g=%receiverSecret%
            pushTokenReporterCustomHeaders: "X-Env: %fromEnv%"
            pushTokenReporterAuthUsername: alice
            pushTokenReporterAuthPassword: \(secrets["digest"]!)
            accountRemovalReporterUrl: \(base)/gone?p=%account[password]%
            services: {journeys: {userId: user-a, platform: ios}, fcm: {group: family}, fcm-legacy: {}}
          - id: bob
            username: bob
            pushTokenOther: token-b
            pushTokenReporterUrl: !env LEAK_URL
            pushTokenReporterPostData: !env LEAK_BODY
            pushTokenReporterCustomHeaders: !env LEAK_HEADERS
            services: {journeys: {userId: user-b, platform: android}, fcm: {group: family}}

        """
    }

    /// The environment every command runs with: the tagged secrets' sources.
    static func environment(base: String, credentials: String) -> [String: String] {
        ["LEAK_ENV": secrets["env"]!, "LEAK_URL": "\(base)/whole?k=\(secrets["url"]!)",
         "LEAK_BODY": "k=\(secrets["body"]!)", "LEAK_HEADERS": "X-Whole: \(secrets["header"]!)",
         "LEAK_FCM_KEY": secrets["serverkey"]!, "CREDENTIALS_DIRECTORY": credentials]
    }

    /// The secrets `text` shows.
    static func leaked(_ text: String) -> [String] {
        secrets.filter { text.contains($0.value) }.map(\.key).sorted()
    }

    @Test func noCommandPrintsASecretAndTheStateKeepsThemOnlyInItsCleanups() throws {
        let server = try FakeJourneysServer(checksCredentials: false) { _, _, journeys in journeys ?? .status(200) }
        let fcm = try FakeFCMServer(publicKey: Self.fcmKey.publicKey, serverKey: Self.secrets["serverkey"]!,
                                    accessTokenPrefix: Self.secrets["access"]!)
        let files = TemporaryDirectory()
        files.write("journeys-token", Self.secrets["journeys"]! + "\n")
        files.write("credentials/hook", Self.secrets["hook"]! + "\n")
        files.write("service-account.json", fcm.serviceAccountJSON(privateKey: Self.fcmKey))
        let config = files.write("accounts.yaml", Self.config(server.baseURL, fcm: fcm.endpoint))
        let state = files.path + "/state"
        let environment = Self.environment(base: server.baseURL, credentials: files.path + "/credentials")
        var outputs: [(command: String, text: String)] = []
        func run(_ arguments: [String]) throws -> ProcessOutput {
            let result = try ProcessRunner.pushreporter(arguments, environment: environment)
            outputs.append((arguments.joined(separator: " "), result.stdout + result.stderr))
            return result
        }

        #expect(try run(["validate", "--config", config]).status == 0)
        _ = try run(["validate", "--config", config, "--format", "json"])
        for format in ["http", "curl", "json"] {
            let preview = try run(["preview", "--config", config, "--format", format])
            #expect(preview.status == 0, "\(preview.stderr)")
            #expect(preview.stdout.contains("/report?u=alice"), "preview \(format) shows the requests")
        }
        let once = try run(["run", "--once", "--config", config, "--state-dir", state, "--log-level", "debug"])
        #expect(once.status == 0, "\(once.stdout)\(once.stderr)")
        for format in ["text", "json"] {
            let agent = try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", state, "--log-level", "debug",
                                                          "--log-format", format], environment: environment)
            #expect(agent.waitForStderr("are reported", timeout: .seconds(60)), "\(agent.stderr)")
            agent.signal(SIGTERM)
            #expect(agent.waitForExit() == 0)
            outputs.append(("run --log-format \(format)", agent.stdout + agent.stderr))
        }
        for format in ["text", "json", "prometheus"] {
            #expect(try run(["status", "--state-dir", state, "--format", format]).status == 0)
        }

        // What went to the receiver carries them all (the secrets reach where they are meant to)…
        let received = (server.requests + fcm.requests).map {
            $0.target + "\n" + $0.headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n") + "\n" + $0.bodyText
        }.joined(separator: "\n")
        #expect(Self.leaked(received) == ["access", "body", "env", "global", "header", "hook", "journeys", "password", "serverkey", "url"],
                "the Digest password and the private key are the only ones never on the wire")
        #expect(fcm.members(of: "family")?.sorted() == ["token-a", "token-b"])
        #expect(fcm.tokenRequests.count >= 2, "each run got an access token")
        // …and no output a person or a collector reads shows any.
        for output in outputs {
            #expect(Self.leaked(output.text).isEmpty, "\(output.command) printed \(Self.leaked(output.text))")
        }

        // The state: the cleanups keep what sending them needs (0600, like the configuration's
        // secrets); nothing else holds a secret, keys least of all.
        let records = try SQLiteStateStore(directory: StateDirectory(path: state, create: false), readOnly: true).records()
        #expect(records.count == 7)
        for record in records {
            let kept = [record.key.account, record.key.service, record.fingerprint, record.deliveredFingerprint ?? "",
                        record.lastOutcome ?? "", record.backendData ?? ""].joined(separator: "\n")
            #expect(Self.leaked(kept).isEmpty, "\(record.key) keeps \(Self.leaked(kept)) outside its cleanup")
        }

        // remove sends the stored cleanups and says nothing secret either.
        let removed = try run(["remove", "alice", "--config", config, "--state-dir", state])
        #expect(removed.status == 0, "\(removed.stdout)\(removed.stderr)")
        #expect(Self.leaked(removed.stdout + removed.stderr).isEmpty)
        #expect(server.cleanups.contains { $0.userId == "user-a" })
        #expect(fcm.members(of: "family") == ["token-b"], "alice's token left the group with her")
        #expect(fcm.members(of: "alice") == nil, "and the group of the legacy service, her only member, is gone")
    }

    @Test func aSecretIdentityIsRefusedWithoutBeingShown() throws {
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", """
            accounts:
              - username: !env LEAK_USER
                pushTokenReporterUrl: https://h.example/r
              - id: !env LEAK_ID
                pushTokenReporterUrl: https://h.example/r
              - id: !env LEAK_ID
                pushTokenReporterUrl: https://h.example/r

            """)
        let result = try ProcessRunner.pushreporter(["validate", "--config", config],
                                                    environment: ["LEAK_USER": "CANARY-USER-1", "LEAK_ID": "CANARY-ID-2"])
        #expect(result.status == 78)
        #expect(result.stderr.contains("\(config):2:20: error: the username is a secret, so it cannot identify the account"), "\(result.stderr)")
        #expect(result.stderr.contains("\(config):4:14: error: the account's id is a secret"), "\(result.stderr)")
        #expect(!result.stderr.contains("CANARY"), "\(result.stderr)")
        #expect(!result.stderr.contains("already used"), "a secret id is refused, never compared and echoed")
    }

    @Test func aWholeSecretBoundForPlainHTTPElsewhereIsNeverSent() throws {
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", """
            agent:
              timeout: 2s
            accounts:
              - id: dave
                pushTokenReporterUrl: http://192.0.2.1/r
                pushTokenReporterPostData: !env LEAK_BODY

            """)
        let environment = ["LEAK_BODY": "k=CANARY-BODY-3"]
        let validate = try ProcessRunner.pushreporter(["validate", "--config", config], environment: environment)
        #expect(validate.status == 0)
        #expect(validate.stderr.contains("\(config):6:37: warning: pushTokenReporterPostData is a secret and pushTokenReporterUrl is plain http to 192.0.2.1, which is not loopback, so the request is not sent; use https"),
                "\(validate.stderr)")
        let once = try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", files.path + "/state"],
                                                  environment: environment)
        #expect(once.status == 1)
        #expect(once.stdout.contains("rejected"), "\(once.stdout)")
        #expect(!(once.stdout + once.stderr).contains("CANARY"))
        let status = try ProcessRunner.pushreporter(["status", "--state-dir", files.path + "/state", "--format", "json"])
        #expect(status.stdout.contains("\"state\": \"rejected\""), "\(status.stdout)")
        #expect(status.stdout.contains("is plain http to 192.0.2.1"))
    }

    @Test func aSecretPartOfARequestToPlainHTTPElsewhereIsAWarningOfValidate() throws {
        // Sent as ******** (the run logs it too): said before the receiver refuses the login.
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", """
            accounts:
              - {id: ian, password: CANARY-PW-4, pushTokenOther: T, pushTokenReporterUrl: "http://prov.example/?u=%account[id]%&p=%account[password]%"}
              - {id: jo, password: CANARY-PW-5, pushTokenOther: T, pushTokenReporterUrl: "http://127.0.0.1:9/?u=%account[id]%&p=%account[password]%"}
              - {id: kim, password: CANARY-PW-6, pushTokenOther: T, pushTokenReporterUrl: "http://prov.example/?u=%account[id]%"}

            """)
        let validate = try ProcessRunner.pushreporter(["validate", "--config", config])
        #expect(validate.status == 0)
        #expect(validate.stderrLines == [
            "\(config):2:79: warning: pushTokenReporterUrl is plain http to prov.example, which is not loopback, so the request's "
                + "secrets are sent as ******** there; use https",
            "1 file, 3 enabled accounts: 0 errors, 1 warning",
        ], "\(validate.stderr)")
    }

    @Test func theWarningOfSecretsOverPlainHTTPIsSaidOnceForAURLTheAccountsShare() throws {
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", """
            defaults:
              pushTokenReporterUrl: http://prov.example/?u=%account[id]%&p=%account[password]%&t=%pushTokenOther%
            accounts:
              - {id: a1, password: CANARY-PW-7, pushTokenOther: T}
              - {id: a2, password: CANARY-PW-8, pushTokenOther: T}

            """)
        let validate = try ProcessRunner.pushreporter(["validate", "--config", config])
        #expect(validate.stderrLines.count { $0.contains("secrets are sent as ******** there") } == 1, "\(validate.stderr)")
        #expect(!validate.stderr.contains("CANARY"))
    }

    @Test func aLoopbackRequestNeverGoesThroughAProxy() throws {
        let receiver = try LoopbackHTTPServer { _, _ in .status(204) }
        let proxy = try LoopbackHTTPServer { _, _ in .status(502) }
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", """
            accounts:
              - id: erin
                password: CANARY-PROXY-1
                pushTokenReporterUrl: \(receiver.baseURL)/r?p=%account[password]%

            """)
        let once = try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", files.path + "/state"],
                                                  environment: ["http_proxy": proxy.baseURL, "HTTP_PROXY": proxy.baseURL,
                                                                "all_proxy": proxy.baseURL, "no_proxy": ""])
        #expect(once.status == 0, "\(once.stdout)\(once.stderr)")
        #expect(receiver.requests.map(\.target) == ["/r?p=CANARY-PROXY-1"])
        #expect(proxy.requests.isEmpty, "the proxy saw \(proxy.requests.map(\.target))")
    }

    @Test func aRedirectToAnotherHostDropsEveryHeaderThatCarriesASecret() throws {
        let elsewhere = try LoopbackHTTPServer { _, _ in .status(204) }
        let first = try LoopbackHTTPServer { _, _ in .status(302, headers: [("Location", elsewhere.baseURL + "/moved")]) }
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", """
            accounts:
              - id: finn
                password: CANARY-REDIRECT-1
                pushTokenReporterUrl: \(first.baseURL)/r
                pushTokenReporterCustomHeaders: |
                  X-Signed: %sha256(%account[password]%)%
                  X-Plain: hello

            """)
        let once = try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", files.path + "/state"])
        #expect(once.status == 0, "\(once.stdout)\(once.stderr)")
        #expect(first.requests.first?.header("X-Signed") != nil, "the first host gets it")
        let moved = try #require(elsewhere.requests.first)
        #expect(moved.path == "/moved")
        #expect(moved.header("X-Plain") == "hello")
        #expect(moved.header("X-Signed") == nil, "a value computed from a secret is a secret")
    }
}

/// SPEC §12: every size has a limit `validate` checks, and the message names it.
@Suite(.blockingThreads) struct SizeLimitTests {
    @Test func validateRefusesWhatIsTooLargeNamingTheLimit() throws {
        let files = TemporaryDirectory()
        let big = String(repeating: "a", count: (1 << 20) + 1)
        let half = String(repeating: "b", count: 600 << 10)
        let config = files.write("accounts.yaml", """
            accounts:
              - id: huge-value
                pushTokenReporterUrl: https://h.example/r
                note: \(big)
              - id: long-header
                pushTokenReporterUrl: https://h.example/r
                pushTokenReporterCustomHeaders: "X-Long: \(String(repeating: "c", count: 9000))"
              - id: large-request
                pushTokenReporterUrl: https://h.example/r?a=%account[first]%
                pushTokenReporterPostData: "b=%account[second]%"
                first: \(half)
                second: \(half)

            """)
        let result = try ProcessRunner.pushreporter(["validate", "--config", config])
        #expect(result.status == 78)
        #expect(result.stderr.contains("\(config):4:11: error: the value of 'note' is 1048577 bytes, more than the limit of 1 MiB for one value"),
                "\(result.stderr.suffix(2000))")
        // Each where the large part is written: the header's line, the request's largest part.
        #expect(result.stderr.contains("\(config):7:37: error: the rendered header X-Long is 9008 bytes, more than the limit of 8 KiB for a header line [account long-header]"),
                "\(result.stderr.suffix(2000))")
        #expect(result.stderr.contains("\(config):9:27: error: the rendered pushTokenReporter request is"), "\(result.stderr.suffix(2000))")
        #expect(result.stderr.contains("more than the limit of 1 MiB for a request [account large-request]"), "\(result.stderr.suffix(2000))")
        #expect(!result.stderr.contains(big.prefix(100)), "the value is not echoed")
    }
}
