import CYAML
import PushSystem

/// The items of the second part of a split file, parsed on another thread, and how the first
/// part's parse goes on after it.
struct SplitSection: Sendable {
    /// The items streamed.
    var itemCount: Int
    /// The nodes in them.
    var nodeCount: Int
    /// Where, in the text libyaml reads, the sequence ends: the first part's parse goes on there.
    var resumeOffset: Int
    /// libyaml's character index of the second part's first character, which the first
    /// part's parse gives to the text at `resumeOffset`.
    var characterIndex: Int
    /// The lines between the second part's start and `resumeOffset`, which the first part's
    /// parse does not see.
    var lineShift: Int
    /// Problems the tree builder found in the second part (a duplicate key in an item, …),
    /// placed as one parse of the whole text places them. A libyaml error makes it unusable.
    var errors: [YAMLError]
}

/// Feeds a file to libyaml so that its streamed sequence (`accounts:`) can be parsed by two
/// threads at once.
///
/// A file's tokenising cannot be cut anywhere, but the items of a block sequence at a known
/// column can: when the streamed sequence begins, this picks the first line near the middle of
/// the rest of the file that starts like one of its items (`- ` at its column), and another
/// thread parses from there (``YAMLParser/parseSection(of:start:column:into:)``), as the value
/// of the same key, up to where the sequence ends. This thread's libyaml is fed the text up to
/// that line; when it asks for more, it is fed the text after the sequence instead, and the
/// other thread's items follow this thread's own ones. The line numbers and byte offsets of
/// what follows are shifted by what was jumped over.
///
/// The guess is checked, and the parse falls back to reading the whole text in order:
/// - the other thread gives up on a YAML error, an anchor or alias in its part, or on a sequence
///   that does not end at a line's start: this thread then reads on through the line;
/// - the tree builder checks that nothing runs across the line (a quoted scalar or a flow
///   collection on several lines would), that only the ends of the last item's collections
///   come between the line and the end of the sequence, and that the sequence ended after the
///   line, not before it; when anything is wrong, or libyaml stops on an error after the jump
///   (its position would be off), the whole text is parsed again without streaming (the loader
///   sees the streamed items are not in the result and loads the file from that tree).
///
/// Used by one thread, the one parsing the file, within the parse.
final class SplitFeed {
    /// What libyaml reads.
    let text: TextFeed
    private let bytes: [UInt8]
    private let minimum: Int
    /// The other part's parse, and the stream its items go to, until the split line.
    private var other: (parse: ThreadResult<SplitSection?>, items: SequenceStream)?
    /// The second part, once the parse jumped over it.
    private(set) var jump: SplitSection?

    /// A feed for `input` (the text of `bytes` after any byte order mark), when `stream` asks
    /// for splits and the text is long enough for one.
    init?(stream: SequenceStream, bytes: [UInt8], input: UnsafeBufferPointer<UInt8>) {
        guard let minimum = stream.splitAbove, input.count >= minimum, input.count > 0 else { return nil }
        text = TextFeed(input)
        self.bytes = bytes
        self.minimum = minimum
        text.atStop = { [unowned self] in decide() }
    }

    /// Starts parsing the second part of the streamed sequence that just began, whose items are
    /// at `column`, if enough of the file is left; the stream its items go to, or nil.
    func plan(column: Int, key: String) -> SequenceStream? {
        let fed = text.position
        let input = text.text
        guard input.count - fed >= minimum, let start = itemLine(from: fed + (input.count - fed) / 2, column: column)
        else { return nil }
        let bytes = bytes
        let bomLength = bytes.count - input.count
        let items = SequenceStream(key: key)
        let parse = ThreadResult<SplitSection?>(named: "pushrep-split") {
            bytes.withUnsafeBufferPointer { buffer in
                YAMLParser.parseSection(of: UnsafeBufferPointer(rebasing: buffer[bomLength...]), start: start,
                                        column: column, into: items)
            }
        }
        guard let parse else { return nil }
        other = (parse, items)
        text.stop = start
        return items
    }

    /// Stops the other part's parse, and drops its items: the split line is not in the sequence,
    /// or the parse stopped before it.
    func cancel() {
        other?.items.cancel()
        other = nil
    }

    /// The offset of the first line at or after `offset` (not counting a line `offset` is
    /// inside of) that starts with `column` spaces, `-` and a space or line break.
    private func itemLine(from offset: Int, column: Int) -> Int? {
        let input = text.text
        var lineStart = offset
        while lineStart < input.count {
            // The start of the next line.
            while lineStart < input.count, input[lineStart] != 0x0A { lineStart += 1 }
            lineStart += 1
            let dash = lineStart + column
            guard dash + 1 < input.count else { return nil }
            if input[dash] == UInt8(ascii: "-"),
               input[dash + 1] == 0x20 || input[dash + 1] == 0x0A || input[dash + 1] == 0x0D,
               (lineStart..<dash).allSatisfy({ input[$0] == 0x20 }) {
                return lineStart
            }
        }
        return nil
    }

    /// At the split line: where to go on when the second part's parse can be used (the text
    /// after its sequence), else nil (the line itself).
    private func decide() -> Int? {
        guard let other else { return nil }
        self.other = nil
        guard let section = other.parse.take() else { return nil }
        jump = section
        return section.resumeOffset
    }

