import PushSystem
import Logging
import PushBackend
import PushConfig
import PushScheduler
import PushState
import PushTransport
import Synchronization

/// The shell every part of the agent shares: its settings and parts (backends, transport,
/// state recorder, notifier, scheduler), and its one ``AgentState`` behind one lock.
///
/// Decisions are the ``AgentBook``'s; the core applies them (``apply(_:in:)``: submissions
/// and cancels to the scheduler, writes to the recorder), sends what the scheduler starts
/// (``perform(_:)``), and tells the parts that wait on it when something changed. The parts
/// that run for long are services of their own (``SenderService``, ``StartFeeder``,
/// ``LeaseKeeper``, ``ConfirmationPolling``, ``StatusReporter``, ``ReloadService``) and a
/// round is a ``RunOnce``; each holds the core.
final class AgentCore<C: Clock>: Sendable where C.Duration == Duration {
    let settings: AgentSettings
    let backends: Backends
    let transport: any HTTPTransport
    let recorder: StateRecorder<C>
    let notifier: any ServiceManagerNotifier
    let logger: Logger
    let clock: C
    /// Unix time in milliseconds, for the state and `Retry-After` dates.
    let wallClock: @Sendable () -> Int64
    /// How long requests in flight may finish once stopping begins.
    let gracePeriod: Duration
    /// The least time between two `STATUS=` messages.
    let statusInterval: Duration
    /// With state shared by several agents (SPEC §11): the store that keeps the leases.
    let shared: (any SharedStateStore)?
    /// With shared state: whether this agent claims subscriptions (not for `remove`).
    let claims: Bool
    /// How many of a start's submissions go to the scheduler at a time (``StartFeeder``).
    let startRunSize: Int
    /// The longest the feeder waits for room before it submits its next run anyway.
    let feedWait: Duration
    /// Lines that outsiders drive (refused webhook calls): one a minute, with a count.
    let outsiders: LogSummary<C>
    /// What `/metrics` says: counters the attempts add to, gauges read at each scrape.
    let metrics: AgentMetrics
    /// Whether `remove --held` asked, since the last reload, for the held removals to be sent
    /// (a file in the state directory it takes); set once, before the agent runs.
    nonisolated(unsafe) var releaseRequested: @Sendable () -> Bool = { false }
    /// Since when a task that `/livez` put on the pool waits to run; nil when none waits.
    let livenessProbe = Mutex<ContinuousClock.Instant?>(nil)

    /// Everything that changes, behind the one lock.
    let state: Mutex<AgentState<C.Instant>>
    let scheduler: ReportScheduler<SubscriptionKey, C>
    /// With libcurl's transport: the requests sent without a task each (``AgentCore+Launch``).
    let directFlights: DirectFlights?

    /// Told when something changed: `STATUS=` may need sending, a round may be over.
    let statusChanges = Signal()
    /// Told when the pollers change, or stopping begins.
    let pollerChanges = Signal()
    /// Told when a reload has held subscriptions (``ReloadService``).
    let heldChanges = Signal()
    /// Happens when stopping begins.
    let stopping = OneShotEvent()

