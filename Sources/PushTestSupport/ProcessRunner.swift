import Foundation

/// What a finished process left behind.
public struct ProcessOutput: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String

    /// Standard error's non-empty lines.
    public var stderrLines: [String] { stderr.split(separator: "\n").map(String.init) }
}

/// Runs the built `pushreporter` binary (or any program) and captures its output.
public enum ProcessRunner {
    /// Where the package's executables are built: beside the test bundle.
    public static let builtProducts: String = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        .deletingLastPathComponent().path

    /// The `pushreporter` executable built beside the test bundle.
    public static let pushreporter = builtProducts + "/pushreporter"

    /// Runs `pushreporter` with `arguments`; the environment is ``childEnvironment(adding:)``.
    public static func pushreporter(_ arguments: [String], environment: [String: String] = [:],
                                    directory: String? = nil, stdin: String? = nil) throws -> ProcessOutput {
        try run(pushreporter, arguments, environment: environment, directory: directory, stdin: stdin)
    }

    /// Runs `pushreporter` on `config` (YAML, written to a fresh directory as `c.yaml`), with
    /// `--config` and the file's path added after `arguments`.
    public static func pushreporter(config: String, _ arguments: [String],
                                    environment: [String: String] = [:]) throws -> ProcessOutput {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", config)
        return try withExtendedLifetime(directory) {
            try pushreporter(arguments + ["--config", path], environment: environment)
        }
    }

    /// What systemd sets for a service that changes how `pushreporter` behaves: a test run from
    /// a unit (or a shell that inherited them) must not pass them on.
    static let systemdVariables: Set<String> = ["JOURNAL_STREAM", "NOTIFY_SOCKET", "STATE_DIRECTORY", "CREDENTIALS_DIRECTORY"]

    /// This process's environment without what would change how `pushreporter` behaves
    /// (`PUSHREPORTER_*`, `WATCHDOG_*` and ``systemdVariables``), plus `environment`.
    public static func childEnvironment(adding environment: [String: String]) -> [String: String] {
        var env = ProcessInfo.processInfo.environment.filter { key, _ in
            !key.hasPrefix("PUSHREPORTER_") && !key.hasPrefix("WATCHDOG_") && !Self.systemdVariables.contains(key)
        }
        env.merge(environment) { _, new in new }
        return env
    }

    public static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                           directory: String? = nil, stdin: String? = nil) throws -> ProcessOutput {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = childEnvironment(adding: environment)
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try? input.fileHandleForWriting.close()
        // Read both pipes while the process runs, so a large output cannot block it.
        nonisolated(unsafe) var errData = Data()
        let errReader = Thread { errData = err.fileHandleForReading.readDataToEndOfFile() }
        errReader.start()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !errReader.isFinished { usleep(1000) }
        return ProcessOutput(status: process.terminationStatus,
                             stdout: String(decoding: outData, as: UTF8.self),
                             stderr: String(decoding: errData, as: UTF8.self))
    }
}
