import CYAML
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

// MARK: - Tree building

/// Converts a libyaml mark (0-based line, 0-based column counted in characters) to a
/// 1-based `SourcePosition`.
@inline(__always)
func sourcePosition(_ mark: yaml_mark_t) -> SourcePosition {
    SourcePosition(line: mark.line + 1, column: mark.column + 1)
}

/// A mapping entry as `YAMLMapping` stores it.
typealias Entry = YAMLMapping.Entry

/// Builds the node tree from libyaml events with an explicit stack of open collections.
///
/// The children of an open collection at depth `d` (the root collection has depth 0) are
/// collected in `itemBuffers[d]` or `entryBuffers[d]` and moved into an exactly-sized array
/// when it closes; the buffers are reused by every later collection at that depth. Call
/// `deallocate()` when done.
struct TreeBuilder {
    /// A node an anchor names, with the number of nodes in its subtree (for the alias budget).
    struct Anchored {
        var node: YAMLNode
        var size: Int
    }

    /// Open collections, outermost first.
    var stack: [Frame] = []
    /// Item buffers of open sequences, indexed by depth.
    var itemBuffers: [ScratchBuffer<YAMLNode>] = []
    /// Entry buffers of open mappings, indexed by depth.
    var entryBuffers: [ScratchBuffer<Entry>] = []
    /// Completed anchored nodes by anchor name; a later anchor with the same name replaces one.
    var anchors: [String: Anchored] = [:]
    var root: YAMLNode?
    var errors: [YAMLError] = []
    /// Nodes produced so far, counting each alias as the size of the subtree it copies.
    var nodeCount = 0
    var documentCount = 0
    var failed = false
    /// The file after any byte order mark, valid while parsing; libyaml's character indexes
    /// are placed in it (past `indexShift` characters of its own for a split file's second
    /// part, over the jump for the first part, see ``SplitFeed``). Read through a `window`, the
    /// bytes it holds, `inputStart` being the first (refreshed at each event: reading moves them).
    var input: UnsafeBufferPointer<UInt8>
    var inputStart = 0
    /// The file fed in chunks, when it is (``InputWindow``).
    let window: InputWindow?

    /// The byte at `offset` of the file (past any byte order mark).
    @inline(__always)
    func byte(_ offset: Int) -> UInt8 {
        input[offset - inputStart]
    }

    /// The offset past the last byte read.
    var inputEnd: Int { inputStart + input.count }
    /// A libyaml character index and the byte offset in `input` of that character. Only moves
    /// forward, so locating scalars costs one pass over the file at most.
    var cursorIndex = 0
    var cursorOffset = 0

    /// Mapping keys, shared between the mappings that repeat them.
    var keys = KeyInterner()

    /// Where the items of the root's `stream.key` sequence go as they are read, if anywhere.
    let stream: SequenceStream?

    /// Feeds libyaml when the streamed sequence may be split (see ``SplitFeed``).
    let feed: SplitFeed?
    /// Whether the split was found not to match the whole file: the parse stops.
    var splitFailed = false
    /// Whether the items of the other part were added to the stream.
    var spliced = false
    /// Whether the document has no `%YAML` or `%TAG` directive, and its root is a block mapping
    /// at column 0: what a split assumes, since the other part is parsed without them.
    var splittable = false

    /// Parsing the second part of a split file: the items of the root's `key` sequence, whose
    /// items start at `column`, go to `stream`; anything else makes the part unusable.
    let section: (key: String, column: Int)?
    /// Where the section's sequence ended, and its node count, once it did.
    var sectionEnd: (mark: yaml_mark_t, nodes: Int)?
    /// Whether the section holds something its parse cannot reproduce (an anchor or alias).
    var sectionUnusable = false

    /// Lines added to libyaml's line numbers for marks at or after character `lineShiftFrom`:
    /// for the second part, all of them (its text starts with a line of its own); after the
    /// jump over the second part, the lines jumped over.
    var lineShift = 0
    var lineShiftFrom = 0

    init(input: UnsafeBufferPointer<UInt8>, stream: SequenceStream?, feed: SplitFeed? = nil) {
        self.input = input
        self.stream = stream
        self.feed = feed
        self.section = nil
        self.window = nil
    }

    /// A builder for a file fed through `window`.
    init(window: InputWindow, stream: SequenceStream?) {
        self.input = window.bytes
        self.window = window
        self.stream = stream
        self.feed = nil
        self.section = nil
    }

