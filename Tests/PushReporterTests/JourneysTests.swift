import Foundation
import PushTestSupport
import Synchronization
import Testing
import PushTestThreads

/// The real binary against a fake Customer Insights – Journeys API on 127.0.0.1 (SPEC §9.0,
/// §9.2): what the fake received, and what a user sees (exit status, summary, log, `status`).
@Suite(.serialized, .blockingThreads) struct JourneysTests {
    static let alice = JourneysAccount("alice", token: "tok-alice", platform: "ios")
    static let bob = JourneysAccount("bob", token: "tok-bob", platform: "android")
    static let carol = JourneysAccount("carol", token: "tok-carol", platform: "ios")

    /// Accounts `a1`…`aN` with tokens `tok-a1`…, alternately iOS and Android.
    static func accounts(_ count: Int, from first: Int = 1) -> [JourneysAccount] {
        (first..<first + count).map { JourneysAccount("a\($0)", token: "tok-a\($0)", platform: $0 % 2 == 1 ? "ios" : "android") }
    }

    // MARK: Registration

    @Test func runOnceRegistersEveryAccountInOneBatchThenAsksItsStatus() throws {
        let bench = try JourneysBench()
        let accounts = [Self.alice, Self.bob, Self.carol]
        bench.write(accounts)
        let result = try bench.runOnce()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("Delivered 3 of 3 reports in "), "\(result.stdout)")

        #expect(bench.endpoints() == ["devices/batch", "devices/status/"])
        let batch = try #require(bench.fake.requests.first)
        #expect(batch.bodyText == "[" + accounts.map { bench.registration($0) }.joined(separator: ",") + "]")
        #expect(batch.header("Content-Type") == "application/json")
        #expect(batch.header("x-ms-track-registration") == "true")
        let registrations = bench.fake.registrations
        #expect(registrations.map(\.deviceToken) == ["tok-alice", "tok-bob", "tok-carol"])
        #expect(registrations.map(\.platform) == [.ios, .android, .ios])
        #expect(registrations.map(\.keyOrder.last) == ["ApnsDeviceToken", "FcmDeviceToken", "ApnsDeviceToken"])
        #expect(registrations.allSatisfy { $0.batchSize == 3 })
        // The ids the 202 answered are the ones asked about.
        let query = try #require(bench.fake.statusQueries.first)
        #expect(Set(query.requestIds) == Set(registrations.compactMap(\.requestId)))
        #expect(query.requestIds.count == 3)

