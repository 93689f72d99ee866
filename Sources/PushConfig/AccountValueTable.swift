/// An account's values by key, in the order they were first set.
///
/// An account has about a dozen keys, and checking or sending its requests looks keys up some
/// thirty times. A `Dictionary` hashed the key of each lookup with SipHash and kept a table of
/// twice the room: for 100,000 accounts, that was a sizeable part of the time to validate them
/// and 1–2 KB each. This is a plain list searched by a cheap digest of each key (its length
/// and first and last eight bytes); a key is compared in full only when its digest matches.
/// Keys are equal as Strings are (canonically equivalent Unicode is one key): a key with a
/// non-ASCII byte has no digest of its bytes, and is compared with every key that could equal it.
public struct AccountValueTable: Sendable {
    fileprivate struct Entry: Sendable {
        let digest: UInt64
        let key: String
        var value: ConfigValue
    }

    private var entries: [Entry] = []

    public init() {}

    /// The values of `dictionary`, in the order of their keys.
    init(_ dictionary: [String: ConfigValue]) {
        entries.reserveCapacity(dictionary.count)
        for (key, value) in dictionary.sorted(by: { $0.key < $1.key }) {
            entries.append(Entry(digest: Self.digest(of: key), key: key, value: value))
        }
    }

    /// The value under `key`; setting nil removes it, setting a new key adds it last.
    public subscript(key: String) -> ConfigValue? {
        get {
            guard let index = index(of: key) else { return nil }
            return entries[index].value
        }
        set { self[PreparedKey(key)] = newValue }
    }

    /// Whether the table has `key` (without copying its value).
    public func contains(_ key: String) -> Bool {
        index(of: key) != nil
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
            guard let index = index(of: key.name, digest: key.digest) else { return nil }
            return entries[index].value
        }
        set {
            if let index = index(of: key.name, digest: key.digest) {
                if let newValue { entries[index].value = newValue } else { entries.remove(at: index) }
            } else if let newValue {
                entries.append(Entry(digest: key.digest, key: key.name, value: newValue))
            }
        }
    }

    /// Whether the table has `key` (without copying its value).
    public func contains(_ key: PreparedKey) -> Bool {
        index(of: key.name, digest: key.digest) != nil
    }

    /// Whether a value satisfies `predicate`, read in place (iterating copies each key and value).
    public func containsValue(where predicate: (ConfigValue) -> Bool) -> Bool {
        entries.contains { predicate($0.value) }
    }

    public var keys: [String] { entries.map(\.key) }

    /// Whether `other` has the same keys in the same order (their values aside).
    func hasSameKeys(as other: AccountValueTable) -> Bool {
        guard entries.count == other.entries.count else { return false }
        // In place: iterating would retain and release every key.
        return entries.withUnsafeBufferPointer { mine in
            other.entries.withUnsafeBufferPointer { theirs in
                mine.indices.allSatisfy { mine[$0].digest == theirs[$0].digest && mine[$0].key == theirs[$0].key }
            }
        }
    }
    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }

    public mutating func reserveCapacity(_ minimumCapacity: Int) {
        entries.reserveCapacity(minimumCapacity)
    }

    private func index(of key: String) -> Int? {
        index(of: key, digest: Self.digest(of: key))
    }

    private func index(of key: String, digest: UInt64) -> Int? {
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
    public struct Iterator: IteratorProtocol {
        private var base: IndexingIterator<[Entry]>

        fileprivate init(_ entries: [Entry]) { base = entries.makeIterator() }

        public mutating func next() -> (key: String, value: ConfigValue)? {
            base.next().map { ($0.key, $0.value) }
        }
    }

    public func makeIterator() -> Iterator { Iterator(entries) }
    public var underestimatedCount: Int { entries.count }
}

extension AccountValueTable: ExpressibleByDictionaryLiteral {
    /// A later repeat of a key replaces its value, where it was first set.
    public init(dictionaryLiteral elements: (String, ConfigValue)...) {
        for (key, value) in elements { self[key] = value }
    }
}
