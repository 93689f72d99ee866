import CYAML
import PushSystem
#if canImport(Glibc)
import Glibc
#endif


/// One copy of each mapping key too long for a small string.
///
/// Every account repeats the same keys, and keys such as `pushTokenIncomingCall` (21 bytes) are
/// too long to be stored inline in a String: without sharing, each account allocates its own
/// copies. A key pushreporter knows is given as the string literal the code uses, which is never
/// reference counted: a shared heap copy would be retained and released by every thread that
/// copies or looks up an account's values. Other keys share one heap copy per recent key (a key
/// that differs from the one in its slot replaces it).
struct KeyInterner {
    private var slots: [String?] = Array(repeating: nil, count: 64)
    /// The keys made last, in order, and the one expected next: the items of a sequence repeat
    /// their keys in the same order, and comparing with the key expected costs a fifth of
    /// hashing and checking a key's bytes again.
    private var recent: [String] = []
    private var next = 0
    private static let recentCount = 32

    mutating func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        if next < recent.count, Self.equal(recent[next], bytes) {
            next += 1
            return recent[next - 1]
        }
        // A mapping's first key, after the last key of the mapping before; or another order.
        if let index = recent.firstIndex(where: { Self.equal($0, bytes) }) {
            next = index + 1
            return recent[index]
        }
        let made = make(bytes)
        if recent.count == Self.recentCount { recent.removeFirst() }
        recent.append(made)
        next = recent.count
        return made
    }

    private mutating func make(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        // Up to 15 UTF-8 bytes, a String holds its text inline: nothing to share.
        guard bytes.count > 15 else { return String(decoding: bytes, as: UTF8.self) }
        let hash = Self.hash(bytes)
        if let known = Self.known.first(hash: hash, matching: bytes) { return known }
        let slot = Int(hash & UInt32(slots.count - 1))
        if let cached = slots[slot], Self.equal(cached, bytes) { return cached }
        let made = String(decoding: bytes, as: UTF8.self)
        slots[slot] = made
        return made
    }

    /// FNV-1a.
    private static func hash<C: Sequence<UInt8>>(_ bytes: C) -> UInt32 {
        var hash: UInt32 = 2_166_136_261
        for byte in bytes { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return hash
    }

    private static func equal(_ string: String, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        string.utf8.count == bytes.count
            && string.utf8.withContiguousStorageIfAvailable({ memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }) == true
    }

    /// The account keys pushreporter acts on that are too long to be inline, by hash (open
    /// addressing over 128 slots).
    private static let known = KnownKeys(LoadSession.accountOwnKeys.filter { $0.utf8.count > 15 })

    private struct KnownKeys {
        private var slots: [(hash: UInt32, key: String)?] = Array(repeating: nil, count: 128)

        init(_ keys: [String]) {
            for key in keys {
                let hash = KeyInterner.hash(key.utf8)
                var slot = Int(hash) & (slots.count - 1)
                while slots[slot] != nil { slot = (slot + 1) & (slots.count - 1) }
                slots[slot] = (hash, key)
            }
        }

        func first(hash: UInt32, matching bytes: UnsafeBufferPointer<UInt8>) -> String? {
            var slot = Int(hash) & (slots.count - 1)
            while let entry = slots[slot] {
                if entry.hash == hash, KeyInterner.equal(entry.key, bytes) { return entry.key }
                slot = (slot + 1) & (slots.count - 1)
            }
            return nil
        }
    }
}