    /// A builder for the second part of a split file (see ``YAMLParser/parseSection``), whose
    /// `input` libyaml reads after `indexShift` characters of its own.
    init(input: UnsafeBufferPointer<UInt8>, section: (key: String, column: Int), stream: SequenceStream, lineShift: Int,
         indexShift: Int) {
        self.input = input
        self.stream = stream
        self.feed = nil
        self.window = nil
        self.section = section
        self.lineShift = lineShift
        self.indexShift = indexShift
    }

    /// Characters libyaml read before `input` (none but for the second part of a split file).
    var indexShift = 0

    /// Whether the result of a parse that jumped over the second part may differ from that of
    /// the whole text: the split did not match, or libyaml stopped on an error (its marks are
    /// not shifted; the builder's own errors are placed with shifted positions).
    var isInDoubt: Bool {
        splitFailed || !spliced || failed
    }

    /// The second part's item and node counts, where its sequence ended, and the problems found
    /// in it (already placed as one parse of the whole text places them); nil when unusable.
    var sectionResult: (items: Int, nodes: Int, end: yaml_mark_t, errors: [YAMLError])? {
        guard let sectionEnd, !sectionUnusable, !failed else { return nil }
        return (streamedItemCount ?? 0, sectionEnd.nodes, sectionEnd.mark, errors)
    }

    /// The items handed to `stream`, once its sequence began.
    var streamedItemCount: Int?

    var result: YAMLParseResult {
        var result = YAMLParseResult(root: failed ? nil : root, errors: errors)
        result.streamedItemCount = streamedItemCount
        return result
    }

    /// Frees the buffers, with any nodes still in them (after a fatal error).
    mutating func deallocate() {
        for index in itemBuffers.indices { itemBuffers[index].deallocate() }
        for index in entryBuffers.indices { entryBuffers[index].deallocate() }
        itemBuffers = []
        entryBuffers = []
    }

    /// A libyaml mark as a position in the file.
    @inline(__always)
    func position(_ mark: yaml_mark_t) -> SourcePosition {
        SourcePosition(line: line(of: mark) + 1, column: mark.column + 1)
    }

    /// The 0-based line of a libyaml mark in the file.
    @inline(__always)
    func line(of mark: yaml_mark_t) -> Int {
        mark.index >= lineShiftFrom ? mark.line + lineShift : mark.line
    }

    /// Stops with the fatal `error`, which replaces any errors collected so far.
    mutating func fail(_ error: YAMLError) {
        failed = true
        root = nil
        errors = [error]
    }

    /// Handles one event; returns false when parsing should stop.
    mutating func consume(_ event: UnsafePointer<yaml_event_t>) -> Bool {
        if let window {
            input = window.bytes
            inputStart = window.start
            // Every later event starts here or after (events come in file order): what is
            // before may go.
            _ = byteOffset(ofCharacterIndex: event.pointee.start_mark.index)
        }
        defer { window?.keepFrom = cursorOffset }
        if !spliced, let jump = feed?.jump, !continuesAcross(jump.characterIndex, event) {
            splitFailed = true
            return false
        }
        switch event.pointee.type {
        case YAML_SCALAR_EVENT:
            nodeCount += 1
            if let anchor = event.pointee.data.scalar.anchor {
                if section != nil {
                    sectionUnusable = true
                    return false
                }
                let scalar = makeScalar(event)
                anchors[String(cString: anchor)] = Anchored(node: .scalar(scalar), size: 1)
                attachScalar(scalar)
            } else {
                // Kept apart from the anchored case so the scalar is moved, never copied.
                attachScalar(makeScalar(event))
            }
        case YAML_MAPPING_START_EVENT:
            let data = event.pointee.data.mapping_start
            return open(.mapping, tag: data.tag, anchor: data.anchor, event: event)
        case YAML_SEQUENCE_START_EVENT:
            let data = event.pointee.data.sequence_start
            return open(.sequence, tag: data.tag, anchor: data.anchor, event: event)
        case YAML_MAPPING_END_EVENT, YAML_SEQUENCE_END_EVENT:
            return close(event)
        case YAML_ALIAS_EVENT:
            if section != nil {
                sectionUnusable = true
                return false
            }
            return alias(String(cString: event.pointee.data.alias.anchor),
                         at: position(event.pointee.start_mark))
        case YAML_DOCUMENT_START_EVENT:
            documentCount += 1
            if documentCount > 1 {
                errors.append(YAMLError(
                    message: "the file holds more than one YAML document; put each in its own file",
                    position: position(event.pointee.start_mark)))
                return false
            }
            let data = event.pointee.data.document_start
            splittable = data.version_directive == nil && data.tag_directives.start == nil
        case YAML_STREAM_END_EVENT:
            return false
        default:
            break // stream start, document end, no event
        }
        return true
    }

