#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What tells a regular file read again from the one read before: its device and inode, size
/// and modification time.
package struct FileIdentity: Sendable, Equatable {
    package let device: UInt64
    package let inode: UInt64
    package let size: Int64
    package let modifiedSeconds: Int
    package let modifiedNanoseconds: Int

    package init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modifiedSeconds = info.st_mtim.tv_sec
        modifiedNanoseconds = info.st_mtim.tv_nsec
    }
}

/// Small POSIX file helpers with messages people can read.
package enum FileSystem {
    package enum Kind { case file, directory, other }

    /// What is at `path`, or the reason it cannot be looked at.
    package static func kind(of path: String) -> Result<Kind, FileError> {
        var info = stat()
        guard stat(path, &info) == 0 else { return .failure(FileError(errno: errno)) }
        switch info.st_mode & S_IFMT {
        case S_IFDIR: return .success(.directory)
        case S_IFREG: return .success(.file)
        default: return .success(.other)
        }
    }

    /// The largest configuration file read (a FIFO such as `--config <(…)` is read up to it too).
    package static let maximumConfigurationSize = 512 << 20
    /// The largest secret read by `!file` or `!credential`.
    package static let maximumSecretSize = 1 << 20

    /// The whole file as bytes, refusing more than `limit` bytes (so `/dev/zero` cannot exhaust memory).
    package static func read(_ path: String, limit: Int = maximumConfigurationSize) -> Result<[UInt8], FileError> {
        readIdentified(path, limit: limit).map(\.bytes)
    }

    /// The whole file as bytes, as ``read(_:limit:)``, with the file's identity when it is a
    /// regular file read whole at the size it had when opened (nil otherwise: it cannot be told
    /// from another when read again).
    package static func readIdentified(_ path: String, limit: Int = maximumConfigurationSize)
        -> Result<(bytes: [UInt8], identity: FileIdentity?), FileError> {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return .failure(FileError(errno: errno)) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return .failure(FileError(errno: errno)) }
        return read(fd, info, limit: limit).map { bytes in
            let whole = info.st_mode & S_IFMT == S_IFREG && bytes.count == Int(info.st_size)
            return (bytes, whole ? FileIdentity(info) : nil)
        }
    }

    private static func read(_ fd: Int32, _ info: stat, limit: Int) -> Result<[UInt8], FileError> {
        if info.st_mode & S_IFMT == S_IFDIR { return .failure(FileError(message: "it is a directory")) }
        if info.st_mode & S_IFMT == S_IFCHR || info.st_mode & S_IFMT == S_IFBLK {
            return .failure(FileError(message: "it is a device, not a file"))
        }
        // Opened non-blocking so a FIFO without a writer cannot hang the open; reads block again.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        let tooLarge = FileError(message: "it is larger than \(limit >> 20) MiB")
        if Int(info.st_size) > limit { return .failure(tooLarge) }
        // Straight into an array of the file's size (through a chunk, a 38 MB configuration
        // was copied twice before its parse could start). One byte more tells a file that grew
        // since `fstat`, or whose size says nothing (a /proc file, a FIFO): the room then
        // doubles, up to one byte past the limit.
        var capacity = info.st_size > 0 ? Int(info.st_size) + 1 : 1 << 16
        var bytes: [UInt8] = []
        while true {
            var failure: FileError?
            bytes = [UInt8](unsafeUninitializedCapacity: capacity) { [bytes] buffer, count in
                count = buffer.initialize(fromContentsOf: bytes)
                while count < buffer.count {
                    let n = Glibc.read(fd, buffer.baseAddress! + count, buffer.count - count)
                    if n < 0 {
                        if errno == EINTR { continue }
                        failure = FileError(errno: errno)
                        return
                    }
                    if n == 0 { return }
                    count += n
                }
            }
            if let failure { return .failure(failure) }
            if bytes.count > limit { return .failure(tooLarge) }
            if bytes.count < capacity { return .success(bytes) }
            capacity = min(capacity * 2, limit + 1)
        }
    }

    /// The names in a directory, sorted.
    package static func list(_ path: String) -> Result<[String], FileError> {
        guard let dir = opendir(path) else { return .failure(FileError(errno: errno)) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return .success(names.sorted())
    }

    package static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The last component of `path` (all of it without a `/`).
    package static func baseName(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    package static func join(_ directory: String, _ name: String) -> String {
        if name.hasPrefix("/") { return name }
        return directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}

package struct FileError: Error {
    package var message: String

    package init(message: String) {
        self.message = message
    }

    package init(errno code: Int32) {
        switch code {
        case ENOENT: message = "no such file or directory"
        case EACCES: message = "permission denied"
        default: message = String(cString: strerror(code)).lowercased()
        }
    }
}
