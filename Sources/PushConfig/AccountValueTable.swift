/// An account's values by key, in the order they were first set.
///
/// An account has about a dozen keys, and checking or sending its requests looks keys up some
/// thirty times. A `Dictionary` hashed the key of each lookup with SipHash and kept a table of
/// twice the room: for 100,000 accounts, that was a sizeable part of the time to validate them
/// and 1–2 KB each. This is a plain list searched by a cheap digest of each key (its length
/// and first and last eight bytes); a key is compared in full only when its digest matches.
/// Keys are equal as Strings are (canonically equivalent Unicode is one key): a key with a
/// non-ASCII byte has no digest of its bytes, and is compared with every key that could equal it.
///
/// A table made over another (``init(over:)``: an account over its file's `defaults:`) keeps
/// the other's list as it is, shared with every table made over it, and only its own keys
/// beside: copied into each account, the `defaults:` were half of what 100,000 accounts of two
/// tokens and a removal URL held once loaded (82 MB, the peak of `run --once`).
public struct AccountValueTable: Sendable {
    fileprivate struct Entry: Sendable {
        let digest: UInt64
        let key: String
        /// Nil only in ``own``: a key of ``base`` this table removed.
        var value: ConfigValue?
    }

    /// The keys of the table this one was made over, shared with it (never changed here).
    private var base: [Entry] = []
    /// This table's own keys: those it set over ``base`` (nil for one it removed), and those it
    /// added, in the order added.
    private var own: [Entry] = []

    public init() {}

    /// A table holding `base`'s values, sharing them with it: what is set here goes over them.
    public init(over base: AccountValueTable) {
        self.base = base.own.isEmpty ? base.base : base.base.isEmpty ? base.own : base.flattened
    }

    /// The values of `dictionary`, in the order of their keys.
    init(_ dictionary: [String: ConfigValue]) {
        own.reserveCapacity(dictionary.count)
        for (key, value) in dictionary.sorted(by: { $0.key < $1.key }) {
            own.append(Entry(digest: Self.digest(of: key), key: key, value: value))
        }
    }

    /// The value under `key`; setting nil removes it, setting a new key adds it last.
    public subscript(key: String) -> ConfigValue? {
        get { self[PreparedKey(key)] }
        set { self[PreparedKey(key)] = newValue }
    }

    /// Whether the table has `key` (without copying its value).
    public func contains(_ key: String) -> Bool {
        contains(PreparedKey(key))
    }

    /// A key name with its digest worked out once, for the names looked up in every account.
    public struct PreparedKey: Sendable {
        public let name: String
        let digest: UInt64

        public init(_ name: String) {
            self.name = name
            digest = AccountValueTable.digest(of: name)
        }

        /// Whether this is `id`, which every account has (see ``Account/text(of:)``).
        var isID: Bool { digest == Self.idDigest && name == "id" }

        private static let idDigest = AccountValueTable.digest(of: "id")
    }

    /// The value under `key`; setting nil removes it, setting a new key adds it last.
    public subscript(key: PreparedKey) -> ConfigValue? {
        get {
            if let index = Self.index(of: key, in: own) { return own[index].value }
            guard let index = Self.index(of: key, in: base) else { return nil }
            return base[index].value
        }
        set {
            if let index = Self.index(of: key, in: own) {
                if newValue == nil && Self.index(of: key, in: base) == nil {
                    own.remove(at: index)
                } else {
                    own[index].value = newValue
                }
            } else if let index = Self.index(of: key, in: base) {
                // Over the base's key, under its spelling (a canonically equivalent one may be set).
                own.append(Entry(digest: base[index].digest, key: base[index].key, value: newValue))
            } else if let newValue {
                own.append(Entry(digest: key.digest, key: key.name, value: newValue))
            }
        }
    }

    /// Whether the table has `key` (without copying its value).
    public func contains(_ key: PreparedKey) -> Bool {
        if let index = Self.index(of: key, in: own) { return own[index].value != nil }
        return Self.index(of: key, in: base) != nil
    }

    /// Whether a value satisfies `predicate`, read in place (iterating copies each key and value).
    public func containsValue(where predicate: (ConfigValue) -> Bool) -> Bool {
        own.contains { $0.value.map(predicate) ?? false }
            || base.indices.contains { !isSetHere(base[$0]) && predicate(base[$0].value!) }
    }

    public var keys: [String] { map(\.key) }

    /// Whether `other` has the same keys in the same order (their values aside).
    func hasSameKeys(as other: AccountValueTable) -> Bool {
        // In place: iterating would retain and release every key.
        if Self.sameKeys(base, other.base) && Self.sameKeys(own, other.own) && Self.sameRemovals(own, other.own) { return true }
        guard count == other.count else { return false }
        return keys == other.keys
    }

    public var count: Int {
        own.reduce(base.count) { count, entry in
            let overrides = Self.index(of: entry.key, digest: entry.digest, in: base) != nil
            return count + (overrides ? (entry.value == nil ? -1 : 0) : 1)
        }
    }

    public var isEmpty: Bool { count == 0 }

