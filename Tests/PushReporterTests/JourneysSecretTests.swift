import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// The Journeys `apiToken` is a secret (SPEC §2, §9.2, §12): the receiver gets it, and
/// `preview --show-secrets` shows it; nothing else a user sees does.
@Suite(.blockingThreads) struct JourneysSecretTests {
    static let secret = "s3cr3t-journeys-token-7f2c"

    @Test func theApiTokenIsSentButNeverShown() throws {
        let bench = try JourneysBench(FakeJourneysServer(apiToken: Self.secret))
        // A retry and a rejection, so the log has more to say than the happy path.
        bench.fake.answerNext(1, of: .registerBatch, with: .status(503))
        bench.fake.rejectRequests(containing: "tok-bob")
        bench.write([JourneysTests.alice, JourneysTests.bob])
        let commands = [["validate"], ["validate", "--format", "json"],
                        ["preview", "--format", "http"], ["preview", "--format", "curl"], ["preview", "--format", "json"],
                        ["run", "--once", "--log-level", "debug"], ["run", "--once", "--log-level", "debug", "--log-format", "json"],
                        ["status"], ["status", "--format", "json"], ["status", "--format", "prometheus"]]
        var outputs: [String: ProcessOutput] = [:]
        for arguments in commands {
            let output = try bench.pushreporter(arguments)
            outputs[arguments.joined(separator: " ")] = output
            #expect(!output.stdout.contains(Self.secret), "\(arguments): \(output.stdout)")
            #expect(!output.stderr.contains(Self.secret), "\(arguments): \(output.stderr)")
        }
        // What they showed instead.
        #expect(outputs["preview --format http"]?.stdout.contains(#""ApiToken":"********""#) == true)
        #expect(outputs["preview --format curl"]?.stdout.contains(#""ApiToken":"'"$APITOKEN"'""#) == true)
        #expect(outputs["preview --format json"]?.stdout.contains(#"\"ApiToken\":\"********\""#) == true)
        #expect(outputs["run --once --log-level debug"]?.stderr.contains("failed: HTTP 503 (attempt 1)") == true)
        #expect(outputs["run --once --log-level debug"]?.stderr.contains("bob: journeys registration rejected by") == true)
        #expect(outputs["run --once --log-level debug --log-format json"]?.stderr.contains("bob: journeys registration rejected by") == true)
        #expect(outputs["status --format json"]?.stdout.contains(#""state": "rejected""#) == true)

        // Only the receiver gets it, and --show-secrets.
        #expect(bench.requests(containing: #""ApiToken":"\#(Self.secret)""#).count >= 4)
        let revealed = try bench.pushreporter(["preview", "--show-secrets"])
        #expect(revealed.stdout.contains(#""ApiToken":"\#(Self.secret)""#))
    }

    @Test func aServerAnswerThatQuotesTheApiTokenDoesNotShowIt() throws {
        let bench = try JourneysBench(FakeJourneysServer(apiToken: Self.secret))
        bench.fake.answerNext(1, of: .register, with: .status(400, contentType: "text/plain",
                                                              body: #"bad registration {"ApiToken":"\#(Self.secret)"}"#))
        bench.write([JourneysTests.alice])
        let result = try bench.runOnce(["--log-level", "debug"])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("alice: journeys registration rejected by"), "\(result.stderr)")
        #expect(!result.stderr.contains(Self.secret), "\(result.stderr)")
        #expect(!result.stdout.contains(Self.secret), "\(result.stdout)")
        let status = try bench.pushreporter(["status", "--format", "json"])
        #expect(status.stdout.contains(#""state": "rejected""#))
        #expect(!status.stdout.contains(Self.secret), "\(status.stdout)")
    }
}
