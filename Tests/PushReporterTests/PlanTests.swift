import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// SPEC §14: `pushreporter plan` says what a start or reload would send, without sending
/// anything or writing the state, for a state directory and for a shared PostgreSQL state.
@Suite(.serialized, .blockingThreads) struct PlanTests {
    static func accounts(_ tokens: [(String, String)], base: String, state: String? = nil) -> String {
        (state.map { "agent:\n  state: \($0)\n" } ?? "") + "accounts:\n" + tokens.map { id, token in
            "  - id: \(id)\n    pushTokenOther: \(token)\n    pushTokenReporterUrl: \(base)/r/\(id)?t=%pushTokenOther%\n"
                + "    accountRemovalReporterUrl: \(base)/gone/\(id)\n"
        }.joined()
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    /// `plan` of `config` (and `arguments`), checking that nothing was sent while it ran.
    static func plan(_ server: LoopbackHTTPServer, _ arguments: [String]) throws -> ProcessOutput {
        let before = server.requests.count
        let result = try ProcessRunner.pushreporter(["plan"] + arguments)
        #expect(server.requests.count == before, "plan sent a request")
        return result
    }

    @Test func newChangedUnchangedAndRemovedWithExitCodesAPipelineCanGateOn() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let state = files.path + "/state"
        let config = files.write("c.yaml", Self.accounts([("alice", "A1"), ("bob", "B1"), ("carol", "C1")], base: server.baseURL))

        // No state yet: everything is new, and plan writes none.
        let first = try Self.plan(server, ["--config", config, "--state-dir", state])
        #expect(first.status == 2, "\(first.stderr)")
        #expect(first.stdout.hasPrefix("acrobits: 3 new, 0 changed, 0 unchanged, 0 removed, 0 held\n"), "\(first.stdout)")
        #expect(first.stderr == "plan: there is no state directory \(state) (no agent has run with it yet); comparing with an empty state\n")
        #expect(!FileManager.default.fileExists(atPath: state), "plan made the state directory")

        #expect(try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", state]).status == 0)
        let settled = try Self.plan(server, ["--config", config, "--state-dir", state])
        #expect(settled.status == 0, "\(settled.stdout)\(settled.stderr)")
        #expect(settled.stdout == "acrobits: 0 new, 0 changed, 3 unchanged, 0 removed, 0 held\n")

        // bob's token changes, carol leaves, dave comes.
        files.write("c.yaml", Self.accounts([("alice", "A1"), ("bob", "B2"), ("dave", "D1")], base: server.baseURL))
        let text = try Self.plan(server, ["--config", config, "--state-dir", state])
        #expect(text.status == 2)
        #expect(text.stdout == """
            acrobits: 1 new, 1 changed, 1 unchanged, 1 removed, 0 held
              new      dave
              changed  bob (query t)
              removed  carol

            """)
        let json = try Self.json(try Self.plan(server, ["--config", config, "--state-dir", state, "--format", "json"]).stdout)
        let services = try #require(json["services"] as? [[String: Any]])
        #expect(services.count == 1)
        for (key, value) in [("new", 1), ("changed", 1), ("unchanged", 1), ("removed", 1), ("held", 0)] {
            #expect(services.first?[key] as? Int == value, "\(key)")
        }
        let items = try #require(json["items"] as? [[String: Any]])
        #expect(items.map { "\($0["account"] ?? "")/\($0["action"] ?? "")" } == ["bob/changed", "carol/removed", "dave/new"])
        #expect(items.allSatisfy { $0["service"] as? String == "acrobits" })
        // The part that changed is named, never its value; the others have none.
        #expect(items.map { $0["changes"] as? [String] } == [["query t"], nil, nil])
        #expect(!text.stdout.contains("B1") && !text.stdout.contains("B2"))

        // What the plan said is what a run does (a start re-reports the unchanged alice too).
        let ran = try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", state])
        #expect(ran.status == 0, "\(ran.stderr)")
        #expect(Set(server.requests.suffix(4).map(\.path)) == ["/r/alice", "/r/bob", "/r/dave", "/gone/carol"])
        #expect(try Self.plan(server, ["--config", config, "--state-dir", state]).status == 0)
    }

    @Test func anInvalidConfigurationAnUnreadableStateAndAnUnknownService() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let bad = files.write("bad.yaml", "agent:\n  timeout: soon\naccounts: []\n")
        let invalid = try Self.plan(server, ["--config", bad, "--state-dir", files.path + "/state"])
        #expect(invalid.status == 78)
        #expect(invalid.stderr.contains("bad.yaml:2:12: error:"), "\(invalid.stderr)")

        let config = files.write("c.yaml", Self.accounts([("alice", "A1")], base: server.baseURL))
        let notADirectory = files.write("file", "x")
        let unreadable = try Self.plan(server, ["--config", config, "--state-dir", notADirectory])
        #expect(unreadable.status == 1, "\(unreadable.stdout)\(unreadable.stderr)")
        #expect(unreadable.stderr.hasPrefix("plan: "), "\(unreadable.stderr)")

        let unknown = try Self.plan(server, ["--config", config, "--state-dir", files.path + "/state", "--service", "acrobit"])
        #expect(unknown.status == 64)
        #expect(unknown.stderr == "plan: the configuration has no service 'acrobit'; did you mean 'acrobits'?\n")
    }

    @Test func theSharedStateOfSeveralAgentsIsPlannedToo() throws {
        let postgres = try TemporaryPostgres.shared()
        let database = try postgres.makeDatabase()
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let config = files.write("c.yaml", Self.accounts([("alice", "A1"), ("bob", "B1")], base: server.baseURL, state: database))
        #expect(try ProcessRunner.pushreporter(["run", "--once", "--config", config]).status == 0)
        files.write("c.yaml", Self.accounts([("alice", "A2")], base: server.baseURL, state: database))
        let plan = try Self.plan(server, ["--config", config, "--format", "json"])
        #expect(plan.status == 2, "\(plan.stderr)")
        let items = try #require(try Self.json(plan.stdout)["items"] as? [[String: Any]])
        #expect(items.map { "\($0["account"] ?? "")/\($0["action"] ?? "")" } == ["alice/changed", "bob/removed"])
        #expect(items.first?["changes"] as? [String] == ["query t"])
    }

    /// SPEC §14: a start that would remove more than the guard allows holds those removals,
    /// says so in plan and status, and `remove --held` sends them.
    @Test func aStartThatRemovesMostAccountsHoldsThemUntilRemoveHeld() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let state = files.path + "/state"
        let all = (0..<150).map { ("a\($0)", "T\($0)") }
        let config = files.write("c.yaml", Self.accounts(all, base: server.baseURL))
        #expect(try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", state]).status == 0)
        files.write("c.yaml", Self.accounts([("a0", "T0")], base: server.baseURL))

        let plan = try Self.plan(server, ["--config", config, "--state-dir", state])
        #expect(plan.status == 0, "a held removal sends nothing: \(plan.stdout)")
        #expect(plan.stdout.hasPrefix("acrobits: 0 new, 0 changed, 1 unchanged, 0 removed, 149 held\n"), "\(plan.stdout)")

        let before = server.requests.count
        let run = try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", state])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("warning: holding the removal of 149 accounts that left the configuration at once"), "\(run.stderr)")
        #expect(server.requests.count == before + 1, "only a0 is reported")
        let status = try ProcessRunner.pushreporter(["status", "--state-dir", state])
        #expect(status.stdout.hasPrefix("150 accounts: 1 reported, 0 retrying, 149 removals held\n"), "\(status.stdout.prefix(300))")
        #expect(status.stdout.contains("a1       acrobits  held"), "\(status.stdout.prefix(600))")

        let released = try ProcessRunner.pushreporter(["remove", "--held", "--config", config, "--state-dir", state])
        #expect(released.status == 0, "\(released.stderr)")
        #expect(released.stdout.hasPrefix("Released the held removals of 149 accounts: 149 removals delivered"), "\(released.stdout)")
        #expect(server.requests.suffix(149).allSatisfy { $0.path.hasPrefix("/gone/") })
        let after = try ProcessRunner.pushreporter(["status", "--state-dir", state])
        #expect(after.stdout.hasPrefix("1 account: 1 reported, 0 retrying\n"), "\(after.stdout.prefix(200))")
        let none = try ProcessRunner.pushreporter(["remove", "--held", "--config", config, "--state-dir", state])
        #expect(none.status == 0)
        #expect(none.stdout == "No removal is held in the state directory \(state).\n", "\(none.stdout)")
    }

    /// SPEC §14: `remove --held` also while the agent runs: the agent's next reload sends them.
    @Test func removeHeldAsksTheRunningAgentToSendThem() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let state = files.path + "/state"
        let all = (0..<150).map { ("a\($0)", "T\($0)") }
        let config = files.write("c.yaml", Self.accounts(all, base: server.baseURL))
        let agent = try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", state])
        defer { agent.signal(SIGKILL) }
        #expect(agent.waitForStderr("all 150 accounts are reported"), "\(agent.stderr)")
        #expect(agent.waitUntilBlocking(SIGHUP))
        files.write("c.yaml", Self.accounts([("a0", "T0")], base: server.baseURL))
        agent.signal(SIGHUP)
        #expect(agent.waitForStderr("149 removals held"), "\(agent.stderr)")
        let asked = try ProcessRunner.pushreporter(["remove", "--held", "--config", config, "--state-dir", state])
        #expect(asked.status == 0, "\(asked.stderr)")
        #expect(asked.stdout.hasPrefix("Asked the running agent (process \(agent.pid)) to send the held removals"), "\(asked.stdout)")
        #expect(agent.waitForStderr("reloaded: 0 new, 0 changed, 1 unchanged, 149 removed"), "\(agent.stderr)")
        #expect(Polling.until { server.requests.count { $0.path.hasPrefix("/gone/") } == 149 })
        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0)
    }
}
