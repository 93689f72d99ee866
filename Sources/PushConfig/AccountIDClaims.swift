/// The account ids a load has taken, each with where it was taken: what tells a duplicate
/// (ids are unique across all files, SPEC §2).
///
/// A `[String: (SourcePath, SourcePosition)]` took 32 bytes a slot at a fill of at most 3/4 and
/// held two tables while it doubled: 12.6 MB at the peak for 100,000 accounts, about 150 MB for a
/// million, for `validate`, `preview` and every load alike. This keeps the ids' bytes one after
/// another, the claims in a list in claim order, and an open-addressing table of 8-byte slots,
/// each 32 bits of an id's hash beside its claim's number: 24 bytes a claim, the id's bytes, and
/// 11–21 bytes of table.
///
/// Ids are equal as Strings are (canonically equivalent Unicode is one id), as with the
/// dictionary: the hash is the String's own, and ids whose bytes differ are compared as Strings
/// unless both are ASCII.
struct AccountIDClaims: Sendable {
    /// Where an id was taken.
    struct Owner: Sendable {
        let path: SourcePath
        let position: SourcePosition
    }

    private struct Claim: Sendable {
        /// Where the id's bytes end in `bytes` (they start where the claim before ends).
        let end: Int
        let owner: Owner
    }

    private var bytes: [UInt8] = []
    private var claims: [Claim] = []
    /// 0 when empty; else the high 32 bits of the id's hash (also what places it: the slot is
    /// found again from them when the table grows), then the claim's index + 1.
    private var slots: [UInt64] = []

    init() {}

    /// How many ids are taken.
    var count: Int { claims.count }

    /// Makes room for `more` ids without the table growing on the way.
    mutating func reserveCapacity(forMore more: Int) {
        claims.reserveRoom(for: more)
        growTable(toHold: claims.count + more)
    }

    /// Takes `id` for the account at `position` of `path`; when an earlier account has it,
    /// takes nothing and returns that account's place.
    mutating func claim(_ id: String, path: SourcePath, at position: SourcePosition) -> Owner? {
        var id = id
        let tag = Self.tag(of: id)
        if let index = find(&id, tag: tag).claim { return claims[index].owner }
        growTable(toHold: claims.count + 1)
        id.withUTF8 { bytes.append(contentsOf: $0) }
        claims.append(Claim(end: bytes.count, owner: Owner(path: path, position: position)))
        insert(tag: tag, claim: claims.count - 1)
        return nil
    }

    /// The place of the account that took `id`, if one did.
    func owner(of id: String) -> Owner? {
        var id = id
        return find(&id, tag: Self.tag(of: id)).claim.map { claims[$0].owner }
    }

    /// Forgets every id taken after the first `count` (a load going back to a checkpoint), in
    /// time for those ids only.
    mutating func removeClaims(after count: Int) {
        guard count < claims.count else { return }
        for index in (count..<claims.count).reversed() {
            let tag = Self.tag(of: String(decoding: idBytes(index), as: UTF8.self))
            if let slot = slot(ofClaim: index, tag: tag) { removeSlot(slot) }
        }
        claims.removeSubrange(count...)
        bytes.removeSubrange((claims.last?.end ?? 0)...)
    }

    // MARK: - The table

    /// The high 32 bits of the String's own hash (seeded per process, as a dictionary's).
    private static func tag(of id: String) -> UInt32 {
        var hasher = Hasher()
        hasher.combine(id)
        return UInt32(truncatingIfNeeded: UInt64(bitPattern: Int64(hasher.finalize())) >> 32)
    }

    private func idBytes(_ index: Int) -> ArraySlice<UInt8> {
        bytes[(index == 0 ? 0 : claims[index - 1].end)..<claims[index].end]
    }

    /// The claim of `id` if taken, else the empty slot where it goes (`id` is mutable only to
    /// read its bytes in place).
    private func find(_ id: inout String, tag: UInt32) -> (claim: Int?, slot: Int) {
        guard !slots.isEmpty else { return (nil, 0) }
        let mask = slots.count - 1
        var slot = Int(tag) & mask
        while true {
            let entry = slots[slot]
            if entry == 0 { return (nil, slot) }
            if UInt32(truncatingIfNeeded: entry >> 32) == tag {
                let index = Int(truncatingIfNeeded: entry & 0xFFFF_FFFF) - 1
                if matches(index, &id) { return (index, slot) }
            }
            slot = (slot + 1) & mask
        }
    }

    /// The slot of claim `index`, whose id's tag is `tag`.
    private func slot(ofClaim index: Int, tag: UInt32) -> Int? {
        let mask = slots.count - 1
        var slot = Int(tag) & mask
        let entry = UInt64(tag) << 32 | UInt64(index + 1)
        while slots[slot] != 0 {
            if slots[slot] == entry { return slot }
            slot = (slot + 1) & mask
        }
        return nil
    }

    /// Empties `slot`, moving back the entries after it in its run that would otherwise no
    /// longer be found from where they belong (linear probing's deletion, without markers).
    private mutating func removeSlot(_ slot: Int) {
        let mask = slots.count - 1
        var hole = slot
        var next = slot
        while true {
            next = (next + 1) & mask
            let entry = slots[next]
            if entry == 0 { break }
            let home = Int(UInt32(truncatingIfNeeded: entry >> 32)) & mask
            // It stays when its home lies after the hole, up to it (cyclically).
            let stays = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next)
            if stays { continue }
            slots[hole] = entry
            hole = next
        }
        slots[hole] = 0
    }

    /// Whether the id of claim `index` equals `id` as Strings are equal.
    private func matches(_ index: Int, _ id: inout String) -> Bool {
        let stored = idBytes(index)
        let (sameBytes, isASCII) = id.withUTF8 { utf8 in
            (stored.elementsEqual(utf8), utf8.allSatisfy { $0 < 0x80 })
        }
        if sameBytes { return true }
        // Different bytes are different ASCII ids; with another character they may still be
        // canonically equivalent (U+212A KELVIN SIGN is K).
        if isASCII && stored.allSatisfy({ $0 < 0x80 }) { return false }
        return String(decoding: stored, as: UTF8.self) == id
    }

    private mutating func insert(tag: UInt32, claim index: Int) {
        let mask = slots.count - 1
        var slot = Int(tag) & mask
        while slots[slot] != 0 { slot = (slot + 1) & mask }
        slots[slot] = UInt64(tag) << 32 | UInt64(index + 1)
    }

    /// Doubles the table until `count` ids fill at most three quarters of it.
    private mutating func growTable(toHold count: Int) {
        var size = max(slots.count, 16)
        while count > size / 4 * 3 { size *= 2 }
        guard size != slots.count else { return }
        let old = slots
        slots = Array(repeating: 0, count: size)
        // Placed again from the tag each slot keeps: no id is hashed again.
        for entry in old where entry != 0 {
            insert(tag: UInt32(truncatingIfNeeded: entry >> 32), claim: Int(truncatingIfNeeded: entry & 0xFFFF_FFFF) - 1)
        }
    }
}

extension Array {
    /// Makes room for `more` elements beyond the count, at least doubling the room when it
    /// grows: `reserveCapacity` gives exactly what is asked, so asking once a file for a little
    /// more would copy everything before at each file.
    mutating func reserveRoom(for more: Int) {
        let needed = count + more
        guard needed > capacity else { return }
        reserveCapacity(Swift.max(needed, 2 * capacity))
    }
}
