#if canImport(Glibc)
import Glibc
#endif
import PushConfig
import PushSystem

/// Watches configuration files and directories with inotify, for `run --watch`.
///
/// A named file is watched through its directory (only events about that name count), so that
/// editors that save by renaming a new file over the old one are seen too; in a named directory,
/// any file counts but editors' swap and backup files. Changes are debounced: a burst of events (an editor's
/// save, a `git checkout`) reports once, `quietPeriod` after the last of them.
public struct ConfigWatcher: Sendable {
    public var paths: [String]
    public var quietPeriod: Duration

    public init(paths: [String], quietPeriod: Duration = .milliseconds(300)) {
        self.paths = paths
        self.quietPeriod = quietPeriod
    }

    /// Why the files cannot be watched: one sentence, starting lower-case.
    public struct Failure: Error, Sendable {
        public var message: String
    }

    /// Calls `onChange` after each burst of changes, until the calling task is cancelled.
    /// Throws at once when the files cannot be watched (no inotify instance or watch left for
    /// this user, no thread), so that the operator hears of it.
    public func changes(_ onChange: @escaping @Sendable () -> Void) async throws(Failure) {
        let inotify = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard inotify >= 0 else {
            let code = errno
            let limit = code == EMFILE ? " (the limit is fs.inotify.max_user_instances, or the process's open files)" : ""
            throw Failure(message: "inotify cannot start: \(Self.reason(code))\(limit)")
        }
        defer { close(inotify) }
        var watches: [Watch] = []
        for path in paths {
            var status = stat()
            if stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR {
                watches.append(Watch(directory: path, name: nil))
                continue
            }
            // A file that is a symbolic link changes when a link beside it is swapped (Kubernetes'
            // `..data`), in events that do not name the file: then any change in its directory
            // counts. A link higher up the path was resolved once, here (docs/deploying.md).
            let isLink = lstat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFLNK
            watches.append(Watch(directory: FileSystem.directory(of: path), name: isLink ? nil : FileSystem.baseName(of: path)))
        }
        let quietMilliseconds = Int32(clamping: quietPeriod.milliseconds)
        // A blocking poll on a thread of its own: the cooperative pool is never held, and an idle
        // agent does not wake up at all. A pipe tells the thread to stop.
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw Failure(message: "a pipe cannot be made: \(Self.reason(errno))") }
        let (stopRead, stopWrite) = (pipeEnds[0], pipeEnds[1])
        _ = fcntl(stopRead, F_SETFD, FD_CLOEXEC)
        _ = fcntl(stopWrite, F_SETFD, FD_CLOEXEC)
        defer { close(stopRead) }
        let (events, continuation) = AsyncStream<Void>.makeStream()
        let thread = WatchThread(inotify: inotify, watches: watches, stop: stopRead, quietMilliseconds: quietMilliseconds) {
            continuation.yield()
        } finished: {
            continuation.finish()
        }
        if let (directory, code) = thread.watchAll() {
            close(stopWrite)
            let limit = code == ENOSPC ? " (the limit is fs.inotify.max_user_watches)" : ""
            throw Failure(message: "\(directory) cannot be watched: \(Self.reason(code))\(limit)")
        }
        guard thread.start() else {
            close(stopWrite)
            throw Failure(message: "its thread cannot start")
        }
        await withTaskCancellationHandler {
            for await _ in events { onChange() }
        } onCancel: {
            var byte: UInt8 = 1
            _ = write(stopWrite, &byte, 1)
        }
        close(stopWrite)
        thread.join()
    }

    private static func reason(_ code: Int32) -> String {
        String(cString: strerror(code)).lowercased()
    }
}

/// A watched directory, and the one file in it that matters (nil: any file but editors' own).
private struct Watch {
    var directory: String
    var name: String?

