import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// SPEC §7: `run --once`, `migrate`, `remove` and `track` take `--format json`, one object on
/// standard output that says what was done, with counts, for the pipelines that call them.
@Suite(.blockingThreads) struct JSONSummaryTests {
    /// `text` as a JSON object.
    static func object(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not a JSON object: \(text)")
    }

    @Test func runOnceCountsEveryStateInAllAndPerService() throws {
        let server = try LoopbackHTTPServer { request, _ in request.target.hasPrefix("/report/b?") ? .status(503) : .status(204) }
        let files = TemporaryDirectory()
        let config = files.write("c.yaml", SampleConfiguration.config([("a", "T1"), ("b", "T2"), ("c", "T3")], base: server.baseURL))
        let result = try ProcessRunner.pushreporter(["run", "--once", "--format", "json", "--config", config,
                                                     "--state-dir", files.path + "/state", "--deadline", "2s"])
        #expect(result.status == 1, "\(result.stderr)")
        let summary = try Self.object(result.stdout)
        #expect(summary["succeeded"] as? Bool == false)
        #expect(summary["reports"] as? Int == 3)
        #expect(summary["reportsDelivered"] as? Int == 2)
        #expect(summary["delivered"] as? Int == 2)
        #expect(summary["retrying"] as? Int == 1)
        for state in ["pending", "accepted", "rejected", "unconfirmed", "stopped", "removing"] { #expect(summary[state] as? Int == 0, "\(state)") }
        let services = try #require(summary["services"] as? [[String: Any]])
        #expect(services.count == 1)
        #expect(services.first?["service"] as? String == "acrobits")
        #expect(services.first?["delivered"] as? Int == 2)
        #expect(services.first?["retrying"] as? Int == 1)
        let undelivered = try #require(summary["undelivered"] as? [[String: Any]])
        #expect(undelivered.map { $0["account"] as? String } == ["b"])
        #expect(undelivered.first?["state"] as? String == "retrying")
        #expect((undelivered.first?["attempts"] as? Int ?? 0) >= 1)

        let usage = try ProcessRunner.pushreporter(["run", "--format", "json", "--config", config])
        #expect(usage.status == 64)
        #expect(usage.stderr.contains("--format applies to --once"), "\(usage.stderr)")
    }

    @Test func removeAndMigrateSayWhatTheyDid() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let state = files.path + "/state"
        let config = files.write("c.yaml", SampleConfiguration.config([("a", "T1")], base: server.baseURL))
        #expect(try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", state]).status == 0)
        let bare = files.write("bare/c.yaml", "accounts: []\n")

        let removed = try ProcessRunner.pushreporter(["remove", "a", "--format", "json", "--config", bare, "--state-dir", state])
        #expect(removed.status == 0, "\(removed.stderr)")
        let summary = try Self.object(removed.stdout)
        #expect(summary["account"] as? String == "a")
        #expect(summary["removals"] as? Int == 1)
        #expect(summary["delivered"] as? Int == 1)
        #expect(summary["forgotten"] as? Bool == true)
        #expect(summary["hosts"] as? [String] == [server.baseURL.replacingOccurrences(of: "http://", with: "")])
        #expect(server.requests.last?.method == "DELETE")

        let migrated = try ProcessRunner.pushreporter(["migrate", "--format", "json", "--config", bare, "--state-dir", state])
        #expect(migrated.status == 0, "\(migrated.stderr)")
        let schema = try Self.object(migrated.stdout)
        #expect(schema["state"] as? String == "directory")
        #expect(schema["location"] as? String == state)
        #expect((schema["schemaVersion"] as? Int ?? 0) >= 1)
    }

    @Test func trackCountsTheActionsAndSaysWhatBecameOfEach() throws {
        let adobe = try FakeAdobeServer()
        let directory = TemporaryDirectory()
        let result = try TrackTests.track(config: TrackTests.config(adobe.baseURL),
                                          ["--service", "adobe", "--event", "open", "--account", "dana", "--format", "json"],
                                          payloads: [TrackTests.iosPayload, "{\"no\": \"ids\"}"], in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try Self.object(result.stdout)
        #expect(summary["actions"] as? Int == 2)
        #expect(summary["delivered"] as? Int == 2)
        #expect(summary["notDelivered"] as? Int == 0)
        #expect(summary["payloadsNotTracked"] as? Int == 1)
        let results = try #require(summary["results"] as? [[String: Any]])
        #expect(results.map { $0["outcome"] as? String } == ["delivered", "delivered"])
        #expect((summary["notTracked"] as? [[String: Any]])?.first?["payload"] as? String == directory.path + "/p2.json")

        let dry = try TrackTests.track(config: TrackTests.config(adobe.baseURL),
                                       ["--service", "adobe", "--event", "open", "--account", "dana", "--format", "json", "--dry-run"],
                                       payloads: [TrackTests.iosPayload])
        #expect(dry.status == 64, "\(dry.stderr)")
    }
}
