import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// What the agent sends when a Journeys subscription leaves or changes (SPEC §9.0, §9.2): the
/// cleanup of an account removed by a reload, of a dropped service, of a replaced device token,
/// and of `pushreporter remove`; and a reload that adds, changes and removes at once.
@Suite(.serialized, .blockingThreads) struct JourneysCleanupTests {
    // MARK: Cleanups

    @Test func accountsThatLeaveAreCleanedUpAloneOrSeveralInABatch() throws {
        let bench = try JourneysBench()
        let accounts = JourneysTests.accounts(4)
        bench.write(accounts)
        let agent = try bench.startAgent()
        for account in accounts { agent.waitForConfirmation(of: account.id) }

        bench.reload(agent, to: [accounts[0], accounts[2], accounts[3]], expecting: "0 new, 0 changed, 3 unchanged, 1 removed")
        agent.waitForForgotten("a2/journeys")
        let single = try #require(bench.fake.cleanups.first)
        #expect(single.keyOrder == ["MobileAppId", "ApiToken", "UserId", "DeviceToken"])
        #expect(single.batchSize == nil)
        #expect(bench.endpoints().last == "devices/cleanup")
        #expect(bench.fake.requests.last?.bodyText == bench.cleanup(accounts[1], token: "tok-a2"))

        bench.reload(agent, to: [accounts[3]], expecting: "0 new, 0 changed, 1 unchanged, 2 removed")
        agent.waitForForgotten("a1/journeys")
        agent.waitForForgotten("a3/journeys")
        agent.terminate()
        #expect(bench.endpoints().filter { $0.hasPrefix("devices/cleanup") } == ["devices/cleanup", "devices/cleanup/batch"])
        let objects = try #require(bench.lastBatch("devices/cleanup/batch"))
        #expect(objects.count == 2)
        #expect(Set(objects) == [bench.cleanup(accounts[0], token: "tok-a1"), bench.cleanup(accounts[2], token: "tok-a3")])
        #expect(bench.fake.cleanups.dropFirst().allSatisfy { $0.batchSize == 2 })
        #expect(bench.registeredTokens.count == 4, "nothing registered again")
        #expect(try bench.states() == ["a4/journeys": "delivered"])
    }

