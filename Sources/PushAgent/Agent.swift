import PushAcrobits
import PushBackend
import Logging
import PushConfig
import PushScheduler
import PushState
import ServiceLifecycle
import Synchronization

/// What loading the configuration gave, for a reload.
public enum ConfigurationLoad: Sendable {
    /// A valid configuration: the plans of its accounts and its agent settings.
    case loaded(plans: [AccountPlan], settings: AgentSettings)
    /// An invalid one, with a sentence that says why (the first error, where it is, and how many).
    case invalid(reason: String)
}

/// The long-running agent (`pushreporter run`, SPEC §5 and §8): reports every account on start,
/// retries for as long as it runs, reloads on request, sends removals, and keeps systemd told.
///
/// Decisions are made by ``AgentBook``; this service applies them to the scheduler and the
/// state recorder. Stopping: on graceful shutdown it sends `STOPPING=1`, starts no new request,
/// gives the requests in flight `gracePeriod` to finish, then cancels them and returns. List the
/// ``StateRecorder`` before it in the service group so the state is flushed after it returns.
public final class Agent<C: Clock>: Service, Sendable where C.Duration == Duration {
    /// A source of reload requests (SIGHUP, changed files): it yields a reason each time, and
    /// returns when its task is cancelled.
    public typealias ReloadSource = @Sendable (AsyncStream<String>.Continuation) async -> Void

    private let settings: AgentSettings
    private let transport: any HTTPTransport
    private let recorder: StateRecorder<C>
    private let notifier: any ServiceManagerNotifier
    private let logger: Logger
    private let clock: C
    private let wallClock: @Sendable () -> Int64
    private let load: @Sendable () async -> ConfigurationLoad
    private let reloadSources: [ReloadSource]
    private let gracePeriod: Duration
    private let statusInterval: Duration

    private let book: Mutex<AgentBook>
    private let startup: Mutex<(plans: [AccountPlan], records: [AccountRecord])?>
    private let statusNote = Mutex<String?>(nil)
    private let isStopping = Mutex(false)
    /// Set at start and by each reload: log "all … reported" once the work is done.
    private let announceWhenSettled = Mutex(true)
    private let statusChanges: AsyncStream<Void>
    private let statusContinuation: AsyncStream<Void>.Continuation

