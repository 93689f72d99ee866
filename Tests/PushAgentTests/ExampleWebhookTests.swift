import PushAgentTesting
import PushBackend
import PushCommandKit
import PushConfig
import PushExampleWebhook
import PushRegistry
import PushState
import PushTestSupport
import PushTestThreads
import Testing

/// docs/adding-a-backend.md's promise: a backend is one module and one line of registration.
/// The example webhook is registered here exactly as a new backend would be in
/// `Backends.standard`, and then is checked, planned, sent, cleaned up and kept in state by the
/// same code as the four real ones, with nothing else changed.
@Suite(.ownThreads) struct ExampleWebhookTests {
    /// The one line.
    static let backends = Backends(Backends.standard.all + [ExampleWebhookBackend()])

    static func config(url: String, accounts: [(String, String)], setting: String = "url") -> String {
        """
        services:
          hook:
            type: example-webhook
            \(setting): \(url)
        accounts:
        \(accounts.map { "  - id: \($0.0)\n    pushTokenOther: \($0.1)\n    services:\n      hook: {}" }.joined(separator: "\n"))

        """
    }

    /// What `validate` finds in `config`, as it prints it.
    static func validate(_ path: String, backends: Backends = backends) throws -> [String] {
        var loaded = LoadedConfiguration(options: try ConfigOptions.parse(["--config", path]), checkingEarly: true,
                                         leavingOutPassed: true, backends: backends)
        loaded.checkRendering(installID: "test", backends: backends)
        return loaded.diagnostics.sorted(fileOrder: loaded.result.configuration.files).map(\.formatted)
    }

    @Test func itsSettingsAreCheckedWithPositionsAndItsTypeOnlyOnceRegistered() throws {
        let files = TemporaryDirectory()
        let good = files.write("good.yaml", Self.config(url: "https://hooks.example/devices", accounts: [("alice", "T1")]))
        #expect(try Self.validate(good) == [])
        // Without its line in the registry, its type is unknown, as any misspelt type is.
        let unregistered = try Self.validate(good, backends: .standard)
        #expect(unregistered.contains { $0.hasPrefix("\(good):3:11: error:") && $0.contains("example-webhook") }, "\(unregistered)")

        let typo = files.write("typo.yaml", Self.config(url: "https://hooks.example/devices", accounts: [("alice", "T1")], setting: "ulr"))
        #expect(try Self.validate(typo).contains(
            "\(typo):4:5: error: service 'hook': unknown setting 'ulr' of an example-webhook service; did you mean 'url'?"))
        let plain = files.write("plain.yaml", Self.config(url: "ftp://hooks.example/devices", accounts: [("alice", "T1")]))
        let found = try Self.validate(plain)
        #expect(found.contains { $0.hasPrefix("\(plain):4:10: error: service 'hook': url ") }, "\(found)")
    }

    @Test func theAgentSendsItAndCleansUpAReplacedTokenAndALeavingAccount() async throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        defer { server.stop() }
        let files = TemporaryDirectory()
        let state = files.path + "/state"
        let url = server.baseURL + "/devices"
        let config = files.write("hook.yaml", Self.config(url: url, accounts: [("alice", "T1"), ("bob", "B1")]))
        let agent = try await AgentHarness.start(config: config, stateDir: state, backends: Self.backends)
        #expect(await agent.log.waitFor("all 2 accounts are reported"), "\(agent.log.value)")
        #expect(Set(server.requests.map(\.bodyText)) == [#"{"account":"alice","token":"T1"}"#, #"{"account":"bob","token":"B1"}"#])
        #expect(server.requests.allSatisfy { $0.method == "POST" && $0.target == "/devices" && $0.header("Content-Type") == "application/json" })

        // alice's token changes (the old one is removed once the new one is in), bob leaves.
        files.write("hook.yaml", Self.config(url: url, accounts: [("alice", "T2")]))
        agent.reload()
        #expect(await agent.log.waitFor("reloaded: 0 new, 1 changed, 0 unchanged, 1 removed"), "\(agent.log.value)")
        #expect(await Polling.until { server.requests.count >= 5 }, "\(server.requests.map(\.bodyText))")
        #expect(Set(server.requests.dropFirst(2).map(\.bodyText)) == [
            #"{"account":"alice","token":"T2"}"#, #"{"account":"alice","token":"T1","removed":true}"#,
            #"{"account":"bob","token":"B1","removed":true}"#,
        ])
        #expect(await agent.stop(), "\(agent.log.value)")
        let records = try SQLiteStateStore(directory: StateDirectory(path: state), readOnly: true).records()
        #expect(records.map(\.key.account) == ["alice"])
        #expect(records.first?.state == .delivered)
        #expect(records.first?.cleanup?.contains(#"\"token\":\"T2\""#) == true, "\(records)")
    }
}
