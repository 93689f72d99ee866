import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The state directory (SPEC §6): created mode 0700, its files 0600. It holds the generated
/// `installid` and the state database (``StateStore``).
public struct StateDirectory: Sendable {
    /// Why the state directory cannot be used, as a sentence.
    public struct Problem: Error, CustomStringConvertible {
        public var description: String
    }

    public let path: String

    /// Creates the directory (and its parents) when missing, mode 0700; with `create: false` a
    /// missing directory, or one this process cannot read, is an error instead (for readers such
    /// as `status`, which must not take an unreadable directory for an empty one).
    public init(path: String, create: Bool = true) throws(Problem) {
        self.path = path
        var status = stat()
        if stat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFDIR else { throw Problem(description: "the state directory \(path) is not a directory") }
            if !create {
                guard access(path, R_OK | X_OK) == 0 else { throw Self.unreadable(path, errno) }
                return
            }
        } else if !create {
            guard errno == ENOENT else { throw Self.unreadable(path, errno) }
            throw Problem(description: "there is no state directory \(path) (no agent has run with it yet)")
        } else {
            if let failure = Self.makeDirectories(path) {
                throw Problem(description: "cannot create the state directory \(path) (\(failure)); "
                              + "give --state-dir DIR or agent.stateDirectory")
            }
        }
        guard access(path, W_OK | X_OK) == 0 else {
            throw Problem(description: "cannot write to the state directory \(path) (\(String(cString: strerror(errno)))); "
                          + "give --state-dir DIR or agent.stateDirectory")
        }
    }

    /// The `%installid%` of this installation: read from `installid`, or generated and written
    /// there (0600) on first use.
    public func installID() throws(Problem) -> String {
        if let id = Self.storedInstallID(in: path) { return id }
        let id = UUID().uuidString.lowercased()
        try writeFile("installid", id + "\n")
        return id
    }

    /// The `installid` that `directory` holds, if the agent has made one (read without
    /// creating anything, for `preview`).
    public static func storedInstallID(in directory: String) -> String? {
        guard let text = try? String(contentsOfFile: directory + "/installid", encoding: .utf8),
              let first = text.firstIndex(where: { !$0.isWhitespace }),
              let last = text.lastIndex(where: { !$0.isWhitespace }) else { return nil }
        return String(text[first...last])
    }

    /// Writes `name` atomically (a temporary file renamed over it), mode 0600.
    public func writeFile(_ name: String, _ text: String) throws(Problem) {
        let target = path + "/" + name
        let temporary = target + ".tmp.\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Problem(description: "cannot write \(target) (\(String(cString: strerror(errno))))") }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced, rename(temporary, target) == 0 else {
            unlink(temporary)
            throw Problem(description: "cannot write \(target) (\(String(cString: strerror(errno))))")
        }
    }

    private static func unreadable(_ path: String, _ code: Int32) -> Problem {
        Problem(description: "cannot read the state directory \(path) (\(String(cString: strerror(code)))); "
                + "run this as the agent's user or as root, or give --state-dir DIR")
    }

    /// `mkdir -p` with mode 0700; nil on success, else the system's reason (`strerror`).
    private static func makeDirectories(_ path: String) -> String? {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST { return String(cString: strerror(errno)) }
        }
        return nil
    }
}
