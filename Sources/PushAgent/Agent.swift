import Logging
import PushBackend
import PushConfig
import PushListener
import PushScheduler
import PushState
import ServiceLifecycle
import Synchronization
import PushSystem

/// What loading the configuration gave, for a reload.
public enum ConfigurationLoad: Sendable {
    /// A valid configuration: its subscriptions, what polls its services, and its agent settings.
    case loaded(plans: [SubscriptionPlan], pollers: [any ConfirmationPoller], settings: AgentSettings, warnings: [Diagnostic] = [])
    /// An invalid one, with a sentence that says why (the first error, where it is, and how many).
    case invalid(reason: String)
}

/// What the agent starts with.
public enum AgentStart: Sendable {
    /// A configuration (`run`, `run --once`): every planned subscription is delivered, and
    /// every stored one that left gets its cleanup.
    case configuration(plans: [SubscriptionPlan], records: [SubscriptionRecord], pollers: [any ConfirmationPoller])
    /// The removal of stored subscriptions (`remove`): each gets its cleanups, then is forgotten;
    /// nothing else is touched.
    case removal(records: [SubscriptionRecord])
}

/// The agent (`pushreporter run`, SPEC §5, §8, §9.0): delivers every subscription on start,
/// retries for as long as it runs, polls accepted ones, reloads on request, sends cleanups,
/// and keeps systemd told; or, with ``runOnce(deadline:output:stop:)``, one round that ends.
///
/// Decisions are made by ``AgentBook``; this applies them to the scheduler and the state
/// recorder, and has the ``Backends`` send. Stopping: on graceful shutdown it sends
/// `STOPPING=1`, starts no new request, gives the requests in flight `gracePeriod` to finish,
/// then cancels them and returns. List the ``StateRecorder`` before it in the service group so
/// the state is flushed after it returns.
public final class Agent<C: Clock>: Service, Sendable where C.Duration == Duration {
    /// A source of reload requests (SIGHUP, changed files): it yields a reason each time, and
    /// returns when its task is cancelled.
    public typealias ReloadSource = @Sendable (AsyncStream<String>.Continuation) async -> Void

    private let settings: AgentSettings
    private let backends: Backends
    private let transport: any HTTPTransport
    private let recorder: StateRecorder<C>
    private let notifier: any ServiceManagerNotifier
    private let logger: Logger
    private let clock: C
    private let wallClock: @Sendable () -> Int64
    /// Loads the configuration again (it reads files, so it runs off Swift's pool).
    private let load: @Sendable () -> ConfigurationLoad
    private let reloadSources: [ReloadSource]
    private let gracePeriod: Duration
    private let statusInterval: Duration

    private let book: Mutex<AgentBook>
    /// With state shared by several agents (SPEC §11): the store that keeps the leases.
    private let shared: (any SharedStateStore)?
    /// With shared state: until when this agent may start attempts (its leases renewed in
    /// time); nil before the first renewal and once renewals fail for too long.
    private let leasesValidUntil = Mutex<C.Instant?>(nil)
    /// With shared state: whether the last round of leases found nothing more to claim.
    private let claimedAll = Mutex(false)
    /// With shared state: subscriptions the shared state has that this agent's configuration
    /// disagrees with (another agent loaded other files last): not claimed until a reload.
    private let disagreed = Mutex(Set<SubscriptionKey>())
    /// With shared state: the configuration's subscriptions, when writing them failed (the
    /// database was away); written by the next round of leases.
    private let pendingPublish = Mutex<[SubscriptionKey]?>(nil)
    /// With shared state: whether this agent claims subscriptions (not for `remove`).
    private let claims: Bool
    /// With shared state, in `runOnce`: what this agent claimed with something to send (its
    /// part of the summary).
    private let claimedJobs = Mutex(Set<SubscriptionKey>())
    /// How many of a start's submissions go to the scheduler at a time (``feed(scheduler:)``).
    private let startRunSize: Int
    /// The longest the feeder waits for room before it submits its next run anyway
    /// (``roomToSubmit(_:)``).
    private let feedWait: Duration
    /// `agent.timeout` of the configuration loaded last: for requests without their own.
    private let defaultTimeout: Mutex<Duration>
    private let startup: Mutex<AgentStart?>
    /// What polls each service whose accepted subscriptions await confirmation, by service.
    private let pollers: Mutex<[String: PollerState]>
    private let statusNote = Mutex<String?>(nil)
    private let isStopping = Mutex(false)
    /// Set at start and by each reload: log "all … reported" once the work is done.
    private let announceWhenSettled = Mutex(true)
    /// Set with `announceWhenSettled`: memory is given back once the burst of first attempts is
    /// over, whether or not every subscription got through.
    private let releaseWhenAnswered = Mutex(true)
    private let statusChanges: AsyncStream<Void>
    private let statusContinuation: AsyncStream<Void>.Continuation
    /// Told when the pollers change: with none, the polling loop sleeps until a reload brings one.
    private let pollerChanges: AsyncStream<Void>
    private let pollerContinuation: AsyncStream<Void>.Continuation
    /// Told when a reload has held subscriptions (``releaseHeld(scheduler:)``).
    private let heldChanges: AsyncStream<Void>
    private let heldContinuation: AsyncStream<Void>.Continuation
    /// Whether a status query is in flight: stopping waits for it (within the grace period).
    private let pollInFlight = Mutex(false)
    /// The scheduler while `run()` runs it (nil before and after): for what the endpoint settles.
    private let serving = Mutex<ReportScheduler<SubscriptionKey, C>?>(nil)
    /// In `runOnce`: when its deadline passes, so that a failure whose retry would come later
    /// says that it was the last attempt.
    private let onceEnd = Mutex<C.Instant?>(nil)
    /// In `runOnce`: the subscriptions whose next attempt falls after the deadline. Once every
    /// job left is one of them, nothing more can happen before it, and the round ends.
    private let outOfTime = Mutex(Set<SubscriptionKey>())
    /// In `runOnce`: told whenever the book may have settled.
    private let progress: Mutex<AsyncStream<Void>.Continuation?> = Mutex(nil)
    /// Lines that outsiders drive (refused webhook calls): one a minute, with a count.
    private let outsiders: LogSummary<C>
    /// Subscriptions cleaned up and forgotten since the log last said so.
    private let forgottenSinceSaid = Mutex(0)
    /// With shared state: whether the log said that the database does not answer.
    private let sharedStateSilent = Mutex(false)

    /// A poller and when it last asked.
    private struct PollerState {
        var poller: any ConfirmationPoller
        var lastPoll: C.Instant?
    }

