import PushSystem
import PushScheduler
import Logging
import Synchronization
import PushBackend
import PushConfig
import PushState

extension AgentCore {
    /// What ``begin()`` did: whether the state was written, and how many subscriptions the
    /// start gives a job (the book flags them as it books them, ``AgentBook/Entry/isStartJob``,
    /// and counts those of the plans it has not booked yet).
    struct Beginning {
        var written: Bool
        var jobs: Int
    }

    /// Starts the book and writes what it decided before anything is sent; `written` is false
    /// when the state cannot be written. A large start keeps all but its first run for the
    /// ``StartFeeder``. Called once, before the scheduler runs.
    func begin() async -> Beginning {
        guard let start = state.withLock({ state in state.start.take() }) else {
            return Beginning(written: true, jobs: 0)
        }
        // With shared state, the agent joins the others first, and adds the subscriptions the
        // state does not know yet, for whichever agent claims them.
        var membership: SharedStateMembership?
        var published: PublishedRemovals?
        if let shared, case .configuration(let plans, _, _) = start {
            let (leaseTimeout, keys, rule) = (settings.leaseTimeout, plans.map(\.key), Self.rule(settings.removalGuard))
            do {
                (membership, published) = try await offPool { () throws(StateError) in
                    let membership = try shared.join(leaseTimeout: leaseTimeout, startsGroups: true)
                    return (membership, try shared.publish(keys, holdingRemovals: rule))
                }
            } catch {
                logger.error("\(error.description)")
                return Beginning(written: false, jobs: 0)
            }
        }
        var pollers: [any ConfirmationPoller] = []
        // The scheduler does not run yet, so nothing is sent before the flush.
        let (jobs, subscriptions, owedCleanups) = state.withLock { state -> (Int, Int, Int) in
            let started: AgentBook.Start
            switch start {
            case .configuration(let plans, let records, let startPollers):
                backends.restore(records.compactMap(KeptData.init))
                if membership != nil {
                    // Nothing is this agent's before it claims it (see LeaseKeeper).
                    state.book.startShared(plans: plans)
                    if let published { state.book.published(published, handedBack: []) }
                    started = AgentBook.Start(firstRun: 0)
                } else {
                    started = state.book.start(plans: plans, records: records, firstRun: startRunSize)
                }
                pollers = startPollers
            case .removal(let records):
                backends.restore(records.compactMap(KeptData.init))
                started = state.book.startCleanup(of: records, firstRun: startRunSize)
                // Nothing to claim: `remove` took its subscriptions before it started.
                state.claimedAll = true
            }
            apply(started.actions, in: &state)
            return (state.book.startJobsToCome, state.book.entries.count, state.book.counts[.removing])
        }
        replacePollers(pollers)
        let recorder = recorder
        guard await offPool({ recorder.flush() }) else { return Beginning(written: false, jobs: jobs) }
        for key in state.withLock({ $0.book.takeUnreadableCleanups() }) { logger.unreadableCleanup(of: key) }
        if case .configuration(let plans, _, _) = start {
            let accounts = Self.accountCount(plans)
            let removals = owedCleanups > 0 ? ", sending \(owedCleanups) owed \(owedCleanups == 1 ? "removal" : "removals")" : ""
            let services = plans.count != accounts ? " (\(plans.count) subscriptions)" : ""
            if let membership, let shared {
                let group = membership.startedGroup ? "starting the group" : "joining \(membership.agents - 1) other \(membership.agents == 2 ? "agent" : "agents")"
                logger.info("started as \(shared.agent), \(group) on \(shared.location): \(accounts) \(accounts == 1 ? "account" : "accounts")\(services) shared")
            } else {
                logger.info("started: reporting \(accounts) \(accounts == 1 ? "account" : "accounts")\(services)\(removals)")
            }
        } else {
            logger.debug("started: cleaning up \(subscriptions) \(subscriptions == 1 ? "subscription" : "subscriptions")")
        }
        sayHeldRemovals()
        return Beginning(written: true, jobs: jobs)
    }

    /// How many accounts `plans` are of, for the start's log line (written before the first
    /// request leaves). An account has at most one subscription of a service, so plans of one
    /// service are of as many accounts: no set of 100,000 names to build (20 ms, perf).
    static func accountCount(_ plans: [SubscriptionPlan]) -> Int {
        // By index: `plans.map(\.account)` and `for plan in plans` copy each plan out.
        guard let first = plans.first?.service, plans.indices.contains(where: { plans[$0].service != first }) else { return plans.count }
        var accountIDs = Set<String>(minimumCapacity: plans.count)
        for index in plans.indices { accountIDs.insert(plans[index].account) }
        return accountIDs.count
    }
}

extension KeptData {
    /// What `record` keeps for its backend; nil when it keeps nothing.
    init?(_ record: SubscriptionRecord) {
        guard let data = record.backendData else { return nil }
        self.init(account: record.key.account, service: record.key.service, data: data)
    }
}
