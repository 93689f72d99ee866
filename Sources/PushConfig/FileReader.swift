import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A configuration or template file read and parsed, ready for a load session to take. Made on
/// any thread: it touches nothing but the file.
struct ParsedFile: Sendable {
    struct Contents: Sendable {
        var parsed: YAMLParseResult
        var source: SourceText
    }

    var contents: Result<Contents, FileError>

    /// Reads and parses `path`, handing the items of its root's `stream.key` sequence to
    /// `stream` as they are parsed; `stream` is always ended on return.
    init(path: String, streaming stream: SequenceStream? = nil) {
        defer { stream?.end() }
        contents = FileSystem.read(path).map { bytes in
            Contents(parsed: YAMLParser.parse(bytes, streaming: stream), source: SourceText(bytes: bytes))
        }
    }

    /// The size of the file's text (0 when it could not be read).
    var byteCount: Int {
        (try? contents.get().source.bytes.count) ?? 0
    }
}

/// Reads and parses the files of a load in order on a thread of its own, staying at most
/// `ahead` files beyond the one the loader takes, so that loading one file overlaps reading the
/// next, and the accounts of a file can be read while it is parsed (``stream(_:)``). Taken from
/// one thread, each file once, in order. Without a second processor, or when the thread cannot
/// start, files are read when taken.
final class FileReader: @unchecked Sendable {
    private let paths: [String]
    private let ahead: Int
    /// Guarded by `lock`: files read and not yet taken, and the index of the next one to take.
    private var files: [ParsedFile?]
    private var next = 0
    /// Each file's `accounts:` items, as they are parsed.
    private let streams: [SequenceStream]
    private var threaded = false
    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let changed = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init(paths: [String], ahead: Int) {
        self.paths = paths
        self.ahead = ahead
        files = Array(repeating: nil, count: paths.count)
        streams = paths.map { _ in SequenceStream(key: TopLevelKey.accounts.rawValue) }
        pthread_mutex_init(lock, nil)
        pthread_cond_init(changed, nil)
        if ahead > 0, !paths.isEmpty { threaded = start() }
    }

    deinit {
        pthread_cond_destroy(changed)
        pthread_mutex_destroy(lock)
        changed.deallocate()
        lock.deallocate()
    }

    /// Starts the reading thread; false when it cannot start.
    private func start() -> Bool {
        var thread = pthread_t()
        let retained = Unmanaged.passRetained(self)
        let status = pthread_create(&thread, nil, { argument in
            Unmanaged<FileReader>.fromOpaque(argument!).takeRetainedValue().readAll()
            return nil
        }, retained.toOpaque())
        guard status == 0 else {
            retained.release()
            return false
        }
        pthread_detach(thread)
        return true
    }

    private func readAll() {
        for index in paths.indices {
            pthread_mutex_lock(lock)
            while index >= next + ahead { pthread_cond_wait(changed, lock) }
            pthread_mutex_unlock(lock)
            let file = ParsedFile(path: paths[index], streaming: streams[index])
            pthread_mutex_lock(lock)
            files[index] = file
            pthread_cond_broadcast(changed)
            pthread_mutex_unlock(lock)
        }
    }

    /// The items of the `accounts:` sequence of the file at `index` as they are parsed, or nil
    /// when files are read only when taken.
    func stream(_ index: Int) -> SequenceStream? {
        threaded ? streams[index] : nil
    }

    /// The file at `index` of the paths, read and parsed.
    func take(_ index: Int) -> ParsedFile {
        guard threaded else { return ParsedFile(path: paths[index]) }
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        while files[index] == nil { pthread_cond_wait(changed, lock) }
        let file = files[index]!
        files[index] = nil
        next = index + 1
        pthread_cond_broadcast(changed)
        return file
    }

    /// Frees a loaded `file`: a large one on a thread of its own, as a tree of tens of thousands
    /// of accounts takes a while to free.
    static func release(_ file: consuming ParsedFile) {
        // One such thread at a time: while one runs, the caller frees the file itself.
        guard Processors.online > 1, file.byteCount >= 4 << 20,
              releasing.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        final class Box: @unchecked Sendable {
            var file: ParsedFile?
            init(_ file: ParsedFile) { self.file = file }
        }
        let box = Unmanaged.passRetained(Box(file))
        var thread = pthread_t()
        let status = pthread_create(&thread, nil, { argument in
            Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue().file = nil
            FileReader.releasing.store(false, ordering: .releasing)
            return nil
        }, box.toOpaque())
        if status == 0 {
            pthread_detach(thread)
        } else {
            releasing.store(false, ordering: .releasing)
            box.release()
        }
    }

    /// Whether a thread is freeing a file.
    private static let releasing = Atomic<Bool>(false)
}

/// The processors this process may run on, and how work on accounts is cut for them.
enum Processors {
    /// The processors in this process's CPU affinity mask (as `taskset` or systemd's
    /// `CPUAffinity=` set it), else the online ones. A CPU quota (`CPUQuota=`) is not counted.
    static let online: Int = {
        // A mask for 1,024 processors, glibc's cpu_set_t.
        var mask = [UInt64](repeating: 0, count: 16)
        let status = mask.withUnsafeMutableBytes { schedGetAffinity(0, $0.count, $0.baseAddress!) }
        let count = mask.reduce(0) { $0 + $1.nonzeroBitCount }
        return status == 0 && count > 0 ? count : max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }()

    /// Into how many runs work on `accounts` accounts is cut (reading them, checking them): none
    /// on one processor or for a few thousand accounts, else runs of at least 1,000 accounts, 16
    /// per processor at most (accounts differ in cost, so equal halves would not end together).
    static func runs(accounts: Int) -> Int {
        guard online > 1, accounts >= 4_000 else { return 1 }
        return max(1, min(online * 16, accounts / 1_000))
    }

    /// `body` for each of `runs` consecutive ranges that together cover `0..<count`, on every
    /// processor (whichever thread is free takes the next run); the results in range order.
    static func inRuns<Result: Sendable>(count: Int, runs: Int, _ body: @Sendable (Range<Int>) -> Result) -> [Result] {
        let size = (count + runs - 1) / runs
        return [Result](unsafeUninitializedCapacity: runs) { buffer, initialized in
            // Each run initializes only its own element.
            nonisolated(unsafe) let results = buffer
            DispatchQueue.concurrentPerform(iterations: runs) { run in
                (results.baseAddress! + run).initialize(to: body(min(run * size, count)..<min((run + 1) * size, count)))
            }
            initialized = runs
        }
    }
}

/// glibc's `sched_getaffinity`, which Swift's Glibc module does not show (it needs `_GNU_SOURCE`).
@_silgen_name("sched_getaffinity")
private func schedGetAffinity(_ pid: pid_t, _ size: Int, _ mask: UnsafeMutableRawPointer) -> Int32
