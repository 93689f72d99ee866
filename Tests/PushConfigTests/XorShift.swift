/// A deterministic pseudo-random generator (xorshift), so that a failure can be reproduced.
struct XorShift {
    var state: UInt64

    /// The next number, from 0 to 2³¹ − 1.
    mutating func next() -> Int {
        advance()
        return Int(truncatingIfNeeded: state >> 33)
    }

    /// Moves `state` on.
    mutating func advance() {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
    }
}