    init(start: AgentStart, settings: AgentSettings, backends: Backends, transport: any HTTPTransport, recorder: StateRecorder<C>,
         shared: (any SharedStateStore)?, notifier: any ServiceManagerNotifier, logger: Logger, clock: C,
         wallClock: @escaping @Sendable () -> Int64, gracePeriod: Duration, statusInterval: Duration, startRunSize: Int,
         feedWait: Duration) {
        self.settings = settings
        self.backends = backends
        self.transport = transport
        self.recorder = recorder
        self.shared = shared
        self.notifier = notifier
        self.logger = logger
        self.clock = clock
        self.wallClock = wallClock
        self.gracePeriod = gracePeriod
        self.statusInterval = statusInterval
        self.startRunSize = max(1, startRunSize)
        self.feedWait = feedWait
        if case .removal = start { claims = false } else { claims = true }
        outsiders = LogSummary(interval: .seconds(60), clock: clock, logger: logger)
        metrics = AgentMetrics(loadedAt: Double(wallClock()) / 1000)
        var book = AgentBook(reportInterval: settings.reportInterval, decodeCleanup: { key, text in
            backends.cleanupRequest(account: key.account, service: key.service, stored: text)
        })
        book.removalGuard = settings.removalGuard
        // Its state its own, the agent reads a cleanup's text back from it when it needs it.
        book.cleanupTextsInStateOnly = shared == nil
        book.deliveredSignature = { request, fingerprint in backends.deliveredSignature(of: request, fingerprint: fingerprint) }
        state = Mutex(AgentState(book: book, start: start, defaultTimeout: settings.timeout, metricsPerAccount: settings.metricsPerAccount))
        // The attempts need the core they are sent by; it is handed to them once made.
        let link = Link()
        let flights = (transport as? CurlTransport).map { curl in
            DirectFlights(transport: curl, backends: backends, settle: { finished in link.core?.settleFlights(finished) })
        }
        directFlights = flights
        scheduler = ReportScheduler<SubscriptionKey, C>(
            settings: settings, clock: clock, wallClock: wallClock,
            performBatch: { items in
                guard let core = link.core else { return items.map { _ in .delivered } }
                return await core.perform(items)
            },
            launcher: flights.map { flights in
                ReportScheduler<SubscriptionKey, C>.Launcher(launch: { launches in link.core?.launch(launches) ?? [] },
                                                             cancel: { flights.cancelAll() })
            },
            onEvent: { event, _ in link.core?.handle(event) })
        link.core = self
        if shared == nil {
            recorder.whenCleanupsWritten { keys in link.core?.state.withLock { $0.book.letGoOfWrittenCleanups(keys) } }
        }
    }

    /// The core, for the scheduler's closures, which are made before it is.
    private final class Link: @unchecked Sendable {
        private let lock = Mutex<Void>(())
        private weak var value: AgentCore?

        var core: AgentCore? {
            get { lock.withLock { _ in value } }
            set { lock.withLock { _ in value = newValue } }
        }
    }

    /// An event without a value, kept once while nobody waits (an `AsyncStream` buffering the newest).
    struct Signal: Sendable {
        let stream: AsyncStream<Void>
        private let continuation: AsyncStream<Void>.Continuation

        init() {
            (stream, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        }

        func yield() { continuation.yield() }
    }

    // MARK: Applying the book's decisions

    /// Applies the book's actions in order; called with the state locked so that they keep it.
    /// Consecutive submissions go to the scheduler together, so that those due together leave
    /// together (in one batch where their backend batches). A key submitted while the start is
    /// fed is handed over: the feeder never submits over it.
    func apply(_ actions: [AgentBook.Action], in state: inout AgentState<C.Instant>) {
        var submissions: [ReportScheduler<SubscriptionKey, C>.Submission] = []
        for action in actions {
            if case .submit(let submission) = action {
                // Nothing to look up unless a start is being fed (``AgentBook/awaitingFeed``).
                state.book.handedOver(submission.key)
                submissions.append(.init(key: submission.key, host: submission.host, after: submission.after,
                                         batch: submission.batch, hold: submission.pauseLabel))
                continue
            }
            scheduler.submit(submissions)
            submissions.removeAll()
            switch action {
            case .submit: break
            case .cancel(let key): scheduler.cancel(key)
            case .save(let record): recorder.save(record)
            case .forget(let key): recorder.forget(key)
            }
        }
        scheduler.submit(submissions)
    }

    /// The writes booking or feeding the start gives (only writes).
    func write(_ actions: [AgentBook.Action]) {
        for action in actions {
            guard case .save(let record) = action else { preconditionFailure("booking the start gave \(action), not a write") }
            recorder.save(record)
        }
    }

    /// Books the start's plans not booked yet, for what needs the whole book (the round's
    /// outcome, a webhook, `/metrics`), and hands their writes to the recorder.
    func bookWholeStart(_ state: inout AgentState<C.Instant>) {
        guard !state.book.startIsBooked else { return }
        write(state.book.bookRestOfStart())
    }

    // MARK: Attempts

