import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// What the tracking spool finds at a name of its directory, read without ever waiting on it:
/// only a regular file inside the directory is read, opened without following a symbolic link
/// and without blocking (a FIFO held open by its writer would have held the reading thread for
/// as long as that writer lives), and no larger than a payload may be.
enum SpoolEntry: Equatable {
    /// The file's bytes.
    case file([UInt8])
    /// Gone meanwhile (taken away, or moved aside by a second look).
    case gone
    /// Never a payload: a symbolic link, a FIFO, a directory, a device, a file too large or
    /// that may not be read. Moved aside, with this reason.
    case refused(String)
    /// Could not be read now (out of file descriptors, an I/O error): tried again later.
    case unreadable(String)

    /// Reads `name` in `directory`, refusing more than `limit` bytes.
    static func read(_ name: String, in directory: String, limit: Int) -> SpoolEntry {
        let path = FileSystem.join(directory, name)
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY)
        guard fd >= 0 else {
            let code = errno
            switch code {
            case ENOENT: return .gone
            case ELOOP: return .refused("it is a symbolic link; the spool takes only regular files in its own directory")
            case EACCES, EPERM: return .refused("it may not be read (\(FileError(errno: code).message))")
            case ENXIO, EISDIR, ENODEV, EOPNOTSUPP: return .refused("it is not a regular file")
            default: return .unreadable("cannot open it (\(FileError(errno: code).message))")
            }
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return .unreadable("cannot look at it (\(FileError(errno: errno).message))") }
        switch info.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: return .refused("it is a directory, not a file")
        case S_IFIFO: return .refused("it is a FIFO, not a file")
        case S_IFSOCK: return .refused("it is a socket, not a file")
        case S_IFCHR, S_IFBLK: return .refused("it is a device, not a file")
        default: return .refused("it is not a regular file")
        }
        let tooLarge = SpoolEntry.refused("it is larger than \(limit >> 20) MiB, the most a payload may be")
        guard Int(info.st_size) <= limit else { return tooLarge }
        // A regular file: reads may block (a hung disk), which is why this runs off the pool.
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var count = 0
        while true {
            if count == bytes.count {
                guard bytes.count <= limit else { return tooLarge }
                bytes += [UInt8](repeating: 0, count: min(bytes.count, limit + 1 - bytes.count) + 1)
            }
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 {
                if errno == EINTR { continue }
                return .unreadable("cannot read it (\(FileError(errno: errno).message))")
            }
            if n == 0 { break }
            count += n
        }
        guard count <= limit else { return tooLarge }
        bytes.removeLast(bytes.count - count)
        return .file(bytes)
    }
}