    /// - Parameters:
    ///   - start: what to start with (see ``AgentStart``).
    ///   - wallClock: Unix time in milliseconds, for the state and `Retry-After` dates.
    ///   - load: loads the configuration again, for a reload.
    ///   - reloadSources: what asks for reloads; each runs in a child task of ``run()``.
    ///   - gracePeriod: how long requests in flight may finish after graceful shutdown, or once a
    ///     round is stopped (``runOnce(deadline:output:stop:)``).
    ///   - statusInterval: the least time between two `STATUS=` messages.
    ///   - startRunSize: how many of a large start's submissions go to the scheduler first; the
    ///     rest follow in runs (``feed(scheduler:)``).
    ///   - feedWait: the longest the feeder waits for the scheduler to begin what it was given
    ///     before it hands over the next run anyway.
    public init(start: AgentStart, settings: AgentSettings, backends: Backends = .standard, transport: any HTTPTransport,
                recorder: StateRecorder<C>, shared: (any SharedStateStore)? = nil,
                notifier: any ServiceManagerNotifier = NoNotifier(), logger: Logger, clock: C,
                wallClock: @escaping @Sendable () -> Int64 = WallClock.epochMilliseconds,
                load: @escaping @Sendable () -> ConfigurationLoad = { .invalid(reason: "no reload") },
                reloadSources: [ReloadSource] = [],
                gracePeriod: Duration = .seconds(10), statusInterval: Duration = .seconds(1), startRunSize: Int = 1_000,
                feedWait: Duration = .seconds(1)) {
        self.settings = settings
        self.startRunSize = max(1, startRunSize)
        self.feedWait = feedWait
        self.shared = shared
        self.backends = backends
        self.transport = transport
        self.recorder = recorder
        self.notifier = notifier
        self.logger = logger
        self.clock = clock
        self.wallClock = wallClock
        self.load = load
        self.reloadSources = reloadSources
        self.gracePeriod = gracePeriod
        self.statusInterval = statusInterval
        outsiders = LogSummary(interval: .seconds(60), clock: clock, logger: logger)
        defaultTimeout = Mutex(settings.timeout)
        book = Mutex(AgentBook(reportInterval: settings.reportInterval, decodeCleanup: { key, text in
            backends.cleanupRequest(key, stored: text)
        }))
        startup = Mutex(start)
        if case .removal = start { claims = false } else { claims = true }
        pollers = Mutex([:])
        (statusChanges, statusContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        (pollerChanges, pollerContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        (heldChanges, heldContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    // MARK: Starting

    /// Starts the book and writes what it decided before anything is sent; `written` is false
    /// when the state cannot be written. A large start keeps all but its first run for
    /// ``feed(scheduler:)``.
    private func begin(_ scheduler: ReportScheduler<SubscriptionKey, C>) async -> Beginning {
        guard let start = startup.withLock({ startup in defer { startup = nil }; return startup }) else {
            return Beginning(written: true, jobs: 0)
        }
        // With shared state, the agent joins the others first, and adds the subscriptions the
        // state does not know yet, for whichever agent claims them.
        var membership: PostgresStateStore.Membership?
        if let shared, case .configuration(let plans, _, _) = start {
            let (leaseTimeout, keys) = (settings.leaseTimeout, plans.map(\.key))
            do {
                membership = try await offPool { () throws(StateError) in
                    let membership = try shared.join(leaseTimeout: leaseTimeout, startsGroups: true)
                    try shared.publish(keys)
                    return membership
                }
            } catch {
                logger.error("\(error.description)")
                return Beginning(written: false, jobs: 0)
            }
        }
        // The scheduler does not run yet, so nothing is sent before the flush.
        var jobs = 0
        let (subscriptions, owedCleanups) = book.withLock { book -> (Int, Int) in
            let started: AgentBook.Start
            switch start {
            case .configuration(let plans, let records, let pollers):
                backends.restore(records)
                if membership != nil {
                    // Nothing is this agent's before it claims it (see keepLeases).
                    book.startShared(plans: plans)
                    started = AgentBook.Start(firstRun: 0)
                } else {
                    started = book.start(plans: plans, records: records, firstRun: startRunSize)
                }
                replacePollers(pollers)
            case .removal(let records):
                backends.restore(records)
                started = book.startCleanup(of: records, firstRun: startRunSize)
                // Nothing to claim: `remove` took its subscriptions before it started.
                claimedAll.withLock { $0 = true }
            }
            jobs = book.startJobsToCome
            apply(started.actions, to: scheduler, in: &book)
            return (book.entries.count, book.counts[.removing])
        }
        let recorder = recorder
        guard await offPool({ recorder.flush() }) else { return Beginning(written: false, jobs: jobs) }
        for key in book.withLock({ $0.takeUnreadableCleanups() }) { logger.unreadableCleanup(of: key) }
        if case .configuration(let plans, _, _) = start {
            let accounts = Self.accountCount(plans)
            let removals = owedCleanups > 0 ? ", sending \(owedCleanups) owed \(owedCleanups == 1 ? "removal" : "removals")" : ""
            let services = plans.count != accounts ? " (\(plans.count) subscriptions)" : ""
            if let membership, let shared {
                let group = membership.startedGroup ? "starting the group" : "joining \(membership.agents - 1) other \(membership.agents == 2 ? "agent" : "agents")"
                logger.info("started as \(shared.agent), \(group) on \(shared.location): \(accounts) \(accounts == 1 ? "account" : "accounts")\(services) shared")
            } else {
                logger.info("started: reporting \(accounts) \(accounts == 1 ? "account" : "accounts")\(services)\(removals)")
            }
        } else {
            logger.debug("started: cleaning up \(subscriptions) \(subscriptions == 1 ? "subscription" : "subscriptions")")
        }
        return Beginning(written: true, jobs: jobs)
    }

    /// How many accounts `plans` are of, for the start's log line (written before the first
    /// request leaves). An account has at most one subscription of a service, so plans of one
    /// service are of as many accounts: no set of 100,000 names to build (20 ms, perf).
    static func accountCount(_ plans: [SubscriptionPlan]) -> Int {
        // By index: `plans.map(\.account)` and `for plan in plans` copy each plan out.
        guard let first = plans.first?.service, plans.indices.contains(where: { plans[$0].service != first }) else { return plans.count }
        var accountIDs = Set<String>(minimumCapacity: plans.count)
        for index in plans.indices { accountIDs.insert(plans[index].account) }
        return accountIDs.count
    }

    /// What ``begin(_:)`` did: whether the state was written, and how many subscriptions the
    /// start gives a job (the book flags them as it books them, ``AgentBook/Entry/isStartJob``,
    /// and counts those of the plans it has not booked yet).
    private struct Beginning {
        var written: Bool
        var jobs: Int
    }

    /// Adds the tasks that book the rest of the start and feed it to the scheduler
    /// (``feed(scheduler:)``), when a start left any.
    private func addFeeder(to group: inout TaskGroup<Ending>, scheduler: ReportScheduler<SubscriptionKey, C>) {
        guard book.withLock({ $0.hasStartToFeed }) else { return }
        if !book.withLock({ $0.startIsBooked }) {
            group.addTask {
                await self.bookRestOfStart(scheduler: scheduler)
                return .other
            }
        }
        group.addTask {
            await self.feed(scheduler: scheduler)
            return .other
        }
    }

    /// Books the start's plans after its first run while it is sent, a run of plans at a time
    /// (the book is held for one run at a time), ahead of the feeder: held until fed, the plans
    /// kept 20 MB more at 100,000 while the sending began, the peak of `run --once`.
    private func bookRestOfStart(scheduler: ReportScheduler<SubscriptionKey, C>) async {
        let run = startRunSize * Self.largestStartRunFactor
        // Stopping, nothing more is sent: what is left is booked for the outcome (runOnce).
        while !Task.isCancelled && !isStopping.withLock({ $0 }) {
            let booked = book.withLock { book -> Bool in
                write(book.bookRestOfStart(upTo: run))
                return book.startIsBooked
            }
            if booked {
                // The book may be settled only now: what waits for that is told.
                changed()
                return
            }
            await Task.yield()
        }
    }

    /// Books the start's plans not booked yet, for what needs the whole book (the round's
    /// outcome, a webhook, `/metrics`), and hands their writes to the recorder.
    private func bookWholeStart(_ book: inout AgentBook) {
        guard !book.startIsBooked else { return }
        write(book.bookRestOfStart())
    }

    /// The writes booking or feeding the start gives (``AgentBook/bookRestOfStart(upTo:)``,
    /// ``AgentBook/takeStartRun(_:)``: only writes).
    private func write(_ actions: [AgentBook.Action]) {
        for action in actions {
            guard case .save(let record) = action else { preconditionFailure("booking the start gave \(action), not a write") }
            recorder.save(record)
        }
    }

    /// Hands the start's runs after the first to the scheduler a run at a time, as the book
    /// gives them (``AgentBook/nextStartRun(_:)``): each run's records as they stand now are
    /// written first, then what is still the start's job is submitted (a reload or a stopped
    /// service may have moved some on meanwhile; ``AgentBook/unsent(_:generation:)``).
    private func feed(scheduler: ReportScheduler<SubscriptionKey, C>) async {
        // Done, or given up: what was not fed awaits the feeder no more.
        defer { book.withLock { $0.endFeed() } }
        // Each run twice the one before, up to `largestStartRunFactor` first runs: the scheduler
        // has the earlier runs to send meanwhile, and the rest of 100,000 subscriptions takes 26
        // transactions instead of 99.
        var size = startRunSize
        while true {
            if Task.isCancelled || isStopping.withLock({ $0 }) { return }
            let run = book.withLock { book -> [AgentBook.Unsent] in
                let (writes, run) = book.takeStartRun(size)
                write(writes)
                return run
            }
            if run.isEmpty {
                // Plans that submit nothing: more may follow them.
                if book.withLock({ $0.hasStartToFeed }) { continue }
                changed()
                break
            }
            size = min(size * 2, startRunSize * Self.largestStartRunFactor)
            guard await flushUntilWritten(), await roomToSubmit(run.count, in: scheduler) else { return }
            book.withLock { book in apply(book.submitStartRun(run), to: scheduler, in: &book) }
        }
        // The start's runs, their records and their writes are freed: give that back now, not
        // only once every first attempt is answered.
        Allocator.releaseFreedMemory()
    }

    /// The most submissions the feeder writes and submits at once, as a multiple of the first
    /// run (4,000 for the default 1,000): a run's records wait in the recorder, and its batch is
    /// copied to be written, at the moment the start holds the most; unbounded doubling made that
    /// burst the peak of a large `run --once` (docs/performance.md, fifth round). A multiple, so
    /// that every run is one of the batch sizes too (100 for Journeys, 20 for FCM): a run that
    /// ended inside a batch would send it in two requests.
    static var largestStartRunFactor: Int { 4 }

    /// Waits until no more than `count` reports wait in `scheduler` for their first attempt, so
    /// that its queue holds about two runs of the start, not all of it: fed as fast as they were
    /// written, 100,000 submissions waited there (27 MB), the peak of `run --once` once planning
    /// let the accounts go. The next run is written before this wait, so the queue does not run
    /// dry meanwhile. The scheduler counts them (a cancelled one goes, a re-submitted one counts
    /// once). Each wait lasts `feedWait` at most: reports that do not begin (a host that holds
    /// them back) slow the feeding to a run per `feedWait`, and never stop it. False once the
    /// agent stops or the task is cancelled.
    private func roomToSubmit(_ count: Int, in scheduler: ReportScheduler<SubscriptionKey, C>) async -> Bool {
        // Real time, not the agent's clock (a test's may stand still): this only paces.
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: feedWait)
        while scheduler.firstAttemptsWaiting > count && clock.now < end {
            do { try await clock.sleep(for: .milliseconds(5)) } catch { return false }
            if isStopping.withLock({ $0 }) { return false }
        }
        return !Task.isCancelled
    }


    /// Runs until graceful shutdown. Throws when the state cannot be written at start: the
    /// cleanups must be in the state before any delivery is sent.
    public func run() async throws {
        let scheduler = makeScheduler()
        let beginning = await begin(scheduler)
        guard beginning.written else {
            throw StateRecorder<C>.Failure(description: "the state cannot be written, so nothing is sent; see the error above")
        }
        notifier.notify("READY=1\nSTATUS=\(statusText())")
        statusContinuation.yield()
        serving.withLock { $0 = scheduler }
        defer { serving.withLock { $0 = nil } }

        let (reloads, reloadContinuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingNewest(1))
        await withTaskGroup(of: Ending.self) { group in
            group.addTask {
                await scheduler.run()
                return .schedulerEnded
            }
            addFeeder(to: &group, scheduler: scheduler)
            for source in reloadSources {
                group.addTask {
                    await source(reloadContinuation)
                    return .other
                }
            }
            group.addTask {
                for await reason in reloads { await self.reload(reason: reason, scheduler: scheduler) }
                return .other
            }
            group.addTask {
                await self.releaseHeld(scheduler: scheduler)
                return .other
            }
            group.addTask {
                await self.reportStatus()
                return .other
            }
            group.addTask {
                await self.outsiders.run()
                return .other
            }
            group.addTask {
                await self.pollForConfirmations(scheduler: scheduler)
                return .pollerEnded
            }
            if shared != nil {
                group.addTask {
                    await self.keepLeases(scheduler: scheduler, claiming: self.claims)
                    return .other
                }
            }
            group.addTask {
                do {
                    try await gracefulShutdown()
                } catch {
                    return .other
                }
                self.notifier.notify("STOPPING=1")
                self.stopSending(scheduler)
                await self.waitOutTheGracePeriod(scheduler)
                return .graceExpired
            }
            // Stopped once the scheduler has finished what it had in flight and no status query is
            // in flight (one gets the grace period too), or once the grace period is over.
            var finished: Set<Ending> = []
            for await ending in group where ending != .other {
                finished.insert(ending)
                let pollerIdle = finished.contains(.pollerEnded) || !self.pollInFlight.withLock { $0 }
                if ending == .graceExpired || (finished.contains(.schedulerEnded) && pollerIdle) {
                    group.cancelAll()
                    break
                }
            }
        }
        reloadContinuation.finish()
        await handBackLeases()
    }

    /// Stopping: no new request starts from now on (those in flight get the grace period to
    /// finish, ``waitOutTheGracePeriod(_:)``).
    private func stopSending(_ scheduler: ReportScheduler<SubscriptionKey, C>) {
        isStopping.withLock { $0 = true }
        pollerContinuation.yield()
        let inFlight = scheduler.inFlightCount
        let waiting = inFlight > 0 ? "; \(inFlight) in flight \(inFlight == 1 ? "gets" : "get") \(DurationText(gracePeriod)) to finish" : ""
        logger.info("stopping: no new requests\(waiting)")
        scheduler.shutdown()
    }

    /// Returns once the grace period is over (or the task is cancelled, when what was in flight
    /// has finished first).
    private func waitOutTheGracePeriod(_ scheduler: ReportScheduler<SubscriptionKey, C>) async {
        try? await clock.sleep(for: gracePeriod)
        if !Task.isCancelled {
            let left = scheduler.inFlightCount
            logger.warning("\(left) \(left == 1 ? "request still in flight after the grace period is" : "requests still in flight after the grace period are") cancelled")
        }
    }

    // MARK: Once

    /// One round (`run --once`, `remove`): sends every due delivery and cleanup, retries until
    /// each is settled or `deadline` passes, asks once more about accepted subscriptions if time
    /// allows, then writes the state. `output` draws a progress line on a terminal.
    ///
    /// `stop` (SIGTERM or SIGINT) ends the round early, as SPEC §8 stops the agent: no new
    /// request starts from the moment it is requested, those in flight (a confirmation query
    /// too) get the grace period to finish, and the state is written. Cancelling the task ends
    /// it at once, with the state written too.
    public func runOnce(deadline: Duration, output: LogOutput? = nil, stop: RoundStop? = nil) async -> OnceOutcome {
        let start = clock.now
        let scheduler = makeScheduler()
        // At once, on the signal's thread: a stop that waited for a task of the round could let
        // a first run of requests leave after it (one that came while the start was booked).
        stop?.whenRequested { [self] in stopSending(scheduler) }
        // One round: nothing is scheduled for later (`reportInterval` is the agent's business).
        book.withLock { $0.reportInterval = nil }
        let beginning = await begin(scheduler)
        let jobs = beginning.jobs
        guard beginning.written else {
            return OnceOutcome(total: jobs, delivered: 0, undelivered: [], counts: book.withLock { $0.counts },
                               elapsed: .zero, deadline: deadline, stateWritten: false)
        }
        let (settled, settledContinuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        progress.withLock { $0 = settledContinuation }
        settledContinuation.yield()
        let end = start.advanced(by: deadline)
        onceEnd.withLock { $0 = end }
        await withTaskGroup(of: Ending.self) { group in
            group.addTask {
                await scheduler.run()
                return .schedulerEnded
            }
            addFeeder(to: &group, scheduler: scheduler)
            group.addTask {
                await self.recorder.writeInBatches()
                return .other
            }
            group.addTask {
                for await _ in settled where self.roundIsOver() && !self.isStopping.withLock({ $0 })
                    && (self.shared == nil || self.claimedAll.withLock { $0 }) {
                    // Everything sent: one more question about what awaits confirmation. A
                    // delivery accepted while it was asked (one the answers sent again, say) is
                    // asked about too: the next turn, which its acceptance signalled.
                    let accepted = self.book.withLock { $0.acceptances }
                    self.pollInFlight.withLock { $0 = true }
                    await self.pollOnce(scheduler: scheduler, before: end)
                    self.pollInFlight.withLock { $0 = false }
                    // Stopped meanwhile: the question was the last thing the round waited for.
                    if self.isStopping.withLock({ $0 }) { break }
                    if self.roundIsOver(), self.book.withLock({ $0.acceptances == accepted }) {
                        scheduler.shutdown()
                        break
                    }
                }
                return .pollerEnded
            }
            group.addTask {
                do {
                    try await self.clock.sleep(until: end, tolerance: nil)
                    return .deadline
                } catch {
                    return .other
                }
            }
            if let stop {
                group.addTask {
                    for await _ in stop.requests {
                        // The round ends once what is in flight has finished, or here.
                        await self.waitOutTheGracePeriod(scheduler)
                        return Task.isCancelled ? .other : .graceExpired
                    }
                    return .other
                }
            }
            if let output, output.isTerminal {
                group.addTask {
                    await self.showProgress(jobs: jobs, output: output, scheduler: scheduler)
                    return .other
                }
            }
            if shared != nil {
                group.addTask {
                    await self.keepLeases(scheduler: scheduler, claiming: self.claims)
                    return .other
                }
            }
            // Over at the deadline, at the end of the grace period, or once the scheduler has
            // finished and no confirmation query is in flight (one gets the grace period too).
            var finished: Set<Ending> = []
            for await ending in group where ending != .other {
                finished.insert(ending)
                if ending == .schedulerEnded && self.pollInFlight.withLock({ $0 }) { continue }
                if ending == .pollerEnded && !finished.contains(.schedulerEnded) { continue }
                group.cancelAll()
                break
            }
        }
        progress.withLock { $0 = nil }
        output?.clearProgress()
        // What the round did not reach is in the outcome too: the start's plans the feeder did
        // not book (stopped, or past the deadline) are booked now, as not delivered.
        book.withLock { bookWholeStart(&$0) }
        for record in book.withLock({ $0.endOfRun() }) { recorder.save(record) }
        let recorder = recorder
        let stateWritten = await offPool { recorder.flush() }
        await handBackLeases()
        return outcome(claimed: claimedJobs.withLock { $0 }, elapsed: start.duration(to: clock.now), deadline: deadline,
                       stateWritten: stateWritten)
    }

    /// The round's outcome: the start's jobs, which the book flags (a list of their keys was
    /// held to the end for this, 3 MB at 100,000), and `claimed`, those taken from other agents
    /// since (shared state only).
    private func outcome(claimed: Set<SubscriptionKey>, elapsed: Duration, deadline: Duration,
                         stateWritten: Bool) -> OnceOutcome {
        book.withLock { book in
            // Read in place (an entry copied out for each of 100,000 took a tenth of a second).
            // One gone from the book was cleaned up and forgotten: it counts, and did not fail.
            var failed = book.entries.compactMapBorrowing { key, entry in
                entry.pointee.isStartJob && AgentBook.Entry.isUndelivered(at: entry) ? key : nil
            }
            let claimedOnly = claimed.filter { key in book.entries.read(key) { !$0.pointee.isStartJob } ?? true }
            failed += claimedOnly.filter { key in book.entries.read(key, AgentBook.Entry.isUndelivered(at:)) == true }
            // What the configuration itself refuses to send (SPEC §12): rejected without a job,
            // and not one of the jobs (which a receiver may have rejected).
            var refused = book.entries.compactMapBorrowing { key, entry in
                !entry.pointee.isStartJob && entry.pointee.job == nil && entry.pointee.record.state == .rejected ? key : nil
            }
            if !claimedOnly.isEmpty { refused.removeAll { claimedOnly.contains($0) } }
            failed += refused
            let undelivered = failed.sorted().compactMap { key -> OnceOutcome.Undelivered? in
                guard let entry = book.entries[key] else { return nil }
                let request = book.currentRequest(key) ?? entry.plan?.delivery
                return .init(key: key, label: request.map { "\(key.account.displayEscaped): \($0.label.displayEscaped)" } ?? key.description.displayEscaped,
                             host: request?.host ?? "", state: entry.record.state, attempts: entry.record.attempts,
                             reason: entry.record.lastOutcome ?? OnceOutcome.noResponse)
            }
            let total = book.startJobs + claimedOnly.count + refused.count
            return OnceOutcome(total: total, delivered: total - undelivered.count, undelivered: undelivered,
                               counts: book.counts, elapsed: elapsed, deadline: deadline, stateWritten: stateWritten)
        }
    }

    private func showProgress(jobs started: Int, output: LogOutput, scheduler: ReportScheduler<SubscriptionKey, C>) async {
        // Real time, not the scheduler's clock: this only paints the terminal.
        let painter = ContinuousClock()
        while !Task.isCancelled {
            // Only agents that share their state claim jobs, and they start with none.
            let jobs = started + claimedJobs.withLock { $0.count }
            let counts = book.withLock { $0.counts }
            let pending = book.withLock { $0.entries.jobCount }
            // Once stopped, only what is in flight is waited for.
            let doing = isStopping.withLock { $0 } ? "Stopping" : "Reporting"
            output.progress("\(doing): \(jobs - pending)/\(jobs) done, \(counts[.retrying]) retrying, \(scheduler.inFlightCount) in flight")
            try? await painter.sleep(for: .milliseconds(200))
        }
    }

    // MARK: Scheduling

    private func makeScheduler() -> ReportScheduler<SubscriptionKey, C> {
        // The attempts need the scheduler they run in (a settled cleanup submits the next one):
        // it is handed to them once made.
        let made = Mutex<ReportScheduler<SubscriptionKey, C>?>(nil)
        let scheduler = ReportScheduler<SubscriptionKey, C>(
            settings: settings, clock: clock, wallClock: wallClock,
            performBatch: { [weak self] items in
                guard let self, let scheduler = made.withLock({ $0 }) else { return items.map { _ in .delivered } }
                return await self.perform(items, scheduler: scheduler)
            },
            onEvent: { [weak self] event, scheduler in self?.handle(event, scheduler: scheduler) })
        made.withLock { $0 = scheduler }
        return scheduler
    }

    /// One attempt of one subscription, or of a batch of them (requests with one `Batching`):
    /// the book's current requests, sent by their backend. A final outcome settles its
    /// subscription in the book here (the scheduler is then told it is done); a retry goes back
    /// to the scheduler, which decides when.
    private func perform(_ items: [BatchItem<SubscriptionKey>], scheduler: ReportScheduler<SubscriptionKey, C>) async -> [AttemptResult] {
        if shared != nil && !leasesValid {
            // The leases were not renewed in time (the database is away): nothing may go out that
            // another agent could send too. Tried again a second later, not logged as a failure.
            return items.map { _ in .failed(.notSent(retryIn: .seconds(1), reason: "the leases could not be renewed")) }
        }
        var results = [AttemptResult](repeating: .delivered, count: items.count)
        // Nothing to send any more (replaced, or held by a reload): done as far as this attempt goes.
        let started = book.withLock { book in
            items.indices.compactMap { index in book.beginAttempt(items[index].key).map { (index, $0) } }
        }
        guard !started.isEmpty else { return results }
        let outcomes = await backends.send(started.map(\.1), transport: transport, defaultTimeout: defaultTimeout.withLock { $0 })
        let now = wallClock()
        var settled: [(SubscriptionKey, SubscriptionRequest, AgentBook.Settlement, Int)] = []
        book.withLock { book in
            for ((index, _), outcome) in zip(started, outcomes) {
                if case .retry(let failure) = outcome {
                    results[index] = .failed(failure)
                    continue
                }
                let item = items[index]
                let alreadyStopped = book.stoppedServices[item.key.service] != nil
                guard let (actions, request, settlement) = book.settle(item.key, outcome, attempt: item.attempt, now: now) else { continue }
                apply(actions, to: scheduler, in: &book)
                // A stopped service is said once, not once for each of its subscriptions.
                if case .stopped = settlement, alreadyStopped { continue }
                settled.append((item.key, request, settlement, item.attempt))
            }
        }
        for (key, request, settlement, attempt) in settled {
            logger.settled(request, key: key, as: settlement, attempts: attempt)
            if case .stopped = settlement { noteStopped() }
            if case .cleanedUp(forgotten: true) = settlement { forgottenSinceSaid.withLock { $0 += 1 } }
        }
        changed()
        return results
    }

    /// Applies the book's actions in order; called with `book` locked so that they keep it.
    /// Consecutive submissions go to the scheduler together, so that those due together leave
    /// together (in one batch where their backend batches). A key submitted while the start is
    /// fed is handed over: the feeder never submits over it.
    private func apply(_ actions: [AgentBook.Action], to scheduler: ReportScheduler<SubscriptionKey, C>, in book: inout AgentBook) {
        var submissions: [ReportScheduler<SubscriptionKey, C>.Submission] = []
        for action in actions {
            if case .submit(let submission) = action {
                // Nothing to look up unless a start is being fed (``AgentBook/awaitingFeed``).
                book.handedOver(submission.key)
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

    /// In `runOnce`: whether nothing is left to send before the deadline: every job done, or
    /// every one left waiting for a retry that comes after it.
    private func roundIsOver() -> Bool {
        let waiting = outOfTime.withLock { $0.count }
        return book.withLock { $0.isSettled || (waiting > 0 && $0.startIsBooked && $0.entries.jobCount <= waiting) }
    }

    private func handle(_ event: SchedulerEvent<SubscriptionKey>, scheduler: ReportScheduler<SubscriptionKey, C>) {
        switch event {
        case .started(let key, _):
            _ = outOfTime.withLock { $0.remove(key) }
        case .delivered:
            break
        case .failed(let key, let attempt, let failure, let retryIn):
            // An attempt cut short by shutdown or the deadline is not the subscription's fault.
            if failure.isCancellation { return }
            let now = wallClock()
            let request = book.withLock { book -> SubscriptionRequest? in
                guard let (actions, request) = book.failed(key, attempt: attempt, reason: failure.reason,
                                                           retryIn: retryIn, now: now) else { return nil }
                apply(actions, to: scheduler, in: &book)
                return request
            }
            if let request {
                let last = onceEnd.withLock { $0 }.map { clock.now.advanced(by: retryIn) >= $0 } ?? false
                if last { _ = outOfTime.withLock { $0.insert(key) } }
                let next: Logger.NextAttempt = isStopping.withLock({ $0 }) ? .stopping : last ? .pastTheDeadline : .after(retryIn)
                logger.failed(request, key: key, attempt: attempt, failure: failure, next: next)
            }
        }
        changed()
    }

    /// Something changed: `STATUS=` may need sending, and a round may be over.
    private func changed() {
        statusContinuation.yield()
        _ = progress.withLock { $0?.yield() }
    }

    private func noteStopped() {
        let stopped = book.withLock { $0.stoppedServices }
        guard !stopped.isEmpty else { return }
        let names = stopped.keys.sorted().joined(separator: ", ")
        statusNote.withLock { $0 = "stopped (credentials refused): \(names); reload once they are mended" }
    }

    // MARK: Confirmations

    private func replacePollers(_ new: [any ConfirmationPoller]) {
        pollers.withLock { pollers in
            var next: [String: PollerState] = [:]
            for poller in new { next[poller.service] = PollerState(poller: poller, lastPoll: pollers[poller.service]?.lastPoll) }
            pollers = next
        }
        pollerContinuation.yield()
    }

    /// Asks each service about its accepted subscriptions every `interval`, until cancelled.
    private func pollForConfirmations(scheduler: ReportScheduler<SubscriptionKey, C>) async {
        var changes = pollerChanges.makeAsyncIterator()
        while !Task.isCancelled && !isStopping.withLock({ $0 }) {
            let now = clock.now
            let due = pollers.withLock { pollers in
                pollers.values.filter { state in state.lastPoll.map { $0.advanced(by: state.poller.interval) <= now } ?? true }
                    .map(\.poller)
            }
            for poller in due where !isStopping.withLock({ $0 }) {
                pollers.withLock { $0[poller.service]?.lastPoll = now }
                // A query in flight finishes when the agent stops (within its grace period).
                pollInFlight.withLock { $0 = true }
                await poll(poller, scheduler: scheduler)
                pollInFlight.withLock { $0 = false }
            }
            if pollers.withLock({ $0.isEmpty }) {
                // No service asks: an idle agent does not wake each second for nothing.
                guard await changes.next() != nil else { return }
                continue
            }
            // Each service is asked at its own interval; a second is the finest any is asked at.
            try? await clock.sleep(for: .seconds(1))
        }
    }

    /// Asks once about what awaits confirmation, each service with time left before `end`.
    private func pollOnce(scheduler: ReportScheduler<SubscriptionKey, C>, before end: C.Instant) async {
        for poller in pollers.withLock({ $0.values.map(\.poller) }) where clock.now < end {
            await poll(poller, scheduler: scheduler)
        }
    }

    private func poll(_ poller: any ConfirmationPoller, scheduler: ReportScheduler<SubscriptionKey, C>) async {
        guard book.withLock({ $0.stoppedServices[poller.service] == nil }) else { return }
        let waiting = book.withLock { $0.awaitingConfirmation(service: poller.service) }
        guard !waiting.isEmpty else { return }
        let now = wallClock()
        let timeout = poller.timeout.milliseconds
        var asked: [(key: SubscriptionKey, data: String)] = []
        for item in waiting {
            if now - item.acceptedAt >= timeout {
                let reason = "accepted, but not confirmed within \(DurationText(poller.timeout)); not sent again until it changes"
                book.withLock { book in apply(book.unconfirmed(item.key, reason: reason), to: scheduler, in: &book) }
                logger.warning("\(item.key.description.displayEscaped): \(reason)")
            } else {
                asked.append((item.key, item.data))
            }
        }
        guard !asked.isEmpty else { return changed() }
        let answers = await poller.poll(asked.map(\.data), transport: transport, defaultTimeout: defaultTimeout.withLock { $0 })
        let answeredAt = wallClock()
        for (item, answer) in zip(asked, answers) {
            guard let answer else { continue }
            let settled = book.withLock { book -> (AgentBook.Settlement?, SubscriptionRequest?)? in
                guard let (actions, settlement) = book.confirmed(item.key, data: item.data, answer, now: answeredAt) else { return nil }
                apply(actions, to: scheduler, in: &book)
                return (settlement, book.entries[item.key]?.plan?.delivery)
            }
            guard let (settlement, request) = settled else { continue }
            if let settlement, let request {
                logger.settled(request, key: item.key, as: settlement == .accepted ? .delivered : settlement, attempts: 1)
                if case .stopped = settlement { noteStopped() }
            } else if case .retry(let failure) = answer {
                logger.warning("\(item.key.description.displayEscaped): \(failure.reason); registering again")
            }
        }
        changed()
    }

    // MARK: Leases (SPEC §11)

    /// Whether this agent's leases were renewed recently enough for it to start attempts.
    private var leasesValid: Bool {
        guard let until = leasesValidUntil.withLock({ $0 }) else { return false }
        return clock.now < until
    }

    /// With shared state, until cancelled (through a graceful stop's grace, so that what is in
    /// flight finishes under a live lease): renews this agent's leases every third of
    /// `leaseTimeout`, claims subscriptions up to its share (again as soon as the work in hand
    /// runs low while there are more to claim), hands back idle ones beyond it, and gives up
    /// what it lost. A database that cannot be reached is tried again with backoff; meanwhile
    /// nothing new is sent once the leases may have expired, and `STATUS=` and the log say so.
    /// With `claiming` false (`remove`) it only keeps this agent alive.
    private func keepLeases(scheduler: ReportScheduler<SubscriptionKey, C>, claiming: Bool) async {
        guard let shared else { return }
        let timeout = settings.leaseTimeout
        let renewEvery = timeout / 3
        // An attempt may take `agent.timeout`: it starts only while the lease holds that long.
        let margin = min(settings.timeout, timeout / 2)
        var failures = 0
        // Leases this agent gave up in its book but not yet in the database (it was away).
        var toRelease = Set<SubscriptionKey>()
        while !Task.isCancelled {
            let started = clock.now
            var wait = renewEvery
            var moreToClaim = false
            let stopping = isStopping.withLock { $0 }
            do {
                if let keys = pendingPublish.withLock({ $0 }) {
                    try await offPool { () throws(StateError) in try shared.publish(keys) }
                    // A reload may have given newer ones meanwhile.
                    pendingPublish.withLock { published in if published == keys { published = nil } }
                }
                try await releaseWritten(&toRelease)
                let excluding = Array(disagreed.withLock { $0 })
                let maxClaim = claiming && !stopping ? Self.claimChunk : 0
                let round = try await sharedStateCall(patience: renewEvery, failures: failures) { () throws(StateError) in
                    try shared.renewAndClaim(leaseTimeout: timeout, maxClaim: maxClaim, excluding: excluding)
                }
                let now = wallClock()
                let idleUntil = now + timeout.milliseconds
                let (lost, disagreeing, handedBack) = book.withLock { book -> (Int, [SubscriptionKey], [SubscriptionKey]) in
                    // Found expired by another agent: what it held is the others' business now.
                    let lost = round.expelled ? Array(book.owned ?? []) : []
                    apply(book.relinquish(lost), to: scheduler, in: &book)
                    // Valid from here: what it lost cannot start any more, and what it claims
                    // may start at once.
                    leasesValidUntil.withLock { $0 = started.advanced(by: timeout - margin) }
                    let (actions, disagreeing) = book.acquire(round.claimed, now: now)
                    apply(actions, to: scheduler, in: &book)
                    claimedJobs.withLock { jobs in
                        jobs.subtract(lost)
                        for case .submit(let submission) in actions { jobs.insert(submission.key) }
                    }
                    // More than its share, and some of it idle: handed back to the others, the
                    // book first, so that nothing of it starts once its records are written.
                    let excess = (book.owned?.count ?? 0) - round.share - max(1, round.share / 20)
                    let idle = excess > 0 && !stopping ? Array(book.idleOwned(until: idleUntil).prefix(excess)) : []
                    apply(book.relinquish(idle), to: scheduler, in: &book)
                    return (lost.count, disagreeing, idle)
                }
                if lost > 0 {
                    logger.warning("another agent found this one's leases expired and took its \(lost) \(lost == 1 ? "subscription" : "subscriptions") (the database was out of reach, or the agent stalled, for \(DurationText(timeout)))")
                }
                if !disagreeing.isEmpty {
                    let first = disagreed.withLock { set in defer { set.formUnion(disagreeing) }; return set.isEmpty }
                    if first {
                        logger.warning("\(disagreeing.count) shared \(disagreeing.count == 1 ? "subscription disagrees" : "subscriptions disagree") with this agent's configuration (such as \(disagreeing[0].description.displayEscaped)): another agent loaded other files last; this one leaves them to the others until it is reloaded with the same files")
                    }
                }
                // Their last records are written first: a delivery the database did not show yet
                // would be sent again by the agent that claims the subscription next.
                toRelease.formUnion(disagreeing)
                toRelease.formUnion(handedBack)
                try await releaseWritten(&toRelease)
                if !handedBack.isEmpty {
                    logger.info("handed \(handedBack.count) \(handedBack.count == 1 ? "subscription" : "subscriptions") to the group's other agents (a share is now \(round.share))")
                }
                // Claims after the first ones take over what an agent left (it stopped, or its
                // leases expired) or what another agent's configuration added: said, and
                // "all … reported" is said again once they are done.
                if claimedAll.withLock({ $0 }) && !round.claimed.isEmpty {
                    logger.info("took over \(round.claimed.count) \(round.claimed.count == 1 ? "subscription" : "subscriptions") no live agent held")
                    announceWhenSettled.withLock { $0 = true }
                    releaseWhenAnswered.withLock { $0 = true }
                }
                claimedAll.withLock { $0 = !claiming || round.claimed.count < round.wanted || round.wanted == 0 }
                moreToClaim = round.wanted > 0 && round.claimed.count == round.wanted
                if moreToClaim { wait = .seconds(1) }
                if failures > 0 || sharedStateSilent.withLock({ silent in defer { silent = false }; return silent }) {
                    logger.notice("the state database \(shared.location) is back; leases renewed")
                    statusNote.withLock { $0 = nil }
                    failures = 0
                }
                changed()
            } catch {
                failures += 1
                if failures == 1 {
                    logger.error("\(error.description); the agent keeps running and tries again (nothing new is sent once its leases may have expired)")
                }
                statusNote.withLock { $0 = "state database unreachable, retrying: \(error.description)" }
                changed()
                wait = min(renewEvery, .milliseconds(500) * (1 << min(failures, 6)))
            }
            if moreToClaim {
                // Claim again as soon as the work in hand runs low (or after `wait`): a fixed pause
                // between claims would hold a fast agent back while it waits for work.
                let end = started.advanced(by: wait)
                while clock.now < end && !Task.isCancelled && scheduler.pendingCount + scheduler.inFlightCount >= Self.claimChunk / 2 {
                    try? await clock.sleep(for: .milliseconds(50), tolerance: nil)
                }
            } else {
                try? await clock.sleep(until: started.advanced(by: wait), tolerance: nil)
            }
        }
    }

    /// Runs a call to the shared state off the pool. A database that freezes (a server stopped,
    /// a network that drops packets) holds the call without an error: one that has not answered
    /// within `patience` is said once, in the log and `STATUS=`, as an error would be (when
    /// `failures` says none was), until the database answers again.
    private func sharedStateCall<T: Sendable>(patience: Duration, failures: Int,
                                              _ body: @escaping @Sendable () throws(StateError) -> T) async throws(StateError) -> T {
        let result = await withTaskGroup(of: Result<T, StateError>?.self) { group -> Result<T, StateError> in
            group.addTask {
                await offPool { () -> Result<T, StateError> in
                    do throws(StateError) { return .success(try body()) } catch { return .failure(error) }
                }
            }
            group.addTask {
                guard (try? await self.clock.sleep(for: patience)) != nil, failures == 0,
                      let shared = self.shared, !self.sharedStateSilent.withLock({ silent in defer { silent = true }; return silent })
                else { return nil }
                let silence = "the state database \(shared.location) has not answered for \(DurationText(patience))"
                self.logger.error("\(silence); the agent keeps running and waits for it (nothing new is sent once its leases may have expired)")
                self.statusNote.withLock { $0 = "state database not answering, waiting: \(silence)" }
                self.changed()
                return nil
            }
            var answer: Result<T, StateError>?
            for await value in group where value != nil {
                answer = value
                group.cancelAll()
                break
            }
            return answer!
        }
        return try result.get()
    }

    /// Gives up the leases of `keys` in the shared state once their records are written, and
    /// empties it; leaves it as it is when they cannot be written yet.
    private func releaseWritten(_ keys: inout Set<SubscriptionKey>) async throws(StateError) {
        guard let shared, !keys.isEmpty else { return }
        let recorder = recorder
        guard await offPool({ recorder.flush() }) else { return }
        let released = Array(keys)
        try await offPool { () throws(StateError) in try shared.release(released) }
        keys = []
    }

    /// The most subscriptions an agent claims in one round of leases.
    private static var claimChunk: Int { 5_000 }

    /// With shared state, once stopping: writes what is left, then gives every lease back, so
    /// the other agents take this one's subscriptions at once rather than after they expire.
    private func handBackLeases() async {
        guard let shared else { return }
        leasesValidUntil.withLock { $0 = nil }
        let recorder = recorder
        guard await offPool({ recorder.flush() }) else { return }
        do {
            try await offPool { () throws(StateError) in try shared.release(nil) }
        } catch {
            logger.warning("\(error.description); this agent's leases expire on their own")
        }
    }

    // MARK: The endpoint

    /// Whether the scheduler runs and the agent is not stopping (`/health`).
    var isServing: Bool {
        serving.withLock { $0 != nil } && !isStopping.withLock { $0 }
    }

    /// Every subscription's record as the agent has it now (`/metrics`).
    func snapshot() -> [SubscriptionRecord] {
        book.withLock { book in
            bookWholeStart(&book)
            return book.entries.values.filter { book.isOwned($0.record.key) }.map(\.record)
        }.sorted { $0.key < $1.key }
    }

    /// The backend that answers webhooks under `path`, if any.
    func webhookReceiver(_ path: String) -> (any WebhookReceiver)? {
        backends.all.lazy.compactMap { $0 as? any WebhookReceiver }.first { $0.webhookPath == path }
    }

    /// A webhook call about the subscription (`account`, `service`): settles it when it is
    /// accepted and the call is genuine; a genuine call about nothing pending is answered 202
    /// and changes nothing (it may have been settled by polling already).
    func webhook(_ receiver: any WebhookReceiver, service: String, account: String, body: [UInt8]) -> HTTPEndpoint.Response {
        let key = SubscriptionKey(account: account, service: service)
        guard let (delivery, data) = book.withLock({ book -> (SubscriptionRequest, String?)? in
            // One not booked yet is known all the same (the start books its plans while its
            // first run is sent).
            bookWholeStart(&book)
            guard let entry = book.entries[key], let delivery = entry.plan?.delivery else { return nil }
            return (delivery, entry.record.state == .accepted ? entry.record.backendData : nil)
        }) else {
            return HTTPEndpoint.Response(status: 404, body: "no such subscription\n")
        }
        switch receiver.webhook(body: body, delivery: delivery) {
        case .refused(let status, let reason):
            outsiders.note("webhook refused", level: .warning, "\(key.description.displayEscaped): a webhook call was refused (\(reason))")
            return HTTPEndpoint.Response(status: status, body: reason + "\n")
        case .settled(nil):
            return HTTPEndpoint.Response(status: 202)
        case .settled(let outcome?):
            guard let data, let scheduler = serving.withLock({ $0 }) else { return HTTPEndpoint.Response(status: 202) }
            let settled = book.withLock { book -> AgentBook.Settlement?? in
                guard let (actions, settlement) = book.confirmed(key, data: data, outcome, now: wallClock()) else { return nil }
                apply(actions, to: scheduler, in: &book)
                return .some(settlement)
            }
            if case .some(.some(let settlement)) = settled {
                logger.settled(delivery, key: key, as: settlement == .accepted ? .delivered : settlement, attempts: 1)
                if case .stopped = settlement { noteStopped() }
            }
            changed()
            return HTTPEndpoint.Response(status: 202)
        }
    }

    // MARK: Reload

    private func reload(reason: String, scheduler: ReportScheduler<SubscriptionKey, C>) async {
        guard !isStopping.withLock({ $0 }) else { return }
        notifier.notify("RELOADING=1\nMONOTONIC_USEC=\(SystemdNotifier.monotonicMicroseconds())")
        logger.info("reloading the configuration (\(reason))")
        let load = load
        switch await offPool(load) {
        case .invalid(let why):
            logger.error("the new configuration is invalid, so the previous one keeps running: \(why)")
            statusNote.withLock { $0 = "reload failed, previous configuration kept: \(why)" }
        case .loaded(let plans, let newPollers, let newSettings, let warnings):
            let now = wallClock()
            defaultTimeout.withLock { $0 = newSettings.timeout }
            // Cancels and state changes now; what the reload submits is held in the book (no
            // attempt of a changed subscription starts) until the state is written, which
            // ``releaseHeld(scheduler:)`` waits for: a state that cannot be written holds those
            // subscriptions, not the reload (READY=1 goes out now).
            let summary = book.withLock { book in
                let (actions, summary) = book.reload(plans: plans, reportInterval: newSettings.reportInterval, now: now)
                apply(actions, to: scheduler, in: &book)
                return summary
            }
            replacePollers(newPollers)
            if shared != nil {
                // This configuration counts now: new subscriptions for whichever agent claims
                // them, dropped ones for their holders to clean up, written to the database once
                // the reload's state is (a database away must not hold the reload).
                disagreed.withLock { $0 = [] }
                pendingPublish.withLock { $0 = plans.map(\.key) }
            }
            heldContinuation.yield()
            for key in book.withLock({ $0.takeUnreadableCleanups() }) { logger.unreadableCleanup(of: key) }
            statusNote.withLock { $0 = nil }
            announceWhenSettled.withLock { $0 = true }
            releaseWhenAnswered.withLock { $0 = true }
            logger.info("reloaded: \(summary.added) new, \(summary.changed) changed, \(summary.unchanged) unchanged, \(summary.removed) removed")
            // As at start: the fix an operator reloaded may itself be misspelt.
            for warning in warnings { logger.warning("\(warning.formatted)", metadata: warning.logFields) }
            for kind in AgentBook.ReloadSummary.Kind.allCases {
                let total = switch kind { case .added: summary.added; case .changed: summary.changed; case .removed: summary.removed }
                guard let keys = summary.named[kind], !keys.isEmpty else { continue }
                let more = total > keys.count ? " and \(total - keys.count) more" : ""
                logger.debug("reloaded, \(kind.rawValue): \(keys.map { $0.description.displayEscaped }.joined(separator: ", "))\(more)")
            }
            let waiting = settings.waitingForRestart(newSettings)
            if !waiting.isEmpty {
                logger.notice("\(waiting.joined(separator: ", ")) changed; \(waiting.count == 1 ? "it takes" : "they take") effect when the agent restarts, and until then the agent keeps the values it started with")
            }
        }
        guard !isStopping.withLock({ $0 }) else { return }
        notifier.notify("READY=1\nSTATUS=\(statusText())")
        statusContinuation.yield()
    }

    /// Until cancelled: once the reloads have held subscriptions, writes the state they
    /// recorded (trying again every second while it cannot be written), then lets them go to the
    /// scheduler; with shared state, then writes the configuration the last reload loaded.
    private func releaseHeld(scheduler: ReportScheduler<SubscriptionKey, C>) async {
        for await _ in heldChanges {
            let through = book.withLock { $0.reloads }
            guard await flushUntilWritten() else { return }
            book.withLock { book in apply(book.releaseHeld(through: through), to: scheduler, in: &book) }
            changed()
            guard let shared, let keys = pendingPublish.withLock({ $0 }) else { continue }
            do {
                try await offPool { () throws(StateError) in try shared.publish(keys) }
                pendingPublish.withLock { published in if published == keys { published = nil } }
            } catch {
                // The leases' next round writes it.
                logger.error("\(error.description); the configuration is written to it once it is back")
            }
        }
    }

    /// Writes the recorded changes, trying again every second while the state cannot be
    /// written; false when the agent stops first.
    private func flushUntilWritten() async -> Bool {
        let recorder = recorder
        while !(await offPool { recorder.flush() }) {
            if Task.isCancelled || isStopping.withLock({ $0 }) { return false }
            try? await clock.sleep(for: .seconds(1))
        }
        return true
    }

    // MARK: Status

    private func statusText(_ counts: SubscriptionCounts? = nil) -> String {
        var text = (counts ?? book.withLock { $0.counts }).statusText
        // With shared state an agent counts what it holds, not the group's accounts.
        if shared != nil { text = "holds " + text }
        return statusNote.withLock { $0 }.map { text + "; " + $0 } ?? text
    }

    /// Sends `STATUS=` when the counts change, at most once per `statusInterval`, and logs when
    /// every subscription has been reported.
    private func reportStatus() async {
        var last = ""
        // Whether the last "all … reported" said some await confirmation: once none does, that is
        // said too (at info, where the confirmations themselves are debug lines).
        var awaitingSaid = false
        for await _ in statusChanges {
            // With shared state, settled means too that nothing is left to claim.
            let (counts, settled, answered) = book.withLock {
                ($0.counts, $0.isSettled && (shared == nil || claimedAll.withLock { $0 }), $0.firstAttemptsAnswered)
            }
            let text = statusText(counts)
            if text != last {
                notifier.notify("STATUS=\(text)")
                last = text
            }
            if settled && counts[.removing] == 0, case let forgotten = forgottenSinceSaid.withLock({ count in defer { count = 0 }; return count }),
               forgotten > 0 {
                // Each removal is a debug line: a reload that removes 200 accounts says so here, once.
                logger.info("\(forgotten == 1 ? "1 subscription that left the configuration is" : "\(forgotten) subscriptions that left the configuration are") cleaned up and forgotten")
            }
            if settled && counts[.removing] == 0 && announceWhenSettled.withLock({ announce in defer { announce = false }; return announce }) {
                awaitingSaid = counts[.accepted] > 0 && counts.accounts > 0
                let awaiting = counts[.accepted] > 0 ? " (\(counts[.accepted]) awaiting the backend's confirmation)" : ""
                // Some are not sent at all (waiting for a value, rejected, …): "all … reported"
                // would contradict `status`, so the counts say what is where.
                let unsent = counts[.pending] + counts[.rejected] + counts[.unconfirmed] + counts[.stopped]
                if unsent > 0 && counts.accounts > 0 {
                    logger.info("nothing more to send for now (\(text))")
                } else if shared == nil {
                    // With nothing to report (the warning at start said so), no "all 0 accounts".
                    if counts.accounts > 0 {
                        logger.info("\(counts.accounts == 1 ? "the 1 account is" : "all \(counts.accounts) accounts are") reported\(awaiting)")
                    }
                } else if counts.accounts == 0 {
                    logger.info("holds no account now: the group's other agents hold them all")
                } else {
                    logger.info("\(counts.accounts == 1 ? "the 1 account this agent holds is" : "all \(counts.accounts) accounts this agent holds are") reported\(awaiting)")
                }
            } else if awaitingSaid && settled && counts[.accepted] == 0 {
                awaitingSaid = false
                logger.info("no registration awaits the backend's confirmation any more (\(text))")
            }
            if answered && releaseWhenAnswered.withLock({ release in defer { release = false }; return release }) {
                // Loading, rendering and the first burst of requests are over: give the memory
                // they freed back to the system, so an idle agent stays small. Not only once all
                // are reported: one receiver down kept it all (idle 200 MB, then 25 MB more at each
                // reload, with 1 % of 100,000 accounts retrying).
                recorder.releaseMemoryOnceWritten()
            }
            try? await clock.sleep(for: statusInterval)
        }
    }
}

/// Why a task of the agent ended.
private enum Ending { case schedulerEnded, pollerEnded, graceExpired, deadline, other }

extension AgentSettings {
    /// The `agent:` keys whose values differ in `new` and take effect only when the agent
    /// restarts (all but `reportInterval` and `timeout`, which a reload applies; `stateDirectory`
    /// is the agent's place, never changed while it runs).
    func waitingForRestart(_ new: AgentSettings) -> [String] {
        var names: [String] = []
        if new.concurrency != concurrency { names.append("agent.concurrency") }
        if new.perHostConcurrency != perHostConcurrency { names.append("agent.perHostConcurrency") }
        if new.retry != retry { names.append("agent.retry") }
        if new.tlsCAFile != tlsCAFile { names.append("agent.tls.caFile") }
        if new.state != state { names.append("agent.state") }
        if new.statePassword != statePassword { names.append("agent.statePassword") }
        if new.leaseTimeout != leaseTimeout { names.append("agent.leaseTimeout") }
        if new.listen != listen { names.append("agent.listen") }
        if new.trackingSpool != trackingSpool { names.append("agent.trackingSpool") }
        // A setting added later and not named above still says that something waits.
        var rest = new
        rest.reportInterval = reportInterval
        rest.timeout = timeout
        rest.stateDirectory = stateDirectory
        if names.isEmpty && rest != self { names.append("an agent setting") }
        return names
    }
}
