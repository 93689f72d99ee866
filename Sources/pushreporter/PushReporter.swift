import ArgumentParser

/// `pushreporter`: reports mobile push tokens from YAML account configurations.
@main
struct PushReporter: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushreporter",
        abstract: "Report mobile push tokens to web services from YAML account configurations.",
        discussion: """
            Exit codes: 0 success; 1 operational failure; 64 bad command-line usage; 78 invalid configuration.
            Configuration: --config PATH (repeatable), else $PUSHREPORTER_CONFIG, else /etc/pushreporter.
            """,
        version: PushReporterVersionText.current,
        subcommands: [Validate.self, Preview.self]
    )
}

enum PushReporterVersionText {
    static let current = "0.1.0"
}

/// Exit codes of SPEC §7.
enum Exit {
    static let configuration = ExitCode(78)
    static let failure = ExitCode(1)
}
