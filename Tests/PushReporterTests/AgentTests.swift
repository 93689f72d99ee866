import Foundation
import PushState
import PushTestSupport
import Synchronization
import Testing
import PushTestThreads

/// The long-running `pushreporter run`, the real binary, against a server on 127.0.0.1: reload,
/// removal, restarts, systemd notifications, `status` and `remove`.
@Suite(.serialized, .blockingThreads) struct AgentTests {
    /// See ``SampleConfiguration``.
    static func account(_ id: String, token: String, base: String) -> String {
        SampleConfiguration.account(id, token: token, base: base)
    }

    static func config(_ accounts: [(String, String)], base: String, agent: String = "") -> String {
        SampleConfiguration.config(accounts, base: base, agent: agent)
    }

    /// `METHOD /path?query` of every request the server got, from index `from`.
    static func seen(_ server: LoopbackHTTPServer, from: Int = 0) -> [String] {
        Array(server.requests.dropFirst(from).map { "\($0.method) \($0.target)" })
    }

    @Test func aBurstOfReloadsWhileSystemdDoesNotReadStrandsNothing() throws {
        // Ten SIGHUPs 200 ms apart while the first reports go out, the files unchanged, and a
        // notify socket that is not read: its queue filled, sendto() blocked the threads of
        // Swift's pool, and 628 of 1,000 accounts were never reported (nor SIGTERM heard).
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", Self.config((0..<1000).map { ("a\($0)", "T\($0)") }, base: server.baseURL))
        let listener = try NotifyListener.notReading()
        let agent = try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", files.path + "/state"],
                                       environment: ["NOTIFY_SOCKET": listener.path])
        #expect(agent.waitForStderr("started: reporting 1000 accounts"), "\(agent.stderr)")
        for _ in 0..<10 {
            agent.signal(SIGHUP)
            usleep(200_000)
        }
        #expect(agent.waitForStderr("all 1000 accounts are reported"), "\(agent.stderr)")
        #expect(Set(Self.seen(server)).count == 1000)
        #expect(agent.waitForStderr("reloaded: 0 new, 0 changed, 1000 unchanged, 0 removed"))
        // The service manager reads again: READY=1 and the last STATUS= come.
        listener.startReading()
        #expect(listener.waitForMessage { $0.contains("STATUS=1000 accounts: 1000 reported") } != nil, "\(listener.messages)")
        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0, "\(agent.stderr)")
    }

    @Test func aJournalThatStopsReadingHoldsNothing() throws {
        // Standard error a pipe nobody reads: once its 64 KiB are full, a log line written from
        // Swift's pool blocked that thread, and a few of them every report and SIGTERM.
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let count = 2_000
        let config = files.write("accounts.yaml", Self.config((0..<count).map { ("a\($0)", "T\($0)") }, base: server.baseURL))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ProcessRunner.pushreporter)
        // A debug line per report: far more than the pipe holds.
        process.arguments = ["run", "--config", config, "--state-dir", files.path + "/state", "--log-level", "debug"]
        let stderr = Pipe()
        process.standardError = stderr
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        #expect(server.waitForRequests(count, timeout: Polling.generous), "\(server.requests.count) of \(count) reports sent")
        kill(process.processIdentifier, SIGTERM)
        #expect(Polling.until { !process.isRunning }, "SIGTERM ended it although its log is not read")
        #expect(process.terminationStatus == 0)
        // The journal reads again: the lines kept in memory, then what was dropped, if anything.
        let text = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(text.contains("started: reporting \(count) accounts"))
    }

    @Test func sigtermGivesAHungRequestItsGracePeriodThenExitsZero() throws {
        let server = try LoopbackHTTPServer { _, _ in .hang }
        let files = TemporaryDirectory()
        // The grace period is agent.timeout (2s); the request's own timeout is far longer, so it
        // is still in flight when SIGTERM comes, however long that takes.
        let config = files.write("accounts.yaml", Self.config([("alice", "A1")], base: server.baseURL, agent: "  timeout: 2s")
                                 + "    pushTokenReporterTimeout: 10m\n")
        let listener = try NotifyListener()
        let agent = try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", files.path + "/state"],
                                       environment: ["NOTIFY_SOCKET": listener.path])
        #expect(server.waitForRequests(1, timeout: Polling.generous))
        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0, "\(agent.stderr)")
        #expect(agent.stderr.contains("stopping: no new requests; 1 in flight gets 2s to finish"), "\(agent.stderr)")
        #expect(listener.waitForMessage { $0 == "STOPPING=1" } != nil)
        let records = try SQLiteStateStore(directory: StateDirectory(path: files.path + "/state"), readOnly: true).records()
        #expect(records.map(\.key.account) == ["alice"])
        #expect(records.first?.cleanup?.contains("token=A1") == true)
    }

    @Test func systemdIsToldReadyStatusReloadingAndStopping() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", Self.config([("alice", "A1"), ("bob", "B1")], base: server.baseURL))
        let listener = try NotifyListener()
        let agent = try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", files.path + "/state"],
                                       environment: ["NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "400000"])
        let ready = try #require(listener.waitForMessage { $0.hasPrefix("READY=1") }, "\(listener.messages)")
        #expect(listener.messages[ready].contains("\nSTATUS=2 accounts: "))
        #expect(listener.waitForMessage(after: ready) { $0 == "STATUS=2 accounts: 2 reported, 0 retrying" } != nil,
                "\(listener.messages)")
        #expect(listener.waitForMessage { $0 == "WATCHDOG=1" } != nil, "\(listener.messages)")

        agent.signal(SIGHUP)
        let reloading = try #require(listener.waitForMessage { $0.hasPrefix("RELOADING=1") }, "\(listener.messages)")
        #expect(listener.messages[reloading].wholeMatch(of: /RELOADING=1\nMONOTONIC_USEC=[1-9][0-9]*/) != nil)
        let readyAgain = try #require(listener.waitForMessage(after: reloading + 1) { $0.hasPrefix("READY=1") },
                                      "\(listener.messages)")
        #expect(readyAgain > reloading)

        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0, "\(agent.stderr)")
        #expect(listener.waitForMessage(after: readyAgain) { $0 == "STOPPING=1" } != nil, "\(listener.messages)")
        let watchdogPings = listener.messages.count { $0 == "WATCHDOG=1" }
        #expect(watchdogPings >= 1)
    }

    @Test func runOnceKeepsStateAndSendsOwedRemovals() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(200) }
        let files = TemporaryDirectory()
        let state = files.path + "/state"
        let config = files.write("accounts.yaml", Self.config([("alice", "A1"), ("bob", "B1")], base: server.baseURL))
        let first = try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", state])
        #expect(first.status == 0, "\(first.stderr)")

        files.write("accounts.yaml", Self.config([("alice", "A1")], base: server.baseURL))
        let second = try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", state])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stdout.hasPrefix("Delivered 2 of 2 reports"))
        #expect(Self.seen(server, from: 2).sorted() == ["DELETE /remove/bob?token=B1", "GET /report/alice?token=A1"])

        let status = try ProcessRunner.pushreporter(["status", "--state-dir", state])
        #expect(status.status == 0)
        let lines = status.stdout.components(separatedBy: "\n")
        #expect(lines.first == "1 account: 1 reported, 0 retrying")
        #expect(lines.count == 5)
        #expect(lines[1] == "" && lines[4] == "")
        #expect(lines[2].hasPrefix("ACCOUNT  SERVICE   STATE      ATTEMPTS  LAST ATTEMPT"))
        #expect(lines[3].hasPrefix("alice    acrobits  delivered  -         "), "a delivered row has no attempt under way, not 0")

        // A misspelt service is not an empty system: with the configuration, an error.
        let misspelt = try ProcessRunner.pushreporter(["status", "--state-dir", state, "--config", config, "--service", "acrobit"])
        #expect(misspelt.status == 64)
        #expect(misspelt.stderr == "status: no service 'acrobit' in the state or the configuration; did you mean 'acrobits'?\n")
        #expect(misspelt.stdout.isEmpty)
        // Without it, a service may be configured with nothing reported yet: a note.
        let unread = try ProcessRunner.pushreporter(["status", "--state-dir", state, "--service", "acrobit"])
        #expect(unread.status == 0)
        #expect(unread.stderr == "status: the state has no subscription of a service 'acrobit'; did you mean 'acrobits'?\n")
        let other = try ProcessRunner.pushreporter(["status", "--state-dir", state, "--service", "journeys"])
        #expect(other.status == 0)
        #expect(other.stderr == "status: the state has no subscription of a service 'journeys'\n")
        #expect(other.stdout.hasPrefix("0 accounts"), "\(other.stdout)")
    }

    @Test func removeSendsTheStoredRemovalAndForgetsTheAccount() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(200) }
        let files = TemporaryDirectory()
        let state = files.path + "/state"
        let config = files.write("accounts.yaml", Self.config([("alice", "A1")], base: server.baseURL))
        #expect(try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", state]).status == 0)
        // The configuration changed since: the removal uses the values last delivered.
        files.write("accounts.yaml", Self.config([("alice", "A2")], base: server.baseURL))

        let removed = try ProcessRunner.pushreporter(["remove", "alice", "--config", config, "--state-dir", state])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout == "Removal of alice delivered to 127.0.0.1:\(server.port); the account is forgotten.\n")
        #expect(removed.stderr.contains("alice is still in the configuration (\(config):5); the agent reports it again"))
        #expect(Self.seen(server).last == "DELETE /remove/alice?token=A1")
        #expect(try SQLiteStateStore(directory: StateDirectory(path: state), readOnly: true).records().isEmpty)

        let unknown = try ProcessRunner.pushreporter(["remove", "zed", "--config", config, "--state-dir", state])
        #expect(unknown.status == 1)
        #expect(unknown.stderr == "remove: no account 'zed' in the state directory \(state) or in the configuration\n")
        // A near name is suggested, as preview --account and track --account do.
        let near = try ProcessRunner.pushreporter(["remove", "alic", "--config", config, "--state-dir", state])
        #expect(near.status == 1)
        #expect(near.stderr == "remove: no account 'alic' in the state directory \(state) or in the configuration; did you mean 'alice'?\n",
                "\(near.stderr)")

        // Configured, but with no removal URL and nothing stored: nothing to send, said once.
        let bare = files.write("bare.yaml", "accounts:\n  - id: carol\n    pushTokenReporterUrl: \(server.baseURL)/r\n")
        let nothing = try ProcessRunner.pushreporter(["remove", "carol", "--config", bare, "--state-dir", state])
        #expect(nothing.status == 1)
        #expect(nothing.stderr.contains("carol is still in the configuration (\(bare):2)"))
        #expect(nothing.stderr.hasSuffix("remove: carol has no accountRemovalReporterUrl and nothing in the state directory \(state), so there is nothing to send\n"))
        #expect(!nothing.stderr.contains("no account 'carol'"))
    }

    @Test func removeRecordsEachStoredRemovalDeliveredBeforeOneFails() throws {
        // DELETE of the second token fails until `accepting` is set.
        let accepting = Atomic<Bool>(false)
        let server = try LoopbackHTTPServer { request, _ in
            request.method == "DELETE" && request.target.contains("A2") && !accepting.load(ordering: .relaxed) ? .status(503) : .status(200)
        }
        let files = TemporaryDirectory()
        let state = files.path + "/state"
        let config = files.write("accounts.yaml", Self.config([("alice", "A1")], base: server.baseURL))
        #expect(try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", state]).status == 0)
        // Two removals owed: that of an earlier report (A1), then that of the last one (A2).
        let directory = try StateDirectory(path: state, create: false)
        var record = try #require(try SQLiteStateStore(directory: directory).records().first)
        let first = try #require(record.cleanup)
        let second = first.replacingOccurrences(of: "A1", with: "A2")
        record.pastCleanups = [first]
        record.cleanup = second
        try SQLiteStateStore(directory: directory).save([record], deleting: [])
        let gone = files.write("gone.yaml", "accounts: []\n")

        // The deadline covers the first removal, delivered, and the state written twice: ample
        // even on a slow machine; the second removal fails until it passes.
        let failed = try ProcessRunner.pushreporter(["remove", "alice", "--config", gone, "--state-dir", state, "--deadline", "3s"])
        #expect(failed.status == 1)
        #expect(failed.stdout.hasPrefix("Delivered 1 of 2 removals of alice (recorded: it is not sent again); "
                                        + "removal 2 was not delivered within the deadline (3s):\n"
                                        + "  alice: accountRemovalReporter to 127.0.0.1:\(server.port): HTTP 503"), "\(failed.stdout)")
        #expect(failed.stdout.hasSuffix("\nIt stays owed in the state: run remove again; the agent sends it when it next starts, unless the account is still in the configuration (then it is reported instead).\n"),
                "\(failed.stdout)")
        let left = try #require(try SQLiteStateStore(directory: directory, readOnly: true).records().first)
        #expect(left.pastCleanups == [])
        #expect(left.cleanup == second)

        accepting.store(true, ordering: .relaxed)
        let removed = try ProcessRunner.pushreporter(["remove", "alice", "--config", gone, "--state-dir", state])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout == "Removal of alice delivered to 127.0.0.1:\(server.port); the account is forgotten.\n")
        #expect(Self.seen(server).filter { $0.hasPrefix("DELETE") && $0.contains("A1") } == ["DELETE /remove/alice?token=A1"],
                "the delivered removal is not sent again")
        #expect(try SQLiteStateStore(directory: directory, readOnly: true).records().isEmpty)
    }

    @Test func statusOfADirectoryWithoutStateSaysSo() throws {
        let files = TemporaryDirectory()
        let result = try ProcessRunner.pushreporter(["status", "--state-dir", files.path])
        #expect(result.status == 0)
        #expect(result.stdout == "0 accounts: 0 reported, 0 retrying\n")
        #expect(result.stderr == "status: there is no state in \(files.path) yet: the agent has not run with this state directory\n")
        let missing = try ProcessRunner.pushreporter(["status", "--state-dir", files.path + "/absent"])
        #expect(missing.status == 1)
        #expect(missing.stderr.hasPrefix("status: there is no state directory \(files.path)/absent"))
        // It was given: no "give --state-dir DIR".
        #expect(!missing.stderr.contains("give --state-dir"), "\(missing.stderr)")
    }
}