    /// Whether `event`, from a parse that jumped over the second part of the file at
    /// `jumpIndex`, is what the whole text would give there. Before the jump, nothing may run
    /// into it (a quoted scalar or flow collection on several lines would); after it, only the
    /// ends of the last item's collections may come before the streamed sequence ends (any
    /// other node would take its position, or more, from the text after the jump; an empty value
    /// is placed at its `:` or `-`, before it).
    func continuesAcross(_ jumpIndex: Int, _ event: UnsafePointer<yaml_event_t>) -> Bool {
        guard event.pointee.start_mark.index >= jumpIndex else { return event.pointee.end_mark.index <= jumpIndex }
        let type = event.pointee.type
        return type == YAML_MAPPING_END_EVENT || type == YAML_SEQUENCE_END_EVENT
    }

    /// The scalar a scalar event describes.
    @inline(__always)
    mutating func makeScalar(_ event: UnsafePointer<yaml_event_t>) -> YAMLScalar {
        let data = event.pointee.data.scalar
        if data.length == 0, event.pointee.start_mark.column == 0, event.pointee.start_mark.line > 0,
           let end = endOfInput(at: event.pointee.start_mark) {
            // An empty scalar libyaml placed past the last line (`key:` ending the file).
            return YAMLScalar(value: "", style: .plain, tag: data.tag.map { String(cString: $0) }, start: end, end: end)
        }
        let bytes = UnsafeBufferPointer(start: data.value, count: data.length)
        let isKey = !stack.isEmpty && stack[stack.count - 1].expectsKey
        let value = data.length == 0 ? "" : isKey ? keys.string(bytes) : String(decoding: bytes, as: UTF8.self)
        let style: YAMLScalar.Style = switch data.style {
        case YAML_SINGLE_QUOTED_SCALAR_STYLE: .singleQuoted
        case YAML_DOUBLE_QUOTED_SCALAR_STYLE: .doubleQuoted
        case YAML_LITERAL_SCALAR_STYLE: .literal
        case YAML_FOLDED_SCALAR_STYLE: .folded
        default: .plain
        }
        return YAMLScalar(
            value: value,
            style: style,
            tag: data.tag.map { String(cString: $0) },
            start: data.tag == nil && data.anchor == nil
                ? position(event.pointee.start_mark)
                : textStart(from: event.pointee.start_mark, before: event.pointee.end_mark),
            end: position(event.pointee.end_mark))
    }

    /// Where a node's own text starts: a scalar's quote, block indicator or first character; a
    /// collection's `{`, `[`, first `-` or first key.
    ///
    /// libyaml starts a node's event at its first property, so for `!env NAME` or `&a "text"`
    /// the event start is the `!` or `&`. This skips the properties and the space, line breaks
    /// and comments after them, stopping before `end` (the event's end, for a scalar). Tags and
    /// anchors are ASCII (libyaml requires it), so each byte skipped in them is one column.
    mutating func textStart(from start: yaml_mark_t, before end: yaml_mark_t?) -> SourcePosition {
        // Start first: the cursor only moves forward cheaply.
        var offset = byteOffset(ofCharacterIndex: start.index)
        let endOffset = end.map { byteOffset(ofCharacterIndex: $0.index) } ?? inputEnd
        var line = line(of: start)
        var column = start.column
        while offset < endOffset, byte(offset) == UInt8(ascii: "!") || byte(offset) == UInt8(ascii: "&") {
            // The property. libyaml ends a tag only at a space or line break (`!<…>` at its
            // `>`), and an anchor name at the first character that is not alphanumeric, `-`
            // or `_` (so `&a[1]` is an anchored flow sequence).
            let isAnchor = byte(offset) == UInt8(ascii: "&")
            let verbatim = !isAnchor && offset + 1 < endOffset && byte(offset + 1) == UInt8(ascii: "<")
            offset += 1
            column += 1
            while offset < endOffset {
                let next = byte(offset)
                let ends = isAnchor ? !isAnchorCharacter(next)
                    : verbatim ? next == UInt8(ascii: ">")
                    : next == 0x20 || next == 0x09 || lineBreakLength(at: offset) > 0
                if ends { break }
                offset += 1
                column += 1
            }
            if verbatim, offset < endOffset {
                offset += 1
                column += 1
            }
            // The separation: spaces, tabs, line breaks and comments.
            while offset < endOffset {
                let next = byte(offset)
                if next == 0x20 || next == 0x09 {
                    offset += 1
                    column += 1
                } else if next == UInt8(ascii: "#") {
                    while offset < endOffset, lineBreakLength(at: offset) == 0 { offset += 1 }
                } else {
                    let length = lineBreakLength(at: offset)
                    guard length > 0 else { break }
                    offset += length
                    line += 1
                    column = 0
                }
            }
        }
        // A scalar with properties but no text (`key: !env`) starts at its properties.
        guard offset < endOffset else { return position(start) }
        return SourcePosition(line: line + 1, column: column + 1)
    }

