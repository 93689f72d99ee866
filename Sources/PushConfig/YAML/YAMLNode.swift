/// A position in a configuration file, as editors and CI show it.
///
/// `line` and `column` are 1-based; `column` counts Unicode scalars (characters), not bytes.
/// Stored in 32 bits each (files are at most 512 MB): every scalar and every loaded value keeps
/// two positions, and at 100,000 accounts their size shows in the time to load.
public struct SourcePosition: Sendable, Hashable, Comparable {
    private var storedLine: Int32
    private var storedColumn: Int32

    public var line: Int {
        get { Int(storedLine) }
        set { storedLine = Int32(clamping: newValue) }
    }

    public var column: Int {
        get { Int(storedColumn) }
        set { storedColumn = Int32(clamping: newValue) }
    }

    public init(line: Int, column: Int) {
        storedLine = Int32(clamping: line)
        storedColumn = Int32(clamping: column)
    }

    public static func < (lhs: SourcePosition, rhs: SourcePosition) -> Bool {
        (lhs.storedLine, lhs.storedColumn) < (rhs.storedLine, rhs.storedColumn)
    }
}

/// A YAML scalar exactly as written: its text is never reinterpreted as a number or a boolean.
public struct YAMLScalar: Sendable {
    /// How the scalar was written; block and quoted scalars map template offsets differently.
    public enum Style: Sendable, Hashable {
        case plain, singleQuoted, doubleQuoted, literal, folded
    }

    /// The scalar's value after YAML unescaping and folding.
    public var value: String
    /// The scalar's style in the source.
    public var style: Style
    /// The tag as written in the file (`!env`, `!file`, `!credential`, …), or nil when untagged.
    public var tag: String?
    /// Where the scalar starts (at its quote or block indicator, or its first character when plain).
    public var start: SourcePosition
    /// Where the scalar ends (just past its last character).
    public var end: SourcePosition

    public init(value: String, style: Style = .plain, tag: String? = nil,
                start: SourcePosition, end: SourcePosition) {
        self.value = value
        self.style = style
        self.tag = tag
        self.start = start
        self.end = end
    }
}

/// A YAML mapping with its entries in file order. Keys are always scalars and never repeat.
public struct YAMLMapping: Sendable {
    /// A key and its value.
    ///
    /// A struct, not a tuple: the optimizer copied a `(key:value:)` tuple whole, through the
    /// runtime's generic tuple copy, each time code read a field of one in an array (twice for
    /// every key of every account), where it reads a struct's fields in place.
    public struct Entry: Sendable {
        public var key: YAMLScalar
        public var value: YAMLNode

        public init(key: YAMLScalar, value: YAMLNode) {
            self.key = key
            self.value = value
        }
    }

    public var entries: [Entry]
    public var tag: String?
    public var start: SourcePosition

    public init(entries: [Entry], tag: String? = nil, start: SourcePosition) {
        self.entries = entries
        self.tag = tag
        self.start = start
    }

    /// The value stored under `key`, if any.
    public subscript(key: String) -> YAMLNode? {
        for entry in entries where entry.key.value == key { return entry.value }
        return nil
    }
}

/// A YAML sequence with its items in file order.
public struct YAMLSequence: Sendable {
    public var items: [YAMLNode]
    public var tag: String?
    public var start: SourcePosition

    public init(items: [YAMLNode], tag: String? = nil, start: SourcePosition) {
        self.items = items
        self.tag = tag
        self.start = start
    }
}

/// One node of a parsed YAML document; every node keeps where it was written.
public enum YAMLNode: Sendable {
    case scalar(YAMLScalar)
    case mapping(YAMLMapping)
    case sequence(YAMLSequence)

    /// Where the node starts in its file.
    public var start: SourcePosition {
        switch self {
        case .scalar(let s): s.start
        case .mapping(let m): m.start
        case .sequence(let s): s.start
        }
    }

    /// A short noun for messages: "a scalar", "a mapping", "a sequence".
    public var kindDescription: String {
        switch self {
        case .scalar: "a scalar"
        case .mapping: "a mapping"
        case .sequence: "a sequence"
        }
    }
}

/// A problem that stops a YAML file from being read at all (syntax, encoding, structure limits).
public struct YAMLError: Error, Sendable, Hashable {
    /// One sentence, starting lower-case, with no position in it (the position is separate).
    public var message: String
    public var position: SourcePosition

    public init(message: String, position: SourcePosition) {
        self.message = message
        self.position = position
    }
}
