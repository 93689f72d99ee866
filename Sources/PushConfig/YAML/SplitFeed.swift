import CYAML

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
}

/// Feeds a file to libyaml so that its streamed sequence (`accounts:`) can be parsed by two
/// threads at once.
///
/// A file's tokenising cannot be cut anywhere, but the items of a block sequence at a known
/// column can: when the streamed sequence begins, this picks the first line near the middle of
/// the rest of the file that starts like one of its items (`- ` at its column), and another
/// thread parses from there (``YAMLParser/parseSection(of:start:column:key:isCancelled:)``),
/// as the value of the same key, up to where the sequence ends. This thread's libyaml is fed
/// the text up to that line; when it asks for more, it is fed the text after the sequence
/// instead, and the other thread's items are streamed after this thread's own ones. The line
/// numbers and byte offsets of what follows are shifted by what was jumped over.
///
/// The guess is checked, and the parse falls back to reading the whole text in order:
/// - the other thread gives up on any error, anchor or alias in its part, or on a sequence
///   that does not end at a line's start: this thread then reads on through the line;
/// - the tree builder checks that nothing runs across the line (a quoted scalar or a flow
///   collection on several lines would), that only the ends of the last item's collections
///   come between the line and the end of the sequence, and that the sequence ended after the
///   line, not before it; when anything is wrong, or on any error after the jump, the whole
///   text is parsed again without streaming (the loader sees the streamed items are not in the
///   result and loads the file from that tree).
///
/// Used by one thread, the one parsing the file, within the parse.
final class SplitFeed {
    private let input: UnsafeBufferPointer<UInt8>
    private let minimum: Int
    /// The bytes fed so far.
    private var position = 0
    /// Where feeding stops until the other part's parse is done.
    private var stop: Int?
    private var other: SectionParse?
    private var section: SplitSection?
    /// Whether the tree builder saw the streamed sequence end: the split line is not in it.
    var streamClosed = false
    /// When the parse jumped, the character index the text after the second part took.
    private(set) var jumpIndex: Int?
    /// When the parse jumped, the offset in the text it jumped to.
    private(set) var resumeOffset = 0

    /// Whether the parse jumped over the second part.
    var jumped: Bool { jumpIndex != nil }

    /// A feed for `input` (the text of `bytes` after any byte order mark), when `stream` asks
    /// for splits and the text is long enough for one.
    init?(stream: SequenceStream, bytes: [UInt8], bomLength: Int, input: UnsafeBufferPointer<UInt8>) {
        guard let minimum = stream.splitAbove, input.count >= minimum, input.count > 0 else { return nil }
        self.input = input
        self.minimum = minimum
        self.bytes = bytes
        self.bomLength = bomLength
    }

    private let bytes: [UInt8]
    private let bomLength: Int

    /// Starts parsing the second part of the streamed sequence that just began, whose items are
    /// at `column`, if enough of the file is left; the stream its items go to, or nil.
    func plan(column: Int, key: String) -> SequenceStream? {
        guard other == nil, !jumped, input.count - position >= minimum,
              let start = itemLine(from: position + (input.count - position) / 2, column: column)
        else { return nil }
        let bytes = bytes
        let bomLength = bomLength
        let stream = SequenceStream(key: key)
        other = SectionParse { isCancelled in
            bytes.withUnsafeBufferPointer { buffer in
                let input = UnsafeBufferPointer(rebasing: buffer[bomLength...])
                return YAMLParser.parseSection(of: input, start: start, column: column, into: stream, isCancelled: isCancelled)
            }
        }
        guard other != nil else { return nil }
        stop = start
        return stream
    }

    /// The section jumped over, once, for the builder to stream its items.
    func takeJump() -> SplitSection? {
        defer { section = nil }
        return section
    }

    /// Stops the other part's parse if it still runs.
    func cancel() {
        other?.cancel()
        other = nil
    }