    /// The position of the end of the input if `mark` is libyaml's end-of-stream mark placed on
    /// a line past the last one, or nil.
    ///
    /// At the end of the stream libyaml moves its mark to the start of a new line even when
    /// the file does not end with a line break, so the mark names a line that does not exist.
    mutating func endOfInput(at mark: yaml_mark_t) -> SourcePosition? {
        guard mark.column == 0, byteOffset(ofCharacterIndex: mark.index) >= inputEnd else { return nil }
        // Find the start of the last line; if the input ends in a line break, the mark is real.
        var lineStart = inputEnd
        while lineStart > 0 {
            if lineStart == inputStart {
                // Read through a window that let the start of a long last line go: only the
                // whole file can tell.
                window?.isLost = true
                return nil
            }
            let last = byte(lineStart - 1)
            if last == 0x0A || last == 0x0D { break }
            if last == 0x85, lineStart - 2 >= inputStart, byte(lineStart - 2) == 0xC2 { break }
            if last == 0xA8 || last == 0xA9, lineStart - 3 >= inputStart, byte(lineStart - 2) == 0x80, byte(lineStart - 3) == 0xE2 {
                break
            }
            lineStart -= 1
        }
        guard lineStart < inputEnd else { return nil }
        var characters = 0
        for offset in lineStart..<inputEnd where byte(offset) & 0xC0 != 0x80 { characters += 1 }
        // `mark.line` is 0-based and one past the last line, so it is the last line 1-based.
        return SourcePosition(line: line(of: mark), column: characters + 1)
    }

    /// Whether libyaml allows `byte` in an anchor name: ASCII letters and digits, `-`, `_`.
    func isAnchorCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default:
            false
        }
    }

    /// The length in bytes of the line break at `offset` (as libyaml counts breaks), or 0.
    func lineBreakLength(at offset: Int) -> Int {
        switch byte(offset) {
        case 0x0A:
            return 1
        case 0x0D:
            return offset + 1 < inputEnd && byte(offset + 1) == 0x0A ? 2 : 1
        case 0xC2:
            return offset + 1 < inputEnd && byte(offset + 1) == 0x85 ? 2 : 0
        case 0xE2:
            return offset + 2 < inputEnd && byte(offset + 1) == 0x80
                && (byte(offset + 2) == 0xA8 || byte(offset + 2) == 0xA9) ? 3 : 0
        default:
            return 0
        }
    }

    /// The byte offset in `input` of the character at libyaml character index `index`
    /// (libyaml counts characters, a CR LF pair being two). Scans forward from the cursor.
    mutating func byteOffset(ofCharacterIndex index: Int) -> Int {
        let index = max(0, index - indexShift)
        if index < cursorIndex {
            // Events come in file order, so this does not happen; restart to stay correct
            // (through a window the start is gone: the file is parsed whole instead).
            if let window {
                window.isLost = true
                return cursorOffset
            }
            cursorIndex = 0
            cursorOffset = 0
        }
        if let jump = feed?.jump, index >= jump.characterIndex, cursorIndex < jump.characterIndex {
            // libyaml read the text after the second part right after the first.
            cursorIndex = jump.characterIndex
            cursorOffset = jump.resumeOffset
        }
        // Skip `remaining` characters, counting their lead (non-continuation) bytes.
        var remaining = index - cursorIndex
        // In `input`, whose first byte is at `inputStart` of the file.
        var offset = cursorOffset - inputStart
        let count = input.count
        if let base = input.baseAddress {
            // Eight bytes at a time: a word holds at most eight lead bytes, so while at least
            // eight characters remain the whole word can be skipped.
            while remaining >= 8, offset + 8 <= count {
                let word = UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self)
                // A continuation byte is 10xxxxxx: bit 7 set, bit 6 clear.
                let continuationBytes = (word & ~(word << 1) & 0x8080_8080_8080_8080).nonzeroBitCount
                remaining -= 8 - continuationBytes
                offset += 8
            }
        }
        while true {
            // Continuation bytes belong to a character already counted.
            while offset < count, input[offset] & 0xC0 == 0x80 { offset += 1 }
            guard remaining > 0, offset < count else { break }
            offset += 1
            remaining -= 1
        }
        cursorIndex = index
        cursorOffset = inputStart + offset
        return cursorOffset
    }
}

