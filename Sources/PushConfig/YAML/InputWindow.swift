import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// A regular file fed to libyaml in chunks, holding only the bytes the tree builder may still
/// look at: from the builder's cursor (``keepFrom``), and the last line read (where the end of
/// the input is placed). For a load that hands its accounts over as it reads them (`preview`),
/// whose memory would otherwise grow with the file (17 MB for 100,000 accounts).
///
/// Offsets are the file's, past a UTF-8 byte order mark, as in a parse of the whole file.
final class InputWindow {
    private let fd: Int32
    private let limit: Int
    private var storage: UnsafeMutablePointer<UInt8>
    /// The offset of `storage[0]`.
    private(set) var start = 0
    /// The bytes held, from `start`.
    private(set) var count = 0
    /// Set by the builder: it will not look before this offset again.
    var keepFrom = 0
    /// Where the last line read starts, as far as a line feed or carriage return tells (a line
    /// ended by U+0085, U+2028 or U+2029 is counted with the one after it, which keeps more).
    private var lastLineStart = 0
    /// Whether a UTF-8 byte order mark was skipped.
    let bomLength: Int
    /// Why reading stopped early, if it did.
    private(set) var failure: FileError?
    /// Set by the builder when it needed bytes the window had let go: its result cannot be
    /// trusted, and the file is parsed whole instead.
    var isLost = false

    /// At most how many bytes a read takes (tests make it small, to move the window often).
    private let chunk: Int
    /// How much of the last line read is kept before the builder's cursor (for the end of the
    /// input, placed in it): a longer line is let go, so that a file on one line is not held
    /// whole, and placing the end then asks for the whole file (``isLost``).
    private let longestLineKept: Int
    /// The room the bytes have (for tests).
    private(set) var capacity: Int

    /// A window on the regular file open at `fd` (at its start), read at most to `limit`
    /// bytes, `capacity` bytes at first; nil when it starts with a UTF-16 byte order mark (a
    /// whole parse says so).
    init?(fd: Int32, limit: Int, capacity: Int = 1 << 18, chunk: Int = .max, longestLineKept: Int = 1 << 16) {
        var head: (UInt8, UInt8, UInt8) = (0, 0, 0)
        let read = withUnsafeMutableBytes(of: &head) { pread(fd, $0.baseAddress!, 3, 0) }
        guard read >= 0 else { return nil }
        if read >= 2, (head.0 == 0xFF && head.1 == 0xFE) || (head.0 == 0xFE && head.1 == 0xFF) { return nil }
        bomLength = read == 3 && head == (0xEF, 0xBB, 0xBF) ? 3 : 0
        guard lseek(fd, off_t(bomLength), SEEK_SET) == off_t(bomLength) else { return nil }
        self.fd = fd
        self.limit = limit
        self.chunk = max(1, chunk)
        self.longestLineKept = longestLineKept
        self.capacity = max(1, capacity)
        storage = .allocate(capacity: self.capacity)
    }

    deinit {
        storage.deallocate()
    }

    /// The bytes held, `start` being the first.
    var bytes: UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: storage, count: count)
    }

    /// The bytes read so far, past the byte order mark.
    var end: Int { start + count }

    /// Reads the next bytes of the file into `out` (at most `size`): 0 at its end, nil when
    /// reading failed (``failure``).
    private func read(into out: UnsafeMutablePointer<UInt8>, size: Int) -> Int? {
        let size = min(size, chunk)
        makeRoom(for: size)
        var n: Int
        repeat { n = Glibc.read(fd, storage + count, size) } while n < 0 && errno == EINTR
        guard n >= 0 else {
            failure = FileError(errno: errno)
            return nil
        }
        guard bomLength + end + n <= limit else {
            failure = FileError(message: "it is larger than \(limit >> 20) MiB")
            return nil
        }
        out.update(from: storage + count, count: n)
        var index = n
        while index > 0 {
            let byte = storage[count + index - 1]
            if byte == 0x0A || byte == 0x0D {
                lastLineStart = end + index
                break
            }
            index -= 1
        }
        count += n
        return n
    }

    /// Lets the bytes before what is kept go, and grows the storage, so that `size` more fit.
    private func makeRoom(for size: Int) {
        guard count + size > capacity else { return }
        // The last line, and the break before it (up to three bytes, which the end of the
        // input is told by), unless it is long.
        let line = lastLineStart - 3 >= keepFrom - longestLineKept ? lastLineStart - 3 : keepFrom
        let keep = max(start, min(keepFrom, line))
        let dropped = keep - start
        if dropped > 0 {
            memmove(storage, storage + dropped, count - dropped)
            start = keep
            count -= dropped
        }
        // Grown when little could be let go, so that moving what is kept stays rare.
        guard count + size > capacity / 2 else { return }
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: max(2 * capacity, count + size))
        grown.update(from: storage, count: count)
        storage.deallocate()
        storage = grown
        capacity = max(2 * capacity, count + size)
    }

    /// libyaml's read handler; `data` is the window, unretained. A failed read is libyaml's
    /// "input error".
    static let readHandler: @convention(c) (
        UnsafeMutableRawPointer?, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?
    ) -> Int32 = { data, buffer, size, sizeRead in
        let window = Unmanaged<InputWindow>.fromOpaque(data!).takeUnretainedValue()
        guard let n = window.read(into: buffer!, size: size) else { return 0 }
        sizeRead!.pointee = n
        return 1
    }
}