    /// libyaml's line number and character index of the text just after `text`; nil when it
    /// holds a line break other than LF, CR and CR LF (NEL, LS and PS are rare: a file with one
    /// before the split line is parsed in order).
    static func count(_ text: UnsafeBufferPointer<UInt8>.SubSequence) -> (lines: Int, characters: Int)? {
        var lines = 0
        var characters = 0
        var offset = text.startIndex
        let end = text.endIndex
        let base = text.base.baseAddress!
        // The second part's parse cannot start before this has run over the whole first part
        // (half of a large file): plain ASCII without CR, nearly all of it, is counted 32
        // bytes at a time. (Swift's SIMD types compared lane by lane here.)
        while offset + 32 <= end {
            let raw = UnsafeRawPointer(base + offset)
            let words = (raw.loadUnaligned(as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                         raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
            let ascii = (words.0 | words.1 | words.2 | words.3) & 0x8080_8080_8080_8080 == 0
            let crs: UInt64 = 0x0D0D_0D0D_0D0D_0D0D
            guard ascii, !hasZeroByte(words.0 ^ crs), !hasZeroByte(words.1 ^ crs), !hasZeroByte(words.2 ^ crs),
                  !hasZeroByte(words.3 ^ crs) else {
                guard let counted = countBytes(text, from: offset, to: offset + 32) else { return nil }
                lines += counted.lines
                characters += counted.characters
                offset += 32
                continue
            }
            lines += countByte(words.0, 0x0A) + countByte(words.1, 0x0A) + countByte(words.2, 0x0A) + countByte(words.3, 0x0A)
            characters += 32
            offset += 32
        }
        guard let rest = countBytes(text, from: offset, to: end) else { return nil }
        return (lines + rest.lines, characters + rest.characters)
    }

    /// Whether a byte of `word`, whose bytes are all below 0x80, is zero.
    private static func hasZeroByte(_ word: UInt64) -> Bool {
        (word &- 0x0101_0101_0101_0101) & 0x8080_8080_8080_8080 != 0
    }

    /// ``count(_:)`` of the bytes of `text` from `start` to `end`, a word at a time, byte by byte
    /// where a word is not plain ASCII without CR (a CR or a line break's last byte is told by
    /// the bytes of `text` around it, in the range or not).
    private static func countBytes(_ text: UnsafeBufferPointer<UInt8>.SubSequence, from start: Int, to end: Int)
        -> (lines: Int, characters: Int)? {
        var lines = 0
        var characters = 0
        var offset = start
        let base = text.base.baseAddress!
        while offset < end {
            if offset + 8 <= end {
                let word = UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self)
                // Plain ASCII without CR: count the LFs in the word at once.
                if word & 0x8080_8080_8080_8080 == 0, !hasZeroByte(word ^ 0x0D0D_0D0D_0D0D_0D0D) {
                    lines += countByte(word, 0x0A)
                    characters += 8
                    offset += 8
                    continue
                }
            }
            let byte = base[offset]
            if byte & 0xC0 != 0x80 { characters += 1 }
            switch byte {
            case 0x0A:
                lines += 1
            case 0x0D:
                if offset + 1 >= text.endIndex || base[offset + 1] != 0x0A { lines += 1 }
            case 0x85:
                if offset > text.startIndex, base[offset - 1] == 0xC2 { return nil }
            case 0xA8, 0xA9:
                if offset >= text.startIndex + 2, base[offset - 1] == 0x80, base[offset - 2] == 0xE2 { return nil }
            default:
                break
            }
            offset += 1
        }
        return (lines, characters)
    }

    /// The number of bytes of `word` equal to `byte`.
    private static func countByte(_ word: UInt64, _ byte: UInt8) -> Int {
        let x = word ^ (0x0101_0101_0101_0101 &* UInt64(byte))
        // A byte's high bit ends up set exactly when the byte is zero.
        let low = 0x7F7F_7F7F_7F7F_7F7F as UInt64
        return (~(((x & low) &+ low) | x | low)).nonzeroBitCount
    }
}

/// Feeds libyaml a few bytes of its own (`prefix`), then `text` where it is, without copying it.
/// At `stop`, `atStop` says where in `text` to go on (nil: at `stop`).
final class TextFeed {
    let text: UnsafeBufferPointer<UInt8>
    private let prefix: [UInt8]
    private var prefixFed = 0
    /// The bytes of `text` fed so far, or where feeding goes on.
    private(set) var position = 0
    var stop: Int?
    var atStop: (() -> Int?)?

    init(_ text: UnsafeBufferPointer<UInt8>, after prefix: [UInt8] = []) {
        self.text = text
        self.prefix = prefix
    }

    /// Copies the next bytes for libyaml into `buffer`; 0 at the end of the text.
    private func read(into buffer: UnsafeMutablePointer<UInt8>, size: Int) -> Int {
        if prefixFed < prefix.count {
            let count = min(size, prefix.count - prefixFed)
            prefix.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + prefixFed, count: count) }
            prefixFed += count
            return count
        }
        if let stop, position == stop {
            self.stop = nil
            position = atStop?() ?? stop
        }
        let count = min(size, (stop ?? text.count) - position)
        if count > 0 { buffer.update(from: text.baseAddress! + position, count: count) }
        position += count
        return count
    }

    /// libyaml's read handler; `data` is the feed, unretained.
    static let readHandler: @convention(c) (
        UnsafeMutableRawPointer?, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?
    ) -> Int32 = { data, buffer, size, sizeRead in
        let feed = Unmanaged<TextFeed>.fromOpaque(data!).takeUnretainedValue()
        sizeRead!.pointee = feed.read(into: buffer!, size: size)
        return 1
    }
}
