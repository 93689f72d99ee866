import PushCommandKit
import ArgumentParser
import Logging
import PushAgent
import PushBackend
import PushConfig
import PushState
import PushTemplates
import PushTransport
import ServiceLifecycle
import Synchronization
import UnixSignals
import PushSystem

/// `pushreporter run`: report every account's tokens and retry failures.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Report every enabled account's push tokens, retrying failures with backoff.",
        discussion: """
            Without --once the agent runs until SIGTERM or SIGINT: it reports every account on start, retries failures \
            for as long as it runs, reloads the configuration on SIGHUP (or on file changes with --watch), \
            reports new and changed accounts at once, sends the removal report of accounts that left, sends the \
            Adobe tracking of the payload files dropped in agent.trackingSpool, and keeps systemd told (READY, STATUS, WATCHDOG, RELOADING, STOPPING). With --once: report every \
            account, retry until each is delivered or the deadline passes, print a summary on standard \
            output and exit 0 (all delivered) or 1; SIGTERM or SIGINT ends the round early, giving the requests \
            in flight the grace period (a second signal cancels them). Logs go to standard error, never with secrets.
            """
    )

    @OptionGroup var config: ConfigOptions

    @OptionGroup var agent: AgentOptions

    @Flag(help: "Report every account once, retrying until delivered or the deadline, then exit.")
    var once = false

    @Flag(help: "Reload when a configuration file or directory changes (as on SIGHUP).")
    var watch = false

    @Option(name: .customLong("service"),
            help: ArgumentHelp("With --once, only this service (repeatable): acrobits for the accounts' own web services, or a name under services:.",
                               valueName: "name"))
    var services: [String] = []

    @Option(help: "Log line format: text (timestamped, or <N> prefixes under journald) or json.")
    var logFormat: LogOutput.Format = .text

    @Option(help: SummaryFormat.help)
    var format: SummaryFormat = .text

    func validate() throws {
        if watch && once { throw ValidationError("--watch applies to the long-running agent, not to --once") }
        if !services.isEmpty && !once {
            throw ValidationError("--service applies to --once; the long-running agent serves every service of its configuration")
        }
        if format == .json && !once {
            throw ValidationError("--format applies to --once's summary; the long-running agent logs (--log-format json)")
        }
        if agent.deadline != nil && !once {
            throw ValidationError("--deadline applies to --once; the long-running agent retries for as long as it runs")
        }
    }

    func run() async throws {
        // SIGHUP is blocked since main() began (see PushReporter.main): one that arrived while the
        // configuration loads is read by this sequence, and asks for a reload after READY=1.
        let hangups = once ? nil : await UnixSignalsSequence(trapping: .sighup)
        // The long-running agent writes its log from a thread of its own: a journal that stops
        // reading must not hold the threads that send (LogOutput.queuedStandardError).
        let output = once ? LogOutput(format: logFormat) : LogOutput(format: logFormat, write: LogOutput.queuedStandardError)
        let logger = agent.logger(output: output)
        let prepared = prepare(output: output, logger: logger)
        // `run --once` keeps them blocked too: SIGTERM or SIGINT while it sends stops the round
        // (the requests in flight get the grace period), the state written and the summary
        // printed; one that came while it loaded, or a third one, ends the process here or then. Read from here on, not
        // during loading: a thread waiting for them beside the loading ones made loading's peak
        // memory 15 MB higher (glibc hands threads their heaps in the order they first allocate).
        let round = once ? OnceRound(logger: logger) : nil
        // Loaded: freed memory goes back to the system from here, as the agent runs for weeks.
        // `run --once` too gives back what loading freed (the accounts) before it fills its book:
        // kept, the book came on top of it, 80 MB more at the peak of 100,000 accounts, for about
        // 2 % more time (`/usr/bin/time`).
        Allocator.useSmallSteps()
        if once { Allocator.releaseFreedMemory() }
        let records: [SubscriptionRecord]
        do {
            records = try prepared.runtime.records()
        } catch {
            logger.error("\(error.description)")
            exitNow(Exit.failure)
        }
        for name in services where !prepared.serviceNames.contains(name) {
            var message = "run: no service '\(name.displayEscaped)' in the configuration"
            if let nearest = NameSuggester.nearest(to: name, among: prepared.serviceNames) { message += "; did you mean '\(nearest)'?" }
            printError(message)
            exitNow(ExitCode(64))
        }
        let start: AgentStart
        if services.isEmpty {
            start = .configuration(plans: prepared.plans, records: records, pollers: prepared.pollers)
        } else {
            // Only these services: the others' subscriptions are neither sent nor cleaned up.
            start = .configuration(plans: prepared.plans.filter { services.contains($0.service) },
                                   records: records.filter { services.contains($0.key.service) },
                                   pollers: prepared.pollers.filter { services.contains($0.service) })
        }
        // The agent keeps the plans and records it needs; none are kept here too for the run.
        _ = consume records
        if once {
            let runtime = prepared.runtime
            _ = consume prepared
            await runOnce(runtime, start: consume start, round: round!, logger: logger, output: output)
        } else {
            await runAgent(consume prepared, start: consume start, logger: logger, hangups: hangups)
        }
    }

    /// What the agent keeps of loading: the loaded configuration and its source text are
    /// dropped once the plans are rendered, so they do not stay in memory while it runs.
    private struct Prepared {
        var runtime: AgentRuntime
        var plans: [SubscriptionPlan]
        var pollers: [any ConfirmationPoller]
        /// The services accounts have without naming them, and every service the configuration declares.
        var serviceNames: Set<String>
        /// What the configuration was loaded with: the notifier and the watched paths use it too.
        var environment: LoaderEnvironment
    }

    /// Loads the configuration and the state directory, prints the diagnostics, and renders
    /// the plans; exits on an invalid configuration (78) or an unusable state directory (1).
    private func prepare(output: LogOutput, logger: Logger) -> Prepared {
        let setup: AgentSetup
        do {
            setup = try AgentSetup(options: config, stateDir: agent.stateDir, logger: logger)
        } catch {
            error.report(output: output, logger: logger)
            if error.code == Exit.configuration {
                logger.error("the configuration has errors, so nothing was sent; for every problem, run: \(config.validateCommand)")
            }
            exitNow(error.code)
        }
        for diagnostic in setup.loaded.diagnostics.sorted(fileOrder: setup.configuration.files).collapsingRepeats() {
            output.diagnostic(diagnostic)
        }
        // By index: `for plan in plans` copied each of 100,000 plans out to read one flag (25 ms, perf).
        for index in setup.plans.indices where setup.plans[index].secretsWithheld {
            let plan = setup.plans[index]
            let host = plan.delivery?.host ?? plan.service
            logger.warning("\(plan.account.displayEscaped): secrets are sent as ******** because \(host) is plain http and not loopback; use https")
        }
        // A backend that sends something else than subscriptions on start (tracking) says so.
        let backends = CommandEnvironment.backends
        let configuredTypes = Set(setup.configuration.services.values.map(\.type))
        let instead = backends.all.filter { configuredTypes.contains($0.type) }.compactMap(\.sendsInstead)
        let insteadNote = instead.isEmpty ? "" : " (\(instead.joined(separator: "; ")))"
        if setup.plans.isEmpty && (once || !backends.hasServices(setup.configuration.agent)) {
            let insteadClause = instead.map { "; " + $0 }.joined()
            logger.warning("no enabled account has anything to report on start (a pushTokenReporterUrl, or a service that registers devices\(insteadClause))")
        } else {
            let quiet = setup.quiet
            if !quiet.isEmpty {
                // Otherwise "reporting 10 accounts" after validate's "12 enabled accounts" reads as two lost.
                let shown = quiet.prefix(5).map(\.displayEscaped).joined(separator: ", ") + (quiet.count > 5 ? " and \(quiet.count - 5) more" : "")
                let sentence = "\(quiet.count) enabled \(plural(quiet.count, "account")) \(quiet.count == 1 ? "has" : "have") nothing to report on start, "
                    + "with no pushTokenReporterUrl and no service that registers devices\(insteadNote): \(shown)"
                logger.info("\(sentence)")
            }
        }
        return Prepared(runtime: setup.runtime, plans: setup.plans, pollers: setup.pollers,
                        serviceNames: Set(backends.accountServiceNames + setup.configuration.services.keys),
                        environment: setup.loaded.environment)
    }

    /// `run --once`: every delivery and every owed cleanup, retried until the deadline, or
    /// until SIGTERM or SIGINT (``OnceRound``).
    private func runOnce(_ runtime: AgentRuntime, start: consuming AgentStart, round: OnceRound, logger: Logger,
                         output: LogOutput) async -> Never {
        let deadline = agent.deadlineDuration
        // Handed over, not captured: a closure's capture would hold every plan to the end of
        // the round (12 MB more at the peak of 100,000 accounts).
        let handoff = Mutex<AgentStart?>(consume start)
        let stop = RoundStop()
        let sending = Task { () async throws -> OnceOutcome in
            let start = handoff.withLock { $0.take()! }
            return try await runtime.runOnce(consume start, deadline: deadline, output: output, stop: stop)
        }
        round.started(stop: { stop.request() }, cancel: { sending.cancel() })
        var outcome: OnceOutcome
        do {
            outcome = try await sending.value
        } catch {
            logger.error("\(error)")
            exitNow(Exit.failure)
        }
        if !outcome.stateWritten {
            logger.error("the state could not be written; the outcomes are not recorded, so they are sent again next time")
        }
        outcome.stoppedBy = round.stoppedBy
        print(format == .json ? outcome.json : outcome.summary)
        exitNow(outcome.succeeded ? .success : Exit.failure)
    }

    /// The long-running agent, until SIGTERM or SIGINT.
    private func runAgent(_ setup: consuming Prepared, start: consuming AgentStart, logger: Logger,
                          hangups: UnixSignalsSequence?) async -> Never {
        let environment = setup.environment.variables
        var reloadSources: [Agent<ContinuousClock>.ReloadSource] = []
        if let hangups {
            reloadSources.append({ continuation in
                for await _ in hangups { continuation.yield("SIGHUP") }
            })
        }
        if watch {
            let paths = config.resolvedPaths(environment: setup.environment)
            reloadSources.append({ [logger] continuation in
                do throws(ConfigWatcher.Failure) {
                    try await ConfigWatcher(paths: paths).changes { continuation.yield("changed files") }
                } catch {
                    logger.error("--watch cannot watch the configuration: \(error.message); it is reloaded only on SIGHUP (systemctl reload)")
                }
            })
        }
        let options = config
        let runtime = setup.runtime
        // The agent has the plans and records now; they are not kept here too for the whole
        // run, since this function never returns.
        _ = consume setup
        do {
            try await runtime.runService(consume start, environment: environment,
                                         load: { [options] in AgentSetup.reload(options: options, runtime: runtime) },
                                         reloadSources: reloadSources)
        } catch {
            logger.error("\(error.description)")
            exitNow(Exit.failure)
        }
        logger.info("stopped")
        exitNow(.success)
    }
}