    @Test func accountsRemovedWhileTheAgentWasDownAreCleanedUpInOneBatchOnTheNextStart() throws {
        let bench = try JourneysBench()
        let accounts = JourneysTests.accounts(3)
        bench.write(accounts)
        #expect(try bench.runOnce().status == 0)
        let before = bench.fake.requests.count

        bench.write([accounts[2]])
        let result = try bench.runOnce()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("started: reporting 1 account, sending 2 owed removals"), "\(result.stderr)")
        #expect(result.stdout.hasPrefix("Delivered 3 of 3 reports in "), "\(result.stdout)")
        #expect(bench.endpoints(from: before).sorted() == ["devices", "devices/cleanup/batch", "devices/status/"])
        let objects = try #require(bench.lastBatch("devices/cleanup/batch"))
        #expect(objects.count == 2)
        #expect(Set(objects) == [bench.cleanup(accounts[0], token: "tok-a1"), bench.cleanup(accounts[1], token: "tok-a2")])
        #expect(try bench.states() == ["a3/journeys": "delivered"])
    }

    @Test func aServiceDroppedFromAnAccountIsCleanedUp() throws {
        let bench = try JourneysBench()
        let both = JourneysAccount("a1", token: "tok-a1", services: ["journeys", "journeys2"], userIds: ["journeys2": "other-a1"])
        let services = [JourneysService(), JourneysService("journeys2")]
        bench.write([both], services: services)
        let agent = try bench.startAgent()
        agent.waitForConfirmation(of: "a1")
        agent.waitForConfirmation(of: "a1", service: "journeys2")

        var one = both
        one.services = ["journeys"]
        bench.reload(agent, to: [one], services: services, expecting: "0 new, 0 changed, 1 unchanged, 1 removed")
        agent.waitForForgotten("a1/journeys2")
        agent.terminate()
        #expect(bench.lastBatch("devices/cleanup") == [bench.cleanup(both, token: "tok-a1", service: "journeys2")])
        #expect(bench.fake.cleanups.map(\.userId) == ["other-a1"])
        #expect(bench.registeredTokens.count == 2, "nothing registered again")
        #expect(try bench.states() == ["a1/journeys": "delivered"])
    }

    @Test func aChangedDeviceTokenIsRegisteredThenTheOldOneCleanedUp() throws {
        let bench = try JourneysBench()
        bench.write([JourneysAccount("a1", token: "tok-old")])
        let agent = try bench.startAgent()
        agent.waitForConfirmation(of: "a1")

        let changed = JourneysAccount("a1", token: "tok-new")
        bench.reload(agent, to: [changed], expecting: "0 new, 1 changed, 0 unchanged, 0 removed")
        agent.waitForConfirmation(of: "a1", count: 2)
        #expect(agent.waitForStderr("a1: journeys cleanup delivered to "), "\(agent.stderr)")
        agent.terminate()
        #expect(bench.registeredTokens == ["tok-old", "tok-new"])
        let cleanup = try #require(bench.fake.cleanups.first)
        #expect(cleanup.deviceToken == "tok-old")
        #expect(bench.fake.requests[cleanup.requestIndex].bodyText == bench.cleanup(changed, token: "tok-old"))
        #expect(bench.fake.registrations[1].requestIndex < cleanup.requestIndex, "the old token went before the new one was registered")
        #expect(try bench.states() == ["a1/journeys": "delivered"])

        // The old token's cleanup was recorded as done: the next start does not send it again.
        let again = try bench.runOnce()
        #expect(again.status == 0, "\(again.stderr)")
        #expect(bench.cleanedTokens == ["tok-old"])
        #expect(bench.registeredTokens == ["tok-old", "tok-new", "tok-new"])
    }

    @Test func removeSendsTheAccountsCleanup() throws {
        let bench = try JourneysBench()
        let accounts = JourneysTests.accounts(2)
        bench.write(accounts)
        #expect(try bench.runOnce().status == 0)
        bench.write([accounts[1]])

        let removed = try bench.pushreporter(["remove", "a1"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout == "Removal of a1 delivered to 127.0.0.1:\(bench.fake.port); the account is forgotten.\n")
        #expect(bench.endpoints().last == "devices/cleanup")
        #expect(bench.lastBatch("devices/cleanup") == [bench.cleanup(accounts[0], token: "tok-a1")])
        #expect(bench.cleanedTokens == ["tok-a1"])
        #expect(try bench.states() == ["a2/journeys": "delivered"])
    }

    // MARK: Reload

    @Test func aReloadThatAddsChangesAndRemovesAtOnce() throws {
        let bench = try JourneysBench()
        let kept = JourneysAccount("a1", token: "tok-a1")
        let changedBefore = JourneysAccount("a2", token: "tok-a2", platform: "android")
        let leaving = JourneysAccount("a3", token: "tok-a3")
        bench.write([kept, changedBefore, leaving])
        let agent = try bench.startAgent()
        for account in [kept, changedBefore, leaving] { agent.waitForConfirmation(of: account.id) }

        let changedAfter = JourneysAccount("a2", token: "tok-a2-new", platform: "android")
        let added = JourneysAccount("a4", token: "tok-a4", platform: "android")
        bench.reload(agent, to: [kept, changedAfter, added], expecting: "1 new, 1 changed, 1 unchanged, 1 removed")
        agent.waitForConfirmation(of: "a2", count: 2)
        agent.waitForConfirmation(of: "a4")
        agent.waitForForgotten("a3/journeys")
        #expect(agent.waitForStderr("a2: journeys cleanup delivered to "), "\(agent.stderr)")
        agent.terminate()

        #expect(Set(bench.registeredTokens.dropFirst(3)) == ["tok-a2-new", "tok-a4"])
        // Due at once after the reload: one batch (docs/journeys.md: "on start, after a reload").
        #expect(bench.fake.registrations.dropFirst(3).map(\.batchSize) == [2, 2], "\(bench.endpoints())")
        #expect(bench.registeredTokens.count == 5, "the unchanged account was registered again")
        #expect(Set(bench.cleanedTokens) == ["tok-a3", "tok-a2"])
        let bodies = Set(bench.fake.cleanups.map { bench.fake.requests[$0.requestIndex].bodyText })
        #expect(bodies.contains { $0.contains(bench.cleanup(leaving, token: "tok-a3")) })
        #expect(bodies.contains { $0.contains(bench.cleanup(changedBefore, token: "tok-a2")) })
        #expect(try bench.states() == ["a1/journeys": "delivered", "a2/journeys": "delivered", "a4/journeys": "delivered"])
    }
}
