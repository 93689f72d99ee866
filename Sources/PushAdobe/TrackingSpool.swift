import Logging
import PushBackend
import PushConfig
import PushSystem
import PushScheduler
import ServiceLifecycle
import Synchronization
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
/// action the server refuses, or that cannot be read, is moved aside as `NAME.json.rejected`
/// (and logged); a payload that is not to be tracked (`_acsDeliveryTracking: off`, no ids, no
/// ECID) is deleted with a log line saying why.
///
/// The directory is listed every `scanInterval`; files are taken in name order, and a
/// producer should write `NAME.json.tmp` (or a hidden file) and rename it, so that no file is
/// read half written. Run it in the agent's service group: it stops on graceful shutdown once
/// the requests in flight are answered.
public final class TrackingSpool<C: Clock>: Service, Sendable where C.Duration == Duration {
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
    /// The files submitted and not yet done with.
    private let known = Mutex<Set<String>>([])
    /// Why the directory could not be listed last time (said once, until it can again).
    private let listingProblem = Mutex<String?>(nil)

    /// - Parameters:
    ///   - directory: the spool (created, mode 0700, when missing).
    ///   - targets: the services and ECIDs files are resolved with; replaced on reload.
    ///   - concurrency: the most files sent at once.
    ///   - wallClock: Unix time in milliseconds, for `Retry-After` dates and the ledger.
    public init(directory: String, targets: TrackingTargets.Current, ledger: any TrackingLedger, transport: any HTTPTransport,
                concurrency: Int, logger: Logger, clock: C, wallClock: @escaping @Sendable () -> Int64,
                scanInterval: Duration = .seconds(1)) {
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
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await scheduler.run() }
                group.addTask {
                    while !Task.isCancelled {
                        self.scan(into: scheduler)
                        try? await self.clock.sleep(for: self.scanInterval)
                    }
                }
                // The scheduler ends on shutdown, once its attempts in flight are done.
                _ = await group.next()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            scheduler.shutdown()
        }
    }

    /// Submits the files that came since the last scan.
    private func scan(into scheduler: ReportScheduler<String, C>) {
        switch FileSystem.list(directory) {
        case .failure(let error):
            let problem = error.message
            if listingProblem.withLock({ last in defer { last = problem }; return last != problem }) {
                logger.error("tracking spool: cannot list \(directory.displayEscaped) (\(problem)); trying again")
            }
        case .success(let names):
            listingProblem.withLock { $0 = nil }
            for name in names where name.hasSuffix(".json") && !name.hasPrefix(".") {
                // One hold label for the whole spool: a 429 or 503 pauses it, as it pauses a service.
                if known.withLock({ $0.insert(name).inserted }) { scheduler.submit(name, host: "tracking-spool", hold: "tracking-spool") }
            }
        }
    }

    /// One attempt at the file `name`: its actions in order, each remembered once delivered;
    /// the file deleted once all are, or moved aside when one is refused.
    private func drain(_ name: String, attempt: Int) async -> AttemptResult {
        let path = FileSystem.join(directory, name)
        let shown = name.displayEscaped
        let bytes: [UInt8]
        switch FileSystem.read(path, limit: PushPayload.maximumSize) {
        case .success(let read):
            bytes = read
        case .failure(let error):
            if access(path, F_OK) != 0 {
                // Taken away meanwhile (by a person, or moved aside by a second look).
                forget(name)
                return .delivered
            }
            return .failed(AttemptFailure(status: nil, reason: "cannot read the file (\(error.message))"))
        }
        let requests: [TrackingRequest]
        switch requestsOf(bytes) {
        case .success(let found):
            requests = found
        case .failure(.rejected(let why)):
            return setAside(name, because: why)
        case .failure(.notTracked(let why)):
            logger.notice("tracking spool: \(shown): not tracked: \(why); the file is deleted")
            return remove(name)
        }
        for request in requests {
            switch await TrackingStep.attempt(request, transport: transport, ledger: ledger, wallClock: wallClock) {
            case .delivered, .alreadySent:
                continue
            case .deliveredNotRecorded(let why):
                logger.error("tracking spool: \(shown): \(request.action.description) was delivered, but \(why)")
            case .rejected(let why):
                return setAside(name, because: "\(request.action.description) rejected by \(request.host): \(why)")
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
        return remove(name)
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

    /// Moves `name` aside as `NAME.rejected`, saying why.
    private func setAside(_ name: String, because why: String) -> AttemptResult {
        let path = FileSystem.join(directory, name)
        if rename(path, path + Self.rejectedSuffix) == 0 {
            logger.error("tracking spool: \(name.displayEscaped): \(why); moved aside as \((name + Self.rejectedSuffix).displayEscaped), not sent again")
            forget(name)
            return .delivered
        }
        return .failed(AttemptFailure(status: nil, reason: "\(why), and it cannot be moved aside (\(String(cString: strerror(errno))))"))
    }

    /// Deletes `name`: all its actions are done.
    private func remove(_ name: String) -> AttemptResult {
        let path = FileSystem.join(directory, name)
        guard unlink(path) == 0 || errno == ENOENT else {
            return .failed(AttemptFailure(status: nil, reason: "tracked, but the file cannot be deleted (\(String(cString: strerror(errno))))"))
        }
        forget(name)
        return .delivered
    }

    /// Done with `name`: a file of that name that comes later is a new one.
    private func forget(_ name: String) {
        _ = known.withLock { $0.remove(name) }
    }
}
