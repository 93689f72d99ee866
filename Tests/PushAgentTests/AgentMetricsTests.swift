@testable import PushAgent
import PushAgentTesting
import PushBackend
import PushConfig
import Synchronization
import PushRegistry
import PushScheduler
import PushState
import PushSystem
import PushTestSupport
import PushTestThreads
import PushTransport
import Testing
import Foundation

/// SPEC §9.5: `/metrics` with bounded cardinality, `/livez` and `/readyz`, through the agent's
/// own endpoint in process.
@Suite(.ownThreads) struct AgentMetricsTests {
    /// `GET path` on the agent's endpoint at `port`: the status and the body.
    static func get(_ port: Int, _ path: String) async throws -> (status: Int, body: String) {
        let response = try await CurlTransport().send(TransportRequest(method: "GET", url: "http://127.0.0.1:\(port)\(path)"))
        return (response.status, String(decoding: response.body, as: UTF8.self))
    }

    /// The port the agent's endpoint said it serves on.
    static func port(_ agent: AgentHarness) async throws -> Int {
        #expect(await agent.log.waitFor("serving /metrics, /livez, /readyz and webhooks on 127.0.0.1:"), "\(agent.log.value)")
        let line = agent.log.value.split(separator: "\n").first { $0.contains("serving /metrics") } ?? ""
        return try #require(Int(line.split(separator: ":").last ?? ""))
    }

