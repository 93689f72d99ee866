import Foundation
import PushState
import PushTestSupport
import Testing
import PushTestThreads

/// The state directory as the real binary uses it (SPEC §11, §12): one writer at a time, a
/// directory that cannot be read, a database that is damaged.
@Suite(.blockingThreads) struct StateDirectoryTests {
    @Test func aSecondProcessOnTheStateDirectoryExitsNamingTheFirstUntilItDies() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let state = files.path + "/state"
        let config = files.write("accounts.yaml", AgentTests.config([("alice", "A1")], base: server.baseURL))
        let first = try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", state])
        #expect(first.waitForStderr("the 1 account is reported"), "\(first.stderr)")
        let lock = state + "/state.lock"
        #expect(try String(contentsOfFile: lock, encoding: .utf8) == "\(first.pid)\n")
        #expect(try FileManager.default.attributesOfItem(atPath: lock)[.posixPermissions] as? Int == 0o600)
        let installID = try String(contentsOfFile: state + "/installid", encoding: .utf8)

        let refusal = "error: the state directory \(state) is in use by process \(first.pid) (see \(lock)): two agents on one "
            + "state directory would deliver every report twice; stop that one first, or give this one another --state-dir"
        let second = try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", state])
        #expect(second.waitForExit() == 1)
        #expect(second.stderr.split(separator: "\n").map { $0.drop { $0 != " " }.dropFirst() } == [refusal[...]], "\(second.stderr)")
        let once = try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", state])
        #expect(once.status == 1)
        #expect(once.stderr.hasSuffix(refusal + "\n"), "\(once.stderr)")
        // remove is told what fits it: another --state-dir would not remove anything.
        let remove = try ProcessRunner.pushreporter(["remove", "alice", "--config", config, "--state-dir", state])
        #expect(remove.status == 1)
        #expect(remove.stderr.hasSuffix("error: the state directory \(state) is in use by process \(first.pid) (see \(lock)): "
                                        + "remove works while the agent is stopped (systemctl stop pushreporter); or delete the account "
                                        + "from the files and reload the agent, which then sends its removal\n"), "\(remove.stderr)")
        #expect(server.requests.count == 1, "only the first agent delivered")

        // Killed, it leaves no lock behind.
        first.signal(SIGKILL)
        #expect(first.waitForExit() == 128 + SIGKILL)
        let third = try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", state])
        #expect(third.waitForStderr("the 1 account is reported"), "\(third.stderr)")
        #expect(try String(contentsOfFile: lock, encoding: .utf8) == "\(third.pid)\n")
        third.signal(SIGTERM)
        #expect(third.waitForExit() == 0)
        #expect(try String(contentsOfFile: state + "/installid", encoding: .utf8) == installID)
    }

    @Test func statusOfAStateDirectoryItCannotReadFails() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let state = files.path + "/state"
        let config = files.write("accounts.yaml", AgentTests.config([("alice", "A1")], base: server.baseURL))
        #expect(try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", state]).status == 0)

        let result = try Self.withoutAccess(to: state, in: files, ["status", "--state-dir", state])
        #expect(result.status == 1)
        #expect(result.stdout == "")
        #expect(result.stderr == "status: cannot read the state directory \(state) (Permission denied); "
                + "run this as the agent's user or as root, or give --state-dir DIR\n")
    }

    @Test func aFileThatIsNotADatabaseStopsWithItsPathAndWhatToDo() throws {
        let files = TemporaryDirectory()
        let state = files.makeDirectory("state")
        let database = files.write("state/state.sqlite", String(repeating: "not a database\n", count: 400))
        try Self.expectStopsOnDamage(state: state, files: files, message: "the state database \(database) is damaged "
            + "(file is not a database); move it aside, with its -wal and -shm files, and start again: every account is then reported again")
    }

    @Test func aDamagedDatabaseStopsWithItsPathAndWhatToDo() throws {
        let files = TemporaryDirectory()
        let state = files.makeDirectory("state")
        do {
            let store = try SQLiteStateStore(directory: StateDirectory(path: state))
            try store.save([SubscriptionRecord(key: SubscriptionKey(account: "alice", service: "acrobits"), fingerprint: "f")])
        }
        // Every page but the first (the header and the schema) overwritten: SQLite reads the
        // tables as malformed.
        let database = state + "/" + SQLiteStateStore.fileName
        let size = try #require(try FileManager.default.attributesOfItem(atPath: database)[.size] as? Int)
        try #require(size > 4096)
        let handle = try #require(FileHandle(forUpdatingAtPath: database))
        try handle.seek(toOffset: 4096)
        try handle.write(contentsOf: Data(repeating: 0xFF, count: size - 4096))
        try handle.close()
        try Self.expectStopsOnDamage(state: state, files: files, message: "the state database \(database) is damaged "
            + "(database disk image is malformed); move it aside, with its -wal and -shm files, and start again: every account is then reported again")
    }

    /// `run --once` and `status` both stop with exit 1 and `message`, as one line, and send nothing.
    static func expectStopsOnDamage(state: String, files: TemporaryDirectory, message: String,
                                    sourceLocation: SourceLocation = #_sourceLocation) throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let config = files.write("accounts.yaml", AgentTests.config([("alice", "A1")], base: server.baseURL))
        let run = try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", state])
        #expect(run.status == 1, sourceLocation: sourceLocation)
        #expect(run.stderrLines.count == 1 && run.stderr.hasSuffix(" error: " + message + "\n"), "\(run.stderr)",
                sourceLocation: sourceLocation)
        #expect(server.requests.isEmpty, sourceLocation: sourceLocation)
        let status = try ProcessRunner.pushreporter(["status", "--state-dir", state])
        #expect(status.status == 1, sourceLocation: sourceLocation)
        #expect(status.stderr == "status: " + message + "\n", sourceLocation: sourceLocation)
    }

    /// Runs `pushreporter` with `arguments`, unable to read `directory` (a folder of `files`): as
    /// root, which reads everything, as the user nobody; otherwise with the directory's
    /// permissions taken away for the run.
    static func withoutAccess(to directory: String, in files: TemporaryDirectory,
                              _ arguments: [String]) throws -> ProcessOutput {
        guard getuid() == 0 else {
            chmod(directory, 0)
            defer { chmod(directory, 0o700) }
            return try ProcessRunner.pushreporter(arguments)
        }
        // nobody may reach the folder, but not into the directory (0700, root's).
        chmod(files.path, 0o755)
        return try ProcessRunner.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups",
                                                          ProcessRunner.pushreporter] + arguments)
    }

    @Test func aRoundLeavesNoWriteAheadLogBehind() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(204) }
        let files = TemporaryDirectory()
        let accounts = (0..<300).map { ("a\($0)", "T\($0)") }
        let config = files.write("c.yaml", SampleConfiguration.config(accounts, base: server.baseURL))
        let result = try ProcessRunner.pushreporter(["run", "--once", "--config", config, "--state-dir", files.path + "/state"])
        #expect(result.status == 0, "\(result.stderr)")
        // The log is folded into the database when the round ends: no megabytes left beside it.
        var info = stat()
        let wal = files.path + "/state/state.sqlite-wal"
        #expect(stat(wal, &info) != 0 || info.st_size == 0, "\(wal) is \(info.st_size) bytes")
        let status = try ProcessRunner.pushreporter(["status", "--state-dir", files.path + "/state"])
        #expect(status.stdout.hasPrefix("300 accounts: 300 reported, 0 retrying"), "\(status.stdout.prefix(200))")
    }
}
