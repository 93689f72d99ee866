import PushCommandKit
import ArgumentParser
import PushBackend
import PushConfig
#if canImport(Glibc)
import Glibc
#endif

/// `pushreporter schema`: the JSON Schema of a configuration file, for editors and CI (SPEC §14).
struct Schema: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the JSON Schema of a configuration file, for editors' completion and checks.",
        discussion: """
            The schema (draft 2020-12) is made from the lists the loader checks against: unknown keys at the top \
            level, under agent and in a service are errors to it too; accounts and defaults take any key, the known \
            ones described; a tagged value (!env, !file, !credential) is a string. A use: template file is \
            checked against its $defs/template. The package installs it as /usr/share/pushreporter/schema.json; \
            see docs/configuration.md for the editor set-up.
            """
    )

    @Option(help: ArgumentHelp("Write it to this file (atomically) instead of standard output.", valueName: "file"))
    var output: String?

    func run() throws {
        let text = ConfigurationSchema.text(for: CommandEnvironment.backends)
        guard let output else {
            print(text, terminator: "")
            return
        }
        let temporary = output + ".tmp.\(getpid())"
        guard let file = fopen(temporary, "w") else {
            printError("schema: cannot write \(output): \(String(cString: strerror(errno)))")
            throw Exit.failure
        }
        let written = fputs(text, file) >= 0
        guard fclose(file) == 0, written, rename(temporary, output) == 0 else {
            printError("schema: cannot write \(output): \(String(cString: strerror(errno)))")
            unlink(temporary)
            throw Exit.failure
        }
    }
}
