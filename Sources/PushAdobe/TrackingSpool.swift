import Logging
import PushBackend
import PushConfig
import PushScheduler
import ServiceLifecycle
import Synchronization
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// Drains `agent.trackingSpool` (SPEC §9.4): every `*.json` file in it is a push payload with
/// an `event` key (and optionally `service`, and `account` or `ecid`), whose tracking actions
/// are sent, retried with the backoff of `agent.retry` for as long as the agent runs.
///
/// Nothing is lost: a file is deleted only once all its actions were delivered, and each
/// delivered action is remembered in the ``TrackingLedger`` before the next step, so after a
/// `kill -9` the file is found again and only what was not acknowledged is sent. A file whose
/// action the server refuses, or that is not a payload, is moved aside as `NAME.json.rejected`
/// (and logged once); a payload that is not to be tracked (`_acsDeliveryTracking: off`, no ids,
/// no ECID) is deleted with a log line saying why.
///
/// Only regular files inside the directory are read (``SpoolEntry``): a symbolic link, a FIFO,
/// a directory, a device or a file over 1 MiB is moved aside with its reason at once, and one
/// that cannot even be moved aside is left alone, said once. Every look at the file system and
/// at the ledger runs on a thread of its own (``BlockingPool``), never on Swift's cooperative
/// pool, so a file that blocks holds back nothing else.
///
/// The directory is listed every `scanInterval`; files are taken in name order, and a
/// producer should write `NAME.json.tmp` (or a hidden file) and rename it, so that no file is
/// read half written. Run it in the agent's service group: on graceful shutdown it starts
/// nothing more, gives what is in flight `gracePeriod`, then cancels it.
public final class TrackingSpool<C: Clock>: BackendService, Sendable where C.Duration == Duration {
    /// The suffix a refused file is given.
    public static var rejectedSuffix: String { ".rejected" }

    private let directory: String
    private let targets: TrackingTargets.Current
    private let ledger: any TrackingLedger
    private let transport: any HTTPTransport
    private let concurrency: Int
    private let logger: Logger
    private let clock: C
    private let wallClock: @Sendable () -> Int64
    private let scanInterval: Duration
    private let gracePeriod: Duration
    private let blocking: BlockingPool
    /// The files submitted and not yet done with.
    private let known = Mutex<Set<String>>([])
    /// Entries that could be neither read nor moved aside: not taken again while they stay.
    private let ignored = Mutex<Set<String>>([])
    /// Told when stopping begins (``beginStopping()``, or graceful shutdown).
    private let stopping: AsyncStream<Void>
    private let stop: AsyncStream<Void>.Continuation
    /// Why the directory could not be listed last time (said once, until it can again).
    private let listingProblem = Mutex<String?>(nil)

    /// - Parameters:
    ///   - directory: the spool (created, mode 0700, when missing).
    ///   - targets: the services and ECIDs files are resolved with; replaced on reload.
    ///   - concurrency: the most files sent at once.
    ///   - wallClock: Unix time in milliseconds, for `Retry-After` dates and the ledger.
    ///   - gracePeriod: how long what is in flight may finish after graceful shutdown.
    public init(directory: String, targets: TrackingTargets.Current, ledger: any TrackingLedger, transport: any HTTPTransport,
                concurrency: Int, logger: Logger, clock: C, wallClock: @escaping @Sendable () -> Int64,
                scanInterval: Duration = .seconds(1), gracePeriod: Duration = .seconds(10)) {
        self.gracePeriod = gracePeriod
        blocking = .shared
        (stopping, stop) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.directory = directory
        self.targets = targets
        self.ledger = ledger
        self.transport = transport
        self.concurrency = concurrency
        self.logger = logger
        self.clock = clock
        self.wallClock = wallClock
        self.scanInterval = scanInterval
    }

