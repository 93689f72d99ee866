import Logging
import PushBackend
import PushConfig
import PushScheduler
import Synchronization

/// Sends the tracking actions of `pushreporter track` (SPEC §9.4): each payload's actions one
/// after the other (an open's click before its open), payloads side by side, each failure
/// retried with the backoff of `agent.retry` (`Retry-After` honoured; a 429 or 503 pauses the
/// service) until it is settled or the deadline passes. With a ``TrackingLedger``, an action
/// delivered before is not sent again, and each one delivered is remembered.
public struct TrackingDelivery<C: Clock>: Sendable where C.Duration == Duration {
    /// What became of one action.
    public enum Result: Sendable, Equatable {
        /// Delivered by attempt number `attempts`.
        case delivered(attempts: Int)
        /// Delivered before (the ledger says so): not sent again.
        case alreadySent
        /// Delivered, but not remembered: the reason.
        case deliveredNotRecorded(String)
        /// Refused by the server, or not sent because the ledger could not be read: the reason.
        case rejected(String)
        /// Still not delivered when the deadline passed: the last failure, or nil when it never
        /// started (an earlier action of its payload was not settled).
        case undelivered(String?)

        /// Whether the action reached its server, now or before.
        public var reachedServer: Bool {
            switch self {
            case .delivered, .alreadySent, .deliveredNotRecorded: true
            case .rejected, .undelivered: false
            }
        }
    }

    /// One payload's actions, in the order they are sent.
    public struct Payload: Sendable {
        /// What logs call it: its file, or `stdin:LINE`.
        public var label: String
        public var requests: [TrackingRequest]

        public init(label: String, requests: [TrackingRequest]) {
            self.label = label
            self.requests = requests
        }
    }

    let policy: BackoffPolicy
    let concurrency: Int
    let perHostConcurrency: Int
    let transport: any HTTPTransport
    let ledger: (any TrackingLedger)?
    let logger: Logger
    let clock: C
    let wallClock: @Sendable () -> Int64

    /// - Parameters:
    ///   - wallClock: Unix time in milliseconds, for `Retry-After` dates and the ledger.
    public init(policy: BackoffPolicy, concurrency: Int, perHostConcurrency: Int, transport: any HTTPTransport,
                ledger: (any TrackingLedger)?, logger: Logger, clock: C, wallClock: @escaping @Sendable () -> Int64) {
        self.policy = policy
        self.concurrency = concurrency
        self.perHostConcurrency = perHostConcurrency
        self.transport = transport
        self.ledger = ledger
        self.logger = logger
        self.clock = clock
        self.wallClock = wallClock
    }

    /// Which action of which payload.
    struct Key: Hashable, Sendable {
        var payload: Int
        var action: Int
    }

    /// What a delivery has settled so far, shared by its tasks.
    private final class Progress: Sendable {
        let results: Mutex<[[Result]]>
        let lastFailure = Mutex<[Key: String]>([:])
        let settledCount = Mutex(0)
        let scheduler = Mutex<ReportScheduler<Key, C>?>(nil)
        let settled: AsyncStream<Void>
        let settledContinuation: AsyncStream<Void>.Continuation

        init(_ payloads: [Payload]) {
            results = Mutex(payloads.map { $0.requests.map { _ in Result.undelivered(nil) } })
            (settled, settledContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        }
    }

    /// Sends every action of `payloads` until each is settled or `deadline` has passed, and
    /// says what became of each (indexed like `payloads` and their requests).
    public func deliver(_ payloads: [Payload], deadline: Duration) async -> [[Result]] {
        let progress = Progress(payloads)
        let total = payloads.reduce(0) { $0 + $1.requests.count }
        let end = clock.now.advanced(by: deadline)
        // Settles `key` and submits the next action of its payload.
        let settle: @Sendable (Key, Result) -> Void = { key, result in
            progress.results.withLock { $0[key.payload][key.action] = result }
            if key.action + 1 < payloads[key.payload].requests.count, let scheduler = progress.scheduler.withLock({ $0 }) {
                let next = payloads[key.payload].requests[key.action + 1]
                scheduler.submit(Key(payload: key.payload, action: key.action + 1), host: next.host, hold: next.service)
            }
            progress.settledCount.withLock { $0 += 1 }
            progress.settledContinuation.yield()
        }
        let (transport, ledger, logger, wallClock) = (transport, ledger, logger, wallClock)
        let scheduler = ReportScheduler<Key, C>(
            policy: policy, concurrency: concurrency, perHostConcurrency: perHostConcurrency, clock: clock,
            random: SystemRandomNumberGenerator(), wallClock: { wallClock() / 1000 },
            perform: { key, attempt in
                let payload = payloads[key.payload]
                let request = payload.requests[key.action]
                switch await TrackingStep.attempt(request, transport: transport, ledger: ledger, wallClock: wallClock) {
                case .retry(let failure):
                    return .failed(failure)
                case .delivered:
                    settle(key, .delivered(attempts: attempt))
                case .alreadySent:
                    settle(key, .alreadySent)
                case .deliveredNotRecorded(let why):
                    logger.error("\(payload.label): \(request.action.description) was delivered, but \(why); it may be sent again")
                    settle(key, .deliveredNotRecorded(why))
                case .rejected(let why):
                    logger.error("\(payload.label): \(request.action.description) rejected by \(request.host): \(why); it is not sent again")
                    settle(key, .rejected(why))
                case .unknown(let why):
                    logger.error("\(payload.label): \(request.action.description) is not sent: \(why)")
                    settle(key, .rejected(why))
                }
                return .delivered
            },
            onEvent: { event, _ in
                guard case .failed(let key, let attempt, let failure, let retryIn) = event, !failure.isCancellation else { return }
                progress.lastFailure.withLock { $0[key] = failure.reason }
                let payload = payloads[key.payload]
                let request = payload.requests[key.action]
                logger.warning("""
                    \(payload.label): \(request.action.description) to \(request.host) failed: \(failure.reason) \
                    (attempt \(attempt)); next attempt in \(DurationText(retryIn))
                    """)
            })
        progress.scheduler.withLock { $0 = scheduler }
        for (index, payload) in payloads.enumerated() {
            guard let first = payload.requests.first else { continue }
            scheduler.submit(Key(payload: index, action: 0), host: first.host, hold: first.service)
        }
        progress.settledContinuation.yield()
        let clock = clock
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await scheduler.run() }
            group.addTask {
                for await _ in progress.settled where progress.settledCount.withLock({ $0 }) >= total { break }
                scheduler.shutdown()
            }
            group.addTask {
                // The deadline: what is still owed then is undelivered.
                try? await clock.sleep(until: end, tolerance: nil)
            }
            _ = await group.next()
            group.cancelAll()
        }
        progress.settledContinuation.finish()
        let failures = progress.lastFailure.withLock { $0 }
        return progress.results.withLock { results in
            results.enumerated().map { payload, actions in
                actions.enumerated().map { action, result in
                    if case .undelivered = result { return .undelivered(failures[Key(payload: payload, action: action)]) }
                    return result
                }
            }
        }
    }
}
