import PushCommandKit
import ArgumentParser
import PushAgent
import PushBackend
import PushConfig
import PushState
import PushTemplates

/// `pushreporter preview`: print the exact requests the configuration produces; sends nothing.
struct Preview: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the exact requests the configuration produces, without sending anything.",
        discussion: """
            Secrets are shown as ******** (as $NAME shell variables with --format curl) unless --show-secrets \
            is given; with it, requests appear as they would be sent, so a secret bound for a plain-http host \
            that is not loopback still shows as ********.
            """
    )

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case http, curl, json
    }

    @OptionGroup var config: ConfigOptions

    @Option(name: .customLong("account"), help: ArgumentHelp("Only this account (repeatable).", valueName: "id"))
    var accounts: [String] = []

    @Option(help: ArgumentHelp("Only this reporter: pushTokenReporter or accountRemovalReporter (of other services: registrations, or cleanups).", valueName: "name"))
    var reporter: ReporterChoice?

    /// `--reporter`: a delivery or a cleanup, by the names an account's own web services give them.
    enum ReporterChoice: String, ExpressibleByArgument, CaseIterable {
        case pushTokenReporter, accountRemovalReporter
    }

    @Option(name: .customLong("service"), help: ArgumentHelp("Only this service (repeatable): acrobits for the accounts' own web services, or a name under services:.", valueName: "name"))
    var services: [String] = []

    @Option(help: "Output format: http (raw HTTP/1.1), curl (runnable commands) or json.")
    var format: Format = .http

    @Flag(help: "Show secrets as they would be sent.")
    var showSecrets = false

    func run() throws {
        // Without --account, the accounts checked while they load and found without a problem
        // are not kept: they are read again from the files when printed, so that memory does
        // not grow with the number of accounts. --account needs every id at once. Nor is a large
        // file parsed in two parts at once (the second part's accounts would wait whole for the
        // first's: 8.7 MB at 100,000 accounts, for no time saved here) or read whole (17 MB): it
        // is read in pieces as it is parsed, both times.
        let streaming = accounts.isEmpty
        let loaded = LoadedConfiguration(options: config, checkingEarly: streaming, leavingOutPassed: streaming,
                                         splitting: !streaming)
        let installID = loaded.storedInstallID
        let configuration = loaded.result.configuration
        if loaded.diagnostics.hasErrors {
            var checked = loaded
            checked.checkRendering(installID: installID)
            try stopOnErrors(checked.diagnostics, files: configuration.files)
        }
        let known = Set(configuration.accounts.map(\.id))
        for id in accounts where !known.contains(id) {
            var message = "preview: no account '\(id.displayEscaped)'"
            if let nearest = NameSuggester.nearest(to: id, among: known) { message += "; did you mean '\(nearest.displayEscaped)'?" }
            printError(message)
            throw ExitCode(64)
        }
        let backends = CommandEnvironment.backends
        let knownServices = Set(backends.accountServiceNames + configuration.services.keys)
        for name in services where !knownServices.contains(name) {
            var message = "preview: no service '\(name.displayEscaped)'"
            if let nearest = NameSuggester.nearest(to: name, among: knownServices) { message += "; did you mean '\(nearest)'?" }
            printError(message)
            throw ExitCode(64)
        }
        let display: SecretDisplay = showSecrets ? .asSent : (format == .curl ? .shellVariables : .stars)
        let context = loaded.context(installID: installID)
        let named = Set(accounts)
        let selected = configuration.accounts.lazy.filter { named.isEmpty || named.contains($0.id) }

        // Twice: once to find every problem before anything is printed (of the accounts kept:
        // the others have none), then to print as each account is rendered.
        var problems = DiagnosticList()
        var planners = backends.planners(context, diagnostics: &problems)
        for account in selected { _ = requests(for: account, planners: &planners, display: display, diagnostics: &problems) }
        try stopOnErrors(problems, files: configuration.files)
        // Warnings too, before the requests they explain (a misspelt key leaves a value empty):
        // those of the accounts shown, and those of no account.
        var warnings = loaded.diagnostics
        warnings.append(contentsOf: problems.all)
        // With --service or --account, not those written in the definition of a service not
        // shown (a vendor's deprecation of one service under --service of another).
        let shownServices: Set<String>? = !services.isEmpty ? Set(services)
            : named.isEmpty ? nil : Set(selected.flatMap(\.services.keys))
        var elsewhere = Set<String>()
        for definition in configuration.services.values where shownServices.map({ !$0.contains(definition.name) }) ?? false {
            for position in [definition.position] + definition.keyPositions.values {
                elsewhere.insert("\(definition.file):\(position.line)")
            }
        }
        for warning in warnings.sorted(fileOrder: configuration.files)
        where warning.severity == .warning && (named.isEmpty || warning.account.map(named.contains) ?? true)
            && !elsewhere.contains("\(warning.file):\(warning.line)") {
            printError(warning.formatted)
        }

        planners = backends.planners(context, diagnostics: &problems)
        var output = Output(format: format, services: Set(services), defaultTimeout: configuration.agent.timeout)
        if configuration.accountsLeftOut.count == 0 {
            for account in selected {
                output.print(requests(for: account, planners: &planners, display: display, diagnostics: &problems), of: account)
            }
        } else {
            let changed = loaded.loadAgain(options: config) { account in
                output.print(requests(for: account, planners: &planners, display: display, diagnostics: &problems), of: account)
            }
            // What was printed came from files other than those checked.
            if !changed.isEmpty {
                output.finish()
                for file in changed { printError("\(file): error: the file changed while preview read it; run preview again") }
                throw Exit.configuration
            }
        }
        output.finish()
        // Only a configuration that changed between the two readings has problems here.
        try stopOnErrors(problems, files: configuration.files)
        exitNow(.success)
    }

    /// Prints requests as they come, and what was not printed at the end.
    private struct Output {
        let format: Format
        /// With --service: the services shown, by which a disabled account counts as skipped.
        let services: Set<String>
        /// `agent.timeout`: curl's `--max-time` for a request without its own.
        let defaultTimeout: Duration
        var printed = 0
        var disabled = 0

        init(format: Format, services: Set<String>, defaultTimeout: Duration) {
            self.format = format
            self.services = services
            self.defaultTimeout = defaultTimeout
        }

        mutating func print(_ requests: [RenderedRequest], of account: Account) {
            guard account.isEnabled else {
                // Only one that would have had a request among those shown.
                if services.isEmpty || services.contains(where: { account.services[$0] != nil })
                    || (services.contains(where: accountServiceNames.contains) && accountKeys.contains(where: account.values.contains)) {
                    disabled += 1
                }
                return
            }
            for request in requests {
                switch format {
                case .json:
                    Swift.print(printed == 0 ? "[" : ",", terminator: "\n")
                    Swift.print("  " + RequestFormatter.json(request, indent: "  "), terminator: "")
                case .curl:
                    Swift.print((printed == 0 ? "" : "\n") + RequestFormatter.curl(request, defaultTimeout: defaultTimeout))
                case .http:
                    Swift.print((printed == 0 ? "" : "\n") + RequestFormatter.http(request))
                }
                printed += 1
            }
        }

        /// The services accounts have without naming them, and the keys that give them
        /// something (``Backends/accountServiceNames``, ``Backends/accountKeys``).
        private let accountServiceNames = CommandEnvironment.backends.accountServiceNames
        private let accountKeys = CommandEnvironment.backends.accountKeys.map(AccountValueTable.PreparedKey.init)

        /// Once, after the last request.
        func finish() {
            if format == .json { Swift.print(printed == 0 ? "[]" : "\n]") }
            // Nothing shown may be a mistake only validate's warnings explain (a misspelt URL key).
            if printed == 0 { printError("preview: no request to show; pushreporter validate says why an account reports nothing") }
            if disabled > 0 { printError("preview: skipped \(disabled) disabled \(plural(disabled, "account"))") }
        }
    }

    /// The requests of `account` that the options select, from every backend.
    private func requests(for account: Account, planners: inout [any SubscriptionPlanner], display: SecretDisplay,
                          diagnostics: inout DiagnosticList) -> [RenderedRequest] {
        guard account.isEnabled else { return [] }
        var found: [RenderedRequest] = []
        for index in planners.indices {
            for request in planners[index].preview(account, display: display, diagnostics: &diagnostics)
            where Self.selects(reporter, request) && (services.isEmpty || services.contains(request.service)) {
                found.append(request)
            }
        }
        return found
    }

    /// Whether `--reporter` shows `request`: an account's own web services by their reporter,
    /// the other services' registrations as `pushTokenReporter` and cleanups as
    /// `accountRemovalReporter`.
    static func selects(_ reporter: ReporterChoice?, _ request: RenderedRequest) -> Bool {
        guard let reporter else { return true }
        if ReporterChoice(rawValue: request.reporter) != nil { return request.reporter == reporter.rawValue }
        return request.isCleanup == (reporter == .accountRemovalReporter)
    }

    /// Prints the errors of `diagnostics` and stops, when it has any. Loading and rendering
    /// both stop a preview; `validate` says the warnings too.
    private func stopOnErrors(_ diagnostics: DiagnosticList, files: [String]) throws {
        guard diagnostics.hasErrors else { return }
        for diagnostic in diagnostics.errors(fileOrder: files) { printError(diagnostic.formatted) }
        printError("preview: the configuration has errors; for every problem, run: \(config.validateCommand)")
        throw Exit.configuration
    }
}

