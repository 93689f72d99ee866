import Foundation
import PushState
import PushTestSupport
import Testing
import PushTestThreads

/// The leases of SPEC §11 in the database itself: several stores on one real PostgreSQL, each an
/// agent, driven statement by statement.
@Suite(.blockingThreads) struct PostgresLeaseTests {
    /// Long enough that no agent expires between two statements, however slow the machine.
    static let timeout = Duration.seconds(30)
    /// Where expiry is what a test is about: a round that finds a lease older than this (slept
    /// past) frees it.
    static let expiry = Duration.seconds(1)

    static func keys(_ count: Int) -> [SubscriptionKey] {
        (0..<count).map { SubscriptionKey(account: String(format: "a%03d", $0), service: "acrobits") }
    }

    /// A new database with `count` subscriptions published, and a store joined to it per name.
    static func group(_ count: Int, agents names: [String]) throws -> (uri: String, stores: [PostgresStateStore]) {
        let uri = try TemporaryPostgres.shared().makeDatabase()
        var stores: [PostgresStateStore] = []
        for name in names {
            let store = try PostgresStateStore(uri: uri, agent: name)
            _ = try store.join(leaseTimeout: timeout)
            stores.append(store)
        }
        try stores.first?.publish(keys(count))
        return (uri, stores)
    }

    static func claimed(_ round: LeaseRound) -> Set<SubscriptionKey> {
        Set(round.claimed.map(\.record.key))
    }

    @Test func agentsClaimTheirSharesAndNeverTheSameSubscription() throws {
        let (_, stores) = try Self.group(100, agents: ["h:1", "h:2"])
        let first = try stores[0].renewAndClaim(leaseTimeout: Self.timeout, maxClaim: 1000)
        let second = try stores[1].renewAndClaim(leaseTimeout: Self.timeout, maxClaim: 1000)
        #expect(first.agents == 2 && first.share == 50)
        #expect(first.claimed.count == 50 && second.claimed.count == 50)
        #expect(Self.claimed(first).isDisjoint(with: Self.claimed(second)))
        #expect(try stores[0].holders().count == 100)
        // Nothing more for either: each holds its share.
        #expect(try stores[0].renewAndClaim(leaseTimeout: Self.timeout, maxClaim: 1000).claimed.isEmpty)
        #expect(try stores[0].renewAndClaim(leaseTimeout: Self.timeout, maxClaim: 10).wanted == 0)
    }

    @Test func anAgentFoundExpiredLosesWhatItHeldAndItsLateWritesAreRefused() throws {
        let (uri, stores) = try Self.group(10, agents: ["h:1"])
        let dead = stores[0]
        #expect(try dead.renewAndClaim(leaseTimeout: Self.timeout, maxClaim: 100).claimed.count == 10)
        let survivor = try PostgresStateStore(uri: uri, agent: "h:2")
        #expect(try survivor.join(leaseTimeout: Self.timeout).agents == 2)
        #expect(try survivor.renewAndClaim(leaseTimeout: Self.timeout, maxClaim: 100).claimed.isEmpty, "all are held")
        // The first stops renewing; once its lease is older than the timeout, the next round
        // of the other frees and takes its subscriptions.
        Thread.sleep(forTimeInterval: 1.5)
        let round = try survivor.renewAndClaim(leaseTimeout: Self.expiry, maxClaim: 100)
        #expect(!round.expelled && round.agents == 1 && round.claimed.count == 10)
        #expect(Set(try survivor.holders().values) == ["h:2"])
        // The first comes back: it learns it was expelled, and what it writes is not kept.
        var late = SubscriptionRecord(key: Self.keys(1)[0])
        late.state = .delivered
        late.lastOutcome = "late"
        try dead.save([late], deleting: [])
        #expect(try survivor.records().first { $0.key == late.key }?.lastOutcome == nil)
        let back = try dead.renewAndClaim(leaseTimeout: Self.timeout, maxClaim: 100)
        #expect(back.expelled && back.agents == 2)
        #expect(back.claimed.isEmpty, "the other holds its share and more")
    }

    @Test func anAgentThatRenewsInTimeKeepsItsSubscriptions() throws {
        let (uri, stores) = try Self.group(10, agents: ["h:1"])
        #expect(try stores[0].renewAndClaim(leaseTimeout: .seconds(30), maxClaim: 100).claimed.count == 10)
        let other = try PostgresStateStore(uri: uri, agent: "h:2")
        _ = try other.join(leaseTimeout: .seconds(30))
        Thread.sleep(forTimeInterval: 1.2)
        #expect(try other.renewAndClaim(leaseTimeout: .seconds(30), maxClaim: 100).claimed.isEmpty)
        #expect(try !stores[0].renewAndClaim(leaseTimeout: .seconds(30), maxClaim: 100).expelled)
        #expect(Set(try other.holders().values) == ["h:1"])
    }

