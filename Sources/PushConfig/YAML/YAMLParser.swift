import CYAML

/// Result of parsing one file.
public struct YAMLParseResult: Sendable {
    /// The file's document, or nil when the file has no document (it is empty or holds only
    /// comments) or when a fatal error stopped parsing.
    public var root: YAMLNode?
    /// Fatal errors (then `root` is nil and this holds exactly that one error) and non-fatal
    /// structural ones (duplicate keys, non-scalar keys, bad merge values, extra documents),
    /// in the order they were found.
    public var errors: [YAMLError]

    public init(root: YAMLNode? = nil, errors: [YAMLError] = []) {
        self.root = root
        self.errors = errors
    }
}

/// Reads YAML files into `YAMLNode` trees using libyaml's event API, keeping the source
/// position of every node.
///
/// Beyond plain YAML parsing it:
/// - keeps mapping entries in file order and reports a duplicate key (keeping the first) or a
///   non-scalar key (dropping the entry) without stopping;
/// - expands aliases (`*a`) to a copy of the anchored node (`&a`), which keeps the anchored
///   node's positions, and resolves merge keys (`<<: *a`, `<<: [*a, *b]`);
/// - rejects a second document, nesting deeper than `maximumDepth`, and alias expansion that
///   produces more than `maximumNodeCount` nodes ("billion laughs").
///
/// Scalars are never reinterpreted: `value` is the text after YAML unescaping and folding.
public enum YAMLParser {
    /// The deepest nesting of mappings and sequences accepted; the root collection is level 1.
    public static let maximumDepth = 64

    /// The most nodes a file may produce, counting every node an alias expands to.
    public static let maximumNodeCount = 10_000_000

    /// Parses a whole file's bytes (UTF-8 expected; a leading UTF-8 byte order mark is skipped).
    public static func parse(_ bytes: [UInt8]) -> YAMLParseResult {
        if bytes.count >= 2, (bytes[0] == 0xFF && bytes[1] == 0xFE) || (bytes[0] == 0xFE && bytes[1] == 0xFF) {
            return fatal("the file is not valid UTF-8 text (it starts with a UTF-16 byte order mark)",
                         at: SourcePosition(line: 1, column: 1))
        }
        // libyaml would skip the mark only when it detects the encoding itself, and we force
        // UTF-8 so UTF-16 input is rejected rather than silently given meaningless byte offsets.
        let bomLength = bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF ? 3 : 0
        guard bytes.count > bomLength else { return YAMLParseResult() }

        // libyaml keeps a pointer to the parser inside the parser, so it needs a stable address.
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        defer { parser.deallocate() }
        let event = UnsafeMutablePointer<yaml_event_t>.allocate(capacity: 1)
        defer { event.deallocate() }
        guard yaml_parser_initialize(parser) != 0 else {
            return fatal("there is not enough memory to read the file", at: SourcePosition(line: 1, column: 1))
        }
        defer { yaml_parser_delete(parser) }
        yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)

