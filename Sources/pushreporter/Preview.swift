import ArgumentParser
import PushAcrobits
import PushAgent
import PushBackend
import PushConfig
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

    @Option(help: ArgumentHelp("Only this reporter: pushTokenReporter or accountRemovalReporter.", valueName: "name"))
    var reporter: Reporter?

    @Option(help: "Output format: http (raw HTTP/1.1), curl (runnable commands) or json.")
    var format: Format = .http

    @Flag(help: "Show secrets as they would be sent.")
    var showSecrets = false

    func run() throws {
        let loaded = LoadedConfiguration(options: config)
        let configuration = loaded.result.configuration
        try stopOnErrors(loaded.diagnostics, files: configuration.files)
        let known = Set(configuration.accounts.map(\.id))
        for id in accounts where !known.contains(id) {
            var message = "preview: no account '\(id)'"
            if let nearest = NameSuggester.nearest(to: id, among: known) { message += "; did you mean '\(nearest)'?" }
            throw ValidationError(message)
        }
        let display: SecretDisplay = showSecrets ? .asSent : (format == .curl ? .shellVariables : .stars)
        var builder = loaded.builder(installID: loaded.storedInstallID)
        var requests: [RenderedRequest] = []
        var problems = DiagnosticList()
        var disabled = 0
        for account in configuration.accounts where accounts.isEmpty || accounts.contains(account.id) {
            guard account.isEnabled else {
                disabled += 1
                continue
            }
            for candidate in Reporter.allCases where reporter == nil || reporter == candidate {
                if let request = builder.request(for: account, reporter: candidate, display: display, diagnostics: &problems) {
                    requests.append(request)
                }
            }
        }
        try stopOnErrors(problems, files: configuration.files)
        switch format {
        case .json: print(JSONText.array(requests.map(RequestFormatter.json)))
        case .curl: print(requests.map(RequestFormatter.curl).joined(separator: "\n\n"))
        case .http: print(requests.map(RequestFormatter.http).joined(separator: "\n\n"))
        }
        if requests.isEmpty { printError("preview: no request to show") }
        if disabled > 0 { printError("preview: skipped \(disabled) disabled \(plural(disabled, "account"))") }
        exitNow(.success)
    }

    /// Prints the errors of `diagnostics` and stops, when it has any. Loading and rendering
    /// both stop a preview; `validate` says every problem, warnings too.
    private func stopOnErrors(_ diagnostics: DiagnosticList, files: [String]) throws {
        guard diagnostics.hasErrors else { return }
        for diagnostic in diagnostics.errors(fileOrder: files) { printError(diagnostic.formatted) }
        printError("preview: the configuration has errors; run 'pushreporter validate' for every problem")
        throw Exit.configuration
    }
}

extension Reporter: ExpressibleByArgument {}
