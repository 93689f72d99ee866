/// How long to wait after a failed attempt: jittered exponential backoff with a cap (SPEC §5).
///
/// The nominal delay after failure `n` (n ≥ 1) is `min(maximum, initial × multiplier^(n−1))`; the
/// delay actually waited is drawn uniformly from `[nominal/2, nominal]`, so that reports that
/// failed together do not all come back together. With the defaults:
///
/// | after failure | nominal | drawn from      |
/// |---------------|---------|-----------------|
/// | 1             | 5s      | 2.5s … 5s       |
/// | 2             | 10s     | 5s … 10s        |
/// | 3             | 20s     | 10s … 20s       |
/// | 4             | 40s     | 20s … 40s       |
/// | 5             | 1m20s   | 40s … 1m20s     |
/// | 6             | 2m40s   | 1m20s … 2m40s   |
/// | 7             | 5m20s   | 2m40s … 5m20s   |
/// | 8             | 10m40s  | 5m20s … 10m40s  |
/// | 9             | 21m20s  | 10m40s … 21m20s |
/// | 10+           | 30m     | 15m … 30m       |
///
/// Retries never stop: after the curve reaches `maximum` every further failure waits
/// `maximum/2 … maximum`. Two rules of SPEC §5 sit on top of the curve and are applied by
/// ``ReportAttempts``: a 4xx other than 408 and 429 goes straight to `maximum`, and a 429 or 503
/// with `Retry-After` waits at least that long, that part capped by `maxRetryAfter`.
///
/// The policy is plain data (the `agent.retry` block of the configuration); values that make no
/// sense are tolerated rather than trapped on: a negative duration counts as zero and a
/// `multiplier` below 1 (or NaN) counts as 1.
public struct BackoffPolicy: Sendable, Hashable {
    /// The nominal delay after the first failure. Default 5 s.
    public var initial: Duration
    /// The factor between the nominal delays of two consecutive failures. Default 2.
    public var multiplier: Double
    /// The cap on the nominal delay, and the nominal delay of the 4xx "slow lane". Default 30 min.
    public var maximum: Duration
    /// The longest `Retry-After` that is honoured; a longer one is cut to this. Default 1 h.
    public var maxRetryAfter: Duration

    /// Creates a policy; every parameter defaults to the value of SPEC §5.
    public init(
        initial: Duration = .seconds(5),
        multiplier: Double = 2,
        maximum: Duration = .seconds(30 * 60),
        maxRetryAfter: Duration = .seconds(60 * 60)
    ) {
        self.initial = initial
        self.multiplier = multiplier
        self.maximum = maximum
        self.maxRetryAfter = maxRetryAfter
    }

    /// The nominal (un-jittered) delay after failure number `failure`, counted from 1.
    ///
    /// `min(maximum, initial × multiplier^(failure−1))`, computed without overflow for any
    /// `failure` (a huge count simply yields `maximum`). A `failure` below 1 counts as 1.
    public func nominalDelay(afterFailure failure: Int) -> Duration {
        let cap = Swift.max(maximum, .zero)
        let start = Swift.max(initial, .zero)
        if start >= cap { return cap }
        if start == .zero { return .zero }
        let factor = multiplier >= 1 ? multiplier : 1
        let startAttoseconds = Double(start.totalAttoseconds)
        let capAttoseconds = Double(cap.totalAttoseconds)
        let limit = capAttoseconds / startAttoseconds
        let scale = Self.power(factor, Swift.max(failure, 1) - 1, stoppingAt: limit)
        let product = startAttoseconds * scale
        guard product < capAttoseconds else { return cap }
        return Swift.min(Duration(totalAttoseconds: Int128(product)), cap)
    }

    /// The delay to actually wait after failure number `failure`: its nominal delay, jittered.
    public func delay(afterFailure failure: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        Self.jittered(nominalDelay(afterFailure: failure), using: &generator)
    }

    /// A delay drawn uniformly from `[nominal/2, nominal]`, at nanosecond granularity.
    ///
    /// A nominal delay of zero (or below one nanosecond) is returned as it is.
    public static func jittered(_ nominal: Duration, using generator: inout some RandomNumberGenerator) -> Duration {
        let attoseconds = Swift.max(nominal, .zero).totalAttoseconds
        let perNanosecond = Duration.attosecondsPerNanosecond
        let high = attoseconds / perNanosecond
        let halfInNanoseconds = (attoseconds + 2 * perNanosecond - 1) / (2 * perNanosecond)
        guard halfInNanoseconds <= high, high > 0 else { return Swift.max(nominal, .zero) }
        let drawn = Int128.random(in: halfInNanoseconds...high, using: &generator)
        return Duration(totalAttoseconds: drawn * perNanosecond)
    }

    /// `base^exponent` by squaring, returning early once the result reaches `limit`.
    private static func power(_ base: Double, _ exponent: Int, stoppingAt limit: Double) -> Double {
        var result = 1.0
        var square = base
        var remaining = exponent
        while remaining > 0 {
            if remaining & 1 == 1 {
                result *= square
                if result >= limit { return result }
            }
            remaining >>= 1
            if remaining > 0 { square *= square }
        }
        return result
    }
}