        var builder = TreeBuilder()
        bytes.withUnsafeBufferPointer { buffer in
            // Non-empty here, so `baseAddress` is non-nil.
            yaml_parser_set_input_string(parser, buffer.baseAddress! + bomLength, buffer.count - bomLength)
            while true {
                guard yaml_parser_parse(parser, event) != 0 else {
                    builder.fail(libyamlError(parser, bytes: bytes, bomLength: bomLength))
                    return
                }
                let proceed = builder.consume(event)
                yaml_event_delete(event)
                if !proceed { return }
            }
        }
        return builder.result
    }

    /// A result holding only the fatal error `message`.
    private static func fatal(_ message: String, at position: SourcePosition) -> YAMLParseResult {
        YAMLParseResult(root: nil, errors: [YAMLError(message: message, position: position)])
    }

    // MARK: - libyaml errors

    /// Describes the error that made `yaml_parser_parse` fail.
    private static func libyamlError(
        _ parser: UnsafePointer<yaml_parser_t>, bytes: [UInt8], bomLength: Int
    ) -> YAMLError {
        let state = parser.pointee
        let problem = state.problem.map { String(cString: $0) } ?? "unknown problem"
        switch state.error {
        case YAML_MEMORY_ERROR:
            return YAMLError(message: "there is not enough memory to read the file",
                             position: SourcePosition(line: 1, column: 1))
        case YAML_READER_ERROR:
            // Reader errors carry a byte offset into the input we passed, not a mark.
            let source = SourceText(bytes: bytes)
            let position = source.position(ofByteOffset: state.problem_offset + bomLength)
            return YAMLError(message: readerMessage(problem: problem, value: Int(state.problem_value)),
                             position: position)
        default:
            let position = sourcePosition(state.problem_mark)
            var message = "YAML syntax error: "
            if problem == "found character that cannot start any token",
               let offset = SourceText(bytes: bytes).byteOffset(of: position),
               offset < bytes.count, bytes[offset] == 0x09 {
                message += "found a tab character, which cannot start any token (indent with spaces, not tabs)"
            } else {
                message += problem
            }
            if let contextPointer = state.context {
                let context = String(cString: contextPointer)
                let contextPosition = sourcePosition(state.context_mark)
                if contextPosition < position {
                    message += " (\(context) that started at line \(contextPosition.line), column \(contextPosition.column))"
                } else {
                    message += " (\(context))"
                }
            }
            return YAMLError(message: message, position: position)
        }
    }

    /// A message for a libyaml reader error (bad encoding or a forbidden character).
    private static func readerMessage(problem: String, value: Int) -> String {
        switch problem {
        case "control characters are not allowed":
            if value == 0 {
                return "the file contains a NUL byte (0x00), which YAML does not allow (is it a binary file?)"
            }
            return "the file contains a control character (\(hex(value, unicode: value > 0x7F))), which YAML does not allow"
        case "incomplete UTF-8 octet sequence":
            return "the file is not valid UTF-8 text (it ends in the middle of a multi-byte character)"
        default:
            // "invalid leading/trailing UTF-8 octet" (value is the byte), "invalid Unicode
            // character" (value is the code point), "invalid length of a UTF-8 sequence".
            let detail = value < 0 ? problem
                : problem.contains("octet") ? "\(problem) \(hex(value))"
                : "\(problem) \(hex(value, unicode: true))"
            return "the file is not valid UTF-8 text (\(detail))"
        }
    }

    /// `0x1B` style for a byte, `U+0085` style for a Unicode code point.
    private static func hex(_ value: Int, unicode: Bool = false) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        let width = unicode ? 4 : 2
        let padded = String(repeating: "0", count: max(0, width - digits.count)) + digits
        return (unicode ? "U+" : "0x") + padded
    }
}

// MARK: - Tree building

/// Converts a libyaml mark (0-based line, 0-based column counted in characters) to a
/// 1-based `SourcePosition`.
@inline(__always)
private func sourcePosition(_ mark: yaml_mark_t) -> SourcePosition {
    SourcePosition(line: mark.line + 1, column: mark.column + 1)
}

/// A mapping entry as `YAMLMapping` stores it.
private typealias Entry = (key: YAMLScalar, value: YAMLNode)

/// Builds the node tree from libyaml events with an explicit stack of open collections.
private struct TreeBuilder {
    /// A node an anchor names, with the number of nodes in its subtree (for the alias budget).
    struct Anchored {
        var node: YAMLNode
        var size: Int
    }

    /// Open collections, outermost first.
    private var stack: [Frame] = []
    /// Item buffers, one per nesting depth, reused by every sequence at that depth.
    private var itemBuffers: [ScratchBuffer<YAMLNode>] = []
    /// Entry buffers, one per nesting depth, reused by every mapping at that depth.
    private var entryBuffers: [ScratchBuffer<Entry>] = []
    /// Completed anchored nodes by anchor name; a later anchor with the same name replaces one.
    private var anchors: [String: Anchored] = [:]
    private var root: YAMLNode?
    private var errors: [YAMLError] = []
    /// Nodes produced so far, counting each alias as the size of the subtree it copies.
    private var nodeCount = 0
    private var documentCount = 0
    private var failed = false

    var result: YAMLParseResult {
        YAMLParseResult(root: failed ? nil : root, errors: errors)
    }

    /// Stops with the fatal `error`, which replaces any errors collected so far.
    mutating func fail(_ error: YAMLError) {
        failed = true
        root = nil
        stack.removeAll()
        errors = [error]
    }

