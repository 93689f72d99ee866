import PushBackend
import PushConfig
import PushScheduler
import PushState

/// With state shared by several agents (SPEC §11): what this agent holds the lease of.
extension AgentBook {
    /// The first configuration of an agent that shares its state (SPEC §11): every planned
    /// subscription is known but none is its own yet; it sends only what it claims
    /// (``acquire(_:now:)``).
    mutating func startShared(plans: [SubscriptionPlan]) {
        owned = []
        entries.reserveCapacity(plans.count)
        for plan in plans {
            var record = SubscriptionRecord(key: plan.key)
            plan.apply(to: &record)
            entries.set(Entry(record: record, plan: plan, job: nil), for: plan.key)
        }
    }

    /// Subscriptions this agent now holds the lease of, as the shared state had them: each is
    /// delivered unless an agent of the running group wrote it with these values (delivered,
    /// refused, or awaiting their confirmation); one the last configuration loaded dropped gets
    /// its cleanup. Keys it holds already are left as they are. Returns too the claimed
    /// subscriptions this agent's configuration disagrees with (it does not have one the shared
    /// state keeps, or still has one it drops): they are not taken, for the caller to hand back.
    mutating func acquire(_ claimed: [ClaimedSubscription], now: Int64)
        -> (actions: [Action], disagreed: [SubscriptionKey]) {
        guard owned != nil else { return ([], []) }
        var actions: [Action] = []
        var disagreed: [SubscriptionKey] = []
        for claim in claimed where !owned!.contains(claim.record.key) {
            let stored = claim.record
            let key = stored.key
            guard var entry = entries[key], let plan = entry.plan?.plan(for: entry.record) else {
                guard claim.leaving else {
                    disagreed.append(key)
                    continue
                }
                owned!.insert(key)
                entries[key] = nil
                beginCleanup(stored, actions: &actions)
                continue
            }
            guard !claim.leaving else {
                disagreed.append(key)
                continue
            }
            owned!.insert(key)
            var record = stored
            plan.apply(to: &record)
            let same = stored.fingerprint == plan.fingerprint && stored.state != .removing
            var job: Job? = plan.delivery == nil ? nil : .delivery
            if same && claim.writtenThisGroup {
                switch stored.state {
                case .delivered:
                    job = nil
                case .accepted, .rejected, .unconfirmed:
                    // As another agent left it: awaiting confirmation, or refused for these values.
                    record.state = stored.state
                    record.backendData = stored.backendData
                    record.lastOutcome = stored.lastOutcome
                    record.attempts = stored.attempts
                    job = nil
                default:
                    break
                }
            }
            entry.record = record
            entry.job = job
            entry.cleanups = []
            if record != stored { actions.append(.save(record)) }
            if job != nil {
                schedule(entry, actions: &actions)
            } else {
                if record.state == .delivered { scheduleReportInterval(&entry, now: now, actions: &actions) }
                entries.set(entry, for: key)
            }
        }
        return (Self.savesFirst(actions), disagreed)
    }

    /// Gives up `keys` (their leases lost, or handed back): their jobs are cancelled, and they
    /// are another agent's business now.
    mutating func relinquish(_ keys: some Sequence<SubscriptionKey>) -> [Action] {
        guard owned != nil else { return [] }
        var actions: [Action] = []
        for key in keys where owned!.remove(key) != nil {
            guard var entry = entries[key] else { continue }
            if entry.job != nil { actions.append(.cancel(key)) }
            if entry.plan == nil {
                entries[key] = nil
            } else {
                entry.job = nil
                entry.cleanups = []
                entries.set(entry, for: key)
            }
        }
        return actions
    }

    /// Subscriptions this agent holds with nothing to send before `until` (nothing scheduled,
    /// or only the delivery `agent.reportInterval` repeats): what it may hand back without
    /// anything in flight being sent twice.
    func idleOwned(until: Int64) -> [SubscriptionKey] {
        guard let owned else { return [] }
        return owned.filter { key in
            guard let entry = entries[key] else { return false }
            return entry.job == nil || (entry.record.state == .delivered && (entry.record.nextDueAt ?? .min) > until)
        }.sorted()
    }

    /// Whether this agent may send for `key`: its own state, or a lease it holds.
    func isOwned(_ key: SubscriptionKey) -> Bool {
        owned?.contains(key) ?? true
    }
}