    /// The value of the sample `series` (its name and labels as written) in `text`.
    static func sample(_ series: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.dropFirst(series.count + 1)) }
    }

    /// The metrics of `count` accounts all delivered (one after a 503): what `/metrics` says.
    static func delivered(_ count: Int, agentLines: String = "") async throws -> (text: String, agent: AgentHarness, files: TemporaryDirectory, server: LoopbackHTTPServer) {
        let refusedOnce = Atomic<Bool>(false)
        let server = try LoopbackHTTPServer { request, _ in
            // The first request of a0 is refused once: a retry to count.
            if request.target.hasPrefix("/report/a0?"), !refusedOnce.exchange(true, ordering: .relaxed) { return .status(503) }
            return .status(204)
        }
        let files = TemporaryDirectory()
        let accounts = (0..<count).map { ("a\($0)", "T\($0)") }
        let config = files.write("accounts.yaml", SampleConfiguration.config(accounts, base: server.baseURL,
                                                                            agent: "  listen: 127.0.0.1:0\n" + agentLines))
        let agent = try await AgentHarness.start(config: config, stateDir: files.path + "/state", backends: .standard)
        let port = try await Self.port(agent)
        #expect(await agent.log.waitFor("all \(count) accounts are reported"), "\(agent.log.value)")
        return (try await get(port, "/metrics").body, agent, files, server)
    }

    @Test func metricsCountAttemptsAndStatesButNotAccounts() async throws {
        let (small, smallAgent, _, smallServer) = try await Self.delivered(10)
        defer { smallServer.stop() }
        #expect(await smallAgent.stop())
        let (text, agent, files, server) = try await Self.delivered(400)
        defer { server.stop() }

        #expect(Self.sample(#"pushreporter_attempts_total{service="acrobits",outcome="delivered"}"#, in: text) == 400, "\(text)")
        #expect(Self.sample(#"pushreporter_attempts_total{service="acrobits",outcome="retry"}"#, in: text) == 1, "\(text)")
        #expect(Self.sample(#"pushreporter_request_duration_seconds_count{service="acrobits"}"#, in: text) == 401, "\(text)")
        #expect(Self.sample(#"pushreporter_request_duration_seconds_bucket{service="acrobits",le="+Inf"}"#, in: text) == 401)
        #expect(Self.sample(#"pushreporter_subscriptions{service="acrobits",state="delivered"}"#, in: text) == 400)
        #expect(Self.sample(#"pushreporter_subscriptions{service="acrobits",state="retrying"}"#, in: text) == 0)
        #expect(Self.sample(#"pushreporter_build_info{version="\#(PushReporterVersion.current)"}"#, in: text) == 1)
        #expect(Self.sample("pushreporter_config_last_reload_successful", in: text) == 1)
        #expect(Self.sample("pushreporter_state_up", in: text) == 1)
        let started = try #require(Self.sample("process_start_time_seconds", in: text))
        let now = Double(WallClock.epochMilliseconds()) / 1000
        #expect(started <= now && started > now - 3600, "a start time of \(started), now \(now)")
        #expect(text.contains("# TYPE pushreporter_attempts_total counter"))
        #expect(text.contains("# TYPE pushreporter_request_duration_seconds histogram"))
        // No series per account, so 40 times the accounts is the same text but for its numbers.
        #expect(!text.contains("account="), "\(text)")
        #expect(text.utf8.count < 8 << 10, "\(text.utf8.count) bytes")
        let shape = { (text: String) in text.split(separator: "\n").map { $0.split(separator: " ").first ?? "" }.sorted() }
        #expect(shape(text) == shape(small))

        // docs/deploying.md's scrape config and alert rules name only series the agent writes.
        let docs = try String(contentsOfFile: RepositoryPaths.root + "/docs/deploying.md", encoding: .utf8)
        let rules = docs.split(separator: "```yml").dropFirst().map { $0.split(separator: "```").first ?? "" }.joined()
        let named = Set(rules.matches(of: /pushreporter_[a-z_]+/).map { String($0.output) })
        #expect(named.count >= 3, "\(rules)")
        for name in named { #expect(text.contains("\n\(name){") || text.contains("\n\(name) "), "docs name \(name), /metrics has none") }

        // A reload that fails says so; one that succeeds with perAccount adds each account's series.
        let config = files.path + "/accounts.yaml"
        files.write("accounts.yaml", "agent: [not, a, mapping]\n")
        agent.reload()
        #expect(await agent.log.waitFor("the new configuration is invalid"), "\(agent.log.value)")
        let port = try await Self.port(agent)
        let failed = try await Self.get(port, "/metrics").body
        #expect(Self.sample("pushreporter_config_last_reload_successful", in: failed) == 0, "\(failed)")
        let accounts = (0..<400).map { ("a\($0)", "T\($0)") }
        files.write("accounts.yaml", SampleConfiguration.config(accounts, base: server.baseURL,
                                                               agent: "  listen: 127.0.0.1:0\n  metrics: {perAccount: true}\n"))
        agent.reload()
        #expect(await agent.log.waitFor("reloaded: 0 new, 0 changed, 400 unchanged, 0 removed"), "\(agent.log.value)")
        // 1,200 lines, past what the transport keeps of a body: read whole by curl.
        let perAccount = try ProcessRunner.run("/usr/bin/curl", ["-sf", "http://127.0.0.1:\(port)/metrics"]).stdout
        #expect(Self.sample("pushreporter_config_last_reload_successful", in: perAccount) == 1)
        #expect(perAccount.split(separator: "\n").count { $0.hasPrefix("pushreporter_report_attempts{") } == 400, "\(config)")
        let successes = perAccount.split(separator: "\n").filter { $0.hasPrefix("pushreporter_last_success_timestamp_seconds{") }
        let lacking = perAccount.split(separator: "\n").filter { $0.hasPrefix("pushreporter_report_attempts{") }
            .map { $0.dropFirst("pushreporter_report_attempts{".count).split(separator: "}").first ?? "" }
            .filter { labels in !successes.contains { $0.contains(labels) } }
        #expect(successes.count == 400, "\(lacking)")
        #expect(await agent.stop(), "\(agent.log.value)")
    }

    @Test func livezAndReadyzAnswerAndEachRequestIsADebugLine() async throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        defer { server.stop() }
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", SampleConfiguration.config([("a", "T")], base: server.baseURL,
                                                                            agent: "  listen: 127.0.0.1:0\n"))
        let agent = try await AgentHarness.start(config: config, stateDir: files.path + "/state", backends: .standard, level: .debug)
        let port = try await Self.port(agent)
        #expect(await agent.log.waitFor("the 1 account is reported"), "\(agent.log.value)")
        // At debug level each request says its service, status and time, its query left out.
        let line = agent.log.value.split(separator: "\n").first { $0.contains(": acrobits: GET ") } ?? ""
        #expect(line.contains("acrobits: GET \(server.baseURL)/report/a?… answered 204 in "), "\(agent.log.value)")
        #expect(!line.contains("token=T"))
        #expect(try await Self.get(port, "/livez") == (200, "ok\n"))
        #expect(try await Self.get(port, "/readyz") == (200, "ok\n"))
        #expect(try await Self.get(port, "/health") == (200, "ok\n"))
        #expect(await agent.stop())
    }

    /// The agent of a round's tests, with a store that can be told to fail.
    static func core(store: MemoryStateStore) -> AgentCore<ManualClock> {
        let plan = AgentOnceTests.plan("a", url: "http://h.example/a")
        let agent = AgentOnceTests.agent([plan], transport: ScriptedTransport { _, _ in TransportResponse(status: 204) },
                                         store: store, clock: ManualClock())
        return agent.core
    }

    @Test func readinessNamesWhatIsNotReady() async throws {
        let store = MemoryStateStore()
        let core = Self.core(store: store)
        #expect(core.readiness().status == 503)
        #expect(String(decoding: core.readiness().body, as: UTF8.self) == "the scheduler is not running\n")
        core.state.withLock { $0.serving = true }
        #expect(core.readiness().status == 200)

        // A state that cannot be written: not ready until a write succeeds again.
        store.failsWrites = true
        core.recorder.save(SubscriptionRecord(key: SubscriptionKey(account: "a", service: SubscriptionKey.acrobits), fingerprint: "f"))
        #expect(!core.recorder.flush())
        #expect(String(decoding: core.readiness().body, as: UTF8.self) == "the state cannot be written\n")
        #expect(Self.sample("pushreporter_state_up", in: String(decoding: core.metricsText(), as: UTF8.self)) == 0)
        store.failsWrites = false
        #expect(core.recorder.flush())
        #expect(core.readiness().status == 200)
        #expect(Self.sample("pushreporter_state_up", in: String(decoding: core.metricsText(), as: UTF8.self)) == 1)

        core.beginStopping()
        #expect(String(decoding: core.readiness().body, as: UTF8.self) == "the agent is stopping\n")
    }

    /// `/livez` puts a task on the pool: one that runs clears the probe; one that waits past the
    /// limit (a pool that stopped turning) makes it 503.
    @Test func livenessFailsOnceAProbeOfThePoolWaitsTooLong() async {
        let core = Self.core(store: MemoryStateStore())
        let now = ContinuousClock.now
        #expect(core.liveness(at: now).status == 200)
        #expect(await Polling.until { core.livenessProbe.withLock { $0 == nil } }, "the probe ran on the pool")

        // A probe that never ran: as a stuck pool leaves it.
        core.livenessProbe.withLock { $0 = now }
        #expect(core.liveness(at: now.advanced(by: .seconds(9))).status == 200)
        let stuck = core.liveness(at: now.advanced(by: .seconds(12)))
        #expect(stuck.status == 503)
        #expect(String(decoding: stuck.body, as: UTF8.self) == "the agent's loops have not run a task for 12s\n")
    }

    @Test func theDebugLineOfARequestHidesItsQueryAndUserInformation() {
        #expect(URLText.withoutCredentialsOrQuery("https://user:secret@push.example.com/register?token=abc&key=s3cr3t")
                == "https://push.example.com/register?…")
        #expect(URLText.withoutCredentialsOrQuery("http://h.example/a/b#frag") == "http://h.example/a/b")
        #expect(URLText.withoutCredentialsOrQuery("http://h.example/p@th") == "http://h.example/p@th")
    }

    @Test func heldRemovalsAreAGauge() {
        let metrics = AgentMetrics(loadedAt: 0)
        let text = String(decoding: metrics.text(AgentMetrics.Reading(
            subscriptions: ["acrobits": [.delivered: 1, .held: 149], "hook": [.held: 2]], stateUp: true, leasesHeld: nil)), as: UTF8.self)
        #expect(Self.sample("pushreporter_removals_held", in: text) == 151, "\(text)")
        #expect(Self.sample(#"pushreporter_subscriptions{service="acrobits",state="held"}"#, in: text) == 149)
    }
}