    /// Handles one event; returns false when parsing should stop.
    mutating func consume(_ event: UnsafePointer<yaml_event_t>) -> Bool {
        switch event.pointee.type {
        case YAML_SCALAR_EVENT:
            nodeCount += 1
            if let anchor = event.pointee.data.scalar.anchor {
                let scalar = makeScalar(event)
                anchors[String(cString: anchor)] = Anchored(node: .scalar(scalar), size: 1)
                attachScalar(scalar)
            } else {
                // Kept apart from the anchored case so the scalar is moved, never copied.
                attachScalar(makeScalar(event))
            }
        case YAML_MAPPING_START_EVENT:
            let data = event.pointee.data.mapping_start
            return open(.mapping, tag: data.tag, anchor: data.anchor, start: sourcePosition(event.pointee.start_mark))
        case YAML_SEQUENCE_START_EVENT:
            let data = event.pointee.data.sequence_start
            return open(.sequence, tag: data.tag, anchor: data.anchor, start: sourcePosition(event.pointee.start_mark))
        case YAML_MAPPING_END_EVENT, YAML_SEQUENCE_END_EVENT:
            close()
        case YAML_ALIAS_EVENT:
            return alias(String(cString: event.pointee.data.alias.anchor),
                         at: sourcePosition(event.pointee.start_mark))
        case YAML_DOCUMENT_START_EVENT:
            documentCount += 1
            if documentCount > 1 {
                errors.append(YAMLError(
                    message: "the file holds more than one YAML document; put each in its own file",
                    position: sourcePosition(event.pointee.start_mark)))
                return false
            }
        case YAML_STREAM_END_EVENT:
            return false
        default:
            break // stream start, document end, no event
        }
        return true
    }

    /// The scalar a scalar event describes.
    @inline(__always)
    private func makeScalar(_ event: UnsafePointer<yaml_event_t>) -> YAMLScalar {
        let data = event.pointee.data.scalar
        let value = data.length == 0 ? "" :
            String(decoding: UnsafeBufferPointer(start: data.value, count: data.length), as: UTF8.self)
        return YAMLScalar(
            value: value,
            style: style(data.style),
            tag: data.tag.map { String(cString: $0) },
            start: sourcePosition(event.pointee.start_mark),
            end: sourcePosition(event.pointee.end_mark))
    }

    /// Starts a mapping or sequence, enforcing the depth limit.
    private mutating func open(
        _ kind: Frame.Kind, tag: UnsafeMutablePointer<yaml_char_t>?,
        anchor: UnsafeMutablePointer<yaml_char_t>?, start: SourcePosition
    ) -> Bool {
        let depth = stack.count
        guard depth < YAMLParser.maximumDepth else {
            fail(YAMLError(message: "nesting is deeper than \(YAMLParser.maximumDepth) levels", position: start))
            return false
        }
        nodeCount += 1
        let anchorName = anchor.map { String(cString: $0) }
        if let anchorName {
            // An alias inside this collection must not resolve to an older node of the same
            // name: it would refer to this unfinished one, which is reported as recursive.
            anchors[anchorName] = nil
        }
        if depth == itemBuffers.count {
            itemBuffers.append(ScratchBuffer())
            entryBuffers.append(ScratchBuffer())
        }
        stack.append(Frame(kind: kind, tag: tag.map { String(cString: $0) }, anchor: anchorName, start: start))
        return true
    }

    /// Finishes the innermost collection and attaches it to its parent.
    private mutating func close() {
        guard let frame = stack.popLast() else { return }
        let depth = stack.count
        let node: YAMLNode
        switch frame.kind {
        case .sequence:
            node = .sequence(YAMLSequence(items: itemBuffers[depth].takeAll(), tag: frame.tag, start: frame.start))
        case .mapping:
            var entries = entryBuffers[depth].takeAll()
            if !frame.merges.isEmpty { errors += Frame.applyMerges(frame.merges, to: &entries) }
            node = .mapping(YAMLMapping(entries: entries, tag: frame.tag, start: frame.start))
        }
        if let anchor = frame.anchor { anchors[anchor] = Anchored(node: node, size: frame.size) }
        attach(node, size: frame.size)
    }

