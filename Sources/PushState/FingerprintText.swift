/// How a subscription's fingerprint is written (issue 35): the first 90 bits of its SHA-256
/// digest, in 15 characters of base64url (RFC 4648 §5). Swift keeps a text of 15 bytes or fewer
/// inline, with no storage of its own: as 64 hex digits, each of 100,000 subscriptions kept a
/// 112-byte allocation for as long as the agent ran, and those, left scattered among what
/// planning freed, held 40 MB of the idle agent's pages.
///
/// A state written before holds 64 hex digits of the same digest; the stores read them in this
/// form (``current(_:)``), so an upgrade sends nothing again.
public enum FingerprintText {
    /// Characters in a fingerprint.
    public static let length = 15
    /// Bytes of the digest it needs.
    public static let digestBytes = 12

    private static let alphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

    /// The fingerprint of a digest (its first ``digestBytes`` bytes; it must have them).
    public static func of(digest bytes: UnsafeRawBufferPointer) -> String {
        precondition(bytes.count >= digestBytes, "a fingerprint takes \(digestBytes) bytes of a digest")
        return String(unsafeUninitializedCapacity: length) { out in
            alphabet.withUTF8Buffer { alphabet in
                // Four characters per three bytes: twelve bytes make sixteen, the last left out.
                var written = 0
                for group in 0..<(digestBytes / 3) {
                    let value = UInt32(bytes[3 * group]) << 16 | UInt32(bytes[3 * group + 1]) << 8 | UInt32(bytes[3 * group + 2])
                    for shift in stride(from: 18, through: 0, by: -6) where written < length {
                        out[written] = alphabet[Int((value >> UInt32(shift)) & 0x3F)]
                        written += 1
                    }
                }
            }
            return length
        }
    }

    /// `stored` in the form written now: 64 lower-case hex digits (a SHA-256 digest, as states
    /// before issue 35 hold) become the digest's fingerprint; anything else is returned as it is.
    public static func current(_ stored: String) -> String {
        guard stored.utf8.count == 64 else { return stored }
        var bytes = [UInt8](repeating: 0, count: digestBytes)
        var digits = stored.utf8.makeIterator()
        for index in 0..<digestBytes {
            guard let high = digits.next().flatMap(hexValue), let low = digits.next().flatMap(hexValue) else { return stored }
            bytes[index] = high << 4 | low
        }
        // The rest must be hex digits too, or it is not a digest.
        while let digit = digits.next() { if hexValue(digit) == nil { return stored } }
        return bytes.withUnsafeBytes { of(digest: $0) }
    }

    /// What the state keeps of a delivery's parts (PushBackend's `DeliveredParts`: its first
    /// line the first 16 characters of the fingerprint delivered), in the form written now: kept
    /// beside 64 hex digits, its first line is made of the fingerprint they now read as
    /// (``current(_:)``), so `plan` reads it for the same delivery after an upgrade.
    public static func currentParts(_ parts: String, deliveredFingerprint stored: String?) -> String {
        guard let stored, stored.utf8.count == 64, parts.utf8.starts(with: stored.utf8.prefix(16)),
              parts.utf8.dropFirst(16).first == UInt8(ascii: "\n") else { return parts }
        let current = current(stored)
        guard current != stored else { return parts }
        return String(current.prefix(16)) + String(parts.dropFirst(16))
    }

    /// ``current(_:)`` of an optional text.
    public static func current(_ stored: String?) -> String? {
        stored.map { current($0) }
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
