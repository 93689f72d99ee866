import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// The shipped unit (SPEC §8): hardened to an exposure of 2.0 or less, with what the agent needs.
@Suite(.blockingThreads) struct SystemdUnitTests {
    static let unit = RepositoryPaths.root + "/examples/pushreporter.service"
    static let analyzer = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first { FileManager.default.isExecutableFile(atPath: $0) }

    @Test(.enabled(if: analyzer != nil, "systemd-analyze is not installed"))
    func systemdAnalyzeRatesTheUnitTwoOrLess() throws {
        let result = try ProcessRunner.run(try #require(Self.analyzer), ["security", "--offline=true", Self.unit])
        let line = try #require(result.stdout.split(separator: "\n").last { $0.contains("Overall exposure level") },
                                "\(result.stdout)\(result.stderr)")
        let figure = try #require(line.firstMatch(of: /level for pushreporter\.service: (\d+\.\d)/)?.1)
        #expect(try #require(Double(String(figure))) <= 2.0, "\(line)")
    }

    @Test func theUnitHasWhatSpecEightLists() throws {
        let text = try String(contentsOfFile: Self.unit, encoding: .utf8)
        let settings = Set(text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init))
        for required in ["Type=notify", "DynamicUser=yes", "StateDirectory=pushreporter", "ConfigurationDirectory=pushreporter",
                         "ProtectSystem=strict", "WatchdogSec=30s", "ExecReload=/bin/kill -HUP $MAINPID",
                         "ExecStart=/usr/local/bin/pushreporter run --config /etc/pushreporter"] {
            #expect(settings.contains(required), "\(required)")
        }
        #expect(text.contains("LoadCredential="))
        let dropIn = try String(contentsOfFile: RepositoryPaths.root + "/examples/pushreporter-notify-reload.conf", encoding: .utf8)
        #expect(dropIn.contains("\nType=notify-reload\n"))
    }

    /// The settings of a unit file, in order, by section (`[Service]`) and key; continuation
    /// lines and comments as systemd.syntax(7) reads them.
    static func settings(_ text: String) -> [(section: String, key: String, value: String)] {
        var found: [(section: String, key: String, value: String)] = []
        var section = ""
        var pending = ""
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = pending + raw.trimmingCharacters(in: .whitespaces)
            pending = ""
            if line.hasPrefix("#") || line.hasPrefix(";") || line.isEmpty { continue }
            if line.hasSuffix("\\") {
                line.removeLast()
                pending = line.trimmingCharacters(in: .whitespaces) + " "
                continue
            }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast())
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { continue }
            found.append((section, String(line[..<equals]).trimmingCharacters(in: .whitespaces),
                          String(line[line.index(after: equals)...]).trimmingCharacters(in: .whitespaces)))
        }
        return found
    }

    /// SPEC §8: an invalid configuration fails the unit once and is not restarted. systemd
    /// restarts a unit whose start failed in any step when `Restart=on-failure` says so, and
    /// `RestartPreventExitStatus=` is read against the main process's exit status only
    /// (systemd.service(5)): a failing `ExecStartPre=` (a `validate` before `run`) was restarted
    /// every `RestartSec=`, for ever with `StartLimitIntervalSec=0`. So nothing before the main
    /// process may fail, and the main process's exit for an invalid configuration (78) and for a
    /// bad command line (64) must be listed.
    @Test func aBadConfigurationFailsTheUnitOnceAndIsNotRestarted() throws {
        let settings = Self.settings(try String(contentsOfFile: Self.unit, encoding: .utf8))
        func values(_ key: String) -> [String] { settings.filter { $0.section == "Service" && $0.key == key }.map(\.value) }
        for step in ["ExecStartPre", "ExecStartPost", "ExecCondition"] {
            // A `-` prefix makes systemd ignore the step's failure; an empty value resets the list.
            let failing = values(step).filter { !$0.isEmpty && !$0.hasPrefix("-") }
            #expect(failing.isEmpty, "\(step)= may fail, and its failure is restarted whatever its exit status: \(failing)")
        }
        #expect(values("Restart").last == "on-failure", "a state store that cannot be reached yet (exit 1) is retried")
        let prevented = Set(values("RestartPreventExitStatus").flatMap { $0.split(separator: " ").map(String.init) })
        #expect(prevented.isSuperset(of: ["78", "64"]), "\(prevented)")
        #expect(values("ExecStart").last?.contains(" run ") == true, "the main process is `run`, which checks the configuration first")
        // The retries of an unreachable state store go on as long as it takes, so the limit is
        // lifted; that is safe only because nothing above fails for good with another status.
        let limit = settings.filter { $0.section == "Unit" && $0.key == "StartLimitIntervalSec" }.last?.value
        #expect(limit == "0")
    }

    /// The unit's restart settings against what `run` really does, started as the unit's
    /// `ExecStart=` starts it: an invalid configuration exits with a status the unit does not
    /// restart, and a state store that cannot be reached yet with one it does (SPEC §8).
    @Test func theExitStatusesOfRunAreTheOnesTheUnitTellsApart() throws {
        let settings = Self.settings(try String(contentsOfFile: Self.unit, encoding: .utf8))
        let prevented = Set(settings.filter { $0.section == "Service" && $0.key == "RestartPreventExitStatus" }
            .flatMap { $0.value.split(separator: " ").compactMap { Int32($0) } })
        let start = try #require(settings.last { $0.section == "Service" && $0.key == "ExecStart" }?.value)
        // The unit's own arguments, with the configuration of the test in place of /etc/pushreporter.
        let arguments = start.split(separator: " ").dropFirst().map(String.init)
        #expect(arguments.first == "run")
        let files = TemporaryDirectory()
        func run(_ name: String, _ config: String) throws -> ProcessOutput {
            let directory = files.path + "/" + name
            files.write(name + "/c.yaml", config)
            return try ProcessRunner.pushreporter(arguments.map { $0 == "/etc/pushreporter" ? directory : $0 },
                                                  environment: ["STATE_DIRECTORY": files.path + "/state"])
        }
        let invalid = try run("invalid", "agent:\n  timeout: soon\naccounts: []\n")
        #expect(prevented.contains(invalid.status), "an invalid configuration exits \(invalid.status): \(invalid.stderr)")
        #expect(invalid.stderr.contains("c.yaml:2:12: error:"), "\(invalid.stderr)")
        // A PostgreSQL state on a port nothing listens on: not yet reachable, restarted.
        let unreachable = try run("unreachable", "agent:\n  state: postgres://pushreporter@127.0.0.1:1/pushreporter\naccounts: []\n")
        #expect(unreachable.status == 1, "\(unreachable.stderr)")
        #expect(!prevented.contains(unreachable.status))
    }

    /// `systemd-analyze verify` reads the unit as systemd would load it, with its `ExecStart=`
    /// on the binary under test.
    @Test(.enabled(if: analyzer != nil, "systemd-analyze is not installed"))
    func systemdVerifiesTheUnit() throws {
        let files = TemporaryDirectory()
        let text = try String(contentsOfFile: Self.unit, encoding: .utf8)
            .replacingOccurrences(of: "/usr/local/bin/pushreporter", with: ProcessRunner.pushreporter as String)
        let unit = files.write("pushreporter.service", text)
        let result = try ProcessRunner.run(try #require(Self.analyzer), ["verify", "--man=no", unit])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
    }

    @Test func theSettingsReaderReadsWhatSystemdReads() {
        let text = "# c\n[Unit]\nA=1\n[Service]\nExecStartPre=-/bin/true \\\n  x\n; note\nB = two words\n"
        let read = Self.settings(text).map { "\($0.section).\($0.key)=\($0.value)" }
        #expect(read == ["Unit.A=1", "Service.ExecStartPre=-/bin/true x", "Service.B=two words"])
    }
}
