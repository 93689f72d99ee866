import Dispatch
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

    init(path: String) {
        contents = FileSystem.read(path).map { bytes in
            Contents(parsed: YAMLParser.parse(bytes), source: SourceText(bytes: bytes))
        }
    }
}

/// Reads and parses files on other threads, at most `ahead` files beyond the one asked for, and
/// frees loaded files on other threads. Used from one thread; `ahead` 0 reads on that thread.
final class FileReader: @unchecked Sendable {
    /// One file's result, handed from the thread that parsed it to the one that takes it.
    private final class Slot: @unchecked Sendable {
        let path: String
        var file: ParsedFile?
        let done = DispatchSemaphore(value: 0)

        init(path: String) {
            self.path = path
        }
    }

    private let slots: [Slot]
    private let ahead: Int
    private var started = 0

    init(paths: [String], ahead: Int) {
        slots = paths.map(Slot.init)
        self.ahead = ahead
    }

    /// The file at `index` of the paths, read and parsed (taken once, in order).
    func take(_ index: Int) -> ParsedFile {
        guard ahead > 0 else { return ParsedFile(path: slots[index].path) }
        while started < min(slots.count, index + 1 + ahead) {
            let slot = slots[started]
            DispatchQueue.global().async {
                slot.file = ParsedFile(path: slot.path)
                slot.done.signal()
            }
            started += 1
        }
        let slot = slots[index]
        slot.done.wait()
        defer { slot.file = nil }
        return slot.file!
    }

    /// Frees `file` on another thread (a large file's tree takes a while to free).
    func release(_ file: consuming ParsedFile) {
        guard ahead > 0 else { return }
        let file = file
        DispatchQueue.global().async { withExtendedLifetime(file) {} }
    }
}

/// The processors this process may run on.
enum Processors {
    static let online = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
}