        let status = try bench.status()
        #expect(status.mapValues(\.state) == ["alice/journeys": "delivered", "bob/journeys": "delivered", "carol/journeys": "delivered"])
        #expect(status.values.allSatisfy { $0.lastSuccess != nil && $0.attempts == 0 })
    }

    @Test func batchSizeOneUsesTheSingleEndpointPerAccount() throws {
        let bench = try JourneysBench()
        let accounts = [Self.alice, Self.bob, Self.carol]
        bench.write(accounts, services: [JourneysService(settings: ["batchSize: 1"])])
        let result = try bench.runOnce()
        #expect(result.status == 0, "\(result.stderr)")

        #expect(bench.endpoints() == ["devices", "devices", "devices", "devices/status/"])
        let bodies = bench.fake.requests.prefix(3).map(\.bodyText)
        #expect(bodies.sorted() == accounts.map { bench.registration($0) }.sorted())
        #expect(bench.fake.registrations.allSatisfy { $0.batchSize == nil && $0.requestId != nil })
        #expect(Set(bench.fake.statusQueries.flatMap(\.requestIds)) == Set(bench.fake.registrations.compactMap(\.requestId)))
        #expect(try bench.states().values.allSatisfy { $0 == "delivered" })
    }

    @Test func withoutTrackRegistrationA202IsDeliveredAndNoStatusIsAsked() throws {
        let bench = try JourneysBench()
        bench.write([Self.alice, Self.bob], services: [JourneysService(settings: ["trackRegistration: false"], statusInterval: nil)])
        let result = try bench.runOnce()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("Delivered 2 of 2 reports in "), "\(result.stdout)")
        #expect(!result.stdout.contains("accepted"), "\(result.stdout)")

        #expect(bench.endpoints() == ["devices/batch"])
        #expect(bench.fake.requests.first?.header("x-ms-track-registration") == nil)
        #expect(bench.fake.registrations.map(\.requestId) == [nil, nil])
        #expect(try bench.states() == ["alice/journeys": "delivered", "bob/journeys": "delivered"])
    }

    // MARK: Refusals

    @Test func aBatchRefusedFor400IsBisectedAndOnlyTheBadTokenIsRejected() throws {
        let bench = try JourneysBench()
        let accounts = Self.accounts(4)
        bench.fake.rejectRequests(containing: "tok-a3")
        bench.write(accounts)
        let result = try bench.runOnce()
        #expect(result.status == 1, "\(result.stderr)")

        // 4 → 2 + 2 → the refused half → 1 + 1, then the accepted ones' status.
        #expect(bench.endpoints() == ["devices/batch", "devices/batch", "devices/batch", "devices", "devices", "devices/status/"])
        #expect(bench.fake.requests.map { $0.bodyText.occurrences(of: "\"UserId\"") } == [4, 2, 2, 1, 1, 0])
        #expect(bench.registeredTokens == ["tok-a1", "tok-a2", "tok-a4"])
        let reason = "HTTP 400: device token 'tok-a3' is refused (Journeys refuses this registration)"
        let host = "127.0.0.1:\(bench.fake.port)"
        #expect(result.stdout.contains("; 1 refused:\n  a3: journeys registration to \(host): \(reason) (1 attempt, rejected)"),
                "\(result.stdout)")
        #expect(result.stderr.occurrences(of: "a3: journeys registration rejected by \(host): \(reason); it is not sent again until its values change") == 1,
                "\(result.stderr)")
        let status = try bench.status()
        #expect(status.mapValues(\.state) == ["a1/journeys": "delivered", "a2/journeys": "delivered",
                                              "a3/journeys": "rejected", "a4/journeys": "delivered"])
        #expect(status["a3/journeys"]?.detail == reason)
        #expect(status["a3/journeys"]?.attempts == 1, "the attempt that was refused")

        // The long-running agent: a restart sends it again (SPEC §9.0), a reload that leaves it
        // unchanged does not.
        let agent = try bench.startAgent()
        #expect(agent.waitForStderr("a3: journeys registration rejected by"), "\(agent.stderr)")
        // Not "all 4 accounts are reported": one is rejected. Said once nothing is left to send,
        // or, when the others still awaited confirmation then, once they are confirmed.
        #expect(agent.waitForStderr("(4 accounts: 3 reported, 0 retrying, 1 rejected)"), "\(agent.stderr)")
        #expect(!agent.stderr.contains("all 4 accounts are reported"), "\(agent.stderr)")
        let sentA3 = bench.requests(containing: "tok-a3").count
        #expect(sentA3 == 6, "in 4, 2 and 1 at each start")
        let registered = bench.fake.registrations.count
        bench.reload(agent, to: accounts + Self.accounts(1, from: 5), expecting: "1 new, 0 changed, 4 unchanged, 0 removed")
        agent.waitForConfirmation(of: "a5")
        agent.terminate()
        #expect(bench.registeredTokens.dropFirst(registered) == ["tok-a5"])
        #expect(bench.requests(containing: "tok-a3").count == sentA3, "the reload sent the rejected registration again")
        #expect(agent.stderr.occurrences(of: "a3: journeys registration rejected by") == 1, "\(agent.stderr)")
        #expect(bench.fake.registrations(forToken: "tok-a3").isEmpty)
        #expect(try bench.states()["a3/journeys"] == "rejected")
    }

    @Test func a429WithRetryAfterPausesTheWholeServiceThenDelivers() throws {
        let arrivals = Mutex<[(endpoint: String, at: ContinuousClock.Instant)]>([])
        let fake = try FakeJourneysServer { request, _, reply in
            arrivals.withLock { $0.append((JourneysBench.endpoint(request), .now)) }
            return reply ?? .status(404)
        }
        fake.answerNext(1, of: .register, with: .status(429, headers: [("Retry-After", "1")]))
        let bench = try JourneysBench(fake)
        // One request at a time, one account a request: the others are due while the service is paused.
        bench.write(Self.accounts(3), services: [JourneysService(settings: ["batchSize: 1"])], agent: ["perHostConcurrency: 1"])
        let result = try bench.runOnce()
        #expect(result.status == 0, "\(result.stderr)")

        let seen = arrivals.withLock { $0 }
        #expect(seen.map(\.endpoint) == ["devices", "devices", "devices", "devices", "devices/status/"])
        if let first = seen.first {
            for later in seen.dropFirst() {
                #expect(first.at.duration(to: later.at) >= .milliseconds(950), "sent before Retry-After was over")
            }
        }
        #expect(Set(bench.registeredTokens) == ["tok-a1", "tok-a2", "tok-a3"])
        #expect(bench.registeredTokens.count == 3)
        #expect(result.stderr.contains("failed: HTTP 429 (attempt 1); next attempt in 1s"), "\(result.stderr)")
        #expect(try bench.states().values.allSatisfy { $0 == "delivered" })
    }

    @Test func a401OnRegistrationStopsTheServiceWhileOtherServicesAndAcrobitsGoOn() throws {
        let bench = try JourneysBench()
        let acrobits = try LoopbackHTTPServer { _, _ in .status(204) }
        let report = "pushTokenReporterUrl: \(acrobits.baseURL)/report/%account[id]%"
        bench.write([JourneysAccount("a1", token: "tok-a1", services: ["journeys", "journeys-ok"], extra: [report]),
                     JourneysAccount("a2", token: "tok-a2", extra: [report])],
                    services: [JourneysService(apiToken: "wrong-token"), JourneysService("journeys-ok")])
        let result = try bench.runOnce()
        #expect(result.status == 1, "\(result.stderr)")

        #expect(bench.requests(containing: "wrong-token").count == 1, "\(bench.endpoints())")
        #expect(bench.registeredTokens == ["tok-a1"])
        #expect(Set(acrobits.requests.map(\.target)) == ["/report/a1", "/report/a2"])
        #expect(result.stderr.occurrences(of: "refused the service's credentials") == 1, "\(result.stderr)")
        #expect(result.stderr.contains("error: journeys: 127.0.0.1:\(bench.fake.port) refused the service's credentials (HTTP 401: Journeys refused the API token); nothing of this service is sent until a reload or restart"),
                "\(result.stderr)")
        #expect(result.stdout.contains("  a1: journeys registration to 127.0.0.1:\(bench.fake.port): HTTP 401: Journeys refused the API token ("),
                "\(result.stdout)")
        #expect(result.stdout.hasPrefix("Delivered 3 of 5 reports; 2 refused:"), "\(result.stdout)")
        let status = try bench.status()
        #expect(status.mapValues(\.state) == ["a1/journeys": "stopped", "a2/journeys": "stopped", "a1/journeys-ok": "delivered",
                                              "a1/acrobits": "delivered", "a2/acrobits": "delivered"])
        #expect(status["a2/journeys"]?.detail == "HTTP 401: Journeys refused the API token")
    }

    // MARK: Callbacks

    @Test func callbackUrlAndHeadersAreSentWithEachRegistration() throws {
        let bench = try JourneysBench()
        bench.write([Self.alice, Self.bob], services: [JourneysService(settings: [
            "callbackUrl: https://127.0.0.1:9443/journeys/journeys/%account[id]%",
            "callbackHeaders: {X-Z: z, X-A: b}",
        ])])
        let result = try bench.runOnce()
        #expect(result.status == 0, "\(result.stderr)")
        let registrations = bench.fake.registrations.sorted { $0.userId < $1.userId }
        #expect(registrations.map(\.callbackURL) == ["https://127.0.0.1:9443/journeys/journeys/alice",
                                                     "https://127.0.0.1:9443/journeys/journeys/bob"])
        #expect(registrations.map(\.statusCallbackURL) == registrations.map(\.callbackURL))
        #expect(registrations.map(\.callbackHeaders) == [#"{"X-Z":"z","X-A":"b"}"#, #"{"X-Z":"z","X-A":"b"}"#])
        #expect(bench.fake.requests.filter { JourneysBench.endpoint($0).hasPrefix("devices") && $0.bodyText.contains("UserId") }
            .allSatisfy { $0.header("x-ms-track-registration") == "true" })
        #expect(try bench.states().values.allSatisfy { $0 == "delivered" })
    }
}
