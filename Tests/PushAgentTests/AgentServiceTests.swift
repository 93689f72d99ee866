import PushAgentTesting
import PushBackend
import PushRegistry
import PushState
import PushTestSupport
import PushTestThreads
import Synchronization
import Testing

/// The long-running agent in process (``AgentHarness``), loaded and assembled as `run` does it,
/// against a server on 127.0.0.1: reloads and removals. What needs the process itself (signals,
/// exit codes, systemd's socket) is in PushReporterTests.
@Suite(.ownThreads) struct AgentServiceTests {
    /// `METHOD /path?query` of every request the server got, from index `from`.
    static func seen(_ server: LoopbackHTTPServer, from: Int = 0) -> [String] {
        Array(server.requests.dropFirst(from).map { "\($0.method) \($0.target)" })
    }

    static func records(_ state: String) throws -> [SubscriptionRecord] {
        try SQLiteStateStore(directory: StateDirectory(path: state), readOnly: true).records()
    }

    @Test func reloadReportsNewAndChangedAccountsAndRemovesTheOnesThatLeft() async throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        defer { server.stop() }
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", SampleConfiguration.config([("alice", "A1"), ("bob", "B1"), ("carol", "C1")],
                                                                             base: server.baseURL))
        let agent = try await AgentHarness.start(config: config, stateDir: files.path + "/state", backends: .standard)
        #expect(await agent.log.waitFor("all 3 accounts are reported"), "\(agent.log.value)")
        #expect(Set(Self.seen(server)) == ["GET /report/alice?token=A1", "GET /report/bob?token=B1", "GET /report/carol?token=C1"])

        // alice unchanged, bob's token changed, carol gone, dave new.
        files.write("accounts.yaml", SampleConfiguration.config([("alice", "A1"), ("bob", "B2"), ("dave", "D1")], base: server.baseURL))
        agent.reload()
        #expect(await agent.log.waitFor("reloaded: 1 new, 1 changed, 1 unchanged, 1 removed"), "\(agent.log.value)")
        #expect(await agent.log.waitFor("all 3 accounts are reported", count: 2), "\(agent.log.value)")
        #expect(await Polling.until { server.requests.count >= 6 })
        #expect(Set(Self.seen(server, from: 3)) == ["GET /report/bob?token=B2", "GET /report/dave?token=D1",
                                                     "DELETE /remove/carol?token=C1"])

        // A reload's warnings are logged, as at start; a fix that is itself misspelt is refused
        // (a typo must not go live) and says where.
        files.write("accounts.yaml", SampleConfiguration.config([("alice", "A1"), ("bob", "B2"), ("dave", "D1")], base: server.baseURL)
                    + "    pushTokenIncommingCall: x\n")
        agent.reload()
        #expect(await agent.log.waitFor("the new configuration is invalid, so the previous one keeps running"), "\(agent.log.value)")
        #expect(await agent.log.waitFor(
            "'pushTokenIncommingCall' is not a key pushreporter acts on, and no template of the account uses it; did you mean 'pushTokenIncomingCall'? [account dave]"),
                "\(agent.log.value)")
        files.write("accounts.yaml", "defaults:\n  pushTokenIncommingCall: x\n" + SampleConfiguration.config([("alice", "A1"), ("bob", "B2"), ("dave", "D1")], base: server.baseURL))
        agent.reload()
        #expect(await agent.log.waitFor("reloaded: 0 new, 0 changed, 3 unchanged, 0 removed"), "\(agent.log.value)")
        #expect(await agent.log.waitFor("'pushTokenIncommingCall' is not a key pushreporter acts on; did you mean 'pushTokenIncomingCall'?"),
                "\(agent.log.value)")

        // A broken file leaves the agent running on the previous configuration.
        files.write("accounts.yaml", "accounts:\n  - id: [broken\n")
        agent.reload()
        #expect(await agent.log.waitFor("the new configuration is invalid, so the previous one keeps running: \(config):"),
                "\(agent.log.value)")
        // Two mistakes, one found loading and one rendering: the log counts both.
        files.write("accounts.yaml",
                    "agent:\n  timout: 5s\naccounts:\n  - id: alice\n    pushTokenReporterUrl: https://h.example/r?u=%account[usrname]%\n")
        agent.reload()
        #expect(await agent.log.waitFor(
            "unknown key 'timout' under agent; did you mean 'timeout'? (and 1 more; pushreporter validate --config \(config) lists them)"),
                "\(agent.log.value)")

        #expect(await agent.stop(), "\(agent.log.value)")
        #expect(server.requests.count == 6, "\(Self.seen(server))")
        let accounts = try Self.records(files.path + "/state").map(\.key.account)
        #expect(accounts.sorted() == ["alice", "bob", "dave"])
    }

    @Test func aChangeWhileTheOldReportIsInFlightIsSentAfterItReturns() async throws {
        // The A1 report is held until the reload is done; A2 must not overtake it, or the server
        // would keep A1.
        let events = Mutex<[String]>([])
        let reloaded = Atomic<Bool>(false)
        let server = try LoopbackHTTPServer { request, _ in
            events.withLock { $0.append("start \(request.target)") }
            if request.target.hasSuffix("token=A1") {
                _ = Polling.until { reloaded.load(ordering: .acquiring) }
            }
            events.withLock { $0.append("end \(request.target)") }
            return .status(204)
        }
        defer { server.stop() }
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", SampleConfiguration.config([("alice", "A1")], base: server.baseURL))
        let agent = try await AgentHarness.start(config: config, stateDir: files.path + "/state", backends: .standard)
        #expect(await Polling.until { !server.requests.isEmpty })
        files.write("accounts.yaml", SampleConfiguration.config([("alice", "A2")], base: server.baseURL))
        agent.reload()
        #expect(await agent.log.waitFor("reloaded: 0 new, 1 changed, 0 unchanged, 0 removed"), "\(agent.log.value)")
        reloaded.store(true, ordering: .releasing)
        // Said once: the start's report was still in flight when the reload came.
        #expect(await agent.log.waitFor("the 1 account is reported"), "\(agent.log.value)")
        #expect(events.withLock { $0 } == ["start /report/alice?token=A1", "end /report/alice?token=A1",
                                           "start /report/alice?token=A2", "end /report/alice?token=A2"])
        #expect(await agent.stop(), "\(agent.log.value)")
        let records = try Self.records(files.path + "/state")
        #expect(records.first?.state == .delivered)
        #expect(records.first?.cleanup?.contains("token=A2") == true)
        #expect(records.first?.pastCleanups == [])
    }

    @Test func anAccountRemovedWhileTheAgentWasDownGetsItsRemovalOnTheNextStart() async throws {
        let server = try LoopbackHTTPServer { _, _ in .status(200) }
        defer { server.stop() }
        let files = TemporaryDirectory()
        let state = files.path + "/state"
        let config = files.write("accounts.yaml", SampleConfiguration.config([("alice", "A1"), ("bob", "B1")], base: server.baseURL))
        let first = try await AgentHarness.start(config: config, stateDir: state, backends: .standard)
        #expect(await first.log.waitFor("all 2 accounts are reported"), "\(first.log.value)")
        #expect(await first.stop(), "\(first.log.value)")

        files.write("accounts.yaml", SampleConfiguration.config([("alice", "A1")], base: server.baseURL))
        let second = try await AgentHarness.start(config: config, stateDir: state, backends: .standard)
        #expect(await second.log.waitFor("started: reporting 1 account, sending 1 owed removal"), "\(second.log.value)")
        #expect(await second.log.waitFor("1 subscription that left the configuration is cleaned up and forgotten"),
                "\(second.log.value)")
        #expect(await second.stop(), "\(second.log.value)")
        // Every start reports every account again, as the Acrobits app does.
        #expect(Self.seen(server, from: 2).sorted() == ["DELETE /remove/bob?token=B1", "GET /report/alice?token=A1"])
        #expect(try Self.records(state).map(\.key.account) == ["alice"])
    }

    /// SPEC §14: a reload that would remove more than agent.removalGuard allows holds those
    /// removals, sends the rest, and lets them go when the guard is set off; an account that
    /// comes back is no longer held and nothing is sent for it.
    @Test func aReloadThatRemovesMostAccountsIsHeldUntilReleased() async throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        defer { server.stop() }
        let files = TemporaryDirectory()
        let state = files.path + "/state"
        let accounts = (0..<150).map { ("a\($0)", "T\($0)") }
        let config = files.write("accounts.yaml", SampleConfiguration.config(accounts, base: server.baseURL))
        let agent = try await AgentHarness.start(config: config, stateDir: state, backends: .standard)
        #expect(await agent.log.waitFor("all 150 accounts are reported"), "\(agent.log.value)")
        #expect(await Polling.until { server.requests.count == 150 })

        // An emptied file, but for one account: 149 removals, held.
        files.write("accounts.yaml", SampleConfiguration.config(Array(accounts.prefix(1)), base: server.baseURL))
        agent.reload()
        #expect(await agent.log.waitFor("reloaded: 0 new, 0 changed, 1 unchanged, 0 removed, 149 removals held"), "\(agent.log.value)")
        #expect(await agent.log.waitFor("warning: holding the removal of 149 accounts that left the configuration at once"),
                "\(agent.log.value)")
        #expect(await Polling.until { (try? Self.records(state).filter { $0.state == .held }.count) == 149 })
        #expect(server.requests.count == 150, "nothing is sent for a held removal")
        // Reloaded again as it is: still held, and the warning is not said again.
        agent.reload()
        #expect(await agent.log.waitFor("reloaded: 0 new, 0 changed, 1 unchanged, 0 removed, 149 removals held", count: 2),
                "\(agent.log.value)")
        #expect(agent.log.value.components(separatedBy: "warning: holding the removal of").count == 2, "\(agent.log.value)")

        // They come back: no longer held, and nothing is sent for them.
        files.write("accounts.yaml", SampleConfiguration.config(accounts, base: server.baseURL))
        agent.reload()
        #expect(await agent.log.waitFor("reloaded: 0 new, 0 changed, 150 unchanged, 0 removed"), "\(agent.log.value)")
        #expect(await Polling.until { (try? Self.records(state).allSatisfy { $0.state == .delivered }) == true })
        #expect(server.requests.count == 150)

        // Gone again, then the guard set off: held, then sent.
        files.write("accounts.yaml", SampleConfiguration.config(Array(accounts.prefix(1)), base: server.baseURL))
        agent.reload()
        #expect(await agent.log.waitFor("149 removals held", count: 3), "\(agent.log.value)")
        files.write("accounts.yaml", SampleConfiguration.config(Array(accounts.prefix(1)), base: server.baseURL, agent: "  removalGuard: off"))
        agent.reload()
        #expect(await agent.log.waitFor("reloaded: 0 new, 0 changed, 1 unchanged, 149 removed"), "\(agent.log.value)")
        #expect(await Polling.until { server.requests.count == 150 + 149 }, "\(server.requests.count)")
        #expect(server.requests.suffix(149).allSatisfy { $0.method == "DELETE" })
        #expect(await agent.stop(), "\(agent.log.value)")
    }

    @Test func removingTwoHundredAccountsIsSaidInAFewLinesNotTwoPerAccount() async throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        defer { server.stop() }
        let files = TemporaryDirectory()
        let accounts = (0..<201).map { ("a\($0)", "T\($0)") }
        // The guard off: removing 200 of 201 at once would be held (see the test below).
        let config = files.write("accounts.yaml", SampleConfiguration.config(accounts, base: server.baseURL, agent: "  removalGuard: off"))
        let agent = try await AgentHarness.start(config: config, stateDir: files.path + "/state", backends: .standard)
        #expect(await agent.log.waitFor("all 201 accounts are reported"), "\(agent.log.value)")
        let before = agent.log.value.split(separator: "\n").count
        files.write("accounts.yaml", SampleConfiguration.config(Array(accounts.prefix(1)), base: server.baseURL, agent: "  removalGuard: off"))
        agent.reload()
        #expect(await agent.log.waitFor("200 subscriptions that left the configuration are cleaned up and forgotten"),
                "\(agent.log.value)")
        #expect(await Polling.until { server.requests.count >= 401 })
        let lines = agent.log.value.split(separator: "\n").dropFirst(before)
        #expect(lines.count <= 5, "\(lines.prefix(10))")
        #expect(lines.contains { $0.contains("reloaded: 0 new, 0 changed, 1 unchanged, 200 removed") })
        #expect(await agent.stop(), "\(agent.log.value)")
    }

    @Test func aSourceOfReloadsThatEndsLeavesTheAgentRunning() async throws {
        // As --watch that cannot watch: "it is reloaded only on SIGHUP", not stopped.
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        defer { server.stop() }
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", SampleConfiguration.config([("alice", "A1")], base: server.baseURL))
        let agent = try await AgentHarness.start(config: config, stateDir: files.path + "/state", backends: .standard)
        #expect(await agent.log.waitFor("the 1 account is reported"), "\(agent.log.value)")
        agent.endReloadRequests()
        // Ending it is not waited for: a second is what the agent gets to end, which it must not.
        #expect(!(await agent.hasEnded(within: .seconds(1))), "\(agent.log.value)")
        #expect(await agent.stop(), "\(agent.log.value)")
    }
}
