import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// What the agent does with each answer of the Journeys status endpoint (SPEC §9.2): delivered,
/// registered again, rejected, stopped, unconfirmed; and a status query in flight at SIGTERM.
@Suite(.serialized, .blockingThreads) struct JourneysStatusTests {
    @Test func statusAnswersDeliverOrRejectEachRegistration() throws {
        let bench = try JourneysBench()
        let names = ["dup", "long", "dry", "odd", "fine"]
        bench.fake.setStatus(.failed(.duplicateExists), forToken: "tok-dup")
        bench.fake.setStatus(.failed(.deviceTokenTooLong), forToken: "tok-long")
        bench.fake.setStatus(.failed(.dryRunSendingFailed), forToken: "tok-dry")
        bench.fake.setStatus(.failed(.init(" SomethingNew ")), forToken: "tok-odd")
        bench.write(names.map { JourneysAccount($0, token: "tok-\($0)") })
        let result = try bench.runOnce()
        #expect(result.status == 1, "\(result.stderr)")
        #expect(bench.endpoints() == ["devices/batch", "devices/status/"])

        let status = try bench.status()
        #expect(status.mapValues(\.state) == ["dup/journeys": "delivered", "long/journeys": "rejected", "dry/journeys": "rejected",
                                              "odd/journeys": "rejected", "fine/journeys": "delivered"])
        let reasons = ["long": "Journeys: the device token is too long (DeviceTokenTooLong)",
                       "dry": "Journeys could not send a test notification to the device (DryRunSendingFailed)",
                       "odd": "Journeys failed the registration: 'SomethingNew'"]
        let host = "127.0.0.1:\(bench.fake.port)"
        for (name, reason) in reasons {
            #expect(status["\(name)/journeys"]?.detail == reason)
            #expect(result.stderr.occurrences(of: "\(name): journeys registration rejected by \(host): \(reason); it is not sent again until its values change") == 1,
                    "\(result.stderr)")
            #expect(result.stdout.contains("  \(name): journeys registration to \(host): \(reason) ("), "\(result.stdout)")
        }
        #expect(result.stdout.hasPrefix("Delivered 2 of 5 reports; 3 refused:"), "\(result.stdout)")
    }

    @Test func failedToStoreDeviceIsRegisteredAgain() throws {
        let bench = try JourneysBench()
        bench.fake.answerNext(1, of: .status, with: .status(200, contentType: "application/json",
                                                            body: #"[{"Status":"Failed","FailureReason":" FailedToStoreDevice "}]"#))
        bench.write([JourneysTests.alice])
        let result = try bench.runOnce()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(bench.endpoints() == ["devices", "devices/status/", "devices", "devices/status/"])
        #expect(bench.registeredTokens == ["tok-alice", "tok-alice"])
        #expect(bench.fake.requests[2].bodyText == bench.registration(JourneysTests.alice))
        #expect(result.stderr.contains("alice/journeys: Journeys failed to store the device (FailedToStoreDevice); registering again"),
                "\(result.stderr)")
        #expect(try bench.states() == ["alice/journeys": "delivered"])
    }

    @Test func apiTokenNotValidStopsItsServiceOnly() throws {
        let bench = try JourneysBench()
        // c1 is asked about every second for as long as the agent runs: the clock of this test.
        bench.fake.setStatus(.pending, forToken: "tok-c1")
        bench.fake.setStatus(.failed(.apiTokenNotValid), forToken: "tok-b1")
        bench.fake.setStatus(.pending, forToken: "tok-b2")
        bench.write([JourneysAccount("b1", token: "tok-b1", services: ["journeys-b"]),
                     JourneysAccount("b2", token: "tok-b2", services: ["journeys-b"]),
                     JourneysAccount("c1", token: "tok-c1")],
                    services: [JourneysService(), JourneysService("journeys-b")])
        let agent = try bench.startAgent()
        let stop = "journeys-b: 127.0.0.1:\(bench.fake.port) refused the service's credentials (Journeys: the API token is not valid (ApiTokenNotValid)); nothing of this service is sent until a reload or restart"
        #expect(agent.waitForStderr(stop), "\(agent.stderr)")
        let requestsAtStop = bench.fake.requests.count
        let queriesAtStop = bench.fake.statusQueries.count
        // Two more rounds of polling: journeys-b would have been asked again by then.
        #expect(bench.fake.waitForStatusQueries(queriesAtStop + 2, timeout: Polling.generous))
        agent.terminate()
        let status = try bench.status()

        let serviceB = Set(["tok-b1", "tok-b2"].compactMap { bench.fake.registrations(forToken: $0).first?.requestId })
        #expect(serviceB.count == 2)
        #expect(bench.fake.statusQueries.count { !serviceB.isDisjoint(with: $0.requestIds) } == 1,
                "journeys-b was asked about again after it stopped")
        #expect(!bench.fake.requests.dropFirst(requestsAtStop).contains { request in
            serviceB.contains { request.bodyText.contains($0) } || request.bodyText.contains("tok-b")
        })
        #expect(agent.stderr.occurrences(of: "refused the service's credentials") == 1, "\(agent.stderr)")
        #expect(status["b1/journeys-b"]?.state == "stopped", "\(status)")
        #expect(status["b1/journeys-b"]?.detail == "Journeys: the API token is not valid (ApiTokenNotValid)")
        #expect(status["b2/journeys-b"]?.state != "delivered")
        #expect(status["c1/journeys"]?.state == "accepted")
    }

    @Test func aRegistrationStillPendingAfterStatusTimeoutIsUnconfirmed() throws {
        let bench = try JourneysBench()
        bench.fake.defaultStatus = .pending
        bench.write([JourneysTests.alice], services: [JourneysService(settings: ["statusTimeout: 4s"])])
        let agent = try bench.startAgent()
        let warning = "alice/journeys: accepted, but not confirmed within 4s; not sent again until it changes"
        #expect(agent.waitForStderr(warning), "\(agent.stderr)")
        #expect(agent.stderr.contains("warning: " + warning), "\(agent.stderr)")
        let queries = bench.fake.statusQueries.count
        agent.terminate()
        let status = try bench.status()
        #expect(queries >= 1)
        #expect(bench.fake.statusQueries.count == queries, "asked again once unconfirmed")
        #expect(bench.registeredTokens == ["tok-alice"], "registered again once unconfirmed")
        #expect(status["alice/journeys"]?.state == "unconfirmed")
        #expect(status["alice/journeys"]?.detail == "accepted, but not confirmed within 4s; not sent again until it changes")
        let text = try bench.pushreporter(["status"])
        #expect(text.stdout.hasPrefix("1 account: 0 reported, 0 retrying, 1 unconfirmed\n"), "\(text.stdout)")
    }

    @Test func sigtermGivesAStatusQueryInFlightItsGracePeriod() throws {
        // Journeys takes 2 s to answer a status query: the agent is told to stop meanwhile.
        let fake = try FakeJourneysServer { request, _, reply in
            if JourneysBench.endpoint(request) == "devices/status/" { usleep(2_000_000) }
            return reply ?? .status(404)
        }
        let bench = try JourneysBench(fake)
        bench.write([JourneysTests.alice])
        let agent = try bench.startAgent()
        #expect(Polling.until { bench.endpoints().contains("devices/status/") }, "\(agent.stderr)")
        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0, "\(agent.stderr)")
        // SPEC §8: in-flight requests get a grace period (here 10 s), so the answer is read.
        #expect(fake.statusQueries.count == 1)
        #expect(agent.stderr.contains("alice: journeys registration delivered to "), "\(agent.stderr)")
        #expect(try bench.states() == ["alice/journeys": "delivered"])
    }
}
