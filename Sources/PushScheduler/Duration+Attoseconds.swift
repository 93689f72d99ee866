/// Exact arithmetic on `Duration` through its attosecond count, for the backoff curve and jitter.
extension Duration {
    static let attosecondsPerSecond: Int128 = 1_000_000_000_000_000_000
    static let attosecondsPerNanosecond: Int128 = 1_000_000_000

    /// The whole duration in attoseconds (a `Duration` always fits in 128 bits).
    var totalAttoseconds: Int128 {
        let (seconds, attoseconds) = components
        return Int128(seconds) * Self.attosecondsPerSecond + Int128(attoseconds)
    }

    /// The duration of `attoseconds`, clamped to what `Duration`'s components can hold.
    init(totalAttoseconds attoseconds: Int128) {
        let limit = Int128(Int64.max) * Self.attosecondsPerSecond
        let clamped = Swift.min(Swift.max(attoseconds, -limit), limit)
        let (seconds, remainder) = clamped.quotientAndRemainder(dividingBy: Self.attosecondsPerSecond)
        self.init(secondsComponent: Int64(seconds), attosecondsComponent: Int64(remainder))
    }
}
