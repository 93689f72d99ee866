/// A type-erased, sendable random number generator, so the scheduler can keep the one it was given.
struct AnySendableGenerator: RandomNumberGenerator, Sendable {
    private var base: any RandomNumberGenerator & Sendable

    init(_ base: some RandomNumberGenerator & Sendable) {
        self.base = base
    }

    mutating func next() -> UInt64 {
        base.next()
    }
}
