import PushAcrobits
import PushBackend
import Logging
import PushConfig
import PushScheduler
import PushTransport
import Synchronization

/// `run --once`: sends every planned report, retries failures with the scheduler's backoff until
/// each is delivered or the deadline passes, and returns what happened to each.
public struct OnceRunner<C: Clock>: Sendable where C.Duration == Duration {
    public var reports: [PlannedReport]
    public var settings: AgentSettings
    public var transport: any HTTPTransport
    public var logger: Logger
    public var clock: C
    /// Where the progress line goes (drawn only on a terminal); nil for none.
    public var output: LogOutput?
    /// Unix time in milliseconds, for `Retry-After` dates (as ``Agent``'s).
    public var wallClock: @Sendable () -> Int64

    public init(reports: [PlannedReport], settings: AgentSettings, transport: any HTTPTransport, logger: Logger,
                clock: C, output: LogOutput? = nil, wallClock: @escaping @Sendable () -> Int64 = WallClock.epochMilliseconds) {
        self.reports = reports
        self.settings = settings
        self.transport = transport
        self.logger = logger
        self.clock = clock
        self.output = output
        self.wallClock = wallClock
    }

    /// Runs until every report is delivered or `deadline` passes; in-flight requests are
    /// cancelled at the deadline.
    public func run(deadline: Duration) async -> OnceOutcome {
        let start = clock.now
        let tally = RunTally(reports: reports)
        guard !reports.isEmpty else { return tally.outcome(elapsed: .zero, deadline: deadline) }
        let scheduler = makeScheduler(tally: tally)
        for (index, report) in reports.enumerated() {
            scheduler.submit(index, host: report.host)
        }

        await withTaskGroup(of: Ending.self) { group in
            group.addTask {
                await scheduler.run()
                return .allDelivered
            }
            group.addTask {
                do {
                    try await clock.sleep(until: start.advanced(by: deadline), tolerance: nil)
                    return .deadline
                } catch {
                    return .other
                }
            }
            if let output, output.isTerminal {
                group.addTask {
                    await showProgress(tally: tally, output: output, scheduler: scheduler)
                    return .other
                }
            }
            for await ending in group where ending != .other {
                group.cancelAll()
                break
            }
        }
        output?.clearProgress()
        return tally.outcome(elapsed: start.duration(to: clock.now), deadline: deadline)
    }

    private func makeScheduler(tally: RunTally) -> ReportScheduler<Int, C> {
        let reports = self.reports
        let transport = self.transport
        let logger = self.logger
        return ReportScheduler(
            settings: settings, clock: clock, wallClock: wallClock,
            perform: { index, _ in
                await reports[index].send(using: transport)
            },
            onEvent: { event, scheduler in
                // Once all are delivered, run() returns (nothing is in flight any more).
                if tally.record(event, logger: logger) { scheduler.shutdown() }
            })
    }

    private func showProgress(tally: RunTally, output: LogOutput, scheduler: ReportScheduler<Int, C>) async {
        // Real time, not the scheduler's clock: this only paints the terminal.
        let painter = ContinuousClock()
        while !Task.isCancelled {
            output.progress(tally.progressLine(inFlight: scheduler.inFlightCount))
            try? await painter.sleep(for: .milliseconds(200))
        }
    }
}

/// Why a task of `OnceRunner.run` ended.
private enum Ending { case allDelivered, deadline, other }

/// What `run --once` did.
public struct OnceOutcome: Sendable {
    /// A report that was not delivered by the deadline.
    public struct Undelivered: Sendable {
        /// The report's position in the runner's `reports`.
        public var index: Int
        public var account: String
        public var reporter: String
        public var host: String
        /// Attempts that finished (0 when the only one was still running at the deadline).
        public var attempts: Int
        /// The last failure, in words.
        public var reason: String
    }

    public var total: Int
    public var delivered: Int
    public var undelivered: [Undelivered]
    public var elapsed: Duration
    public var deadline: Duration

    /// The summary printed at the end: one line, then one line per undelivered report.
    public var summary: String {
        let seconds = DurationText(elapsed)
        if undelivered.isEmpty {
            return "Delivered \(delivered) of \(total) \(total == 1 ? "report" : "reports") in \(seconds)."
        }
        let lines = ["Delivered \(delivered) of \(total) \(total == 1 ? "report" : "reports"); "
            + "\(undelivered.count) not delivered within the deadline (\(DurationText(deadline))):"] + undeliveredLines
        return lines.joined(separator: "\n")
    }

    /// One line per undelivered report: account, reporter, host, last failure and attempts.
    public var undeliveredLines: [String] {
        undelivered.map { failure in
            let attempts = failure.attempts == 1 ? "1 attempt" : "\(failure.attempts) attempts"
            return "  \(failure.account): \(failure.reporter) to \(failure.host): \(failure.reason) (\(attempts))"
        }
    }
}

/// Per-report progress of a run, shared by the scheduler's events and the progress line.
final class RunTally: Sendable {
    private struct Entry {
        var attempts = 0
        var delivered = false
        var lastReason: String?
    }

    private struct State {
        var entries: [Entry]
        var delivered = 0
    }

    private let state: Mutex<State>
    private let reports: [PlannedReport]

    init(reports: [PlannedReport]) {
        self.reports = reports
        state = Mutex(State(entries: Array(repeating: Entry(), count: reports.count)))
    }

    /// Records `event`, logs it, and says whether every report is now delivered.
    func record(_ event: SchedulerEvent<Int>, logger: Logger) -> Bool {
        switch event {
        case .started:
            return false
        case .delivered(let index, let attempts):
            let report = reports[index]
            let done = state.withLock { state -> Bool in
                if !state.entries[index].delivered {
                    state.entries[index].delivered = true
                    state.entries[index].attempts = attempts
                    state.delivered += 1
                }
                return state.delivered == state.entries.count
            }
            logger.delivered(report, attempts: attempts)
            return done
        case .failed(let index, let attempt, let failure, let retryIn):
            // Cut short by the deadline: not the report's fault, not counted, and it does not
            // replace the last real failure in the summary.
            if failure.isCancellation { return false }
            let report = reports[index]
            state.withLock { state in
                state.entries[index].attempts = attempt
                state.entries[index].lastReason = failure.reason
            }
            logger.failed(report, attempt: attempt, failure: failure, retryIn: retryIn)
            return false
        }
    }

    func progressLine(inFlight: Int) -> String {
        state.withLock { state in
            let retrying = state.entries.count { !$0.delivered && $0.attempts > 0 }
            return "Reporting: \(state.delivered)/\(state.entries.count) delivered, \(retrying) retrying, \(inFlight) in flight"
        }
    }

    func outcome(elapsed: Duration, deadline: Duration) -> OnceOutcome {
        state.withLock { state in
            var undelivered: [OnceOutcome.Undelivered] = []
            for (index, entry) in state.entries.enumerated() where !entry.delivered {
                let report = reports[index]
                undelivered.append(.init(index: index, account: report.account, reporter: report.reporter, host: report.host,
                                         attempts: entry.attempts,
                                         reason: entry.lastReason ?? "no response before the deadline"))
            }
            return OnceOutcome(total: state.entries.count, delivered: state.delivered, undelivered: undelivered,
                               elapsed: elapsed, deadline: deadline)
        }
    }
}
