import PushCommandKit
import ArgumentParser
import PushAgent
import PushBackend
import PushConfig

/// `pushreporter validate`: check configurations, and every request as rendering it would.
struct Validate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check configuration files and every request, without sending any.",
        discussion: """
            Prints FILE:LINE:COLUMN: error|warning: MESSAGE lines on standard error (or a JSON array on \
            standard output with --format json) and exits 78 when there is an error, or a warning with --strict (but for a vendor's notice that \
            no edit of the files can remove, such as Google's deprecation of device groups).
            """
    )

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case text, json
    }

    @OptionGroup var config: ConfigOptions

    @Option(help: "Output format: text (on standard error) or json (on standard output).")
    var format: Format = .text

    @Flag(help: "Treat warnings as errors (exit 78), but for a vendor's notice no edit can remove.")
    var strict = false

    func run() throws {
        // Accounts are checked while they load, as far as that can tell, and only the others are
        // kept, to be checked after.
        var loaded = LoadedConfiguration(options: config, checkingEarly: true, leavingOutPassed: true)
        loaded.checkRendering(installID: loaded.storedInstallID)
        let diagnostics = loaded.diagnostics.sorted(fileOrder: loaded.result.configuration.files)
        let errors = loaded.diagnostics.errorCount
        let warnings = loaded.diagnostics.warningCount
        // A vendor's deprecation is said, but no edit of the files could ever make --strict pass.
        let failingWarnings = loaded.diagnostics.strictWarningCount
        switch format {
        case .text:
            for diagnostic in diagnostics.collapsingRepeats() { printError(diagnostic.formatted) }
            let configuration = loaded.result.configuration
            let enabled = configuration.accounts.count { $0.isEnabled } + configuration.accountsLeftOut.enabled
            // A file that could not be parsed may hold accounts: "0 enabled accounts" would say it has none.
            let notRead = configuration.filesNotRead.count
            let uncounted = notRead == 0 ? "" : " (not counting \(notRead == 1 ? "the file" : "the \(notRead) files") that could not be read)"
            printError("\(configuration.files.count) \(plural(configuration.files.count, "file")), "
                       + "\(enabled) \(plural(enabled, "enabled account"))\(uncounted): "
                       + "\(errors) \(plural(errors, "error")), \(warnings) \(plural(warnings, "warning"))"
                       // The exit says so, but a person reads this line.
                       + (strict && errors == 0 && failingWarnings > 0 ? " (they fail the check: --strict)" : "")
                       + (strict && failingWarnings < warnings
                          ? " (\(warnings - failingWarnings == 1 ? "1 is a vendor's notice" : "\(warnings - failingWarnings) are vendors' notices") that no edit of the files can remove, which --strict does not fail on)"
                          : ""))
        case .json:
            print(JSONText.array(diagnostics.map(\.json)))
        }
        // Exit here rather than return: freeing 100,000 loaded accounts one by one only to end the
        // process cost more than a tenth of validate's time.
        exitNow(errors > 0 || (strict && failingWarnings > 0) ? Exit.configuration : .success)
    }
}

extension Diagnostic {
    var json: String {
        var fields: [(String, String)] = [("file", JSONText.string(file)), ("line", String(line)), ("column", String(column)),
                                          ("severity", JSONText.string(severity.rawValue)), ("message", JSONText.string(message))]
        if let account { fields.append(("account", JSONText.string(account))) }
        return JSONText.object(fields)
    }
}
