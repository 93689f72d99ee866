import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// SPEC §12: signals are never fatal. SIGHUP, SIGTERM and SIGINT are blocked before anything else
/// runs, so one that comes while the agent loads is handled once it runs; `run --once` ends its
/// round on SIGINT or SIGTERM; the other commands still end on them as any program does.
@Suite(.blockingThreads) struct SignalTests {
    /// Enough accounts that loading them takes a while: a signal sent as soon as the agent blocks
    /// it lands before any handler exists.
    static func manyAccounts(base: String) -> String {
        AgentTests.config((0..<500).map { ("a\($0)", "T") }, base: base)
    }

    @Test func aHangupInTheFirstMillisecondsIsAReloadOnceLoaded() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", Self.manyAccounts(base: server.baseURL))
        for round in 1...5 {
            let agent = try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", files.path + "/state"])
            try #require(agent.waitUntilBlocking(SIGHUP), "round \(round)")
            agent.signal(SIGHUP)
            #expect(agent.waitForStderr("reloaded: 0 new, 0 changed, 500 unchanged, 0 removed"), "round \(round): \(agent.stderr)")
            agent.signal(SIGTERM)
            #expect(agent.waitForExit() == 0, "round \(round): \(agent.stderr)")
        }
    }

    @Test func aTerminationInTheFirstMillisecondsStopsGracefully() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", Self.manyAccounts(base: server.baseURL))
        for signal in [SIGTERM, SIGINT] {
            let agent = try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", files.path + "/state"])
            try #require(agent.waitUntilBlocking(signal))
            agent.signal(signal)
            #expect(agent.waitForExit() == 0, "\(agent.stderr)")
            #expect(agent.stderr.hasSuffix(" info: stopped\n"), "\(agent.stderr)")
        }
    }

    @Test func runOnceEndsItsRoundOnAnInterruptOrATermination() throws {
        let server = try LoopbackHTTPServer { _, _ in .hang }
        let files = TemporaryDirectory()
        // The grace period is agent.timeout (2s); the request's own timeout is far longer, so it
        // is still in flight when the grace period ends, however long that takes.
        let config = files.write("accounts.yaml", AgentTests.config([("alice", "A1")], base: server.baseURL, agent: "  timeout: 2s")
                                 + "    pushTokenReporterTimeout: 10m\n")
        for (index, (signal, name)) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")].enumerated() {
            let once = try RunningProcess(pushreporter: ["run", "--once", "--config", config, "--state-dir", files.path + "/state"])
            #expect(server.waitForRequests(index + 1, timeout: Polling.generous))
            // A hangup is not fatal: the round goes on.
            once.signal(SIGHUP)
            once.signal(signal)
            // The request in flight gets the grace period, then the round ends as the deadline
            // would end it, with the summary and the state written.
            #expect(once.waitForExit() == 1, "\(once.stderr)")
            #expect(once.stdout.hasPrefix("Delivered 0 of 1 report; 1 not delivered before \(name) stopped the round:\n"), "\(once.stdout)")
            #expect(once.stderr.contains("stopping: no new requests; 1 in flight gets 2s to finish"), "\(once.stderr)")
            #expect(once.stderr.contains("1 request still in flight after the grace period is cancelled"), "\(once.stderr)")
        }
    }
}
