import Foundation
import PushTestSupport
import Testing

/// The state directory as the real binary uses it (SPEC §12): a directory that cannot be read.
@Suite struct StateDirectoryTests {
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
}
