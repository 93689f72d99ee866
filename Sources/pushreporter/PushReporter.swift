import ArgumentParser
import PushConfig

/// `pushreporter`: reports mobile push tokens from YAML account configurations.
@main
struct PushReporter: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushreporter",
        abstract: "Report mobile push tokens to web services from YAML account configurations.",
        discussion: """
            Exit codes: 0 success; 1 operational failure; 64 bad command-line usage; 78 invalid configuration.
            Configuration: --config PATH (repeatable), else $PUSHREPORTER_CONFIG, else /etc/pushreporter.
            """,
        version: PushReporterVersion.current,
        subcommands: [Run.self, Validate.self, Preview.self, Status.self, Remove.self]
    )

    static func main() async {
        // Before anything allocates: loading and checking a large configuration then costs a
        // tenth less CPU. The agent goes back to the default once loaded.
        Allocator.useLargeSteps()
        await main(nil)
    }
}

/// Exit codes of SPEC §7.
enum Exit {
    static let configuration = ExitCode(78)
    static let failure = ExitCode(1)
}
