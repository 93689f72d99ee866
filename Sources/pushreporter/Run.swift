import ArgumentParser
import Logging
import PushAcrobits
import PushAgent
import PushBackend
import PushConfig
import PushState
import PushTransport
import ServiceLifecycle
import UnixSignals

/// `pushreporter run`: report every account's tokens and retry failures.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Report every enabled account's push tokens, retrying failures with backoff.",
        discussion: """
            Without --once the agent runs until SIGTERM or SIGINT: it reports every account on start, retries failures \
            for as long as it runs, reloads the configuration on SIGHUP (or on file changes with --watch), \
            reports new and changed accounts at once, sends the removal report of accounts that left, and \
            keeps systemd told (READY, STATUS, WATCHDOG, RELOADING, STOPPING). With --once: report every \
            account, retry until each is delivered or the deadline passes, print a summary on standard \
            output and exit 0 (all delivered) or 1. Logs go to standard error, never with secrets.
            """
    )

    @OptionGroup var config: ConfigOptions

    @OptionGroup var agent: AgentOptions

    @Flag(help: "Report every account once, retrying until delivered or the deadline, then exit.")
    var once = false

    @Flag(help: "Reload when a configuration file or directory changes (as on SIGHUP).")
    var watch = false

    @Option(help: "Log line format: text (timestamped, or <N> prefixes under journald) or json.")
    var logFormat: LogOutput.Format = .text

    func validate() throws {
        if watch && once { throw ValidationError("--watch applies to the long-running agent, not to --once") }
        if agent.deadline != nil && !once {
            throw ValidationError("--deadline applies to --once; the long-running agent retries for as long as it runs")
        }
    }

    func run() async throws {
        // SIGHUP is trapped first thing, so that one arriving while the configuration loads asks
        // for a reload after READY=1 instead of ending the process.
        let hangups = once ? nil : await UnixSignalsSequence(trapping: .sighup)
        let output = LogOutput(format: logFormat)
        let logger = agent.logger(output: output)

        let prepared = prepare(output: output, logger: logger)
        // Loaded: from here the agent runs for weeks, and freed memory goes back to the system.
        if !once { Allocator.useSmallSteps() }
        let records: [AccountRecord]
        let transport: CurlTransport
        do {
            records = try prepared.store.records()
            transport = try CurlTransport(settings: TransportSettings(caFile: prepared.settings.tlsCAFile))
        } catch {
            logger.error("\(String(describing: error))")
            exitNow(Exit.failure)
        }
        if once {
            await runOnce(prepared, records: records, transport: transport, logger: logger, output: output)
        } else {
            await runAgent(consume prepared, records: consume records, transport: transport, logger: logger, hangups: hangups)
        }
    }

    /// What the agent keeps of loading: the loaded configuration and its source text are
    /// dropped once the plans are rendered, so they do not stay in memory while it runs.
    private struct Prepared {
        var store: StateStore
        var plans: [AccountPlan]
        var settings: AgentSettings
        var installID: String
        /// What the configuration was loaded with: the notifier and the watched paths use it too.
        var environment: LoaderEnvironment
    }

    /// Loads the configuration and the state directory, prints the diagnostics, and renders
    /// the plans; exits on an invalid configuration (78) or an unusable state directory (1).
    private func prepare(output: LogOutput, logger: Logger) -> Prepared {
        let setup: AgentSetup
        do {
            setup = try AgentSetup(options: config, stateDir: agent.stateDir)
        } catch {
            error.report(output: output, logger: logger)
            if error.code == Exit.configuration {
                logger.error("the configuration has errors, so nothing was sent; 'pushreporter validate' lists every problem")
            }
            exitNow(error.code)
        }
        for diagnostic in setup.loaded.diagnostics.sorted(fileOrder: setup.configuration.files) {
            output.line(diagnostic.formatted)
        }
        for plan in setup.plans where plan.report.rendered.secretsWithheld {
            logger.warning("\(plan.id): secrets are sent as ******** because \(plan.report.host) is plain http and not loopback; use https")
        }
        if setup.plans.isEmpty {
            logger.warning("no enabled account has a pushTokenReporterUrl, so there is nothing to report")
        }
        return Prepared(store: setup.store, plans: setup.plans, settings: setup.configuration.agent, installID: setup.installID,
                        environment: setup.loaded.environment)
    }

    /// `run --once`: every report and every owed removal, retried until the deadline.
    private func runOnce(_ setup: Prepared, records: [AccountRecord], transport: CurlTransport, logger: Logger,
                         output: LogOutput) async -> Never {
        let settings = setup.settings
        var batch = OnceBatch(plans: setup.plans, records: records, defaultTimeout: settings.timeout)
        for id in batch.unreadableRemovals {
            logger.unreadableRemoval(of: id)
        }
        do {
            let before = batch.takeRecordsBeforeSending()
            try setup.store.save(before.save, deleting: before.forget)
        } catch {
            logger.error("\(error.description)")
            exitNow(Exit.failure)
        }
        let runner = OnceRunner(reports: batch.reports, settings: settings, transport: transport,
                                logger: logger, clock: ContinuousClock(), output: output)
        let outcome = await runner.run(deadline: agent.deadlineDuration)
        transport.shutdown()
        let (records, forgotten) = batch.records(after: outcome, now: WallClock.epochMilliseconds())
        var saved = true
        do {
            try setup.store.save(records, deleting: forgotten)
        } catch {
            logger.error("\(error.description); the outcomes are not recorded, so they are sent again next time")
            saved = false
        }
        print(outcome.summary)
        exitNow(outcome.undelivered.isEmpty && saved ? .success : Exit.failure)
    }

    /// The long-running agent, as a group of services that stops on SIGTERM or SIGINT.
    private func runAgent(_ setup: consuming Prepared, records: consuming [AccountRecord], transport: CurlTransport,
                          logger: Logger, hangups: UnixSignalsSequence?) async -> Never {
        let environment = setup.environment.variables
        let notifier = SystemdNotifier(environment: environment)
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
        let installID = setup.installID
        let settings = setup.settings
        let recorder = StateRecorder(store: setup.store, logger: logger, clock: ContinuousClock())
        let agent = Agent(plans: setup.plans, records: records, settings: settings, transport: transport,
                          recorder: recorder, notifier: notifier, logger: logger, clock: ContinuousClock(),
                          load: { AgentSetup.reload(options: options, installID: installID) },
                          reloadSources: reloadSources, gracePeriod: min(settings.timeout, .seconds(10)))
        // The agent has the plans and records now (`records` went to it); they are not kept
        // here too for the whole run, since this function never returns.
        _ = consume setup
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: recorder)]
        if let interval = SystemdNotifier.watchdogInterval(environment: environment) {
            services.append(.init(service: Watchdog(notifier: notifier, interval: interval, clock: ContinuousClock())))
        }
        services.append(.init(service: agent))
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .warning)
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint],
                                                      logger: quiet))
        do {
            try await group.run()
        } catch {
            logger.error("the agent stopped: \(String(describing: error))")
            recorder.flush()
            exitNow(Exit.failure)
        }
        transport.shutdown()
        logger.info("stopped")
        exitNow(.success)
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
extension LogOutput.Format: ExpressibleByArgument {}
