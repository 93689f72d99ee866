@testable import PushAgent
import PushState
import Testing
import PushTestThreads

/// The book's table of entries: a dictionary's behaviour, entries kept densely, and the counts of
/// entries with a job kept exact through every change.
@Suite(.blockingThreads) struct EntryTableTests {
    static func entry(_ account: String, service: String = SubscriptionKey.acrobits, job: AgentBook.Job?,
                      state: SubscriptionState = .pending) -> AgentBook.Entry {
        AgentBook.Entry(record: SubscriptionRecord(key: SubscriptionKey(account: account, service: service), state: state),
                        plan: nil, job: job)
    }

    static func key(_ account: String, _ service: String = SubscriptionKey.acrobits) -> SubscriptionKey {
        SubscriptionKey(account: account, service: service)
    }

    @Test func itBehavesAsADictionaryThroughRandomChanges() {
        var table = EntryTable()
        var reference: [SubscriptionKey: AgentBook.Job?] = [:]
        var generator = SystemRandomNumberGenerator()
        let services = [SubscriptionKey.acrobits, "journeys", "fcm"]
        let jobs: [AgentBook.Job?] = [nil, .delivery, .cleanup, .replacedCleanup]
        for _ in 0..<5_000 {
            let key = Self.key("a\(Int.random(in: 0..<200, using: &generator))", services.randomElement(using: &generator)!)
            if Bool.random(using: &generator) && Int.random(in: 0..<3, using: &generator) == 0 {
                table[key] = nil
                reference[key] = nil
            } else if Bool.random(using: &generator) {
                // In place: found or not, the counts follow.
                let job = jobs.randomElement(using: &generator)!
                let state = SubscriptionState.allCases.randomElement(using: &generator)!
                let found: Void? = table.update(key) { entry in
                    entry.job = job
                    entry.record.state = state
                }
                #expect((found != nil) == (reference[key] != nil))
                if found != nil { reference[key] = .some(job) }
            } else {
                let job = jobs.randomElement(using: &generator)!
                table[key] = Self.entry(key.account, service: key.service, job: job,
                                        state: SubscriptionState.allCases.randomElement(using: &generator)!)
                reference[key] = .some(job)
            }
            if table.accountCount != Set(reference.keys.map(\.account)).count {
                Issue.record("the accounts counted drifted from the accounts held")
                break
            }
        }
        #expect(table.count == reference.count)
        #expect(Set(table.map(\.key)) == Set(reference.keys))
        for (key, entry) in table {
            #expect(entry.record.key == key, "each entry is found under its own key after the swaps of removals")
            #expect(table[key]?.job == reference[key]!)
            #expect(table.read(key) { $0.pointee.job } == .some(reference[key]!), "read in place, as the getter")
        }
        #expect(table.read(Self.key("never")) { $0.pointee.job } == nil)
        let withCleanup = table.compactMapBorrowing { key, entry in entry.pointee.job == .cleanup ? key : nil }
        #expect(Set(withCleanup) == Set(reference.filter { $0.value == .cleanup }.keys))
        #expect(withCleanup.count == Set(withCleanup).count)
        let withJobs = reference.filter { $0.value != nil }
        #expect(table.jobCount == withJobs.count)
        for service in services {
            #expect(table.jobsByService[service, default: 0] == withJobs.keys.count { $0.service == service })
        }
        let kept = SubscriptionCounts(accounts: table.accountCount, subscriptions: table.count, byState: table.stateCounts)
        #expect(kept == SubscriptionCounts(table.map(\.value.record)), "the counts kept are those of a walk of the records")
        #expect(kept.accounts == Set(reference.keys.map(\.account)).count)
    }

    @Test func removingTheLastOrAMissingKeyKeepsTheRestInPlace() {
        var table = EntryTable()
        table[Self.key("a")] = Self.entry("a", job: .delivery)
        table[Self.key("b")] = Self.entry("b", job: nil)
        table[Self.key("missing")] = nil
        #expect(table.count == 2)
        table[Self.key("b")] = nil
        #expect(table.map(\.key) == [Self.key("a")])
        #expect(table[Self.key("a")]?.job == .delivery)
        table[Self.key("a")] = nil
        #expect(table.isEmpty)
        #expect(table.jobCount == 0)
        #expect(table.jobsByService[SubscriptionKey.acrobits] == 0)
        #expect(table.accountCount == 0)
        #expect(SubscriptionCounts(accounts: 0, subscriptions: 0, byState: table.stateCounts) == SubscriptionCounts([]))
    }

    @Test func everyEntryIsFoundThroughGrowthAndRemovalsInAnyOrder() {
        var table = EntryTable()
        var generator = SystemRandomNumberGenerator()
        var held = Set<SubscriptionKey>()
        // No room made first: the index grows from nothing, rebuilt at each doubling.
        for number in 0..<6_000 {
            let key = Self.key("user\(number)", number % 3 == 0 ? "journeys" : SubscriptionKey.acrobits)
            table[key] = Self.entry(key.account, service: key.service, job: .delivery)
            held.insert(key)
        }
        for key in held.shuffled(using: &generator).prefix(4_000) {
            table[key] = nil
            held.remove(key)
        }
        #expect(table.count == held.count)
        for number in 0..<6_000 {
            for service in [SubscriptionKey.acrobits, "journeys"] {
                let key = Self.key("user\(number)", service)
                let found = table.read(key) { $0.pointee.record.key }
                if found != (held.contains(key) ? key : nil) {
                    Issue.record("\(key) is \(found == nil ? "not found" : "found") after removals")
                    return
                }
            }
        }
        #expect(table.accountCount == Set(held.map(\.account)).count)
        #expect(table.jobCount == held.count)
    }
}
