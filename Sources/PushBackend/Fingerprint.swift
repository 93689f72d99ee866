import Crypto
import FoundationEssentials
import PushState

/// Fingerprints: what a subscription sends, or what requests must share to go in one batch.
public enum Fingerprint {
    /// SHA-256 (lower-case hex) of `parts`, each followed by NUL: what requests of a batch
    /// share, a group's name.
    public static func sha256(_ parts: [String]) -> String {
        hex(digest(parts))
    }

    /// A subscription's fingerprint (``SubscriptionPlan/fingerprint``) of `parts`, each followed
    /// by NUL: of the same SHA-256 digest, written as ``FingerprintText`` (15 characters, kept
    /// inline).
    public static func subscription(_ parts: [String]) -> String {
        subscription(digest: digest(parts))
    }

    /// A subscription's fingerprint of a SHA-256 digest.
    public static func subscription(digest: SHA256.Digest) -> String {
        digest.withUnsafeBytes { FingerprintText.of(digest: $0) }
    }

    /// SHA-256 of `parts`, each followed by NUL.
    private static func digest(_ parts: [String]) -> SHA256.Digest {
        // The parts are copied into one buffer and hashed in one update: a string and an array
        // per part cost planning 100,000 subscriptions more than the hashing itself.
        let size = parts.reduce(0) { $0 + $1.utf8.count + 1 }
        let digest = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: size) { buffer -> SHA256.Digest in
            var offset = 0
            for var part in parts {
                part.withUTF8 { bytes in
                    if let base = bytes.baseAddress {
                        (buffer.baseAddress! + offset).update(from: base, count: bytes.count)
                    }
                    offset += bytes.count
                }
                buffer[offset] = 0
                offset += 1
            }
            var hasher = SHA256()
            hasher.update(bufferPointer: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: buffer[..<offset])))
            return hasher.finalize()
        }
        return digest
    }

    /// Lower-case hex of a digest, read in place: iterating it as a sequence into an array was
    /// a sixth of a fingerprint (perf, planning 100,000 subscriptions).
    public static func hex(_ digest: some Digest) -> String {
        digest.withUnsafeBytes { hexDigits($0) }
    }

    /// Lower-case hex of `bytes`.
    public static func hex(_ bytes: some Sequence<UInt8>) -> String {
        Array(bytes).withUnsafeBytes { hexDigits($0) }
    }

    /// Read as raw bytes: a digest's memory is bound to its own type, not to `UInt8`.
    private static func hexDigits(_ bytes: UnsafeRawBufferPointer) -> String {
        // Written as bytes into the string's own storage: appending scalars one at a time was
        // 13 % of planning 100,000 Journeys registrations (perf).
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
