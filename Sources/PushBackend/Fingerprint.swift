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
        let digits = Array("0123456789abcdef".unicodeScalars)
        var out = ""
        for byte in bytes {
            out.unicodeScalars.append(digits[Int(byte >> 4)])
            out.unicodeScalars.append(digits[Int(byte & 0x0F)])
        }
        return out
    }
}