    /// One attempt of one subscription, or of a batch of them (requests with one `Batching`):
    /// the book's current requests, sent by their backend. A final outcome settles its
    /// subscription in the book here (the scheduler is then told it is done); a retry goes back
    /// to the scheduler, which decides when.
    func perform(_ items: [BatchItem<SubscriptionKey>]) async -> [AttemptResult] {
        if leasesLapsed {
            // The leases were not renewed in time (the database is away): nothing may go out that
            // another agent could send too. Tried again a second later, not counted as an attempt.
            return items.map { _ in .failed(.notSent(retryIn: .seconds(1), reason: "the leases could not be renewed")) }
        }
        var results = [AttemptResult](repeating: .delivered, count: items.count)
        // Nothing to send any more (replaced, or held by a reload): done as far as this attempt goes.
        let (started, timeout) = state.withLock { state in
            (items.indices.compactMap { index in state.book.beginAttempt(items[index].key).map { (index, $0) } }, state.defaultTimeout)
        }
        guard !started.isEmpty else { return results }
        let observed = ObservedTransport(base: transport, service: items[started[0].0].key.service, metrics: metrics, logger: logger)
        let outcomes = await backends.send(started.map(\.1), transport: observed, defaultTimeout: timeout)
        count(outcomes, of: observed.service)
        for ((index, _), result) in zip(started, settle(zip(started, outcomes).map { (items[$0.0], $1) })) {
            results[index] = result
        }
        changed()
        return results
    }

    /// Settles the final outcomes in the book, under one lock, and says so in the log; returns
    /// each one's result for the scheduler (a retry's failure, else delivered).
    func settle(_ outcomes: [(BatchItem<SubscriptionKey>, Outcome)]) -> [AttemptResult] {
        var results = [AttemptResult](repeating: .delivered, count: outcomes.count)
        let answeredAt = wallClock()
        var settled: [(SubscriptionKey, SubscriptionRequest, AgentBook.Settlement, Int)] = []
        state.withLock { state in
            for (index, (item, outcome)) in outcomes.enumerated() {
                if case .retry(let failure) = outcome {
                    results[index] = .failed(failure)
                    continue
                }
                let alreadyStopped = state.book.stoppedServices[item.key.service] != nil
                guard let (actions, request, settlement) = state.book.settle(item.key, outcome, attempt: item.attempt, now: answeredAt)
                else { continue }
                apply(actions, in: &state)
                if case .cleanedUp(forgotten: true) = settlement { state.forgottenSinceSaid += 1 }
                // A stopped service is said once, not once for each of its subscriptions.
                if case .stopped = settlement, alreadyStopped { continue }
                if case .stopped = settlement { noteStopped(&state) }
                settled.append((item.key, request, settlement, item.attempt))
            }
        }
        for (key, request, settlement, attempt) in settled {
            logger.settled(request, key: key, as: settlement, attempts: attempt)
        }
        return results
    }

    /// With shared state: whether this agent's leases were not renewed in time (the database is
    /// away), so that nothing may go out that another agent could send too.
    var leasesLapsed: Bool {
        guard shared != nil else { return false }
        let now = clock.now
        return state.withLock { $0.leasesValidUntil.map { now >= $0 } ?? true }
    }

    /// Adds a batch's outcomes to `pushreporter_attempts_total`: only requests that were sent
    /// (not those held back or cancelled at shutdown).
    func count(_ outcomes: [Outcome], of service: String) {
        var delivered = 0, retry = 0, rejected = 0
        for outcome in outcomes {
            switch outcome {
            case .delivered, .deliveredKeeping, .accepted: delivered += 1
            case .rejected, .stopped: rejected += 1
            case .retry(let failure) where failure.notSentRetry == nil && !failure.isCancellation: retry += 1
            case .retry: break
            }
        }
        metrics.attempted(service, .delivered, count: delivered)
        metrics.attempted(service, .retry, count: retry)
        metrics.attempted(service, .rejected, count: rejected)
    }

    /// What the scheduler tells of its attempts: a failure is recorded and logged.
    func handle(_ event: SchedulerEvent<SubscriptionKey>) {
        switch event {
        case .started(let key, _):
            state.withLock { _ = $0.outOfTime.remove(key) }
        case .delivered:
            break
        case .failed(let key, let attempt, let failure, let retryIn):
            // An attempt cut short by shutdown or the deadline is not the subscription's fault.
            if failure.isCancellation { return }
            let now = wallClock()
            let retryAt = clock.now.advanced(by: retryIn)
            let failed = state.withLock { state -> (request: SubscriptionRequest, next: Logger.NextAttempt)? in
                guard let (actions, request) = state.book.failed(key, attempt: attempt, reason: failure.reason,
                                                                 retryIn: retryIn, now: now) else { return nil }
                apply(actions, in: &state)
                let last = state.onceEnd.map { retryAt >= $0 } ?? false
                if last { state.outOfTime.insert(key) }
                return (request, state.isStopping ? .stopping : last ? .pastTheDeadline : .after(retryIn))
            }
            if let failed { logger.failed(failed.request, key: key, attempt: attempt, failure: failure, next: failed.next) }
        }
        changed()
    }