/// SIGTERM and SIGINT for `run --once`, read once it has loaded (they stay blocked, SPEC §12).
/// The first while the round sends stops it as SIGTERM stops the agent (SPEC §8): no new request
/// starts, those in flight get the grace period, and the state is written. A second cancels
/// those still in flight, the state written all the same; a third, or one before the round
/// sends, ends the process (exit 130 or 143).
final class OnceRound: Sendable {
    private struct State {
        /// Stops the round, then cancels it; nil until it sends.
        var stop: (@Sendable () -> Void)?
        var cancel: (@Sendable () -> Void)?
        var stoppedBy: String?
        var signals = 0
    }

    private let state = Mutex(State())

    /// Reads the signals from a task of its own; the command goes on meanwhile.
    init(logger: Logger) {
        Task.detached { [self] in
            let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
            for await signal in signals {
                let name = signal == .sigint ? "SIGINT" : "SIGTERM"
                // How many signals since the round started sending; 0 before.
                let count = self.state.withLock { state -> Int in
                    guard state.stop != nil else { return 0 }
                    state.signals += 1
                    if state.stoppedBy == nil { state.stoppedBy = name }
                    return state.signals
                }
                switch count {
                case 0:
                    logger.notice("\(name): stopped before anything was sent")
                    exitNow(ExitCode(signal == .sigint ? 130 : 143))
                case 1:
                    let sentence = "\(name): stopping the round; no new request starts, and the state is written "
                        + "(a second \(name) cancels the requests in flight)"
                    logger.notice("\(sentence)")
                    self.state.withLock { $0.stop }?()
                case 2:
                    logger.notice("\(name) again: the requests in flight are cancelled, and the state is written")
                    self.state.withLock { $0.cancel }?()
                default:
                    logger.notice("\(name) again: ended at once; what was delivered since the state was last written is sent again next time")
                    exitNow(ExitCode(signal == .sigint ? 130 : 143))
                }
            }
        }
    }

    /// The round sends from now on: the first signal calls `stop`, the second `cancel`.
    func started(stop: @escaping @Sendable () -> Void, cancel: @escaping @Sendable () -> Void) {
        state.withLock {
            $0.stop = stop
            $0.cancel = cancel
        }
    }

    /// The signal that stopped the round, if one did.
    var stoppedBy: String? { state.withLock { $0.stoppedBy } }
}
