import PushScheduler
import PushTestSupport
import Testing
import PushTestThreads

@Suite("Retry decisions (pure)", .blockingThreads)
struct ReportAttemptsTests {
    static let now: Int64 = 1_750_000_000

    /// The delay a fresh state decides for `failures`, and what the plain curve would draw with the same seed.
    static func decide(_ failures: [AttemptFailure], seed: UInt64 = 9, policy: BackoffPolicy = BackoffPolicy()) -> (delays: [Duration], backoff: [Duration]) {
        var attempts = ReportAttempts(policy: policy)
        var generator = SeededGenerator(seed: seed)
        var twin = SeededGenerator(seed: seed)
        var delays: [Duration] = []
        var backoff: [Duration] = []
        for (index, failure) in failures.enumerated() {
            delays.append(attempts.attemptFailed(failure, nowEpochSeconds: now, using: &generator))
            backoff.append(policy.delay(afterFailure: index + 1, using: &twin))
        }
        return (delays, backoff)
    }

    @Test("Plain failures follow the jittered curve and count up")
    func plainFailures() {
        var attempts = ReportAttempts(policy: BackoffPolicy())
        var generator = SeededGenerator(seed: 1)
        #expect(attempts.failures == 0 && attempts.nextAttempt == 1)
        for failure in 1...12 {
            let delay = attempts.attemptFailed(.http(500), nowEpochSeconds: Self.now, using: &generator)
            let nominal = BackoffPolicy().nominalDelay(afterFailure: failure)
            #expect(delay >= nominal / 2 && delay <= nominal)
        }
        #expect(attempts.failures == 12 && attempts.nextAttempt == 13)
        #expect(attempts.lastFailure == .http(500))
        #expect(!attempts.isDelivered)
        attempts.attemptSucceeded()
        #expect(attempts.isDelivered)

        let (delays, backoff) = Self.decide(Array(repeating: AttemptFailure(status: nil, reason: "timed out after 20s"), count: 5))
        #expect(delays == backoff)
    }

    @Test("A 429 or 503 with Retry-After waits that long when it is longer than the backoff", arguments: [429, 503])
    func retryAfterLonger(status: Int) {
        let seconds = Self.decide([.http(status, retryAfter: .seconds(120))]).delays
        #expect(seconds == [.seconds(120)])
        let date = Self.decide([.http(status, retryAfter: .date(epochSeconds: Self.now + 300))]).delays
        #expect(date == [.seconds(300)])
    }

    @Test("A Retry-After shorter than the backoff keeps the backoff (it is a minimum)", arguments: [429, 503])
    func retryAfterShorter(status: Int) {
        let failures: [AttemptFailure] = [.http(500), .http(500), .http(500), .http(status, retryAfter: .seconds(1))]
        let (delays, backoff) = Self.decide(failures)
        #expect(delays == backoff)
        #expect(delays[3] >= .seconds(20))
        // A date in the past asks for nothing.
        let past = Self.decide([.http(status, retryAfter: .date(epochSeconds: Self.now - 60))])
        #expect(past.delays == past.backoff)
    }

    @Test("Retry-After is capped by maxRetryAfter")
    func retryAfterCap() {
        #expect(Self.decide([.http(503, retryAfter: .seconds(7200))]).delays == [.seconds(3600)])
        #expect(Self.decide([.http(429, retryAfter: .date(epochSeconds: Self.now + 86_400))]).delays == [.seconds(3600)])
        let tight = BackoffPolicy(maxRetryAfter: .seconds(30))
        #expect(Self.decide([.http(503, retryAfter: .seconds(600))], policy: tight).delays == [.seconds(30)])
        // The cap applies to Retry-After only: a backoff above it is kept.
        let (delays, backoff) = Self.decide(Array(repeating: .http(503, retryAfter: .seconds(600)), count: 8), policy: tight)
        #expect(delays.last == backoff.last)
        #expect(delays.last! > .seconds(30))
    }

    @Test("Retry-After is ignored with other statuses", arguments: [500, 502, 408, 301])
    func retryAfterIgnored(status: Int) {
        let (delays, backoff) = Self.decide([.http(status, retryAfter: .seconds(600))])
        #expect(delays == backoff)
    }

    @Test("A 4xx other than 408 and 429 starts at the maximum delay", arguments: [400, 401, 403, 404, 410, 422, 499])
    func slowLane(status: Int) {
        let failure = AttemptFailure.http(status)
        #expect(failure.isSlowLane)
        var attempts = ReportAttempts(policy: BackoffPolicy())
        var generator = SeededGenerator(seed: 11)
        var twin = SeededGenerator(seed: 11)
        let delay = attempts.attemptFailed(failure, nowEpochSeconds: Self.now, using: &generator)
        #expect(delay == BackoffPolicy.jittered(.seconds(1800), using: &twin))
        #expect(delay >= .seconds(900) && delay <= .seconds(1800))
        #expect(attempts.isSlowLane)
    }

    @Test("408, 429, 5xx and transport errors do not take the slow lane", arguments: [408, 429, 500, 503, nil] as [Int?])
    func notSlowLane(status: Int?) {
        let failure = AttemptFailure(status: status, reason: "x")
        #expect(!failure.isSlowLane)
        let (delays, backoff) = Self.decide([failure])
        #expect(delays == backoff)
        #expect(delays[0] <= .seconds(5))
    }

    @Test("Once in the slow lane a report stays at the maximum until it is delivered")
    func slowLaneSticks() {
        let (delays, _) = Self.decide([.http(404), .http(503), AttemptFailure(status: nil, reason: "timed out")])
        for delay in delays { #expect(delay >= .seconds(900) && delay <= .seconds(1800)) }
    }

    @Test("isSlowLane and honoursRetryAfter by status")
    func classification() {
        #expect(AttemptFailure.http(399).isSlowLane == false)
        #expect(AttemptFailure.http(400).isSlowLane == true)
        #expect(AttemptFailure.http(500).isSlowLane == false)
        #expect(AttemptFailure.http(404).reason == "HTTP 404")
        #expect(AttemptFailure.http(503, retryAfter: .seconds(1)).honoursRetryAfter)
        #expect(!AttemptFailure.http(503).honoursRetryAfter)
        #expect(!AttemptFailure.http(500, retryAfter: .seconds(1)).honoursRetryAfter)
    }
}