    func matches(_ file: String) -> Bool {
        if let name { return file == name }
        // Anything in a configuration directory (a `!file` secret, Kubernetes' `..data` swap)
        // but editors' swap and backup files.
        return !(file.hasSuffix("~") || file.hasSuffix(".swp") || file.hasSuffix(".swx") || file == "4913")
    }
}

/// The thread that waits for inotify events.
private final class WatchThread: @unchecked Sendable {
    private static let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB)
    private let inotify: Int32
    private let watches: [Watch]
    /// Watch descriptor → indexes in `watches` (two named files in one directory share one).
    private var descriptors: [Int32: [Int]] = [:]
    private let stop: Int32
    private let quietMilliseconds: Int32
    private let onBurst: @Sendable () -> Void
    private let finished: @Sendable () -> Void
    private var thread: OwnThread?

    init(inotify: Int32, watches: [Watch], stop: Int32, quietMilliseconds: Int32, onBurst: @escaping @Sendable () -> Void,
         finished: @escaping @Sendable () -> Void) {
        self.inotify = inotify
        self.watches = watches
        self.stop = stop
        self.quietMilliseconds = quietMilliseconds
        self.onBurst = onBurst
        self.finished = finished
    }

    /// Starts watching on a thread of its own; false when the thread cannot start.
    func start() -> Bool {
        thread = OwnThread(named: "pushrep-watch", detached: false) { [self] in loop() }
        return thread != nil
    }

    func join() {
        thread?.join()
    }

    /// Watches every directory, before the thread starts; the first that cannot be, with the
    /// error, if any.
    func watchAll() -> (directory: String, errno: Int32)? {
        for index in watches.indices {
            guard add(index) else { return (watches[index].directory, errno) }
        }
        return nil
    }

    /// Watches the directory of `watches[index]` (again, after it was replaced or removed);
    /// false (with `errno`) when it cannot be.
    @discardableResult
    private func add(_ index: Int) -> Bool {
        let descriptor = inotify_add_watch(inotify, watches[index].directory, Self.mask)
        guard descriptor >= 0 else { return false }
        if !descriptors[descriptor, default: []].contains(index) { descriptors[descriptor, default: []].append(index) }
        return true
    }

    /// Reads the pending events; true when one concerns a configuration file.
    private func readEvents(into buffer: inout [UInt8]) -> Bool {
        var relevant = false
        while true {
            let count = read(inotify, &buffer, buffer.count)
            guard count > 0 else { return relevant }
            var offset = 0
            let header = MemoryLayout<inotify_event>.size
            while offset + header <= count {
                let (descriptor, mask, length) = buffer.withUnsafeBytes { raw in
                    let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    return (event.wd, event.mask, Int(event.len))
                }
                let nameBytes = buffer[(offset + header)..<min(count, offset + header + length)].prefix { $0 != 0 }
                let name = String(decoding: nameBytes, as: UTF8.self)
                offset += header + length
                if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    // Events were dropped (wd is -1): one of them may have been ours.
                    relevant = true
                    continue
                }
                guard let indexes = descriptors[descriptor] else { continue }
                if mask & UInt32(IN_IGNORED) != 0 {
                    // The directory itself went away or was replaced: watch it again if it is
                    // already back (if it comes back later, only SIGHUP reloads).
                    descriptors[descriptor] = nil
                    for index in indexes { add(index) }
                    relevant = true
                } else if indexes.contains(where: { watches[$0].matches(name) }) {
                    relevant = true
                }
            }
        }
    }

    private func loop() {
        defer { finished() }
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var pendingBurst = false
        while true {
            var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: stop, events: Int16(POLLIN), revents: 0)]
            // Wait forever when idle; during a burst, only until it has been quiet long enough.
            let ready = poll(&fds, 2, pendingBurst ? quietMilliseconds : -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            if fds[1].revents != 0 { return }
            if ready == 0 {
                pendingBurst = false
                onBurst()
                continue
            }
            if readEvents(into: &buffer) { pendingBurst = true }
        }
    }
}
