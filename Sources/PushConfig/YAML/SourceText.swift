import Synchronization
import PushSystem

/// A file's bytes together with an index of where each line starts, so positions
/// (1-based line and column, as libyaml and editors report them) and UTF-8 byte offsets
/// can be converted in both directions.
///
/// Line breaks are recognised exactly as libyaml recognises them, so that positions computed
/// here agree with the marks libyaml reports: `\n`, `\r\n` (one break), a lone `\r`, and the
/// Unicode breaks U+0085 (NEL), U+2028 (LS) and U+2029 (PS).
///
/// A UTF-8 byte order mark at the very start of the file is not part of any column: line 1,
/// column 1 is the first byte after it (the parser hands libyaml the bytes after the mark too).
///
/// The first conversion makes one pass over the bytes that records line-start offsets; converting
/// a position walks only the bytes of that one line. Columns count Unicode scalars, which for
/// invalid UTF-8 means every byte that is not a continuation byte (`10xxxxxx`).
public struct SourceText: Sendable {
    /// The raw bytes of the file; none when they were let go (``releaseBytes()``) and the file
    /// has changed since it was read.
    public var bytes: [UInt8] { storage.bytes }

    private let storage: Storage

    /// Where each line starts, found on first need: only a diagnostic needs it, and most loads
    /// report none (for 100,000 accounts, the pass and its 8 MB were 2% of `validate`).
    private let lineIndex = LineIndex()

    public init(bytes: [UInt8]) {
        storage = Storage(bytes: bytes, file: nil)
    }

    /// The bytes read from the regular file at `path` whose identity was `identity` then (nil:
    /// they cannot be read again).
    init(bytes: [UInt8], path: String, identity: FileIdentity?) {
        storage = Storage(bytes: bytes, file: identity.map { (path, $0) })
    }

    /// The regular file at `path`, whose identity was `identity` when it was read, without its
    /// bytes: they are read back when needed (as after ``releaseBytes()``).
    init(releasedFrom path: String, identity: FileIdentity) {
        storage = Storage(bytes: [], file: (path, identity))
        storage.release()
    }

    /// A file that changed while it was read: its bytes cannot be read back (``bytesIfAvailable``
    /// is nil), and it is the same file as no other (``isSameFile(as:)``).
    static func changedWhileRead() -> SourceText {
        SourceText(storage: Storage(lostFile: ()))
    }

    private init(storage: Storage) {
        self.storage = storage
    }

    /// Lets the bytes go when they can be read again from the file, to be read back when a
    /// diagnostic needs them: for a load that keeps little else, whose largest part would
    /// otherwise be the files themselves. Read back only while the file is the one read (same
    /// inode, size and modification time); else ``bytes`` is empty, and a problem is placed at
    /// the start of its value instead of inside it.
    func releaseBytes() {
        storage.release()
    }

    /// The bytes, or nil when they were let go and the file has changed since.
    var bytesIfAvailable: [UInt8]? { storage.bytesIfAvailable }

    /// Whether `other` was read from the same file as it was then (device, inode, size and
    /// modification time); false when either was not read from a regular file.
    public func isSameFile(as other: SourceText) -> Bool {
        guard let mine = storage.identity, let theirs = other.storage.identity else { return false }
        return mine == theirs
    }

    private final class Storage: Sendable {
        private enum State {
            case held([UInt8])
            /// Let go, to be read back.
            case released
            /// Let go, and the file changed since.
            case lost
        }

        private let state: Mutex<State>
        private let file: (path: String, identity: FileIdentity)?

        init(bytes: [UInt8], file: (path: String, identity: FileIdentity)?) {
            state = Mutex(.held(bytes))
            self.file = file
        }

        init(lostFile: Void) {
            state = Mutex(.lost)
            file = nil
        }

        var bytes: [UInt8] { bytesIfAvailable ?? [] }

        var identity: FileIdentity? { file?.identity }

        /// The bytes, read back if they were let go; nil (from then on) when the file changed.
        var bytesIfAvailable: [UInt8]? {
            state.withLock { state in
                switch state {
                case .held(let bytes):
                    return bytes
                case .lost:
                    return nil
                case .released:
                    guard let file, case .success(let read) = FileSystem.readIdentified(file.path),
                          read.identity == file.identity else {
                        state = .lost
                        return nil
                    }
                    state = .held(read.bytes)
                    return read.bytes
                }
            }
        }

        func release() {
            guard file != nil else { return }
            state.withLock { state in
                if case .held = state { state = .released }
            }
        }
    }

    /// The byte offset at which each line starts; never empty. `lineStarts[0]` is 0, or 3 when
    /// the file starts with a UTF-8 byte order mark.
    private var lineStarts: [Int] { lineIndex.starts(of: bytes) }

