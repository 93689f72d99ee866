import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// `pushreporter validate` on Journeys services and subscriptions (SPEC §7, §9.2): each problem
/// is one `FILE:LINE:COLUMN: error: …` line at the key or value at fault, and the exit is 78.
@Suite(.blockingThreads) struct JourneysValidateTests {
    /// The settings of a valid service, in file order (they start on line 4).
    static let settings: [(key: String, value: String)] = [
        ("publicEndpoint", "https://push.example.com"),
        ("orgId", "0a1b2c3d-0000-0000-0000-000000000000"),
        ("mobileAppId", "00000000-0000-0000-0000-000000000000"),
        ("apiToken", "t0ken"),
    ]
    /// The line of the account's service values: always the last one.
    static let validAccount = "journeys: {userId: u1, platform: ios}"

    /// A configuration with one service of `settings` and one account whose `journeys` values are
    /// `account` (the file's last line).
    static func yaml(_ settings: [(key: String, value: String)] = settings, account: String = validAccount) -> String {
        (["services:", "  journeys:", "    type: customer-insights-journeys"] + settings.map { "    \($0.key): \($0.value)" }
            + ["accounts:", "  - id: alice", "    pushTokenOther: tok-alice", "    services:", "      " + account])
            .joined(separator: "\n") + "\n"
    }

    /// The settings with `key` replaced by `replacement` (nil: removed) or, when absent, added last.
    static func settings(_ key: String, _ replacement: (key: String, value: String)?) -> [(key: String, value: String)] {
        var result = settings
        if let index = result.firstIndex(where: { $0.key == key }) {
            if let replacement { result[index] = replacement } else { result.remove(at: index) }
        } else if let replacement {
            result.append(replacement)
        }
        return result
    }

    /// The 1-based column of `text` in the last line of `yaml`.
    static func column(of text: String, inLastLineOf yaml: String) -> Int {
        let line = yaml.split(separator: "\n").last.map(String.init) ?? ""
        return line.range(of: text).map { line.distance(from: line.startIndex, to: $0.lowerBound) + 1 } ?? 0
    }

    /// Runs `validate` (text and JSON) on `yaml` and expects exactly `errors` (`LINE:COLUMN: error: …`
    /// after the file's path), and exit 78.
    func expectErrors(_ yaml: String, _ errors: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let files = TemporaryDirectory()
        let path = files.write("journeys.yaml", yaml)
        let text = try ProcessRunner.pushreporter(["validate", "--config", path])
        #expect(text.status == 78, "\(text.stderr)", sourceLocation: sourceLocation)
        let expected = errors.map { "\(path):\($0)" }
        #expect(text.stderrLines.dropLast() == expected[...], sourceLocation: sourceLocation)
        #expect(text.stderrLines.last == "1 file, 1 enabled account: \(errors.count) \(errors.count == 1 ? "error" : "errors"), 0 warnings",
                sourceLocation: sourceLocation)