    /// Something changed: `STATUS=` may need sending, and a round may be over.
    func changed() {
        statusChanges.yield()
        state.withLock { $0.progress }?.yield()
    }

    /// Says once that a start or reload held its removals (SPEC §14), and how to release them.
    func sayHeldRemovals() {
        guard let (accounts, guardSettings) = state.withLock({ state in state.book.takeHeldNotice().map { ($0, state.book.removalGuard) } })
        else { return }
        let limit = guardSettings.map { "\($0.count) accounts and \($0.shareText) of those in the state" } ?? "none"
        let message = "holding the removal of \(accounts) accounts that left the configuration at once, more than agent.removalGuard allows "
            + "(\(limit)): nothing is sent for them until their accounts come back, pushreporter remove --held is run, "
            + "or agent.removalGuard is set off and the agent reloaded"
        logger.warning("\(message)")
    }

    /// Says in `STATUS=` which services are stopped.
    func noteStopped(_ state: inout AgentState<C.Instant>) {
        let stopped = state.book.stoppedServices
        guard !stopped.isEmpty else { return }
        state.statusNote = "stopped (credentials refused): \(stopped.keys.sorted().joined(separator: ", ")); reload once they are mended"
    }

    // MARK: Stopping

    /// Stopping (SIGTERM, or a round stopped): `STOPPING=1` once, and no new request starts from
    /// now on; those in flight have the grace period from now (``stopDeadline``).
    func beginStopping() {
        let now = clock.now
        let first = state.withLock { state in
            defer { if state.stoppingSince == nil { state.stoppingSince = now } }
            return state.stoppingSince == nil
        }
        guard first else { return }
        notifier.notify("STOPPING=1")
        stopping.fire()
        pollerChanges.yield()
        let inFlight = scheduler.inFlightCount
        let waiting = inFlight > 0 ? "; \(inFlight) in flight \(inFlight == 1 ? "gets" : "get") \(DurationText(gracePeriod)) to finish" : ""
        logger.info("stopping: no new requests\(waiting)")
        scheduler.shutdown()
        changed()
    }

    var isStopping: Bool { state.withLock { $0.isStopping } }

    /// When what is in flight at stopping is cancelled: the grace period after stopping began;
    /// nil while running.
    var stopDeadline: C.Instant? { state.withLock { $0.stoppingSince?.advanced(by: gracePeriod) } }

    /// Returns once stopping has begun and the grace period after it is over (or the task is
    /// cancelled); when `saying`, logs how many requests are still in flight then, to be cancelled.
    func waitOutTheGracePeriod(saying: Bool = false) async {
        await stopping.wait()
        guard let deadline = stopDeadline else { return }
        try? await clock.sleep(until: deadline, tolerance: nil)
        if saying && !Task.isCancelled {
            let left = scheduler.inFlightCount
            logger.warning("\(left) \(left == 1 ? "request still in flight after the grace period is" : "requests still in flight after the grace period are") cancelled")
        }
    }

    // MARK: Writing

    /// Writes the recorded changes, trying again every second while the state cannot be
    /// written; false when the agent stops first.
    func flushUntilWritten() async -> Bool {
        let recorder = recorder
        while !(await offPool { recorder.flush() }) {
            if Task.isCancelled || isStopping { return false }
            try? await clock.sleep(for: .seconds(1))
        }
        return true
    }

    // MARK: Status

    /// `12 accounts: 11 reported, 1 retrying`, then the note of the moment.
    func statusText(_ counts: SubscriptionCounts? = nil) -> String {
        let (counts, note) = state.withLock { state in (counts ?? state.book.counts, state.statusNote) }
        var text = counts.statusText
        // With shared state an agent counts what it holds, not the group's accounts.
        if shared != nil { text = "holds " + text }
        return note.map { text + "; " + $0 } ?? text
    }

    // MARK: Pollers

    func replacePollers(_ new: [any ConfirmationPoller]) {
        state.withLock { state in
            var next: [String: AgentState<C.Instant>.PollerState] = [:]
            for poller in new { next[poller.service] = .init(poller: poller, lastPoll: state.pollers[poller.service]?.lastPoll) }
            state.pollers = next
        }
        pollerChanges.yield()
    }
}