/// A `<<` entry, resolved when its mapping closes.
struct Merge {
    var source: YAMLNode
    /// Where the `<<` key is written (the source may be an alias to a node far away).
    var keyPosition: SourcePosition
    /// How many explicit entries precede it; merged entries are placed there.
    var index: Int
}

/// The state of one open mapping or sequence (its children are in the builder's buffers).
struct Frame {
    enum Kind { case mapping, sequence }

    /// Mappings up to this size detect duplicate keys by a linear scan, larger ones by a set.
    /// Comparing short keys is a few instructions each, so scanning up to 16 of them costs
    /// less than hashing every key and allocating a set for each mid-sized mapping.
    static let linearScanLimit = 16

    let kind: Kind
    let tag: String?
    let anchor: String?
    let start: SourcePosition
    /// In a mapping, whether the next node is a key.
    var expectsKey: Bool
    /// In a mapping, the key just read, whose value comes next.
    var pendingKey: YAMLScalar?
    /// In a mapping, whether the next node is the value of a non-scalar key, to be dropped.
    var skipsValue = false
    /// The keys of a mapping's entries, filled only once it outgrows `linearScanLimit`.
    var keySet: Set<String> = []
    var merges: [Merge] = []
    /// In a sequence, whether its items go to the builder's stream (and not into the tree).
    var streams = false
    /// Nodes in this subtree so far, this collection included.
    var size = 1

    init(kind: Kind, tag: String?, anchor: String?, start: SourcePosition) {
        self.kind = kind
        self.tag = tag
        self.anchor = anchor
        self.start = start
        self.expectsKey = kind == .mapping
    }
}

/// A growable buffer that hands all its elements over to an exactly-sized array by moving
/// them, then is reused for the next collection at the same depth.
///
/// Arrays grown by doubling waste a third of their memory on average, which on a large file
/// means hundreds of MB of extra page faults; copying into an exact array would instead cost a
/// retain and release per string. Moving avoids both. The buffer owns manually managed memory:
/// it lives in exactly one place and must be freed with `deallocate()`.
struct ScratchBuffer<Element> {
    /// The storage; `base[0..<count]` are the elements held. Valid until the next `append`.
    private(set) var base: UnsafeMutablePointer<Element>
    /// The number of elements held.
    private(set) var count = 0
    private var capacity: Int

    init() {
        capacity = 16
        base = UnsafeMutablePointer<Element>.allocate(capacity: capacity)
    }

    /// Destroys the elements held and frees the storage; the buffer must not be used again.
    mutating func deallocate() {
        base.deinitialize(count: count)
        base.deallocate()
        count = 0
        capacity = 0
    }

    @inline(__always)
    mutating func append(_ element: consuming Element) {
        if count == capacity { grow() }
        (base + count).initialize(to: element)
        count += 1
    }

    /// Moves every element into a new array of exactly that size, leaving the buffer empty.
    mutating func takeAll() -> [Element] {
        let taken = count
        let source = base
        count = 0
        return [Element](unsafeUninitializedCapacity: taken) { buffer, initialized in
            if taken > 0 { buffer.baseAddress!.moveInitialize(from: source, count: taken) }
            initialized = taken
        }
    }

    private mutating func grow() {
        let newCapacity = capacity * 2
        let newBase = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        newBase.moveInitialize(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }
}
