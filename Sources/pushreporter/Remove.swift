import ArgumentParser
import Logging
import PushAgent
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
            the other; without any, the removal is rendered from the configuration. Use it for an account the agent no longer runs with: an \
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
        var removals: [PlannedReport] = []
        var unreadable = 0
        if let record {
            let stored = AccountPlan.removalReports(of: record, defaultTimeout: settings.timeout)
            unreadable = stored.unreadable
            if unreadable > 0 { logger.unreadableRemoval(of: id) }
            removals = stored.reports
        }
        if removals.isEmpty, let configured {
            var builder = setup.loaded.builder(installID: setup.installID)
            var problems = DiagnosticList()
            if let rendered = builder.request(for: configured, reporter: .accountRemovalReporter, display: .asSent,
                                              diagnostics: &problems) {
                removals = [PlannedReport(rendered, defaultTimeout: settings.timeout)]
            } else if problems.hasErrors {
                for diagnostic in problems.errors(fileOrder: setup.configuration.files) {
                    output.line(diagnostic.formatted)
                }
                exitNow(Exit.configuration)
            }
        }
        if let configured {
            let place = " (\(configured.file):\(configured.position.line))"
            logger.warning("\(id) is still in the configuration\(place); the agent reports it again when it next starts, so delete it there to keep it removed")
        }
        guard !removals.isEmpty else {
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
        let transport: CurlTransport
        do {
            transport = try CurlTransport(settings: TransportSettings(caFile: settings.tlsCAFile))
        } catch {
            logger.error("\(String(describing: error))")
            exitNow(Exit.failure)
        }
        // One after the other, oldest report's first, within one deadline.
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: agent.deadlineDuration)
        for removal in removals {
            let runner = OnceRunner(reports: [removal], settings: settings, transport: transport, logger: logger,
                                    clock: clock, output: output)
            let outcome = await runner.run(deadline: max(clock.now.duration(to: end), .milliseconds(1)))
            guard outcome.undelivered.isEmpty else {
                transport.shutdown()
                print(outcome.summary)
                exitNow(Exit.failure)
            }
        }
        transport.shutdown()
        forget(in: setup.store, logger: logger)
        let hosts = Set(removals.map { $0.host }).sorted().joined(separator: ", ")
        print("Removal of \(id) delivered to \(hosts); the account is forgotten.")
        exitNow(.success)
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