    private final class LineIndex: Sendable {
        private let starts = Mutex<[Int]?>(nil)

        func starts(of bytes: [UInt8]) -> [Int] {
            starts.withLock { starts in
                if let starts { return starts }
                let found = bytes.withUnsafeBufferPointer(SourceText.scanLineStarts)
                starts = found
                return found
            }
        }
    }

    /// The number of lines in the file (a final line break starts a last, empty line).
    public var lineCount: Int { lineStarts.count }

    /// UTF-8 byte offset of a 1-based line/column (column in Unicode scalars), or nil if out of range.
    ///
    /// A column one past the last character of a line is in range: it is the offset of the line
    /// break (or of the end of the file on the last line).
    public func byteOffset(of position: SourcePosition) -> Int? {
        let lineStarts = self.lineStarts
        guard position.line >= 1, position.line <= lineStarts.count, position.column >= 1 else { return nil }
        let lineStart = lineStarts[position.line - 1]
        let contentEnd = self.contentEnd(ofLine: position.line - 1, lineStarts)
        return bytes.withUnsafeBufferPointer { buffer -> Int? in
            var offset = lineStart
            var column = 1
            while column < position.column {
                guard offset < contentEnd else { return nil }
                offset += 1
                // Skip the continuation bytes of a multi-byte scalar.
                while offset < contentEnd, buffer[offset] & 0xC0 == 0x80 { offset += 1 }
                column += 1
            }
            return offset
        }
    }

    /// 1-based line/column of a UTF-8 byte offset.
    ///
    /// Offsets are clamped to the file (`0...bytes.count`). An offset inside a multi-byte
    /// character maps to that character, and one inside a line break to the end of its line,
    /// so the result is always a position `byteOffset(of:)` accepts.
    public func position(ofByteOffset offset: Int) -> SourcePosition {
        var offset = min(max(offset, 0), bytes.count)
        let lineStarts = self.lineStarts
        // Binary search for the last line starting at or before `offset`.
        var low = 0
        var high = lineStarts.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if lineStarts[middle] <= offset { low = middle } else { high = middle - 1 }
        }
        let lineStart = lineStarts[low]
        offset = min(offset, contentEnd(ofLine: low, lineStarts))
        guard offset > lineStart else { return SourcePosition(line: low + 1, column: 1) }
        let column = bytes.withUnsafeBufferPointer { buffer -> Int in
            // Back up from a continuation byte to the start of its character.
            while offset > lineStart, offset < buffer.count, buffer[offset] & 0xC0 == 0x80 { offset -= 1 }
            var count = 0
            for index in lineStart..<offset where buffer[index] & 0xC0 != 0x80 { count += 1 }
            return count
        }
        return SourcePosition(line: low + 1, column: column + 1)
    }

    /// The offset just past the last character of line `index` (0-based), before its line break.
    private func contentEnd(ofLine index: Int, _ lineStarts: [Int]) -> Int {
        guard index + 1 < lineStarts.count else { return bytes.count }
        let next = lineStarts[index + 1]
        let start = lineStarts[index]
        // The line ends in exactly one break; find out which one from its last bytes.
        switch bytes[next - 1] {
        case 0x0A:
            return next - 2 >= start && bytes[next - 2] == 0x0D ? next - 2 : next - 1
        case 0x0D:
            return next - 1
        case 0x85:
            // NEL (C2 85): the only recognised break ending in 0x85.
            return next - 2
        default:
            // LS (E2 80 A8) or PS (E2 80 A9).
            return next - 3
        }
    }

    /// One pass over the bytes recording the offset at which each line starts.
    private static func scanLineStarts(_ buffer: UnsafeBufferPointer<UInt8>) -> [Int] {
        let count = buffer.count
        let first = count >= 3 && buffer[0] == 0xEF && buffer[1] == 0xBB && buffer[2] == 0xBF ? 3 : 0
        var starts = [first]
        // Configuration files have short lines; a rough guess avoids most regrowth.
        starts.reserveCapacity(count / 32 + 1)
        var index = first
        while index < count {
            let byte = buffer[index]
            index += 1
            // Fast path: only these four bytes can start a line break.
            if byte != 0x0A && byte != 0x0D && byte != 0xC2 && byte != 0xE2 { continue }
            switch byte {
            case 0x0A:
                starts.append(index)
            case 0x0D:
                if index < count, buffer[index] == 0x0A { index += 1 }
                starts.append(index)
            case 0xC2:
                if index < count, buffer[index] == 0x85 {
                    index += 1
                    starts.append(index)
                }
            case 0xE2:
                if index + 1 < count, buffer[index] == 0x80, buffer[index + 1] == 0xA8 || buffer[index + 1] == 0xA9 {
                    index += 2
                    starts.append(index)
                }
            default:
                break
            }
        }
        return starts
    }
}