    /// Expands an alias to a copy of its anchored node, enforcing the node budget.
    private mutating func alias(_ name: String, at position: SourcePosition) -> Bool {
        guard let anchored = anchors[name] else {
            let message = stack.contains(where: { $0.anchor == name })
                ? "the alias '*\(name)' refers to a node that contains it"
                : "the alias '*\(name)' does not refer to an earlier anchor '&\(name)'"
            fail(YAMLError(message: message, position: position))
            return false
        }
        nodeCount += anchored.size
        guard nodeCount <= YAMLParser.maximumNodeCount else {
            fail(YAMLError(message: "aliases expand to more than \(YAMLParser.maximumNodeCount) nodes",
                           position: position))
            return false
        }
        attach(anchored.node, size: anchored.size)
        return true
    }

    /// Attaches a finished node to the innermost open collection, or makes it the root.
    private mutating func attach(_ node: consuming YAMLNode, size: Int) {
        let top = stack.count - 1
        guard top >= 0 else {
            root = node
            return
        }
        if let error = stack[top].add(node, size: size, items: itemBuffers[top], entries: entryBuffers[top]) {
            errors.append(error)
        }
    }

    /// `attach` for a scalar event, the hot path: a key needs no enum wrapping.
    private mutating func attachScalar(_ scalar: consuming YAMLScalar) {
        let top = stack.count - 1
        guard top >= 0 else {
            root = .scalar(scalar)
            return
        }
        if let error = stack[top].add(scalar, items: itemBuffers[top], entries: entryBuffers[top]) {
            errors.append(error)
        }
    }

    private func style(_ style: yaml_scalar_style_t) -> YAMLScalar.Style {
        switch style {
        case YAML_SINGLE_QUOTED_SCALAR_STYLE: .singleQuoted
        case YAML_DOUBLE_QUOTED_SCALAR_STYLE: .doubleQuoted
        case YAML_LITERAL_SCALAR_STYLE: .literal
        case YAML_FOLDED_SCALAR_STYLE: .folded
        default: .plain
        }
    }
}

/// One open mapping or sequence. Its items or entries live in the builder's buffers for its
/// depth, which are passed to the methods that add to them.
private struct Frame {
    enum Kind { case mapping, sequence }

    /// A `<<` entry, resolved when the mapping closes.
    struct Merge {
        var source: YAMLNode
        /// Where the `<<` key is written (the source may be an alias to a node far away).
        var keyPosition: SourcePosition
        /// How many explicit entries precede it; merged entries are placed there.
        var index: Int
    }

    /// Mappings up to this size detect duplicate keys by a linear scan, larger ones by a set.
    /// Comparing short keys is a few instructions each, so scanning up to 16 of them costs
    /// less than hashing every key and allocating a set for each mid-sized mapping.
    static let linearScanLimit = 16

    let kind: Kind
    let tag: String?
    let anchor: String?
    let start: SourcePosition
    /// In a mapping, the key read whose value comes next.
    var pendingKey: YAMLScalar?
    /// In a mapping, whether the next node is the value of a non-scalar key, to be dropped.
    var skippingValue = false
    /// The keys of `entries`, filled only once the mapping outgrows `linearScanLimit`.
    var keySet: Set<String> = []
    var merges: [Merge] = []
    /// Nodes in this subtree so far, this collection included.
    var size = 1

    init(kind: Kind, tag: String?, anchor: String?, start: SourcePosition) {
        self.kind = kind
        self.tag = tag
        self.anchor = anchor
        self.start = start
    }

    /// Adds a finished child node; returns a non-fatal error when it is dropped.
    mutating func add(
        _ node: consuming YAMLNode, size: Int, items: ScratchBuffer<YAMLNode>, entries: ScratchBuffer<Entry>
    ) -> YAMLError? {
        self.size += size
        if kind == .sequence {
            items.append(node)
            return nil
        }
        if let key = pendingKey.take() {
            return addEntry(key: key, value: node, to: entries)
        }
        if skippingValue {
            skippingValue = false
            return nil
        }
        guard case .scalar(let key) = node else {
            skippingValue = true
            return YAMLError(message: "a mapping key must be a plain value", position: node.start)
        }
        pendingKey = key
        return nil
    }

    /// `add` for a scalar.
    mutating func add(
        _ scalar: consuming YAMLScalar, items: ScratchBuffer<YAMLNode>, entries: ScratchBuffer<Entry>
    ) -> YAMLError? {
        if kind == .mapping, case .none = pendingKey, !skippingValue {
            size += 1
            pendingKey = scalar
            return nil
        }
        return add(.scalar(scalar), size: 1, items: items, entries: entries)
    }

