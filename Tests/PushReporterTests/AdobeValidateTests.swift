import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// `validate` on adobe-campaign services (SPEC §9.4): each problem of a setting or of an
/// account's ecid at its file, line and column, with a did-you-mean where one helps.
@Suite(.blockingThreads) struct AdobeValidateTests {
    @Test func badSettingsAndEcidsAreSaidWhereTheyAreWritten() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", """
            services:
              plain:
                type: adobe-campaign
                trackingServer: http://track.example.com
              pathy:
                type: adobe-campaign
                trackingServer: https://track.example.com/r/
                timeout: soon
              missing:
                type: adobe-campaign
                trackingServr: https://track.example.com
              bare:
                type: adobe-campaign
                trackingServer: track.example.com
              good:
                type: adobe-campaign
                trackingServer: https://track.example.com:8443/
            accounts:
              - username: dana
                services:
                  good: {ecdi: x}
              - username: erin
                services:
                  good: {}
              - username: fay
                services:
                  good: {ecid: "%account[ecidd]%"}
              - username: gus
                ecid: ""
                services:
                  good: {ecid: "%account[ecid]%"}
              - username: hal
                services:
                  missing: {ecdi: x}
              - username: ida
                services:
                  good: {ecid: "%nope2%", foo: 1}
            """)
        let result = try ProcessRunner.pushreporter(["validate", "--config", path])
        #expect(result.status == 78)
        #expect(result.stderr == """
            \(path):4:21: error: service 'plain': trackingServer must be https (plain http only to a loopback address), not 'http://track.example.com'
            \(path):7:21: error: service 'pathy': trackingServer must be https://host[:port] alone, without a path, query, fragment or user, not 'https://track.example.com/r/'
            \(path):8:14: error: service 'pathy': timeout must be a duration such as 5s, not 'soon'
            \(path):9:3: error: service 'missing' needs 'trackingServer' (adobe-campaign: the tracking server, the SDK's campaign.server, as https://host)
            \(path):11:5: error: service 'missing': unknown setting 'trackingServr' of an adobe-campaign service; did you mean 'trackingServer'?
            \(path):14:21: error: service 'bare': trackingServer must be https://host[:port] (the SDK's campaign.server, with https:// before it), not 'track.example.com'
            \(path):21:14: error: unknown key 'ecdi' for the service 'good' (adobe-campaign takes ecid); did you mean 'ecid'? [account dana]
            \(path):24:7: error: the service 'good' needs 'ecid' for each account that names it (the Experience Cloud id) [account erin]
            \(path):27:21: error: no account has a key 'ecidd'; did you mean 'ecid'?
            \(path):31:20: warning: ecid renders empty for this account, so its payloads are not tracked [account gus]
            \(path):34:17: error: unknown key 'ecdi' for the service 'missing' (adobe-campaign takes ecid); did you mean 'ecid'? [account hal]
            \(path):37:21: error: unknown variable 'nope2'
            \(path):37:31: error: unknown key 'foo' for the service 'good' (adobe-campaign takes ecid) [account ida]
            1 file, 6 enabled accounts: 12 errors, 1 warning

            """)
    }

    @Test func aGoodServiceValidatesCleanAndSendsNothingOnStart() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", """
            agent:
              trackingSpool: spool
            services:
              adobe:
                type: adobe-campaign
                trackingServer: https://track.example.com
                timeout: 2s
            accounts:
              - username: dana
                services:
                  adobe: {ecid: "%account[username]%-ecid"}
            """)
        let validated = try ProcessRunner.pushreporter(["validate", "--config", path, "--strict"])
        #expect(validated.status == 0, "\(validated.stderr)")
        #expect(validated.stderr == "1 file, 1 enabled account: 0 errors, 0 warnings\n")
        let preview = try ProcessRunner.pushreporter(["preview", "--config", path, "--service", "adobe", "--format", "curl"])
        #expect(preview.stdout == """
            # dana adobe tracking
            curl --fail-with-body -sS -H 'User-Agent: pushreporter/0.1.0' -H 'Accept: */*' --max-time 2.0 'https://track.example.com/r/?id=<_mId>,<_dId>,<action>&mcId=dana-ecid'

            """)
        let once = try ProcessRunner.pushreporter(["run", "--once", "--config", path, "--state-dir", directory.path + "/state"])
        #expect(once.status == 0, "\(once.stderr)")
        #expect(once.stdout.hasPrefix("Delivered 0 of 0 reports"), "an adobe-campaign service has nothing to deliver per account")
        // Not "no … service": dana has one, which reports events instead.
        #expect(once.stderr.contains("warning: no enabled account has anything to report on start (a pushTokenReporterUrl, "
                                     + "or a service that registers devices; an adobe-campaign service sends the tracking of "
                                     + "received push payloads, with pushreporter track or agent.trackingSpool, not devices)"),
                "\(once.stderr)")
    }

    @Test func anAccountWithOnlyAnAdobeServiceIsSaidToReportNothingOnStart() throws {
        let server = try LoopbackHTTPServer { _, _ in .status(200) }
        let directory = TemporaryDirectory()
        let path = directory.write("c.yaml", """
            services:
              adobe: {type: adobe-campaign, trackingServer: "https://track.example.com"}
            accounts:
              - {username: dana, services: {adobe: {ecid: "%account[username]%-ecid"}}}
              - username: erin
                pushToken: T1
                pushTokenReporterUrl: \(server.baseURL)/report?token=%pushToken%
            """)
        let validated = try ProcessRunner.pushreporter(["validate", "--config", path])
        #expect(validated.stderr.hasSuffix("1 file, 2 enabled accounts: 0 errors, 0 warnings\n"), "\(validated.stderr)")
        let once = try ProcessRunner.pushreporter(["run", "--once", "--config", path, "--state-dir", directory.path + "/state"])
        #expect(once.status == 0, "\(once.stderr)")
        // Two enabled accounts, one reported: the log says which one has nothing to send, and why.
        #expect(once.stderr.contains("info: 1 enabled account has nothing to report on start, with no pushTokenReporterUrl "
                                     + "and no service that registers devices (an adobe-campaign service sends the tracking of "
                                     + "received push payloads, with pushreporter track or agent.trackingSpool, not devices): dana\n"),
                "\(once.stderr)")
        #expect(once.stderr.contains("started: reporting 1 account\n"), "\(once.stderr)")
        #expect(once.stdout.hasPrefix("Delivered 1 of 1 report"), "\(once.stdout)")
    }
}