    /// Room for `minimumCapacity` keys of its own, beside those of the table it was made over.
    public mutating func reserveCapacity(_ minimumCapacity: Int) {
        own.reserveCapacity(minimumCapacity)
    }

    /// Whether `entry` of ``base`` is set or removed by ``own``.
    private func isSetHere(_ entry: Entry) -> Bool {
        Self.index(of: entry.key, digest: entry.digest, in: own) != nil
    }

    /// Every key in order as one list, with no layer.
    private var flattened: [Entry] {
        var entries: [Entry] = []
        entries.reserveCapacity(base.count + own.count)
        for (key, value) in self { entries.append(Entry(digest: Self.digest(of: key), key: key, value: value)) }
        return entries
    }

    private static func sameKeys(_ mine: [Entry], _ theirs: [Entry]) -> Bool {
        guard mine.count == theirs.count else { return false }
        return mine.withUnsafeBufferPointer { mine in
            theirs.withUnsafeBufferPointer { theirs in
                mine.indices.allSatisfy { mine[$0].digest == theirs[$0].digest && mine[$0].key == theirs[$0].key }
            }
        }
    }

    private static func sameRemovals(_ mine: [Entry], _ theirs: [Entry]) -> Bool {
        mine.indices.allSatisfy { (mine[$0].value == nil) == (theirs[$0].value == nil) }
    }

    private static func index(of key: PreparedKey, in entries: [Entry]) -> Int? {
        index(of: key.name, digest: key.digest, in: entries)
    }

    private static func index(of key: String, digest: UInt64, in entries: [Entry]) -> Int? {
        entries.withUnsafeBufferPointer { entries in
            if digest == Self.nonASCII {
                // Canonically equivalent to other non-ASCII keys, and even to some ASCII ones
                // (U+212A KELVIN SIGN is K): compared with all.
                return entries.firstIndex { $0.key == key }
            }
            for index in entries.indices
            where (entries[index].digest == digest || entries[index].digest == Self.nonASCII) && entries[index].key == key {
                return index
            }
            return nil
        }
    }

    /// The digest of every key with a non-ASCII byte; no ASCII key has it.
    static let nonASCII: UInt64 = .max

    /// For an ASCII key, its length, first and last eight bytes, mixed: equal keys have equal
    /// digests, and different keys rarely do (they are then told apart by comparing them).
    /// ``nonASCII`` for any other key.
    static func digest(of key: String) -> UInt64 {
        var key = key
        return key.withUTF8 { bytes in
            let count = bytes.count
            guard let start = bytes.baseAddress, count > 0 else { return 0 }
            guard isASCII(bytes) else { return nonASCII }
            var digest = UInt64(truncatingIfNeeded: count) &* 0x9E37_79B9_7F4A_7C15
            if count >= 8 {
                let raw = UnsafeRawPointer(start)
                digest ^= raw.loadUnaligned(as: UInt64.self)
                digest = (digest &* 0xFF51_AFD7_ED55_8CCD) ^ (digest >> 29)
                digest ^= raw.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
            } else {
                var word: UInt64 = 0
                for i in 0..<count { word |= UInt64(start[i]) << (8 * UInt64(i)) }
                digest ^= word
            }
            // The top bit clear: never `nonASCII`.
            return ((digest &* 0xC4CE_B9FE_1A85_EC53) ^ (digest >> 32)) & 0x7FFF_FFFF_FFFF_FFFF
        }
    }

    /// Whether no byte has its top bit set, eight at a time.
    private static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let raw = UnsafeRawBufferPointer(bytes)
        var all: UInt64 = 0
        var offset = 0
        while offset + 8 <= raw.count {
            all |= raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        while offset < raw.count {
            all |= UInt64(raw[offset])
            offset += 1
        }
        return all & 0x8080_8080_8080_8080 == 0
    }
}

extension AccountValueTable: Sequence {
    /// The keys of the table it was made over, each with this table's value if it set one (and
    /// skipped if it removed it), then the keys this table added.
    public struct Iterator: IteratorProtocol {
        private let table: AccountValueTable
        private var index = 0

        fileprivate init(_ table: AccountValueTable) { self.table = table }

        public mutating func next() -> (key: String, value: ConfigValue)? {
            while index < table.base.count {
                let entry = table.base[index]
                index += 1
                guard let here = AccountValueTable.index(of: entry.key, digest: entry.digest, in: table.own) else {
                    return (entry.key, entry.value!)
                }
                if let value = table.own[here].value { return (entry.key, value) }
            }
            while index < table.base.count + table.own.count {
                let entry = table.own[index - table.base.count]
                index += 1
                if AccountValueTable.index(of: entry.key, digest: entry.digest, in: table.base) == nil, let value = entry.value {
                    return (entry.key, value)
                }
            }
            return nil
        }
    }

    public func makeIterator() -> Iterator { Iterator(self) }
    public var underestimatedCount: Int { count }
}

extension AccountValueTable: ExpressibleByDictionaryLiteral {
    /// A later repeat of a key replaces its value, where it was first set.
    public init(dictionaryLiteral elements: (String, ConfigValue)...) {
        for (key, value) in elements { self[key] = value }
    }
}