        let json = try ProcessRunner.pushreporter(["validate", "--config", path, "--format", "json"])
        #expect(json.status == 78, sourceLocation: sourceLocation)
        let diagnostics = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]] ?? []
        let fromJSON = diagnostics.map { "\($0["file"] ?? ""):\($0["line"] ?? ""):\($0["column"] ?? ""): \($0["severity"] ?? ""): \($0["message"] ?? "")" }
        #expect(fromJSON == expected.map { $0.replacingOccurrences(of: " [account alice]", with: "") }, sourceLocation: sourceLocation)
    }

    @Test func theValidConfigurationHasNoDiagnostics() throws {
        let output = try ProcessRunner.pushreporter(config: Self.yaml(), ["validate"])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stderr == "1 file, 1 enabled account: 0 errors, 0 warnings\n")
    }

    @Test func aCallbackURLNamesTheAccountIdWhetherItIsWrittenOrTheUsername() throws {
        // SPEC §9.2's example: %account[id]% is the id, which defaults to the username.
        let yaml = """
            services:
              journeys:
                type: customer-insights-journeys
                publicEndpoint: https://push.example.com
                orgId: 0a1b2c3d-0000-0000-0000-000000000000
                mobileAppId: 00000000-0000-0000-0000-000000000000
                apiToken: t0ken
                callbackUrl: https://agent.example.com/journeys/journeys/%account[id]%
            accounts:
              - {username: dana, pushTokenOther: tok-d, services: {journeys: {userId: u1, platform: ios}}}
              - {id: eve-1, username: eve, pushTokenOther: tok-e, services: {journeys: {userId: u2, platform: ios}}}

            """
        let validate = try ProcessRunner.pushreporter(config: yaml, ["validate"])
        #expect(validate.status == 0, "\(validate.stderr)")
        #expect(validate.stderr == "1 file, 2 enabled accounts: 0 errors, 0 warnings\n")
        let preview = try ProcessRunner.pushreporter(config: yaml, ["preview", "--format", "http"])
        let callbacks = preview.stdout.split(separator: "\n").filter { $0.hasPrefix("x-ms-callback-url: ") }
        #expect(callbacks == ["x-ms-callback-url: https://agent.example.com/journeys/journeys/dana",
                              "x-ms-callback-url: https://agent.example.com/journeys/journeys/eve-1"], "\(preview.stdout)")
    }

    @Test func anAccountWithoutADeviceTokenIsAWarningAndHasNothingToPreview() throws {
        // It waits for its device (SPEC §9.2): not an error, but said, and nothing shown as sent.
        let yaml = Self.yaml().replacingOccurrences(of: "    pushTokenOther: tok-alice\n", with: "")
        let validate = try ProcessRunner.pushreporter(config: yaml, ["validate"])
        #expect(validate.status == 0, "\(validate.stderr)")
        #expect(validate.stderrLines.first?.hasSuffix(":11:7: warning: the account has no pushTokenOther, which deviceToken defaults to, "
                                                      + "so 'journeys' does not register it until it has one [account alice]") == true,
                "\(validate.stderr)")
        let preview = try ProcessRunner.pushreporter(config: yaml, ["preview", "--format", "json"])
        #expect(preview.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]", "\(preview.stdout)")
        // Written, but empty.
        let empty = try ProcessRunner.pushreporter(config: Self.yaml().replacingOccurrences(of: "pushTokenOther: tok-alice", with: "pushTokenOther: ''"),
                                                   ["validate"])
        #expect(empty.stderr.contains(": warning: the account's pushTokenOther, which deviceToken defaults to, is empty, "
                                      + "so 'journeys' does not register it until it has one [account alice]"), "\(empty.stderr)")
    }

    @Test func aMisspeltSettingIsAnErrorAtItsKeyWithTheNearestName() throws {
        try expectErrors(Self.yaml(Self.settings("apiToken", ("apiTokn", "t0ken"))), [
            "2:3: error: service 'journeys' needs 'apiToken' (customer-insights-journeys: publicEndpoint, orgId, mobileAppId and apiToken)",
            "7:5: error: service 'journeys': unknown setting 'apiTokn' of a customer-insights-journeys service; did you mean 'apiToken'?",
        ])
    }

    @Test func aServiceWithBadSettingsStillHasItsAccountsChecked() throws {
        // The settings' problems and the account's, in one validate run.
        let yaml = Self.yaml(Self.settings("apiToken", ("apiTokn", "t0ken")), account: "journeys: {userId: u1, platform: windows}")
        try expectErrors(yaml, [
            "2:3: error: service 'journeys' needs 'apiToken' (customer-insights-journeys: publicEndpoint, orgId, mobileAppId and apiToken)",
            "7:5: error: service 'journeys': unknown setting 'apiTokn' of a customer-insights-journeys service; did you mean 'apiToken'?",
            "12:\(Self.column(of: "windows", inLastLineOf: yaml)): error: platform must be ios or android, not 'windows' [account alice]",
        ])
    }

    @Test func thePlatformIsReadInAnyCaseAsTheDocsSay() throws {
        // CRM fields often hold iOS and Android: read as ios and android (docs/journeys.md).
        let files = TemporaryDirectory()
        let path = files.write("journeys.yaml", Self.yaml(account: "journeys: {userId: u1, platform: iOS}"))
        let preview = try ProcessRunner.pushreporter(["preview", "--config", path, "--format", "json"])
        #expect(preview.status == 0, "\(preview.stderr)")
        #expect(preview.stdout.contains("ApnsDeviceToken"), "\(preview.stdout)")
        #expect(!preview.stdout.contains("FcmDeviceToken"))
    }

    @Test func aMissingOrgIdIsAnError() throws {
        try expectErrors(Self.yaml(Self.settings("orgId", nil)), [
            "2:3: error: service 'journeys' needs 'orgId' (customer-insights-journeys: publicEndpoint, orgId, mobileAppId and apiToken)",
        ])
    }

    @Test func plainHttpToAnotherHostThanLoopbackIsAnError() throws {
        try expectErrors(Self.yaml(Self.settings("publicEndpoint", ("publicEndpoint", "http://push.example.com"))), [
            "4:21: error: service 'journeys': publicEndpoint must be https (plain http only to a loopback address), not 'http://push.example.com'",
        ])
        // Loopback is how tests reach a local server: allowed.
        let loopback = try ProcessRunner.pushreporter(config: Self.yaml(Self.settings("publicEndpoint", ("publicEndpoint", "http://127.0.0.1:9"))),
                                                      ["validate"])
        #expect(loopback.status == 0, "\(loopback.stderr)")
    }

    @Test func manyAccountsAreCheckedInRunsEachErrorOnceAtItsLine() throws {
        // 6,000 accounts are checked in runs on every processor: an error every 997 accounts
        // must come out once, at its own line, whichever run found it.
        let header = ["services:", "  journeys:", "    type: customer-insights-journeys"] + Self.settings.map { "    \($0.key): \($0.value)" }
            + ["accounts:"]
        var lines = header
        var expected: [String] = []
        for index in 0..<6_000 {
            let bad = index % 997 == 500
            let line = "  - {id: a\(index), pushTokenOther: t\(index), services: {journeys: {userId: u\(index), platform: \(bad ? "windows" : "ios")}}}"
            lines.append(line)
            if bad {
                let column = line.distance(from: line.startIndex, to: line.range(of: "windows")!.lowerBound) + 1
                expected.append("\(lines.count):\(column): error: platform must be ios or android, not 'windows'")
            }
        }
        let files = TemporaryDirectory()
        let path = files.write("journeys.yaml", lines.joined(separator: "\n") + "\n")
        let result = try ProcessRunner.pushreporter(["validate", "--config", path, "--format", "json"])
        #expect(result.status == 78)
        #expect(expected.count == 6)
        let diagnostics = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]] ?? []
        let found = diagnostics.map { "\($0["line"] ?? ""):\($0["column"] ?? ""): \($0["severity"] ?? ""): \($0["message"] ?? "")" }
        #expect(found == expected, "\(result.stdout)")
    }

    @Test func batchSizeZeroIsAnError() throws {
        try expectErrors(Self.yaml(Self.settings("batchSize", ("batchSize", "0"))), [
            "8:16: error: service 'journeys': batchSize must be a whole number from 1 to 100, not '0'",
        ])
    }

    @Test func anUnknownPlatformIsAnErrorAtItsValue() throws {
        let yaml = Self.yaml(account: "journeys: {userId: u1, platform: windows}")
        try expectErrors(yaml, [
            "12:\(Self.column(of: "windows", inLastLineOf: yaml)): error: platform must be ios or android, not 'windows' [account alice]",
        ])
    }

    @Test func anUnknownAccountKeyIsAnErrorAtItsKeyWithTheNearestName() throws {
        let yaml = Self.yaml(account: "journeys: {userId: u1, platform: ios, deviceTokn: t}")
        try expectErrors(yaml, [
            "12:\(Self.column(of: "deviceTokn", inLastLineOf: yaml)): error: unknown key 'deviceTokn' for the service 'journeys' "
                + "(customer-insights-journeys takes userId, platform, deviceToken); did you mean 'deviceToken'? [account alice]",
        ])
    }

    @Test func anEmptyUserIdDoesNotHideABadPlatform() throws {
        let yaml = Self.yaml(account: "journeys: {userId: \"\", platform: windows}")
        try expectErrors(yaml, [
            "12:\(Self.column(of: "\"\"", inLastLineOf: yaml)): error: userId renders empty for this account [account alice]",
            "12:\(Self.column(of: "windows", inLastLineOf: yaml)): error: platform must be ios or android, not 'windows' [account alice]",
        ])
    }

    @Test func anUnknownAccountKeyDoesNotHideABadPlatform() throws {
        // Both at once, not one validate run after the other.
        let yaml = Self.yaml(account: "journeys: {userId: u1, platform: windows, ecdi: x}")
        try expectErrors(yaml, [
            "12:\(Self.column(of: "windows", inLastLineOf: yaml)): error: platform must be ios or android, not 'windows' [account alice]",
            "12:\(Self.column(of: "ecdi", inLastLineOf: yaml)): error: unknown key 'ecdi' for the service 'journeys' "
                + "(customer-insights-journeys takes userId, platform, deviceToken) [account alice]",
        ])
    }
}
