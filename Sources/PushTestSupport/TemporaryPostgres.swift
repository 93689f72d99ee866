import Foundation
import Synchronization

/// A PostgreSQL server of its own for tests (SPEC §11): Debian's `postgresql` binaries run by
/// an unprivileged user (`initdb` refuses root) in a temporary directory, on a loopback port,
/// trusting local connections. It is stopped, and its files removed, when released.
///
/// ```swift
/// let server = try TemporaryPostgres.shared()
/// let uri = try server.makeDatabase()      // a fresh database for one test
/// ```
public final class TemporaryPostgres: Sendable {
    /// Why the server cannot start, as a sentence that says what to install or do.
    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
    }

    public let port: Int
    private let directory: String
    private let binaries: String
    private let runAs: [String]
    private let databases = Mutex(0)

    /// The server the whole test run shares (started on first use).
    public static func shared() throws -> TemporaryPostgres {
        try sharedServer.withLock { shared in
            if let server = shared { return server }
            let server = try TemporaryPostgres()
            shared = server
            // A static is never released: the server is stopped when the test process exits.
            atexit {
                TemporaryPostgres.sharedServer.withLock { $0?.stopNow() }
            }
            return server
        }
    }

    private static let sharedServer = Mutex<TemporaryPostgres?>(nil)

    /// The directory of Debian's PostgreSQL binaries (the newest version installed), or nil.
    public static var binaryDirectory: String? {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return versions.compactMap(Int.init).sorted().last.map { "\(root)/\($0)/bin" }
            .flatMap { FileManager.default.isExecutableFile(atPath: $0 + "/initdb") ? $0 : nil }
    }

    /// Starts a server; throws ``Unavailable`` when PostgreSQL is not installed.
    public init() throws {
        guard let binaries = Self.binaryDirectory else {
            throw Unavailable(description: "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): "
                              + "`make deps` installs Debian's postgresql package")
        }
        self.binaries = binaries
        directory = NSTemporaryDirectory() + "pushreporter-pg-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // initdb and postgres refuse to run as root: as root, they run as nobody.
        if getuid() == 0 {
            runAs = ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
            _ = try ProcessRunner.run("/bin/chown", ["-R", "nobody:nogroup", directory])
        } else {
            runAs = []
        }
        port = try Self.freePort()
        let data = directory + "/data"
        let initdb = try run(binaries + "/initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
        guard initdb.status == 0 else { throw Unavailable(description: "initdb failed: \(initdb.stderr)") }
        try startServer()
    }

    /// `pg_ctl start`, with the server's output in `server.log`. The server it leaves running
    /// must hold none of this process's descriptors: Foundation's `Process` learns that a child
    /// ended when a socket the child inherited closes, and a server holding it would make
    /// `pg_ctl` look alive for ever. So every descriptor above 2 is closed first.
    private func startServer() throws {
        let options = "-c listen_addresses=127.0.0.1 -c port=\(port) -c unix_socket_directories=\(directory) -c fsync=off "
            + "-c max_connections=200 -c shared_buffers=32MB"
        let command = "for fd in $(ls /proc/$$/fd); do [ \"$fd\" -gt 2 ] && eval \"exec $fd>&-\"; done; "
            + "exec '\(binaries)/pg_ctl' -D '\(directory)/data' -l '\(directory)/server.log' -o '\(options)' -w -t 60 start "
            + "< /dev/null > '\(directory)/pg_ctl.out' 2>&1"
        let start = try run("/bin/bash", ["-c", command])
        guard start.status == 0 else {
            let output = (try? String(contentsOfFile: directory + "/pg_ctl.out", encoding: .utf8)) ?? ""
            let log = (try? String(contentsOfFile: directory + "/server.log", encoding: .utf8)) ?? ""
            throw Unavailable(description: "pg_ctl start failed: \(output)\(log)")
        }
    }

    deinit {
        stopNow()
    }

    /// Stops the server at once and removes its files.
    private func stopNow() {
        _ = try? run(binaries + "/pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The URI of the server's `postgres` database, as the superuser.
    public var baseURI: String { "postgres://postgres@127.0.0.1:\(port)/postgres" }

    /// A fresh, empty database, and its URI.
    public func makeDatabase() throws -> String {
        let name = databases.withLock { count in
            count += 1
            return "test_\(count)_\(UUID().uuidString.prefix(8).lowercased())"
        }
        let created = try run(binaries + "/psql", ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-d", "postgres",
                                                   "-v", "ON_ERROR_STOP=1", "-c", "CREATE DATABASE \(name)"])
        guard created.status == 0 else { throw Unavailable(description: "CREATE DATABASE failed: \(created.stderr)") }
        return "postgres://postgres@127.0.0.1:\(port)/\(name)"
    }

    /// Runs `sql` on the database of `uri` with psql; its output.
    @discardableResult
    public func psql(_ uri: String, _ sql: String) throws -> String {
        let result = try run(binaries + "/psql", [uri, "-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
        guard result.status == 0 else { throw Unavailable(description: "psql failed: \(result.stderr)") }
        return result.stdout
    }

    /// Stops the server at once (as a crash would) and starts it again on the same port. On a
    /// server of the test's own (`TemporaryPostgres()`), never on ``shared()``: the other suites'
    /// statements would fail meanwhile.
    public func restart() throws {
        _ = try run(binaries + "/pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"])
        try startServer()
    }

    /// Freezes the server (SIGSTOP to the postmaster and every backend), as a database that
    /// stops answering without closing its connections; ``thaw()`` lets it go on.
    public func freeze() throws {
        for pid in try serverProcesses() { kill(pid, SIGSTOP) }
    }

    /// Lets a frozen server go on.
    public func thaw() throws {
        for pid in try serverProcesses() { kill(pid, SIGCONT) }
    }

    /// The postmaster and its children.
    private func serverProcesses() throws -> [Int32] {
        let pidFile = try String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8)
        guard let postmaster = pidFile.split(separator: "\n").first.flatMap({ Int32($0) }) else {
            throw Unavailable(description: "postmaster.pid names no process")
        }
        var found = [postmaster]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // After "pid (name) ": the state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, Int32(fields[1]) == postmaster { found.append(pid) }
        }
        return found
    }

    private func run(_ executable: String, _ arguments: [String]) throws -> ProcessOutput {
        if runAs.isEmpty { return try ProcessRunner.run(executable, arguments, directory: directory) }
        return try ProcessRunner.run(runAs[0], Array(runAs.dropFirst()) + [executable] + arguments, directory: directory)
    }

    /// A loopback port nothing listens on now.
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw Unavailable(description: "no free port for PostgreSQL") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
