#if canImport(Glibc)
import Glibc
#endif

/// Watches configuration files and directories with inotify, for `run --watch`.
///
/// A named file is watched through its directory, so that editors that save by renaming a new
/// file over the old one are seen too. Changes are debounced: a burst of events (an editor's
/// save, a `git checkout`) reports once, `quietPeriod` after the last of them.
public struct ConfigWatcher: Sendable {
    public var paths: [String]
    public var quietPeriod: Duration

    public init(paths: [String], quietPeriod: Duration = .milliseconds(300)) {
        self.paths = paths
        self.quietPeriod = quietPeriod
    }

    /// Calls `onChange` after each burst of changes, until the calling task is cancelled.
    /// Returns at once when inotify is not available.
    public func changes(_ onChange: @escaping @Sendable () -> Void) async {
        let inotify = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard inotify >= 0 else { return }
        defer { close(inotify) }
        let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB)
        for path in paths {
            var status = stat()
            let isDirectory = stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
            _ = inotify_add_watch(inotify, isDirectory ? path : Self.directory(of: path), mask)
        }
        let quietMilliseconds = Int32(quietPeriod.components.seconds * 1000
                                      + quietPeriod.components.attoseconds / 1_000_000_000_000_000)
        // A blocking poll on a thread of its own: the cooperative pool is never held, and an idle
        // agent does not wake up at all. A pipe tells the thread to stop.
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { return }
        let (stopRead, stopWrite) = (pipeEnds[0], pipeEnds[1])
        _ = fcntl(stopRead, F_SETFD, FD_CLOEXEC)
        _ = fcntl(stopWrite, F_SETFD, FD_CLOEXEC)
        defer { close(stopRead) }
        let (events, continuation) = AsyncStream<Void>.makeStream()
        let thread = WatchThread(inotify: inotify, stop: stopRead, quietMilliseconds: quietMilliseconds) {
            continuation.yield()
        } finished: {
            continuation.finish()
        }
        thread.start()
        await withTaskCancellationHandler {
            for await _ in events { onChange() }
        } onCancel: {
            var byte: UInt8 = 1
            _ = write(stopWrite, &byte, 1)
        }
        close(stopWrite)
        thread.join()
    }

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}

/// The thread that waits for inotify events.
private final class WatchThread: @unchecked Sendable {
    private let inotify: Int32
    private let stop: Int32
    private let quietMilliseconds: Int32
    private let onBurst: @Sendable () -> Void
    private let finished: @Sendable () -> Void
    private var thread = pthread_t()

    init(inotify: Int32, stop: Int32, quietMilliseconds: Int32, onBurst: @escaping @Sendable () -> Void,
         finished: @escaping @Sendable () -> Void) {
        self.inotify = inotify
        self.stop = stop
        self.quietMilliseconds = quietMilliseconds
        self.onBurst = onBurst
        self.finished = finished
    }

    func start() {
        let unmanaged = Unmanaged.passRetained(self)
        pthread_create(&thread, nil, { argument in
            let watcher = Unmanaged<WatchThread>.fromOpaque(argument!).takeRetainedValue()
            watcher.loop()
            return nil
        }, unmanaged.toOpaque())
    }

    func join() {
        pthread_join(thread, nil)
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
            while read(inotify, &buffer, buffer.count) > 0 {}
            pendingBurst = true
        }
    }
}
