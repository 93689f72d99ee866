import PushCommandKit
import ArgumentParser
import Logging
import PushAgent
import PushBackend
import PushConfig
import PushState
import PushTemplates
#if canImport(Glibc)
import Glibc
#endif

/// `pushreporter remove ID`: send an account's cleanups (its removal report) now, then forget it.
struct Remove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send an account's removal report now, retrying until the deadline, then forget the account.",
        discussion: """
            The removal requests are those kept in the state directory for each of the account's services \
            (the cleanups of earlier deliveries that may have reached a receiver, then that of the last one), \
            sent one after the other, each recorded once delivered; without any, they are rendered from the \
            configuration. Use it for an account the agent no longer runs with: an account still in the \
            configuration is reported again when the agent next starts (a running agent does not notice the \
            removal), so delete it from the files and reload instead.
            """
    )

    @Argument(help: "The account's id.")
    var account: String?

    @Flag(help: "Instead of one account: send the removals agent.removalGuard holds (status shows them as held).")
    var held = false

    /// The account's id (``validate()`` makes sure there is one, or --held).
    private var id: String { account ?? "" }

    func validate() throws {
        if held && account != nil { throw ValidationError("give an account's id, or --held, not both") }
        if !held && account == nil { throw ValidationError("give the id of the account to remove, or --held for the removals held") }
    }

    @OptionGroup var config: ConfigOptions

    @OptionGroup var agent: AgentOptions

    @Option(help: SummaryFormat.help)
    var format: SummaryFormat = .text

    func run() async throws {
        let output = LogOutput(format: .text)
        let logger = agent.logger(output: output)
        if held { askTheRunningAgent(logger: logger) }
        let setup: AgentSetup
        do {
            setup = try AgentSetup(options: config, stateDir: agent.stateDir, logger: logger, forRemove: true)
        } catch {
            error.report(output: output, logger: logger)
            exitNow(error.code)
        }
        let runtime = setup.runtime
        if held { await releaseHeld(runtime, output: output, logger: logger) }
        let stored: [SubscriptionRecord]
        do {
            stored = try runtime.records().filter { $0.key.account == id }
        } catch {
            logger.error("\(error.description)")
            exitNow(Exit.failure)
        }
        let configured = setup.configuration.accounts.first { $0.id == id }
        if let configured {
            let place = " (\(configured.file):\(configured.position.line))"
            logger.warning("\(id.displayEscaped) is still in the configuration\(place); the agent reports it again when it next starts, so delete it there to keep it removed")
        }
        var records = stored
        if records.isEmpty, let configured {
            // Nothing stored to send: the cleanups the configuration renders, if any.
            var problems = DiagnosticList()
            var planners = runtime.backends.planners(runtime.context(setup.loaded.result, hostname: setup.loaded.environment.hostname),
                                                     diagnostics: &problems)
            var plans: [SubscriptionPlan] = []
            for index in planners.indices { plans += planners[index].plans(for: configured, diagnostics: &problems) }
            if problems.hasErrors {
                for diagnostic in problems.errors(fileOrder: setup.configuration.files) { output.diagnostic(diagnostic) }
                exitNow(Exit.configuration)
            }
            records = plans.compactMap { plan in
                plan.cleanup.map { SubscriptionRecord(key: SubscriptionKey(account: plan.account, service: plan.service), cleanup: $0) }
            }
            if records.isEmpty {
                printError("remove: \(id.displayEscaped) has no accountRemovalReporterUrl and nothing in \(runtime.describedLocation), so there is nothing to send")
                exitNow(Exit.failure)
            }
        } else if records.isEmpty {
            // A near name, from the state and the configuration, as preview --account suggests one.
            let known = Set(((try? runtime.records()) ?? []).map(\.key.account) + setup.configuration.accounts.map(\.id))
            let nearest = NameSuggester.nearest(to: id, among: known).map { "; did you mean '\($0.displayEscaped)'?" } ?? ""
            printError("remove: no account '\(id.displayEscaped)' in \(runtime.describedLocation) or in the configuration\(nearest)")
            exitNow(Exit.failure)
        }
        let owed = cleanups(of: records, backends: runtime.backends)
        let outcome = await sendRemovals(of: records, runtime: runtime, output: output, logger: logger)
        if owed.isEmpty {
            let unreadable = records.contains { $0.cleanup != nil || !$0.pastCleanups.isEmpty }
            let why = unreadable ? "its stored removal request cannot be read" : "no accountRemovalReporterUrl"
            say("\(id.displayEscaped) has no removal request to send (\(why)), so it was forgotten without one.",
                removals: 0, delivered: 0, forgotten: outcome.stateWritten, hosts: [], outcome: outcome, note: "no removal request to send (\(why))")
            exitNow(outcome.stateWritten ? .success : Exit.failure)
        }
        guard outcome.succeeded else {
            // What is left owed is in the state: the rest was delivered, and recorded.
            let left = (try? runtime.records().filter { $0.key.account == id }).map { cleanups(of: $0, backends: runtime.backends).count }
                ?? owed.count
            say(notDelivered(outcome, delivered: owed.count - left, of: owed.count),
                removals: owed.count, delivered: owed.count - left, forgotten: false, hosts: [], outcome: outcome)
            exitNow(Exit.failure)
        }
        let hosts = Self.hosts(of: owed)
        say("Removal of \(id.displayEscaped) delivered to \(hosts.joined(separator: ", ")); the account is forgotten.",
            removals: owed.count, delivered: owed.count, forgotten: true, hosts: hosts, outcome: outcome)
        exitNow(.success)
    }

    /// Sends the cleanups `records` owe, retrying until the deadline (a round of the agent's,
    /// after taking them from a shared state); exits when it cannot.
    private func sendRemovals(of records: [SubscriptionRecord], runtime: AgentRuntime, output: LogOutput,
                              logger: Logger) async -> OnceOutcome {
        do {
            try runtime.takeForRemoval(records.map(\.key))
            return try await runtime.runOnce(.removal(records: records), deadline: agent.deadlineDuration, output: output)
        } catch {
            logger.error("\(error.description)")
            exitNow(Exit.failure)
        }
    }

    /// The hosts `requests` go to, each once, in order.
    private static func hosts(of requests: [SubscriptionRequest]) -> [String] {
        var hosts: [String] = []
        for request in requests where !hosts.contains(request.host) { hosts.append(request.host) }
        return hosts
    }

    /// `remove --held` while an agent runs on the state directory: the request is left in the
    /// directory and the agent told with SIGHUP; its reload sends the held removals, as any
    /// removal, without a further step (SPEC §14). Returns when no agent holds the directory.
    private func askTheRunningAgent(logger: Logger) {
        let loaded = LoadedConfiguration(options: config)
        let state = agent.stateDir ?? loaded.result.configuration.agent.resolvedState(environment: loaded.environment.variables)
        guard !AgentRuntime.isDatabase(state), let directory = try? StateDirectory(path: state, create: false),
              let pid = directory.lockHolder(), pid != getpid() else { return }
        do {
            try directory.writeFile(StateDirectory.releaseRequestFileName, "\(getpid())\n")
        } catch {
            logger.error("remove: cannot ask the running agent (process \(pid)) to send the held removals: \(error.description)")
            exitNow(Exit.failure)
        }
        guard kill(pid, SIGHUP) == 0 else {
            let why = String(cString: strerror(errno))
            logger.error("remove: cannot signal the running agent (process \(pid)): \(why); systemctl reload pushreporter sends them too")
            exitNow(Exit.failure)
        }
        say("Asked the running agent (process \(pid)) to send the held removals: it reloads and sends them as any removal (its journal and status say when).",
            removals: 0, delivered: 0, forgotten: false, hosts: [], outcome: nil, note: "asked the running agent (process \(pid))")
        exitNow(.success)
    }

    /// `remove --held`: every removal the guard holds, sent as any removal (SPEC §14).
    private func releaseHeld(_ runtime: AgentRuntime, output: LogOutput, logger: Logger) async -> Never {
        let records: [SubscriptionRecord]
        do {
            records = try runtime.records().filter { $0.state == .held }
        } catch {
            logger.error("\(error.description)")
            exitNow(Exit.failure)
        }
        guard !records.isEmpty else {
            say("No removal is held in \(runtime.describedLocation).", removals: 0, delivered: 0, forgotten: false, hosts: [],
                outcome: nil)
            exitNow(.success)
        }
        let accounts = Set(records.map(\.key.account)).count
        let owed = cleanups(of: records, backends: runtime.backends)
        let outcome = await sendRemovals(of: records, runtime: runtime, output: output, logger: logger)
        let left = ((try? runtime.records()) ?? []).filter { record in records.contains { $0.key == record.key } }
        let delivered = owed.count - cleanups(of: left, backends: runtime.backends).count
        let hosts = Self.hosts(of: owed)
        let sentence = outcome.succeeded
            ? "Released the held removals of \(accounts) \(plural(accounts, "account")): \(delivered) \(plural(delivered, "removal")) delivered"
                + (hosts.isEmpty ? "" : " to \(hosts.joined(separator: ", "))") + "; the accounts are forgotten."
            : "Released the held removals of \(accounts) \(plural(accounts, "account")): delivered \(delivered) of \(owed.count) within the deadline "
                + "(\(DurationText(agent.deadlineDuration))); the rest stay owed and are sent when the agent next starts:\n"
                + outcome.undeliveredLines.joined(separator: "\n")
        say(sentence, removals: owed.count, delivered: delivered, forgotten: outcome.succeeded, hosts: hosts, outcome: outcome)
        exitNow(outcome.succeeded ? .success : Exit.failure)
    }

    /// Prints `sentence`, or with `--format json` one object that says the same with counts.
    private func say(_ sentence: String, removals: Int, delivered: Int, forgotten: Bool, hosts: [String], outcome: OnceOutcome?,
                     note: String? = nil) {
        guard format == .json else { return print(sentence) }
        let undelivered = (outcome?.undelivered ?? []).map(\.json)
        print(JSONText.object([
            ("account", held ? "null" : JSONText.string(id)),
            ("removals", "\(removals)"),
            ("delivered", "\(delivered)"),
            ("forgotten", "\(forgotten)"),
            ("hosts", "[" + hosts.map { JSONText.string($0) }.joined(separator: ",") + "]"),
            ("elapsedSeconds", "\(Double((outcome?.elapsed ?? .zero).milliseconds) / 1000)"),
            ("note", note.map { JSONText.string($0) } ?? "null"),
            ("undelivered", JSONText.array(undelivered, indent: "  ")),
        ]))
    }

    /// The cleanups `records` owe, in the order they are sent, as the agent reads them.
    private func cleanups(of records: [SubscriptionRecord], backends: Backends) -> [SubscriptionRequest] {
        records.flatMap { record in
            var texts: [String] = []
            for text in record.pastCleanups + [record.cleanup].compactMap({ $0 }) where !texts.contains(text) { texts.append(text) }
            return texts.compactMap { backends.cleanupRequest(account: record.key.account, service: record.key.service, stored: $0) }
        }
    }

    /// What `remove` prints when removal `delivered + 1` of `count` was not delivered.
    private func notDelivered(_ outcome: OnceOutcome, delivered: Int, of count: Int) -> String {
        let name = id.displayEscaped
        let done = switch delivered {
        case 0: count == 1 ? "The removal of \(name) was not delivered " : "Delivered 0 of \(count) removals of \(name); the first was not delivered "
        case 1: "Delivered 1 of \(count) removals of \(name) (recorded: it is not sent again); removal 2 was not delivered "
        default: "Delivered \(delivered) of \(count) removals of \(name) (recorded: they are not sent again); "
            + "removal \(delivered + 1) was not delivered "
        }
        return done + "within the deadline (\(DurationText(agent.deadlineDuration))):\n" + outcome.undeliveredLines.joined(separator: "\n")
            + (count > delivered ? "\nIt stays owed in the state: run remove again; the agent sends it when it next starts, unless the account is still in the configuration (then it is reported instead)." : "")
    }
}
