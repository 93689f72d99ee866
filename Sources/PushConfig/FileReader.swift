import Dispatch
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// A configuration or template file read and parsed, ready for a load session to take. Made on
/// any thread: it touches nothing but the file.
struct ParsedFile: Sendable {
    struct Contents: Sendable {
        var parsed: YAMLParseResult
        var source: SourceText
    }

    var contents: Result<Contents, FileError>

    /// Reads and parses `path`, handing the items of its root's `stream.key` sequence to
    /// `stream` as they are parsed; `stream` is always ended on return. A regular file larger
    /// than `windowAbove` bytes is read in chunks (``InputWindow``) instead of whole, and its
    /// source's bytes are read back only when a diagnostic needs them.
    init(path: String, streaming stream: SequenceStream? = nil, windowAbove: Int? = nil) {
        defer { stream?.end() }
        if let windowAbove, let windowed = Self.windowed(path, above: windowAbove, streaming: stream) {
            contents = windowed
            return
        }
        contents = FileSystem.readIdentified(path).map { read in
            Contents(parsed: YAMLParser.parse(read.bytes, streaming: stream),
                     source: SourceText(bytes: read.bytes, path: path, identity: read.identity))
        }
    }

    /// `path` parsed through an ``InputWindow`` when it is a regular file larger than `above`
    /// bytes; nil to read it whole (another kind of file, a small one, one that cannot be
    /// opened: the whole read words the problem). When only the whole bytes can tell the
    /// result (a YAML error, see ``YAMLParser/parse(window:streaming:)``), they are read and
    /// parsed without streaming, as a split parse in doubt is: the loader, seeing no streamed
    /// items in it, loads the file from its tree.
    private static func windowed(_ path: String, above: Int, streaming stream: SequenceStream?) -> Result<Contents, FileError>? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, Int(info.st_size) > above,
              Int(info.st_size) <= FileSystem.maximumConfigurationSize,
              let window = InputWindow(fd: fd, limit: FileSystem.maximumConfigurationSize) else { return nil }
        guard let parsed = YAMLParser.parse(window: window, streaming: stream) else {
            return FileSystem.readIdentified(path).map { read in
                Contents(parsed: YAMLParser.parse(read.bytes), source: SourceText(bytes: read.bytes, path: path, identity: read.identity))
            }
        }
        // Read back for a diagnostic only if it is still the file read: one written since has
        // another identity, and reading it back says it changed. One written while it was read
        // (in place: the same inode, another size or modification time) was read in part
        // before and in part after, so it is the same file as no other: a load that reads the
        // files twice (`preview`) then says it changed.
        var after = stat()
        let unchanged = fstat(fd, &after) == 0 && FileIdentity(after) == FileIdentity(info)
        return .success(Contents(parsed: parsed, source: unchanged ? SourceText(releasedFrom: path, identity: FileIdentity(info))
                                                                : .changedWhileRead()))
    }

    /// `contents` parsed again, without streaming, for the whole tree; a failure when its bytes
    /// were let go and the file has changed since.
    init(reparsing contents: Contents) {
        guard let bytes = contents.source.bytesIfAvailable else {
            self.contents = .failure(FileError(message: "it changed while it was read; read it again"))
            return
        }
        self.contents = .success(Contents(parsed: YAMLParser.parse(bytes), source: contents.source))
    }
}

/// Reads and parses the files of a load in order on a thread of its own, staying at most
/// `ahead` files beyond the one the loader takes, so that loading one file overlaps reading the
/// next, and the accounts of a file can be read while it is parsed (``stream(_:)``). Taken from
/// one thread, each file once, in order. Without a second processor, or when the thread cannot
/// start, files are read when taken.
final class FileReader: @unchecked Sendable {
    private struct Shared {
        /// Files read and not yet taken.
        var files: [ParsedFile?]
        /// The index of the next file to take.
        var next = 0
        /// The load is over (``finish()``): nothing more is read.
        var finished = false
    }

    private let paths: [String]
    private let ahead: Int
    private let shared: ConditionLock<Shared>
    /// Each file's `accounts:` items, as they are parsed (only with a reading thread).
    private let streams: [SequenceStream?]
    /// The reading thread, joined by ``finish()``; nil when files are read when taken. Set
    /// once, in `init`, before anything reads it.
    private var thread: OwnThread?
    private var threaded: Bool { thread != nil }
    /// Whether each file's bytes are let go once it is parsed (``SourceText/releaseBytes()``).
    private let releasesBytes: Bool
    /// From how many bytes on a regular file is read in chunks (``ParsedFile/init(path:streaming:windowAbove:)``).
    private let windowAbove: Int?

    /// `splitAbove`: see ``SequenceStream/splitAbove``. `releasesBytes`: each file's bytes are
    /// let go once it is parsed, before the next is read, to be read again if needed.
    /// `unstreamed`: paths whose accounts are not streamed, only parsed into the tree.
    /// `windowAbove`: a regular file larger is read in chunks, not whole (and never split).
    /// What the reading thread is called, unless told otherwise.
    static let threadName = "pushrep-read"

    init(paths: [String], ahead: Int, splitAbove: Int? = nil, releasesBytes: Bool = false, unstreamed: Set<String> = [],
         windowAbove: Int? = nil, threadName: String = FileReader.threadName) {
        self.paths = paths
        self.ahead = ahead
        self.releasesBytes = releasesBytes
        self.windowAbove = windowAbove
        shared = ConditionLock(Shared(files: Array(repeating: nil, count: paths.count)))
        let reads = ahead > 0 && !paths.isEmpty
        streams = !reads ? [] : paths.map { path in
            unstreamed.contains(path) ? nil : SequenceStream(key: TopLevelKey.accounts.rawValue, splitAbove: splitAbove)
        }
        if reads { thread = OwnThread(named: threadName, detached: false) { [self] in readAll() } }
    }

    private func readAll() {
        for index in paths.indices {
            guard shared.wait(until: { index < $0.next + ahead || $0.finished }, then: { !$0.finished }) else { return }
            let file = ParsedFile(path: paths[index], streaming: streams[index], windowAbove: windowAbove)
            if releasesBytes, case .success(let contents) = file.contents { contents.source.releaseBytes() }
            shared.change { $0.files[index] = file }
        }
    }

    /// The load is over: the reading thread stops (a file it is parsing is parsed to its end,
    /// its accounts dropped) and is waited for, and the files not taken are freed. Without
    /// it, a load that did not take every file left its thread waiting for ever with what it
    /// had read, and even a load that took them all could return while the thread still held
    /// its last file (LeakSanitizer saw it as a leak: `fuzz/regressions/loader/`).
    func finish() {
        shared.change { $0.finished = true }
        for stream in streams { stream?.cancel() }
        thread?.join()
        thread = nil
        shared.change { $0.files = [] }
    }

    /// The items of the `accounts:` sequence of the file at `index` as they are parsed, or nil
    /// when files are read only when taken.
    func stream(_ index: Int) -> SequenceStream? {
        threaded ? streams[index] : nil
    }

    /// The file at `index` of the paths, read and parsed.
    func take(_ index: Int) -> ParsedFile {
        guard threaded else { return ParsedFile(path: paths[index], windowAbove: windowAbove) }
        return shared.wait(until: { $0.files[index] != nil }) { shared in
            defer {
                shared.files[index] = nil
                shared.next = index + 1
            }
            return shared.files[index]!
        }
    }
}