    /// Stores a key and value, or records a merge; returns an error for a duplicate key.
    private mutating func addEntry(
        key: consuming YAMLScalar, value: consuming YAMLNode, to entries: ScratchBuffer<Entry>
    ) -> YAMLError? {
        if key.style == .plain, key.value == "<<", key.tag == nil || key.tag == "tag:yaml.org,2002:merge" {
            merges.append(Merge(source: value, keyPosition: key.start, index: entries.count))
            return nil
        }
        // Read keys in place through the pointer: iterating entries would copy each one.
        let existing = entries.base
        let count = entries.count
        if count < Frame.linearScanLimit {
            for index in 0..<count where existing[index].key.value == key.value {
                return duplicate(key, first: existing[index].key)
            }
        } else {
            if keySet.isEmpty {
                keySet.reserveCapacity(count * 2)
                for index in 0..<count { keySet.insert(existing[index].key.value) }
            }
            if !keySet.insert(key.value).inserted,
               let index = (0..<count).first(where: { existing[$0].key.value == key.value }) {
                return duplicate(key, first: existing[index].key)
            }
        }
        entries.append((key: key, value: value))
        return nil
    }

    private func duplicate(_ key: YAMLScalar, first: YAMLScalar) -> YAMLError {
        YAMLError(message: "duplicate key '\(key.value)' (first at line \(first.start.line))", position: key.start)
    }

    /// Merges the entries of the `<<` sources into `entries` where their keys are not already
    /// present: explicit keys win, then earlier sources over later ones. Merged entries take
    /// the place of their `<<` entry. Returns errors for sources that are not mappings.
    static func applyMerges(_ merges: [Merge], to entries: inout [Entry]) -> [YAMLError] {
        var errors: [YAMLError] = []
        var present = Set<String>(minimumCapacity: entries.count * 2)
        for entry in entries { present.insert(entry.key.value) }
        var merged: [Entry] = []
        merged.reserveCapacity(entries.count)
        var nextExplicit = 0

        func take(_ mapping: YAMLMapping) {
            for entry in mapping.entries where present.insert(entry.key.value).inserted {
                merged.append(entry)
            }
        }

        for merge in merges {
            merged.append(contentsOf: entries[nextExplicit..<merge.index])
            nextExplicit = merge.index
            switch merge.source {
            case .mapping(let mapping):
                take(mapping)
            case .sequence(let sequence):
                for item in sequence.items {
                    if case .mapping(let mapping) = item {
                        take(mapping)
                    } else {
                        errors.append(YAMLError(
                            message: "the merge key '<<' can only merge mappings, but its list holds \(item.kindDescription)",
                            position: merge.keyPosition))
                    }
                }
            case .scalar:
                errors.append(YAMLError(
                    message: "the value of the merge key '<<' must be a mapping or a list of mappings",
                    position: merge.keyPosition))
            }
        }
        merged.append(contentsOf: entries[nextExplicit...])
        entries = merged
        return errors
    }
}

/// A growable buffer that hands all its elements over to an exactly-sized array by moving
/// them, then is reused for the next collection at the same depth.
///
/// Arrays grown by doubling waste a third of their memory on average, which on a large file
/// means hundreds of MB of extra page faults; copying into an exact array would instead cost a
/// retain and release per string. Moving avoids both.
private final class ScratchBuffer<Element> {
    /// The storage; `base[0..<count]` are the elements held. Valid until the next `append`.
    private(set) var base: UnsafeMutablePointer<Element>
    private var capacity: Int
    /// The number of elements held.
    private(set) var count = 0

    init() {
        capacity = 16
        base = UnsafeMutablePointer<Element>.allocate(capacity: capacity)
    }

    deinit {
        base.deinitialize(count: count)
        base.deallocate()
    }


    @inline(__always)
    func append(_ element: consuming Element) {
        if count == capacity { grow() }
        (base + count).initialize(to: element)
        count += 1
    }

    /// Moves every element into a new array of exactly that size, leaving the buffer empty.
    func takeAll() -> [Element] {
        let taken = count
        count = 0
        return [Element](unsafeUninitializedCapacity: taken) { buffer, initialized in
            if taken > 0 { buffer.baseAddress!.moveInitialize(from: base, count: taken) }
            initialized = taken
        }
    }

    private func grow() {
        let newCapacity = capacity * 2
        let newBase = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        newBase.moveInitialize(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }
}