    /// Scans and sends until graceful shutdown, then lets the attempts in flight finish.
    public func run() async {
        if mkdir(directory, 0o700) == 0 {
            logger.notice("tracking spool: created \(directory.displayEscaped)")
        }
        if targets.value.services.isEmpty {
            logger.warning("tracking spool: the configuration has no adobe-campaign service, so every file put in \(directory.displayEscaped) is moved aside")
        }
        let retry = targets.value.retry
        let scheduler = ReportScheduler<String, C>(
            policy: BackoffPolicy(retry),
            concurrency: concurrency, perHostConcurrency: concurrency, clock: clock, random: SystemRandomNumberGenerator(),
            wallClock: { [wallClock] in wallClock() / 1000 },
            perform: { [self] name, attempt in await drain(name, attempt: attempt) },
            onEvent: { [logger] event, _ in
                guard case .failed(let name, let attempt, let failure, let retryIn) = event, !failure.isCancellation else { return }
                let message: Logger.Message = """
                    tracking spool: \(name.displayEscaped) failed: \(failure.reason) (attempt \(attempt)); \
                    next attempt in \(DurationText(retryIn))
                    """
                if attempt & (attempt - 1) == 0 { logger.warning(message) } else { logger.debug(message) }
            })
        let (stopping, stop) = (stopping, stop)
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await scheduler.run() }
                group.addTask {
                    while !Task.isCancelled {
                        await self.scan(into: scheduler)
                        try? await self.clock.sleep(for: self.scanInterval)
                    }
                }
                group.addTask {
                    // Stopping: nothing new starts, what is in flight has the grace period, then
                    // it is cancelled (a read or a ledger call stuck on its thread is left there).
                    for await _ in stopping {
                        scheduler.shutdown()
                        try? await self.clock.sleep(for: self.gracePeriod)
                        return
                    }
                }
                // The scheduler ends on shutdown once its attempts in flight are done, or the
                // grace period ends first.
                _ = await group.next()
                group.cancelAll()
            }
            // Stopped early (beginStopping): it ends when the group tells it to.
            try? await gracefulShutdown()
        } onGracefulShutdown: {
            stop.yield()
        }
    }

    /// Stopping begins (SIGTERM): no new file or action starts from now on, and what is in
    /// flight has the grace period from now. Called before the spool's turn to stop comes.
    public func beginStopping() {
        stop.yield()
    }

    /// Submits the files that came since the last scan.
    private func scan(into scheduler: ReportScheduler<String, C>) async {
        let directory = directory
        guard let listing = try? await blocking.run({ FileSystem.list(directory) }) else { return }
        switch listing {
        case .failure(let error):
            let problem = error.message
            if listingProblem.withLock({ last in defer { last = problem }; return last != problem }) {
                logger.error("tracking spool: cannot list \(directory.displayEscaped) (\(problem)); trying again")
            }
        case .success(let names):
            listingProblem.withLock { $0 = nil }
            let candidates = names.filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }
            // An entry left alone is looked at again once it is gone and comes back.
            ignored.withLock { $0.formIntersection(candidates) }
            for name in candidates where !ignored.withLock({ $0.contains(name) }) {
                // One hold label for the whole spool: a 429 or 503 pauses it, as it pauses a service.
                if known.withLock({ $0.insert(name).inserted }) { scheduler.submit(name, host: "tracking-spool", hold: "tracking-spool") }
            }
        }
    }

    /// One attempt at the file `name`: its actions in order, each remembered once delivered;
    /// the file deleted once all are, or moved aside when it is not a payload or one is refused.
    private func drain(_ name: String, attempt: Int) async -> AttemptResult {
        let shown = name.displayEscaped
        let (directory, limit) = (directory, PushPayload.maximumSize)
        let entry: SpoolEntry
        do {
            entry = try await blocking.run { SpoolEntry.read(name, in: directory, limit: limit) }
        } catch {
            return .failed(.cancelled)
        }
        let bytes: [UInt8]
        switch entry {
        case .file(let read):
            bytes = read
        case .gone:
            // Taken away meanwhile (by a person, or moved aside by a second look).
            forget(name)
            return .delivered
        case .refused(let why):
            return await setAside(name, because: why)
        case .unreadable(let why):
            return .failed(AttemptFailure(status: nil, reason: why))
        }
        let requests: [TrackingRequest]
        switch requestsOf(bytes) {
        case .success(let found):
            requests = found
        case .failure(.rejected(let why)):
            return await setAside(name, because: why)
        case .failure(.notTracked(let why)):
            logger.notice("tracking spool: \(shown): not tracked: \(why); the file is deleted")
            return await remove(name)
        }
        for request in requests {
            switch await TrackingStep.attempt(request, transport: transport, ledger: ledger, wallClock: wallClock, blocking: blocking) {
            case .delivered, .alreadySent:
                continue
            case .deliveredNotRecorded(let why):
                logger.error("tracking spool: \(shown): \(request.action.description) was delivered, but \(why)")
            case .rejected(let why):
                return await setAside(name, because: "\(request.action.description) rejected by \(request.host): \(why)")
            case .unknown(let why):
                // The state's problem, not the file's: tried again.
                return .failed(AttemptFailure(status: nil, reason: why))
            case .retry(let failure):
                return .failed(AttemptFailure(status: failure.status, retryAfter: failure.retryAfter,
                                              reason: "\(request.action.description) to \(request.host): \(failure.reason)",
                                              isCancellation: failure.isCancellation))
            }
        }
        let actions = requests.map(\.action.rawValue).joined(separator: ", ")
        let message: Logger.Message = "tracking spool: \(shown): tracked (action \(actions)) at \(requests.first?.host ?? "")"
        if attempt > 1 { logger.notice("\(message) after \(attempt) attempts") } else { logger.debug(message) }
        return await remove(name)
    }

    /// Why a file is not sent.
    private enum Refusal: Error {
        /// Never sent: moved aside.
        case rejected(String)
        /// Nothing to send: deleted.
        case notTracked(String)
    }

    /// The requests a spool file asks for, with the targets in force.
    private func requestsOf(_ bytes: [UInt8]) -> Result<[TrackingRequest], Refusal> {
        let payload: PushPayload
        do {
            payload = try PushPayload(json: bytes)
        } catch {
            return .failure(.rejected("it \(error.reason)"))
        }
        if let problem = payload.problems.first(where: { !$0.hasPrefix("_") }) { return .failure(.rejected(problem)) }
        guard let eventName = payload.event else {
            return .failure(.rejected("it has no event (\(TrackingEvent.choices))"))
        }
        guard let event = TrackingEvent(rawValue: eventName) else {
            return .failure(.rejected("event '\(eventName.displayEscaped)' is not \(TrackingEvent.choices)"))
        }
        let targets = targets.value
        let service: TrackingTargets.Service
        switch targets.service(named: payload.service, key: "a service key") {
        case .success(let found): service = found
        case .failure(let why): return .failure(.rejected(why.description))
        }
        let ecid: TrackingTargets.Resolution
        switch targets.ecid(given: payload.ecid, account: payload.account, service: service, hint: "give an account or an ecid key") {
        case .success(let resolved): ecid = resolved
        case .failure(let why): return .failure(.rejected(why.description))
        }
        return service.requests(event, for: payload, ecid: ecid).mapError { .notTracked($0.description) }
    }

    /// Moves `name` aside as `NAME.rejected`, saying why. One that cannot be moved aside is left
    /// alone, said once, and looked at again only once it has gone and come back.
    private func setAside(_ name: String, because why: String) async -> AttemptResult {
        let path = FileSystem.join(directory, name)
        let failure: Int32?
        do {
            failure = try await blocking.run { rename(path, path + Self.rejectedSuffix) == 0 ? nil : errno }
        } catch {
            return .failed(.cancelled)
        }
        if let code = failure {
            if code == ENOENT {
                forget(name)
                return .delivered
            }
            logger.error("tracking spool: \(name.displayEscaped): \(why), and it cannot be moved aside (\(FileError(errno: code).message)); it is left where it is and not looked at again until it is replaced")
            ignored.withLock { _ = $0.insert(name) }
        } else {
            logger.error("tracking spool: \(name.displayEscaped): \(why); moved aside as \((name + Self.rejectedSuffix).displayEscaped), not sent again")
        }
        forget(name)
        return .delivered
    }

    /// Deletes `name`: all its actions are done.
    private func remove(_ name: String) async -> AttemptResult {
        let path = FileSystem.join(directory, name)
        let failure: Int32?
        do {
            failure = try await blocking.run { unlink(path) == 0 || errno == ENOENT ? nil : errno }
        } catch {
            return .failed(.cancelled)
        }
        if let code = failure {
            return .failed(AttemptFailure(status: nil, reason: "tracked, but the file cannot be deleted (\(FileError(errno: code).message))"))
        }
        forget(name)
        return .delivered
    }

    /// Done with `name`: a file of that name that comes later is a new one.
    private func forget(_ name: String) {
        _ = known.withLock { $0.remove(name) }
    }
}
