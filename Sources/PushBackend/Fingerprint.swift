import Crypto

/// Fingerprints: what a subscription sends, or what requests must share to go in one batch.
public enum Fingerprint {
    /// SHA-256 (lower-case hex) of `parts`, each followed by NUL.
    public static func sha256(_ parts: [String]) -> String {
        var hasher = SHA256()
        for part in parts { hasher.update(data: Array((part + "\u{0}").utf8)) }
        return hex(hasher.finalize())
    }

    /// Lower-case hex of `bytes` (a digest).
    public static func hex(_ bytes: some Sequence<UInt8>) -> String {
        // Written as bytes into the string's own storage: appending scalars one at a time was
        // 13 % of planning 100,000 Journeys registrations (perf).
        let bytes = Array(bytes)
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 2 * bytes.count) { buffer in
            digits.withUTF8Buffer { digits in
                for (index, byte) in bytes.enumerated() {
                    buffer[2 * index] = digits[Int(byte >> 4)]
                    buffer[2 * index + 1] = digits[Int(byte & 0x0F)]
                }
            }
            return 2 * bytes.count
        }
    }
}
