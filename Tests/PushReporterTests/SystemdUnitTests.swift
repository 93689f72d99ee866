import Foundation
import PushTestSupport
import Testing

/// The shipped unit (SPEC §8): hardened to an exposure of 2.0 or less, with what the agent needs.
@Suite struct SystemdUnitTests {
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
                         "ExecStartPre=/usr/local/bin/pushreporter validate --config /etc/pushreporter",
                         "ExecStart=/usr/local/bin/pushreporter run --config /etc/pushreporter"] {
            #expect(settings.contains(required), "\(required)")
        }
        #expect(text.contains("LoadCredential="))
        let dropIn = try String(contentsOfFile: RepositoryPaths.root + "/examples/pushreporter-notify-reload.conf", encoding: .utf8)
        #expect(dropIn.contains("\nType=notify-reload\n"))
    }
}
