import ArgumentParser
import Logging
import PushAcrobits
import PushAgent
import PushBackend
import PushConfig
import PushState
import PushTransport

/// `pushreporter remove ID`: send an account's removal report now, then forget the account.
struct Remove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send an account's removal report now, retrying until the deadline, then forget the account.",
        discussion: """
            The removal requests are those kept in the state directory (the removals of the account's \
            earlier reports that may have reached a server, then that of its last report), sent one after \
            the other, each recorded once delivered; without any, the removal is rendered from the configuration. Use it for an account the agent no longer runs with: an \
            account still in the configuration is reported again when the agent next starts (a running \
            agent does not notice the removal), so delete it from the files and reload instead.
            """
    )

    @Argument(help: "The account's id.")
    var id: String

    @OptionGroup var config: ConfigOptions

    @OptionGroup var agent: AgentOptions

    func run() async throws {
        let output = LogOutput(format: .text)
        let logger = agent.logger(output: output)
        let setup: AgentSetup
        do {
            setup = try AgentSetup(options: config, stateDir: agent.stateDir, forRemove: true)
        } catch {
            error.report(output: output, logger: logger)
            exitNow(error.code)
        }
        let settings = setup.configuration.agent
        let record: AccountRecord?
        do {
            record = try setup.store.records().first { $0.id == id }
        } catch {
            logger.error("\(error.description)")
            exitNow(Exit.failure)
        }
        let configured = setup.configuration.accounts.first { $0.id == id }
        if let configured {
            let place = " (\(configured.file):\(configured.position.line))"
            logger.warning("\(id) is still in the configuration\(place); the agent reports it again when it next starts, so delete it there to keep it removed")
        }
        var unreadable = 0
        if let record {
            let stored = AccountPlan.removalReports(of: record, defaultTimeout: settings.timeout)
            unreadable = stored.unreadable
            if unreadable > 0 { logger.unreadableRemoval(of: id) }
            if !stored.reports.isEmpty {
                await sendStored(record, count: stored.reports.count, setup: setup, logger: logger, output: output)
            }
        }
        // Nothing stored to send: the removal the configuration renders, if any.
        var removal: PlannedReport?
        if let configured {
            var builder = setup.loaded.builder(installID: setup.installID)
            var problems = DiagnosticList()
            if let rendered = builder.request(for: configured, reporter: .accountRemovalReporter, display: .asSent,
                                              diagnostics: &problems) {
                removal = PlannedReport(rendered, defaultTimeout: settings.timeout)
            } else if problems.hasErrors {
                for diagnostic in problems.errors(fileOrder: setup.configuration.files) {
                    output.line(diagnostic.formatted)
                }
                exitNow(Exit.configuration)
            }
        }
        guard let removal else {
            if record != nil {
                forget(in: setup.store, logger: logger)
                let why = unreadable > 0 ? "its stored removal request cannot be read" : "no accountRemovalReporterUrl"
                print("\(id) has no removal request to send (\(why)), so it was forgotten without one.")
                exitNow(.success)
            }
            if configured != nil {
                printError("remove: \(id) has no accountRemovalReporterUrl and nothing in the state directory \(setup.directory.path), so there is nothing to send")
            } else {
                printError("remove: no account '\(id)' in the state directory \(setup.directory.path) or in the configuration")
            }
            exitNow(Exit.failure)
        }
        let transport = makeTransport(settings, logger: logger)
        let runner = OnceRunner(reports: [removal], settings: settings, transport: transport, logger: logger,
                                clock: ContinuousClock(), output: output)
        let outcome = await runner.run(deadline: agent.deadlineDuration)
        transport.shutdown()
        guard outcome.undelivered.isEmpty else {
            print(notDelivered(outcome, delivered: 0, of: 1))
            exitNow(Exit.failure)
        }
        forget(in: setup.store, logger: logger)
        print("Removal of \(id) delivered to \(removal.host); the account is forgotten.")
        exitNow(.success)
    }

    /// Sends the `count` removals `record` owes, one after the other (the oldest report's first)
    /// within one deadline, as the agent would: the state records each one delivered, so a
    /// failure leaves only the rest owed. Forgets the account once all are delivered.
    private func sendStored(_ record: AccountRecord, count: Int, setup: AgentSetup, logger: Logger,
                            output: LogOutput) async -> Never {
        let settings = setup.configuration.agent
        let transport = makeTransport(settings, logger: logger)
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: agent.deadlineDuration)
        var current = record
        var hosts: [String] = []
        while true {
            var batch = OnceBatch(plans: [], records: [current], defaultTimeout: settings.timeout)
            save(batch.takeRecordsBeforeSending(), in: setup.store, logger: logger, consequence: "the next removal was not sent")
            // The book forgets an account that owes nothing more.
            guard let removal = batch.reports.first else { break }
            let runner = OnceRunner(reports: [removal], settings: settings, transport: transport, logger: logger,
                                    clock: clock, output: output)
            let outcome = await runner.run(deadline: max(clock.now.duration(to: end), .milliseconds(1)))
            let after = batch.records(after: outcome, now: WallClock.epochMilliseconds())
            save(after, in: setup.store, logger: logger,
                 consequence: "the removals delivered are not recorded, so they are sent again next time")
            guard outcome.undelivered.isEmpty else {
                transport.shutdown()
                print(notDelivered(outcome, delivered: hosts.count, of: count))
                exitNow(Exit.failure)
            }
            hosts.append(removal.host)
            guard let next = after.save.first(where: { $0.id == id }) else { break }
            current = next
        }
        transport.shutdown()
        let distinct = hosts.reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
        print("Removal of \(id) delivered to \(distinct.joined(separator: ", ")); the account is forgotten.")
        exitNow(.success)
    }

    /// What `remove` prints when removal `delivered + 1` of `count` was not delivered.
    private func notDelivered(_ outcome: OnceOutcome, delivered: Int, of count: Int) -> String {
        let done = switch delivered {
        case 0: count == 1 ? "The removal of \(id) was not delivered " : "Delivered 0 of \(count) removals of \(id); the first was not delivered "
        case 1: "Delivered 1 of \(count) removals of \(id) (recorded: it is not sent again); removal 2 was not delivered "
        default: "Delivered \(delivered) of \(count) removals of \(id) (recorded: they are not sent again); "
            + "removal \(delivered + 1) was not delivered "
        }
        return done + "within the deadline (\(DurationText(agent.deadlineDuration))):\n" + outcome.undeliveredLines.joined(separator: "\n")
    }

    private func makeTransport(_ settings: AgentSettings, logger: Logger) -> CurlTransport {
        do {
            return try CurlTransport(settings: TransportSettings(caFile: settings.tlsCAFile))
        } catch {
            logger.error("\(String(describing: error))")
            exitNow(Exit.failure)
        }
    }

    /// Writes what sending changes, or changed; exits 1 when the state cannot be written,
    /// saying so with its `consequence`.
    private func save(_ changes: (save: [AccountRecord], forget: [String]), in store: StateStore, logger: Logger,
                      consequence: String) {
        do {
            try store.save(changes.save, deleting: changes.forget)
        } catch {
            logger.error("\(error.description); \(consequence)")
            exitNow(Exit.failure)
        }
    }

    /// Deletes the account's record; exits 1, saying so, when the state cannot be written.
    private func forget(in store: StateStore, logger: Logger) {
        do {
            try store.save([AccountRecord](), deleting: [id])
        } catch {
            logger.error("\(id) could not be forgotten (\(error.description)); the state still holds it")
            exitNow(Exit.failure)
        }
    }
}
