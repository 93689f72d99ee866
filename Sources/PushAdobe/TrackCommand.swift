import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
import Logging
import PushBackend
import PushCommandKit
import PushConfig
import PushScheduler
import PushSystem

/// `pushreporter track`: send Adobe Campaign tracking for received push payloads (SPEC §9.4).
/// The Adobe backend's own command (``AdobeBackend/commands``).
public struct TrackCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "track",
        abstract: "Send Adobe Campaign tracking (impression, click, open, dismiss) for received push payloads.",
        discussion: """
            Each payload is one JSON document per FILE, or each JSON document on standard input (one a line, or \
            indented as 'pushreporter payload' prints them); both shapes Adobe \
            Campaign sends are read: iOS (_mId, _dId and _acsDeliveryTracking beside aps) and Android (inside \
            data, also wrapped with "to"). Each action is GET {trackingServer}/r/?id={_mId},{_dId},{action}&mcId={ecid}: \
            impression sends action 7, click and dismiss 2, open 2 then 1. A payload without _mId or _dId, with \
            _acsDeliveryTracking other than on, or without an ECID is not tracked: the command says why and sends \
            nothing for it. Exactly 200 is delivered; 408, 429, 5xx and connection errors are retried with the \
            backoff of agent.retry until the deadline; any other answer is rejected and not retried. Exit 0 when \
            every action was delivered (or there was nothing to track), 1 when one was not or a payload cannot be \
            read, 64 for a service or account that does not exist.
            """
    )

    @OptionGroup var config: ConfigOptions

    @Option(name: .customLong("service"), help: ArgumentHelp("The adobe-campaign service under services: to track with.", valueName: "name"))
    var service: String

    @Option(help: "What happened to the notification: impression (action 7), click (2), open (2, then 1) or dismiss (2).")
    var event: TrackingEvent

    @Option(help: ArgumentHelp("The account whose ecid for the service identifies the user.", valueName: "id"))
    var account: String?

    @Option(help: ArgumentHelp("The Experience Cloud id, for a payload without an account.", valueName: "ecid"))
    var ecid: String?

    @Flag(help: "Print the requests instead of sending them (secrets masked, as preview shows them).")
    var dryRun = false

    @Option(help: ArgumentHelp("How long to keep retrying, e.g. 60s, 5m (default: 60s).", valueName: "duration"))
    var deadline: String?

    @Option(help: ArgumentHelp("Remember each action delivered here, so that the same event is sent once (it may be the agent's state directory); without it nothing is remembered.",
                               valueName: "dir"))
    var stateDir: String?

    @Option(help: SummaryFormat.help)
    var format: SummaryFormat = .text

    @Argument(help: ArgumentHelp("Payload files, one JSON document each; without any, the JSON documents on standard input (JSON lines, or as payload prints them).",
                                 valueName: "file"))
    var files: [String] = []

    public init() {}

    public func validate() throws {
        if account != nil && ecid != nil { throw ValidationError("give --account or --ecid, not both") }
        _ = try AgentOptions.deadline(deadline)
        if dryRun && format == .json { throw ValidationError("--format json says what was sent; --dry-run sends nothing (it prints the requests)") }
        if files.isEmpty && isatty(STDIN_FILENO) == 1 {
            throw ValidationError("give payload files, or JSON lines on standard input")
        }
    }

    public func run() async throws {
        let loaded = LoadedConfiguration(options: config)
        let configuration = loaded.result.configuration
        var diagnostics = loaded.diagnostics
        let context = loaded.context(installID: loaded.storedInstallID)
        AdobeBackend().check(context, skipping: nil, diagnostics: &diagnostics)
        if diagnostics.hasErrors {
            for diagnostic in diagnostics.errors(fileOrder: configuration.files) { printError(diagnostic.formatted) }
            printError("track: the configuration has errors, so nothing was sent; for every problem, run: \(config.validateCommand)")
            exitNow(Exit.configuration)
        }
        let targets = AdobeBackend.trackingTargets(context)
        let target: TrackingTargets.Service
        let resolution: TrackingTargets.Resolution
        do {
            target = try targets.service(named: service, key: "--service").get()
            resolution = try targets.ecid(given: ecid, account: account, service: target, hint: "give --account ID or --ecid ECID").get()
        } catch {
            printError("track: \(error)")
            exitNow(Exit.usage)
        }

        var payloads: [TrackingDelivery<ContinuousClock>.Payload] = []
        var notTracked: [(payload: String, reason: String)] = []
        for (label, payload) in readPayloads() {
            switch target.requests(event, for: payload, ecid: resolution) {
            case .success(let requests):
                payloads.append(.init(label: label, requests: requests))
            case .failure(let why):
                if format == .text { print("\(label): not tracked: \(why); nothing is sent") }
                notTracked.append((label, "\(why)"))
            }
        }
        if dryRun {
            for request in payloads.flatMap({ payload in payload.requests.map { $0.rendered(account: payload.label) } }) {
                print(RequestFormatter.http(request) + "\n")
            }
            printError("track: dry run: \(payloads.count * event.actions.count) \(plural(payloads.count * event.actions.count, "request")) shown, nothing sent")
            exitNow(.success)
        }
        guard !payloads.isEmpty else {
            if format == .json {
                _ = report([], [], notTracked: notTracked)
            } else {
                print("Nothing to track: \(notTracked.count) \(plural(notTracked.count, "payload")) not tracked.")
            }
            exitNow(.success)
        }
        let results = await send(payloads, configuration: configuration)
        exitNow(report(payloads, results, notTracked: notTracked) ? .success : Exit.failure)
    }

    /// Sends every action, with the ledger of `--state-dir` when given.
    private func send(_ payloads: [TrackingDelivery<ContinuousClock>.Payload],
                      configuration: Configuration) async -> [[TrackingDelivery<ContinuousClock>.Result]] {
        let logger = CommandEnvironment.logger()
        var ledger: (any TrackingLedger)?
        if let stateDir {
            do {
                ledger = SentOnceTrackingLedger(try CommandEnvironment.sentOnceLedger(stateDirectory: stateDir))
            } catch {
                logger.error("\(error.description)")
                exitNow(Exit.failure)
            }
        }
        let transport: any ShutdownableTransport
        do {
            transport = try CommandEnvironment.makeTransport(caFile: configuration.agent.tlsCAFile)
        } catch {
            logger.error("\(String(describing: error))")
            exitNow(Exit.failure)
        }
        defer { transport.shutdown() }
        let agent = configuration.agent
        let delivery = TrackingDelivery(policy: BackoffPolicy(agent.retry), concurrency: agent.concurrency,
                                        perHostConcurrency: agent.perHostConcurrency, transport: transport, ledger: ledger,
                                        logger: logger, clock: ContinuousClock(), wallClock: WallClock.epochMilliseconds)
        return await delivery.deliver(payloads, deadline: (try? AgentOptions.deadline(deadline)) ?? .seconds(60))
    }

    /// Prints what became of each action, then a summary (or, with `--format json`, one object
    /// with the counts and each action); true when every action reached its server.
    private func report(_ payloads: [TrackingDelivery<ContinuousClock>.Payload], _ results: [[TrackingDelivery<ContinuousClock>.Result]],
                        notTracked: [(payload: String, reason: String)]) -> Bool {
        var delivered = 0, already = 0, failed = 0
        var items: [String] = []
        let within = "within the deadline (\(DurationText((try? AgentOptions.deadline(deadline)) ?? .seconds(60))))"
        for (payload, actions) in zip(payloads, results) {
            for (request, result) in zip(payload.requests, actions) {
                let what = "\(payload.label): \(request.action.description)"
                let line: String, outcome: String
                var reason: String?
                var attemptsMade: Int?
                switch result {
                case .delivered(let attempts):
                    delivered += 1
                    (line, outcome, attemptsMade) = ("\(what) delivered to \(request.host)\(attempts > 1 ? " after \(attempts) attempts" : "")", "delivered", attempts)
                case .alreadySent:
                    already += 1
                    (line, outcome) = ("\(what) already sent (remembered in \(stateDir ?? "the state")); not sent again", "alreadySent")
                case .deliveredNotRecorded(let why):
                    delivered += 1
                    failed += 1
                    (line, outcome, reason) = ("\(what) delivered to \(request.host), but not remembered: \(why)", "deliveredNotRemembered", why)
                case .rejected(let why):
                    failed += 1
                    (line, outcome, reason) = ("\(what) rejected by \(request.host): \(why)", "rejected", why)
                case .undelivered(let why):
                    failed += 1
                    let said = why ?? "it waits for the action before it"
                    (line, outcome, reason) = ("\(what) not delivered \(within): \(said)", "notDelivered", said)
                }
                if format == .text { print(line) }
                items.append(JSONText.compactObject([
                    ("payload", JSONText.string(payload.label)), ("action", JSONText.string(request.action.description)),
                    ("host", JSONText.string(request.host)), ("outcome", JSONText.string(outcome)),
                    ("attempts", attemptsMade.map { "\($0)" } ?? "null"), ("reason", reason.map { JSONText.string($0) } ?? "null"),
                ]))
            }
        }
        let total = results.reduce(0) { $0 + $1.count }
        if format == .json {
            let skipped = notTracked.map {
                JSONText.compactObject([("payload", JSONText.string($0.payload)), ("reason", JSONText.string($0.reason))])
            }
            print(JSONText.object([
                ("actions", "\(total)"), ("delivered", "\(delivered)"), ("alreadySent", "\(already)"),
                ("notDelivered", "\(total - delivered - already)"), ("payloadsNotTracked", "\(notTracked.count)"),
                ("results", JSONText.array(items, indent: "  ")),
                ("notTracked", JSONText.array(skipped, indent: "  ")),
            ]))
            return failed == 0
        }
        var summary = "Delivered \(delivered) of \(total) \(plural(total, "action"))"
        if already > 0 { summary += "; \(already) already sent" }
        if total - delivered - already > 0 { summary += "; \(total - delivered - already) not delivered" }
        if !notTracked.isEmpty { summary += "; \(notTracked.count) \(plural(notTracked.count, "payload")) not tracked" }
        print(summary + ".")
        return failed == 0
    }

    /// The payloads of the files, or of standard input's lines, each with what messages call
    /// it; exits when one cannot be read (nothing is sent then).
    private func readPayloads() -> [(label: String, payload: PushPayload)] {
        var sources: [(label: String, bytes: [UInt8])] = []
        var problems: [String] = []
        if files.isEmpty {
            switch FileSystem.read("/dev/stdin", limit: 64 << 20) {
            case .failure(let error):
                problems.append("standard input cannot be read (\(error.message))")
            case .success(let bytes):
                for document in PushPayload.documents(in: bytes) { sources.append(("stdin:\(document.line)", Array(document.bytes))) }
                if sources.isEmpty { problems.append("standard input holds no payload") }
            }
        } else {
            for file in files {
                switch FileSystem.read(file, limit: PushPayload.maximumSize) {
                case .success(let bytes): sources.append((file.displayEscaped, bytes))
                case .failure(let error): problems.append("\(file.displayEscaped) cannot be read (\(error.message))")
                }
            }
        }
        var payloads: [(label: String, payload: PushPayload)] = []
        for source in sources {
            do {
                payloads.append((source.label, try PushPayload(json: source.bytes)))
            } catch {
                problems.append("\(source.label) \(error.reason)")
            }
        }
        guard problems.isEmpty else {
            for problem in problems { printError("track: \(problem)") }
            printError("track: nothing was sent")
            exitNow(Exit.failure)
        }
        return payloads
    }
}

extension TrackingEvent: ExpressibleByArgument {}
