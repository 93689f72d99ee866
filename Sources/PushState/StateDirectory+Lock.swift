#if canImport(Glibc)
import Glibc
#endif

extension StateDirectory {
    /// The lock file in the state directory: it holds the id of the process that writes the state.
    public static let lockFileName = "state.lock"

    /// Takes the state directory for this process alone, until the process ends (SPEC §11): two
    /// agents on one directory would deliver every report twice. The lock is an exclusive `fcntl`
    /// record lock on `state.lock` (0600), which then holds this process's id. The kernel
    /// releases it when the process ends, however it ends, so a `kill -9` never leaves it
    /// stale; nothing ever unlocks it otherwise.
    ///
    /// Throws a sentence naming the directory and the holder's process id when another process
    /// holds it. Called again in the same process, it succeeds (the lock is already this one's).
    /// `advice`: what to do when another process holds it (by default, as for a second agent).
    public func lockForThisProcess(advice: String = "two agents on one state directory would deliver every report twice; "
                                       + "stop that one first, or give this one another --state-dir") throws(Problem) {
        let file = path + "/" + Self.lockFileName
        let fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Problem(description: "cannot open \(file) (\(String(cString: strerror(errno))))") }
        var lock = Self.wholeFile(F_WRLCK)
        guard fcntl(fd, F_SETLK, &lock) == 0 else {
            let code = errno
            defer { close(fd) }
            guard code == EACCES || code == EAGAIN else {
                throw Problem(description: "cannot lock \(file) (\(String(cString: strerror(code))))")
            }
            var holder = Self.wholeFile(F_WRLCK)
            let pid = fcntl(fd, F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK && holder.l_pid > 0
                ? "\(holder.l_pid)" : Self.recordedPID(fd) ?? "unknown"
            throw Problem(description: "the state directory \(path) is in use by process \(pid) (see \(file)): " + advice)
        }
        // Left open on purpose: closing any descriptor of the file would release the lock.
        let text = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }

    /// The process that holds the directory's lock (a running agent), if one does.
    public func lockHolder() -> pid_t? {
        let file = path + "/" + Self.lockFileName
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var holder = Self.wholeFile(F_WRLCK)
        guard fcntl(fd, F_GETLK, &holder) == 0, holder.l_type != F_UNLCK else { return nil }
        if holder.l_pid > 0 { return holder.l_pid }
        return Self.recordedPID(fd).flatMap { pid_t($0) }
    }

    /// The file `remove --held` leaves for a running agent: its next reload sends the held
    /// removals (``takeReleaseRequest()``).
    public static let releaseRequestFileName = "release-held"

    /// Whether `remove --held` asked for the held removals to be sent; the request is taken.
    public func takeReleaseRequest() -> Bool {
        unlink(path + "/" + Self.releaseRequestFileName) == 0
    }

    private static func wholeFile(_ type: Int32) -> flock {
        var lock = flock()
        lock.l_type = Int16(type)
        lock.l_whence = Int16(SEEK_SET)
        return lock
    }

    /// The process id the holder wrote, for when the kernel cannot name it (another PID namespace).
    private static func recordedPID(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[..<count], as: UTF8.self).filter(\.isNumber)
        return text.isEmpty ? nil : text
    }
}