    /// - Parameters:
    ///   - plans: the accounts of the configuration loaded at start.
    ///   - records: the state database's records, as loaded at start.
    ///   - wallClock: Unix time in milliseconds, for the state and `Retry-After` dates.
    ///   - load: loads the configuration again, for a reload.
    ///   - reloadSources: what asks for reloads; each runs in a child task of ``run()``.
    ///   - gracePeriod: how long requests in flight may finish after graceful shutdown.
    ///   - statusInterval: the least time between two `STATUS=` messages.
    public init(plans: [AccountPlan], records: [AccountRecord], settings: AgentSettings, transport: any HTTPTransport,
                recorder: StateRecorder<C>, notifier: any ServiceManagerNotifier, logger: Logger, clock: C,
                wallClock: @escaping @Sendable () -> Int64 = WallClock.epochMilliseconds,
                load: @escaping @Sendable () async -> ConfigurationLoad, reloadSources: [ReloadSource] = [],
                gracePeriod: Duration = .seconds(10), statusInterval: Duration = .seconds(1)) {
        self.settings = settings
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
        book = Mutex(AgentBook(defaultTimeout: settings.timeout, reportInterval: settings.reportInterval))
        startup = Mutex((plans, records))
        (statusChanges, statusContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Runs until graceful shutdown. Throws when the state cannot be written at start: the
    /// reports' removal requests must be in the state before any report is sent.
    public func run() async throws {
        let scheduler = makeScheduler()

        if let (plans, records) = startup.withLock({ startup in defer { startup = nil }; return startup }) {
            // The scheduler does not run yet, so nothing is sent before the flush.
            let owedRemovals = book.withLock { book -> Int in
                apply(book.start(plans: plans, records: records), to: scheduler)
                return book.counts.removing
            }
            guard recorder.flush() else {
                throw StateRecorder<C>.Failure(description: "the state cannot be written, so nothing is sent; see the error above")
            }
            for id in book.withLock({ $0.takeUnreadableRemovals() }) {
                logger.unreadableRemoval(of: id)
            }
            let removals = owedRemovals > 0 ? ", sending \(owedRemovals) owed \(owedRemovals == 1 ? "removal" : "removals")" : ""
            logger.info("started: reporting \(plans.count) \(plans.count == 1 ? "account" : "accounts")\(removals)")
        }
        notifier.notify("READY=1\nSTATUS=\(statusText())")
        statusContinuation.yield()

        let (reloads, reloadContinuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingNewest(1))
        await withTaskGroup(of: Ending.self) { group in
            group.addTask {
                await scheduler.run()
                return .schedulerEnded
            }
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
                await self.reportStatus()
                return .other
            }
            group.addTask {
                do {
                    try await gracefulShutdown()
                } catch {
                    return .other
                }
                self.isStopping.withLock { $0 = true }
                self.notifier.notify("STOPPING=1")
                let inFlight = scheduler.inFlightCount
                let waiting = inFlight > 0 ? "; \(inFlight) in flight get \(DurationText(self.gracePeriod)) to finish" : ""
                self.logger.info("stopping: no new requests\(waiting)")
                scheduler.shutdown()
                try? await self.clock.sleep(for: self.gracePeriod)
                if !Task.isCancelled {
                    self.logger.warning("\(scheduler.inFlightCount) requests still in flight after the grace period are cancelled")
                }
                return .graceExpired
            }
            for await ending in group where ending != .other {
                group.cancelAll()
                break
            }
        }
        reloadContinuation.finish()
    }

    // MARK: Scheduling

    private func makeScheduler() -> ReportScheduler<String, C> {
        ReportScheduler(
            settings: settings, clock: clock, wallClock: wallClock,
            perform: { [weak self] id, _ in
                guard let self, let report = self.book.withLock({ $0.beginAttempt(id) }) else { return .delivered }
                return await report.send(using: self.transport)
            },
            onEvent: { [weak self] event, scheduler in self?.handle(event, scheduler: scheduler) })
    }

    /// Applies the book's actions in order; called with the book locked so that they keep it.
    private func apply(_ actions: [AgentBook.Action], to scheduler: ReportScheduler<String, C>) {
        for action in actions {
            switch action {
            case .submit(let id, let host, let delay): scheduler.submit(id, host: host, after: delay)
            case .cancel(let id): scheduler.cancel(id)
            case .save(let record): recorder.save(record)
            case .forget(let id): recorder.forget(id)
            }
        }
    }

    private func handle(_ event: SchedulerEvent<String>, scheduler: ReportScheduler<String, C>) {
        switch event {
        case .started:
            return
        case .delivered(let id, let attempts):
            let now = wallClock()
            let done = book.withLock { book -> (report: PlannedReport, forgotten: Bool)? in
                guard let (actions, report) = book.delivered(id, now: now) else { return nil }
                apply(actions, to: scheduler)
                return (report, actions.contains(.forget(id)))
            }
            guard let done else { return }
            logger.delivered(done.report, attempts: attempts)
            if done.forgotten { logger.notice("\(id): every removal delivered; the account is forgotten") }
        case .failed(let id, let attempt, let failure, let retryIn):
            // An attempt cut short by shutdown is not the report's fault.
            if failure.isCancellation { return }
            let now = wallClock()
            let report = book.withLock { book -> PlannedReport? in
                guard let (actions, report) = book.failed(id, attempt: attempt, reason: failure.reason,
                                                          retryIn: retryIn, now: now) else { return nil }
                apply(actions, to: scheduler)
                return report
            }
            if let report { logger.failed(report, attempt: attempt, failure: failure, retryIn: retryIn) }
        }
        statusContinuation.yield()
    }

    // MARK: Reload

    private func reload(reason: String, scheduler: ReportScheduler<String, C>) async {
        guard !isStopping.withLock({ $0 }) else { return }
        notifier.notify("RELOADING=1\nMONOTONIC_USEC=\(SystemdNotifier.monotonicMicroseconds())")
        logger.info("reloading the configuration (\(reason))")
        switch await load() {
        case .invalid(let why):
            logger.error("the new configuration is invalid, so the previous one keeps running: \(why)")
            statusNote.withLock { $0 = "reload failed, previous configuration kept: \(why)" }
        case .loaded(let plans, let newSettings):
            let now = wallClock()
            // Cancels and state changes first; the changed accounts are held (no attempt starts)
            // until their removal requests are written, outside the book's lock, and only then
            // submitted.
            let (submits, summary) = book.withLock { book in
                book.defaultTimeout = newSettings.timeout
                let (actions, summary) = book.reload(plans: plans, reportInterval: newSettings.reportInterval, now: now)
                var submits: [AgentBook.Action] = []
                var others: [AgentBook.Action] = []
                for action in actions {
                    if case .submit = action { submits.append(action) } else { others.append(action) }
                }
                apply(others, to: scheduler)
                return (submits, summary)
            }
            for id in book.withLock({ $0.takeUnreadableRemovals() }) {
                logger.unreadableRemoval(of: id)
            }
            guard await flushUntilWritten() else { return }
            book.withLock { book in
                book.releaseHeld()
                apply(submits, to: scheduler)
            }
            statusNote.withLock { $0 = nil }
            announceWhenSettled.withLock { $0 = true }
            logger.info("reloaded: \(summary.added) new, \(summary.changed) changed, \(summary.unchanged) unchanged, \(summary.removed) removed")
            if !settings.takesEffectOnReload(newSettings) {
                logger.notice("agent concurrency, retry and TLS settings changed; they take effect when the agent restarts")
            }
        }
        guard !isStopping.withLock({ $0 }) else { return }
        notifier.notify("READY=1\nSTATUS=\(statusText())")
        statusContinuation.yield()
    }

    /// Writes the recorded changes, trying again every second while the state cannot be
    /// written; false when the agent stops first.
    private func flushUntilWritten() async -> Bool {
        while !recorder.flush() {
            if Task.isCancelled || isStopping.withLock({ $0 }) { return false }
            try? await clock.sleep(for: .seconds(1))
        }
        return true
    }

    // MARK: Status

    private func statusText(_ counts: AccountCounts? = nil) -> String {
        let text = (counts ?? book.withLock { $0.counts }).statusText
        return statusNote.withLock { $0 }.map { text + "; " + $0 } ?? text
    }

    /// Sends `STATUS=` when the counts change, at most once per `statusInterval`, and logs when
    /// every account has been reported.
    private func reportStatus() async {
        var last = ""
        for await _ in statusChanges {
            let counts = book.withLock { $0.counts }
            let text = statusText(counts)
            if text != last {
                notifier.notify("STATUS=\(text)")
                last = text
            }
            let settled = counts.retrying == 0 && counts.pending == 0 && counts.removing == 0
            if settled && announceWhenSettled.withLock({ announce in defer { announce = false }; return announce }) {
                logger.info("all \(counts.accounts) \(counts.accounts == 1 ? "account is" : "accounts are") reported")
                // Loading, rendering and the first burst of requests are over: give the memory
                // they freed back to the system, so an idle agent stays small.
                recorder.releaseMemoryOnceWritten()
            }
            try? await clock.sleep(for: statusInterval)
        }
    }
}

/// Why a task of `Agent.run` ended.
private enum Ending { case schedulerEnded, graceExpired, other }

extension AgentSettings {
    /// True when `new` differs from these settings only in what a reload applies
    /// (`reportInterval`, `timeout`).
    func takesEffectOnReload(_ new: AgentSettings) -> Bool {
        var comparable = new
        comparable.reportInterval = reportInterval
        comparable.timeout = timeout
        comparable.stateDirectory = stateDirectory
        return comparable == self
    }
}