/// `run --watch`: a changed file reloads as SIGHUP does.
@Suite(.blockingThreads) struct WatchTests {
    @Test func aChangedFileIsReloaded() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let directory = files.makeDirectory("config")
        files.write("config/a.yaml", AgentTests.config([("alice", "A1")], base: server.baseURL))
        // A new file in the watched directory, written the way editors do: a temporary file
        // renamed. The temporary file is there before the watch, so that the change is one
        // rename, and one burst however slowly this test runs.
        files.write("config/.b.tmp", "accounts:\n" + AgentTests.account("bob", token: "B1", base: server.baseURL) + "\n")
        let agent = try RunningProcess(pushreporter: ["run", "--watch", "--config", directory, "--state-dir", files.path + "/state"])
        #expect(agent.waitForStderr("the 1 account is reported"), "\(agent.stderr)")
        #expect(agent.waitUntilWatchingFiles())
        rename(directory + "/.b.tmp", directory + "/b.yaml")
        #expect(agent.waitForStderr("reloading the configuration (changed files)"), "\(agent.stderr)")
        #expect(agent.waitForStderr("reloaded: 1 new, 0 changed, 1 unchanged, 0 removed"), "\(agent.stderr)")
        #expect(server.waitForRequests(2, timeout: Polling.generous))
        #expect(server.requests.last.map { "\($0.method) \($0.target)" } == "GET /report/bob?token=B1")
        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0)
        #expect(agent.stderr.components(separatedBy: "reloading the configuration").count == 2, "one burst, one reload")
    }

    @Test func aConfigurationFileBehindASwappedLinkIsReloaded() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        // Laid out as Kubernetes mounts a ConfigMap: config.yaml -> current/config.yaml, and
        // current -> the directory of a version.
        _ = files.makeDirectory("v1")
        _ = files.makeDirectory("v2")
        files.write("v1/config.yaml", AgentTests.config([("alice", "A1")], base: server.baseURL))
        files.write("v2/config.yaml", AgentTests.config([("alice", "A2")], base: server.baseURL))
        symlink("v1", files.path + "/current")
        symlink("current/config.yaml", files.path + "/config.yaml")
        let agent = try RunningProcess(pushreporter: ["run", "--watch", "--config", files.path + "/config.yaml",
                                                      "--state-dir", files.path + "/state"])
        #expect(agent.waitForStderr("the 1 account is reported"), "\(agent.stderr)")
        #expect(agent.waitUntilWatchingFiles())
        // The new version goes live by renaming a new `current` over the old one: no event
        // names config.yaml.
        symlink("v2", files.path + "/current.new")
        rename(files.path + "/current.new", files.path + "/current")
        #expect(agent.waitForStderr("reloaded: 0 new, 1 changed, 0 unchanged, 0 removed"), "\(agent.stderr)")
        #expect(server.waitForRequests(2, timeout: Polling.generous))
        let last: String? = server.requests.last.map { "\($0.method) \($0.target)" }
        #expect(last == "GET /report/alice?token=A2")
        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0)
    }
}

