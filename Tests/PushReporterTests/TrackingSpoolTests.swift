import Foundation
import PushState
import PushTestSupport
import Testing
import PushTestThreads

/// The agent drains `agent.trackingSpool` (SPEC §9.4): a file is deleted only once all its
/// actions were delivered, and a `kill -9` loses nothing and sends nothing twice that the
/// server acknowledged.
@Suite(.serialized, .blockingThreads) struct TrackingSpoolTests {
    /// The agent's configuration: the spool `spool` beside it, tracking to `server` with a long
    /// timeout (a hung request stays hung until the test acts).
    static func config(_ server: String) -> String {
        """
        agent:
          retry: {initial: 100ms, multiplier: 2, max: 500ms, maxRetryAfter: 5s}
          trackingSpool: spool
        services:
          adobe:
            type: adobe-campaign
            trackingServer: \(server)
            timeout: 60s
        accounts:
          - username: dana
            services:
              adobe: {ecid: dana-ecid}
        """
    }

    /// Puts a spool file as a producer should: written beside, then renamed into place.
    static func drop(_ name: String, _ text: String, in spool: String) {
        let temporary = spool + "/." + name + ".tmp"
        precondition(FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8)))
        precondition(rename(temporary, spool + "/" + name) == 0)
    }

    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// An iOS payload of message `id` with the spool's instructions.
    static func file(_ id: String, event: String, extra: String = "") -> String {
        #"{"event":"\#(event)","account":"dana"\#(extra),"aps":{"alert":"hi"},"_mId":"\#(id)","_dId":"d-\#(id)"}"#
    }

    /// A directory with the agent's configuration, its spool (holding `files`, by name) and its state.
    struct Setup {
        let directory = TemporaryDirectory()
        let config: String
        let spool: String
        var state: String { directory.path + "/state" }

        init(_ adobe: FakeAdobeServer, files: [(name: String, text: String)]) {
            config = directory.write("agent.yaml", TrackingSpoolTests.config(adobe.baseURL))
            spool = directory.makeDirectory("spool")
            for file in files { TrackingSpoolTests.drop(file.name, file.text, in: spool) }
        }

        /// Starts the agent on it.
        func agent() throws -> RunningProcess {
            try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", state])
        }
    }

    @Test func theAgentDrainsItsSpoolFileByFile() throws {
        let adobe = try FakeAdobeServer()
        adobe.answer(.status(404), forMessage: "refused")
        let setup = Setup(adobe, files: [("a.json", Self.file("m1", event: "open"))])
        let spool = setup.spool
        let agent = try setup.agent()
        #expect(Polling.until { !Self.exists(spool + "/a.json") }, "\(agent.stderr)")
        #expect(adobe.delivered.map { "\($0.messageId):\($0.action):\($0.ecid)" } == ["m1:2:dana-ecid", "m1:1:dana-ecid"])

        // Files that come later, while it runs: an Android one given an ECID, one the server
        // refuses, one not to be tracked, and one that is not JSON.
        Self.drop("b.json", #"{"event":"click","ecid":"given","to":"t","data":{"_mId":"m2","_dId":"d2"}}"#, in: spool)
        Self.drop("c.json", Self.file("refused", event: "impression"), in: spool)
        Self.drop("d.json", Self.file("m4", event: "click", extra: #","_acsDeliveryTracking":"off""#), in: spool)
        Self.drop("e.json", "{not json", in: spool)
        Self.drop("f.json", Self.file("m6", event: "wave"), in: spool)
        #expect(Polling.until {
            ["b", "c", "d", "e", "f"].allSatisfy { !Self.exists(spool + "/\($0).json") }
        }, "\(agent.stderr)")
        #expect(adobe.delivered.map { "\($0.messageId):\($0.action):\($0.ecid)" }.sorted()
            == ["m1:1:dana-ecid", "m1:2:dana-ecid", "m2:2:given"])
        #expect(adobe.hits.filter { $0.messageId == "refused" }.count == 1, "a refused action is not retried")
        #expect(Self.exists(spool + "/c.json.rejected"))
        #expect(Self.exists(spool + "/e.json.rejected"))
        #expect(Self.exists(spool + "/f.json.rejected"))
        #expect(!Self.exists(spool + "/d.json.rejected"), "a payload not to be tracked is deleted")
        #expect(agent.waitForStderr("tracking spool: c.json: action 7 (impression) rejected by 127.0.0.1:\(adobe.port): HTTP 404; moved aside as c.json.rejected, not sent again"))
        #expect(agent.waitForStderr("tracking spool: d.json: not tracked: _acsDeliveryTracking is 'off', not on; the file is deleted"))
        #expect(agent.waitForStderr("tracking spool: e.json: it is not JSON (expected a string key at byte 2); moved aside as e.json.rejected, not sent again"))
        #expect(agent.waitForStderr("tracking spool: f.json: event 'wave' is not impression, click, open or dismiss; moved aside"))
        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0, "\(agent.stderr)")
    }

    @Test func aFailingActionIsRetriedAndItsFileKeptUntilItIsDelivered() throws {
        let adobe = try FakeAdobeServer()
        adobe.answer(.status(503), forMessage: "m1")
        let setup = Setup(adobe, files: [("a.json", Self.file("m1", event: "impression"))])
        let spool = setup.spool
        let agent = try setup.agent()
        #expect(adobe.waitForHits(3, timeout: Polling.generous), "\(agent.stderr)")
        #expect(Self.exists(spool + "/a.json"), "kept while its action is not delivered")
        #expect(agent.waitForStderr("tracking spool: a.json failed: action 7 (impression) to 127.0.0.1:\(adobe.port): HTTP 503 (attempt 1); next attempt in"))
        adobe.clearAnswers()
        #expect(Polling.until { !Self.exists(spool + "/a.json") }, "\(agent.stderr)")
        #expect(adobe.delivered.count == 1)
        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0, "\(agent.stderr)")
    }

    @Test func killedDuringADrainItLosesNothingAndResendsNothingAcknowledged() throws {
        let adobe = try FakeAdobeServer()
        // The open's click is acknowledged; its open hangs until the agent is killed.
        adobe.answer(.hang, forMessage: "m1", action: "1")
        let setup = Setup(adobe, files: [("a.json", Self.file("m1", event: "open")), ("b.json", Self.file("m2", event: "impression"))])
        let spool = setup.spool
        let first = try setup.agent()
        #expect(Polling.until { adobe.hits.contains { $0.messageId == "m1" && $0.action == "1" } && !Self.exists(spool + "/b.json") },
                "\(first.stderr)")
        first.signal(SIGKILL)
        #expect(first.waitForExit() == 128 + SIGKILL)
        #expect(Self.exists(spool + "/a.json"), "a file with an action not acknowledged is still there")
        #expect(adobe.delivered.map { "\($0.messageId):\($0.action)" }.sorted() == ["m1:2", "m2:7"])

        adobe.clearAnswers()
        let second = try setup.agent()
        #expect(Polling.until { !Self.exists(spool + "/a.json") }, "\(second.stderr)")
        let delivered = adobe.delivered.map { "\($0.messageId):\($0.action)" }
        #expect(delivered.sorted() == ["m1:1", "m1:2", "m2:7"], "each action acknowledged once, none lost")
        #expect(adobe.hits.filter { $0.messageId == "m1" && $0.action == "2" }.count == 1, "the acknowledged click is not sent again")
        second.signal(SIGTERM)
        #expect(second.waitForExit() == 0, "\(second.stderr)")
        let remembered = try SQLiteTrackedActions(directory: StateDirectory(path: setup.state)).all()
        #expect(remembered.map { "\($0.messageId):\($0.action)" }.sorted() == ["m1:1", "m1:2", "m2:7"])
    }

    @Test func fifosHeldOpenInTheSpoolFreezeNothingAndSIGTERMStillStopsTheAgent() throws {
        let adobe = try FakeAdobeServer()
        let setup = Setup(adobe, files: [])
        // Two FIFOs held open by their writer (as many as the cooperative pool has threads on
        // two cores), dropped before the good file, so they are taken first.
        var fifos: [Int32] = []
        for name in ["a0.json", "a1.json"] {
            #expect(mkfifo(setup.spool + "/" + name, 0o600) == 0)
            fifos.append(open(setup.spool + "/" + name, O_RDWR | O_NONBLOCK))
        }
        defer { for fd in fifos { close(fd) } }
        Self.drop("b.json", Self.file("m1", event: "impression"), in: setup.spool)
        let notify = try NotifyListener()
        let agent = try RunningProcess(pushreporter: ["run", "--config", setup.config, "--state-dir", setup.state],
                                       environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "400000"])
        #expect(Polling.until { !Self.exists(setup.spool + "/b.json") }, "the good file is tracked: \(agent.stderr)")
        #expect(adobe.delivered.map(\.messageId) == ["m1"])
        #expect(Self.exists(setup.spool + "/a0.json.rejected") && Self.exists(setup.spool + "/a1.json.rejected"), "\(agent.stderr)")
        #expect(agent.waitForStderr("tracking spool: a0.json: it is a FIFO, not a file; moved aside as a0.json.rejected"))
        // The watchdog still turns.
        let seen = notify.messages.count
        #expect(notify.waitForMessage(after: seen) { $0.contains("WATCHDOG=1") } != nil)
        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0, "\(agent.stderr)")
    }
}
