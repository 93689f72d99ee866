import ArgumentParser
import Logging
import PushAgent
import PushConfig
import PushState
import PushTransport

/// `pushreporter run`: report every account's tokens and retry failures.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Report every enabled account's push tokens, retrying failures with backoff.",
        discussion: """
            With --once: report every account, retry failures until each is delivered or the deadline \
            passes, print a summary on standard output and exit 0 (all delivered) or 1. Logs go to standard \
            error, never with secrets; on a terminal a progress line shows how far it got.
            """
    )

    @OptionGroup var config: ConfigOptions

    @Option(help: ArgumentHelp("Where state lives (default: agent.stateDirectory, else $STATE_DIRECTORY, else /var/lib/pushreporter).",
                               valueName: "dir"))
    var stateDir: String?

    @Flag(help: "Report every account once, retrying until delivered or the deadline, then exit.")
    var once = false

    @Option(help: ArgumentHelp("With --once: how long to keep retrying, e.g. 60s, 5m.", valueName: "duration"))
    var deadline: String = "60s"

    @Option(help: "Least severe log level shown: trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .info

    @Option(help: "Log line format: text (timestamped, or <N> prefixes under journald) or json.")
    var logFormat: LogOutput.Format = .text

    func validate() throws {
        guard once else {
            throw ValidationError("only 'run --once' exists so far; the long-running mode is not built yet")
        }
        guard let parsed = DurationParser.parse(deadline), parsed > .zero else {
            throw ValidationError("--deadline must be a duration such as 60s, 5m or 1h, not '\(deadline)'")
        }
    }

    func run() async throws {
        let output = LogOutput(format: logFormat)
        var logger = Logger(label: "pushreporter") { _ in AgentLogHandler(output: output, level: logLevel) }
        logger.logLevel = logLevel

        let loaded = LoadedConfiguration(options: config)
        let configuration = loaded.result.configuration
        for diagnostic in loaded.diagnostics.sorted(fileOrder: configuration.files) {
            output.line(diagnostic.formatted)
        }
        if loaded.diagnostics.hasErrors {
            logger.error("the configuration has errors, so nothing was sent; 'pushreporter validate' lists every problem")
            exitNow(Exit.configuration)
        }

        let environment = LoaderEnvironment.current()
        let reports: [PlannedReport]
        do {
            let state = try StateDirectory(path: stateDir ?? configuration.agent.resolvedStateDirectory(environment: environment.variables))
            var builder = RequestBuilder(configuration: configuration, sources: loaded.result.sources,
                                         installID: try state.installID(), hostname: environment.hostname)
            var problems = DiagnosticList()
            reports = PlannedReport.reports(builder: &builder, defaultTimeout: configuration.agent.timeout, diagnostics: &problems)
            if problems.hasErrors {
                for diagnostic in problems.sorted(fileOrder: configuration.files) where diagnostic.severity == .error {
                    output.line(diagnostic.formatted)
                }
                exitNow(Exit.configuration)
            }
        } catch {
            logger.error("\(error.description)")
            exitNow(Exit.failure)
        }
        for report in reports where report.rendered.secretsWithheld {
            logger.warning("\(report.account): secrets are sent as ******** because \(report.host) is plain http and not loopback; use https")
        }
        if reports.isEmpty {
            logger.warning("no enabled account has a pushTokenReporterUrl, so there is nothing to report")
        }

        let transport: CurlTransport
        do {
            transport = try CurlTransport(settings: TransportSettings(caFile: configuration.agent.tlsCAFile))
        } catch {
            logger.error("\(String(describing: error))")
            exitNow(Exit.failure)
        }
        let runner = OnceRunner(reports: reports, settings: configuration.agent, transport: transport,
                                logger: logger, clock: ContinuousClock(), output: output)
        let outcome = await runner.run(deadline: DurationParser.parse(deadline) ?? .seconds(60))
        transport.shutdown()
        print(outcome.summary)
        exitNow(outcome.undelivered.isEmpty ? .success : Exit.failure)
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
extension LogOutput.Format: ExpressibleByArgument {}