    /// The offset of the first line at or after `offset` (not counting a line `offset` is
    /// inside of) that starts with `column` spaces, `-` and a space or line break.
    private func itemLine(from offset: Int, column: Int) -> Int? {
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

    /// Copies the next bytes for libyaml into `buffer`; 0 at the end of the text.
    private func read(into buffer: UnsafeMutablePointer<UInt8>, size: Int) -> Int {
        if let stop, position == stop { decide() }
        let count = min(size, (stop ?? input.count) - position)
        if count > 0 { buffer.update(from: input.baseAddress! + position, count: count) }
        position += count
        return count
    }

    /// At the split line: jumps over the second part when its parse could be used.
    private func decide() {
        stop = nil
        guard let other else { return }
        self.other = nil
        if streamClosed {
            other.cancel()
            return
        }
        guard let section = other.result() else { return }
        jumpIndex = section.characterIndex
        resumeOffset = section.resumeOffset
        position = section.resumeOffset
        self.section = section
    }

    /// libyaml's read handler; `data` is the feed, unretained.
    static let readHandler: @convention(c) (
        UnsafeMutableRawPointer?, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?
    ) -> Int32 = { data, buffer, size, sizeRead in
        let feed = Unmanaged<SplitFeed>.fromOpaque(data!).takeUnretainedValue()
        sizeRead!.pointee = feed.read(into: buffer!, size: size)
        return 1
    }

    /// libyaml's line number and character index of the text just after `text`; nil when it
    /// holds a line break other than LF, CR and CR LF (libyaml counts NEL, LS and PS as breaks
    /// in some places only).
    static func count(_ text: UnsafeBufferPointer<UInt8>.SubSequence) -> (lines: Int, characters: Int)? {
        var lines = 0
        var characters = 0
        var offset = text.startIndex
        let end = text.endIndex
        let base = text.base.baseAddress!
        while offset < end {
            if offset + 8 <= end {
                let word = UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self)
                // Plain ASCII without CR: count the LFs in the word at once.
                if word & 0x8080_8080_8080_8080 == 0, !hasByte(word, 0x0D) {
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
                if offset + 1 >= end || base[offset + 1] != 0x0A { lines += 1 }
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

    private static func hasByte(_ word: UInt64, _ byte: UInt8) -> Bool {
        countByte(word, byte) > 0
    }
}

/// The parse of the second part of a split file, on a thread of its own.
final class SectionParse: @unchecked Sendable {
    private struct State {
        var finished = false
        var cancelled = false
        var section: SplitSection?
    }

    private let state = ConditionLock(State())

    /// Starts `parse` on a new thread; nil when none can start. `parse` is given a function
    /// that tells whether the result is no longer wanted.
    init?(_ parse: @escaping @Sendable (() -> Bool) -> SplitSection?) {
        let started = OwnThread(named: "pushrep-split", detached: true) { [self] in
            let section = parse { self.state.change { $0.cancelled } }
            state.change {
                $0.finished = true
                $0.section = $0.cancelled ? nil : section
            }
        }
        guard started != nil else { return nil }
    }

    func cancel() {
        state.change { $0.cancelled = true }
    }

    /// Waits for the parse to end; its section, or nil when it could not be used.
    func result() -> SplitSection? {
        state.wait(until: { $0.finished }) { $0.section }
    }
}

/// Feeds libyaml a few bytes of its own, then a text where it is, without copying the text.
final class PrefixedFeed {
    let prefix: [UInt8]
    private let text: UnsafeBufferPointer<UInt8>
    /// The bytes fed so far, prefix included.
    private var position = 0

    init(prefix: [UInt8], text: UnsafeBufferPointer<UInt8>) {
        self.prefix = prefix
        self.text = text
    }

    private func read(into buffer: UnsafeMutablePointer<UInt8>, size: Int) -> Int {
        if position < prefix.count {
            let count = min(size, prefix.count - position)
            prefix.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + position, count: count) }
            position += count
            return count
        }
        let offset = position - prefix.count
        let count = min(size, text.count - offset)
        if count > 0 { buffer.update(from: text.baseAddress! + offset, count: count) }
        position += count
        return count
    }

    /// libyaml's read handler; `data` is the feed, unretained.
    static let readHandler: @convention(c) (
        UnsafeMutableRawPointer?, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?
    ) -> Int32 = { data, buffer, size, sizeRead in
        let feed = Unmanaged<PrefixedFeed>.fromOpaque(data!).takeUnretainedValue()
        sizeRead!.pointee = feed.read(into: buffer!, size: size)
        return 1
    }
}