    @Test func writesGoOnlyToRowsTheAgentHoldsOrNobodyHolds() throws {
        let (_, stores) = try Self.group(2, agents: ["h:1", "h:2"])
        let mine = try stores[0].renewAndClaim(leaseTimeout: .seconds(30), maxClaim: 1)
        let held = try #require(mine.claimed.first?.record.key)
        let free = try #require(Self.keys(2).first { $0 != held })
        func record(_ key: SubscriptionKey, _ outcome: String) -> SubscriptionRecord {
            var record = SubscriptionRecord(key: key)
            record.lastOutcome = outcome
            return record
        }
        try stores[1].save([record(held, "not mine"), record(free, "nobody's")], deleting: [held])
        let records = Dictionary(uniqueKeysWithValues: try stores[0].records().map { ($0.key, $0) })
        #expect(records[held]?.lastOutcome == nil, "held by the other: neither written nor deleted")
        #expect(records[free]?.lastOutcome == "nobody's")
        try stores[0].save([record(held, "mine")], deleting: [])
        #expect(try stores[0].records().first { $0.key == held }?.lastOutcome == "mine")
    }

    @Test func aNewGroupDeliversAgainWhatAnEarlierGroupWrote() throws {
        let (uri, stores) = try Self.group(3, agents: ["h:1"])
        _ = try stores[0].renewAndClaim(leaseTimeout: .seconds(30), maxClaim: 100)
        try stores[0].save(Self.keys(3).map { SubscriptionRecord(key: $0, state: .delivered) }, deleting: [])
        // A second agent joins the running group: what the group wrote counts.
        let joining = try PostgresStateStore(uri: uri, agent: "h:2")
        #expect(try !joining.join(leaseTimeout: .seconds(30)).startedGroup)
        try stores[0].release(Self.keys(3))
        let taken = try joining.renewAndClaim(leaseTimeout: .seconds(30), maxClaim: 100).claimed
        #expect(taken.count == 2 && taken.allSatisfy(\.writtenThisGroup), "its share, as the group wrote it")
        // Every agent stops; the next to start starts a new group, which delivers everything again.
        try stores[0].release(nil)
        try joining.release(nil)
        let next = try PostgresStateStore(uri: uri, agent: "h:3")
        let membership = try next.join(leaseTimeout: .seconds(30))
        #expect(membership.startedGroup && membership.agents == 1)
        let again = try next.renewAndClaim(leaseTimeout: .seconds(30), maxClaim: 100).claimed
        #expect(again.count == 3 && again.allSatisfy { !$0.writtenThisGroup })
    }

    @Test func theLastConfigurationPublishedSaysWhatIsLeaving() throws {
        let (_, stores) = try Self.group(0, agents: ["h:1"])
        let (a, b, c) = (SubscriptionKey(account: "a", service: "x"), SubscriptionKey(account: "b", service: "x"),
                         SubscriptionKey(account: "c", service: "x"))
        try stores[0].publish([a, b])
        try stores[0].publish([b, c])
        let claimed = try stores[0].renewAndClaim(leaseTimeout: .seconds(30), maxClaim: 100).claimed
        #expect(Dictionary(uniqueKeysWithValues: claimed.map { ($0.record.key, $0.leaving) }) == [a: true, b: false, c: false])
        // Back in a later configuration: staying again.
        try stores[0].release(nil)
        _ = try stores[0].join(leaseTimeout: .seconds(30))
        try stores[0].publish([a, b, c])
        let again = try stores[0].renewAndClaim(leaseTimeout: .seconds(30), maxClaim: 100).claimed
        #expect(again.count == 3 && again.allSatisfy { !$0.leaving })
    }

    @Test func removeTakesOnlyWhatNobodyHolds() throws {
        let (uri, stores) = try Self.group(2, agents: ["h:1"])
        let held = try #require(try stores[0].renewAndClaim(leaseTimeout: .seconds(30), maxClaim: 1).claimed.first?.record.key)
        let free = try #require(Self.keys(2).first { $0 != held })
        let remover = try PostgresStateStore(uri: uri, agent: "h:9")
        #expect(try !remover.join(leaseTimeout: .seconds(30), startsGroups: false).startedGroup)
        #expect(try remover.take([held, free]) == [held: "h:1"])
        #expect(try remover.holders()[free] == "h:9")
    }

    @Test func aRestartedAgentWithTheSameNameDoesNotInheritTheDeadOnesLeases() throws {
        // A container restarted as pid 1 again: same host:pid, another process.
        let (uri, stores) = try Self.group(4, agents: ["box:1"])
        #expect(try stores[0].renewAndClaim(leaseTimeout: Self.expiry, maxClaim: 100).claimed.count == 4)
        let again = try PostgresStateStore(uri: uri, agent: "box:1")
        _ = try again.join(leaseTimeout: Self.expiry)
        Thread.sleep(forTimeInterval: 1.5)
        // The dead one's leases expire and the new one claims them as its own, with their records.
        let round = try again.renewAndClaim(leaseTimeout: Self.expiry, maxClaim: 100)
        #expect(round.claimed.count == 4)
    }
}
