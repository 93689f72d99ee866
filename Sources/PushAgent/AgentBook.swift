import PushConfig
import PushState

/// The scheduler's key for an account's current job: its id and a generation that changes
/// whenever the job is replaced, so that a late result of a replaced job is recognised and dropped.
public struct JobKey: Hashable, Sendable, CustomStringConvertible {
    public var id: String
    public var generation: UInt64

    public var description: String { "\(id)#\(generation)" }
}

/// The agent's decisions about accounts (SPEC §5), as a pure state machine: it takes the plans
/// of a configuration, the stored records and the scheduler's outcomes, and returns what to
/// submit, cancel, save and forget. The ``Agent`` applies the actions; tests call it directly.
///
/// The removal request is rendered and stored when a report is planned, from the same values,
/// and the caller saves it before the report is sent: a report that reached a server always has
/// its removal in the state, whatever moment the agent is killed at. An account removed before
/// its report was ever delivered therefore still gets its removal (receivers treat the removal
/// of an unknown token as done).
struct AgentBook {
    /// What is scheduled for an account.
    enum Job: Equatable {
        case report
        case removal
    }

    struct Entry {
        var record: AccountRecord
        /// The configuration's plan; nil once the account has left the configuration.
        var plan: AccountPlan?
        /// What is scheduled; nil when nothing is (delivered, no `reportInterval`).
        var job: Job?
        /// The removal being sent, when `job` is `.removal`.
        var removalReport: PlannedReport?
        var generation: UInt64
    }

    enum Action: Equatable {
        case submit(JobKey, host: String, after: Duration)
        case cancel(JobKey)
        case save(AccountRecord)
        case forget(String)
    }

    /// What a reload changed, for the log.
    struct ReloadSummary: Equatable {
        var added = 0
        var changed = 0
        var unchanged = 0
        var removed = 0
    }

    private(set) var entries: [String: Entry] = [:]
    private var lastGeneration: UInt64 = 0
    /// `agent.timeout`, for stored removal requests without their own timeout.
    var defaultTimeout: Duration
    /// `agent.reportInterval`: a delivered report is sent again this long after.
    var reportInterval: Duration?
    /// Records whose stored removal could not be read (forgotten without a removal), for the log.
    private(set) var unreadableRemovals: [String] = []

    init(defaultTimeout: Duration, reportInterval: Duration?) {
        self.defaultTimeout = defaultTimeout
        self.reportInterval = reportInterval
    }

    /// The first configuration after a start: every planned account is reported (changed or
    /// not), and every stored account that left the configuration gets its removal.
    mutating func start(plans: [AccountPlan], records: [AccountRecord]) -> [Action] {
        var actions: [Action] = []
        var planned = Set<String>()
        planned.reserveCapacity(plans.count)
        for plan in plans { planned.insert(plan.id) }
        var stored: [String: AccountRecord] = [:]
        stored.reserveCapacity(records.count)
        for record in records {
            if planned.contains(record.id) {
                stored[record.id] = record
            } else {
                beginRemoval(record, actions: &actions)
            }
        }
        for plan in plans {
            let old = stored[plan.id]
            var record = old ?? AccountRecord(id: plan.id)
            record.fingerprint = plan.report.rendered.fingerprint
            record.isRemoving = false
            record.attempts = 0
            record.removal = plan.removal
            if record.phase != .delivered { record.nextDueAt = nil }
            if record != old { actions.append(.save(record)) }
            schedule(Entry(record: record, plan: plan, job: .report, generation: 0), actions: &actions)
        }
        return actions
    }

    /// A new configuration while running: new and changed accounts are reported now (replacing
    /// a pending retry), unchanged ones keep their schedule, and accounts that left get their
    /// removal.
    mutating func reload(plans: [AccountPlan]) -> ([Action], ReloadSummary) {
        var actions: [Action] = []
        var summary = ReloadSummary()
        var planned = Set<String>()
        planned.reserveCapacity(plans.count)
        for plan in plans {
            planned.insert(plan.id)
            let fingerprint = plan.report.rendered.fingerprint
            guard var entry = entries[plan.id] else {
                summary.added += 1
                let record = AccountRecord(id: plan.id, fingerprint: fingerprint, removal: plan.removal)
                actions.append(.save(record))
                schedule(Entry(record: record, plan: plan, job: .report, generation: 0), actions: &actions)
                continue
            }
            if !entry.record.isRemoving && entry.record.fingerprint == fingerprint {
                summary.unchanged += 1
                entry.plan = plan
                if entry.record.removal != plan.removal {
                    entry.record.removal = plan.removal
                    actions.append(.save(entry.record))
                }
                entries[plan.id] = entry
                continue
            }
            if entry.record.isRemoving { summary.added += 1 } else { summary.changed += 1 }
            if entry.job != nil { actions.append(.cancel(key(entry))) }
            entry.record.fingerprint = fingerprint
            entry.record.isRemoving = false
            entry.record.attempts = 0
            entry.record.nextDueAt = nil
            entry.record.removal = plan.removal
            entry.plan = plan
            entry.job = .report
            entry.removalReport = nil
            actions.append(.save(entry.record))
            schedule(entry, actions: &actions)
        }
        for (id, entry) in entries where !planned.contains(id) && !entry.record.isRemoving {
            summary.removed += 1
            if entry.job != nil { actions.append(.cancel(key(entry))) }
            entries[id] = nil
            beginRemoval(entry.record, actions: &actions)
        }
        return (actions, summary)
    }

    /// The request to send for `key`; nil when the job was replaced or forgotten.
    func request(for key: JobKey) -> PlannedReport? {
        guard let entry = entries[key.id], entry.generation == key.generation else { return nil }
        switch entry.job {
        case .report: return entry.plan?.report
        case .removal: return entry.removalReport
        case nil: return nil
        }
    }

    /// The job of `key` when it is still current.
    func job(of key: JobKey) -> Job? {
        guard let entry = entries[key.id], entry.generation == key.generation else { return nil }
        return entry.job
    }

    /// `key` was delivered at `now` (Unix milliseconds).
    mutating func delivered(_ key: JobKey, now: Int64) -> [Action] {
        guard var entry = entries[key.id], entry.generation == key.generation, let job = entry.job else { return [] }
        if job == .removal {
            entries[key.id] = nil
            return [.forget(key.id)]
        }
        var actions: [Action] = []
        entry.record.deliveredFingerprint = entry.record.fingerprint
        entry.record.attempts = 0
        entry.record.lastAttemptAt = now
        entry.record.lastOutcome = "delivered"
        entry.record.lastSuccessAt = now
        if let reportInterval, let host = entry.plan?.report.host {
            entry.record.nextDueAt = now + reportInterval.milliseconds
            actions.append(.submit(key, host: host, after: reportInterval))
        } else {
            entry.record.nextDueAt = nil
            entry.job = nil
        }
        entries[key.id] = entry
        actions.insert(.save(entry.record), at: 0)
        return actions
    }

    /// Attempt `attempt` of `key` failed at `now`; the scheduler tries again `retryIn` later.
    mutating func failed(_ key: JobKey, attempt: Int, reason: String, retryIn: Duration, now: Int64) -> [Action] {
        guard var entry = entries[key.id], entry.generation == key.generation, entry.job != nil else { return [] }
        entry.record.attempts = attempt
        entry.record.lastAttemptAt = now
        entry.record.lastOutcome = reason
        entry.record.nextDueAt = now + retryIn.milliseconds
        entries[key.id] = entry
        return [.save(entry.record)]
    }

    /// How many accounts stand where.
    var counts: AccountCounts {
        AccountCounts(entries.values.lazy.map(\.record))
    }

    /// Starts the removal of a stored account that left the configuration, or forgets it when
    /// it has no removal to send.
    private mutating func beginRemoval(_ stored: AccountRecord, actions: inout [Action]) {
        guard let text = stored.removal else {
            actions.append(.forget(stored.id))
            return
        }
        guard let report = AccountPlan.removalReport(account: stored.id, storedText: text, defaultTimeout: defaultTimeout) else {
            unreadableRemovals.append(stored.id)
            actions.append(.forget(stored.id))
            return
        }
        var record = stored
        if !record.isRemoving { record.attempts = 0 }
        record.isRemoving = true
        record.fingerprint = ""
        record.nextDueAt = nil
        if record != stored { actions.append(.save(record)) }
        schedule(Entry(record: record, plan: nil, job: .removal, removalReport: report, generation: 0), actions: &actions)
    }

    /// Gives `entry` a new generation, stores it and submits its job now.
    private mutating func schedule(_ entry: Entry, actions: inout [Action]) {
        var entry = entry
        lastGeneration += 1
        entry.generation = lastGeneration
        entries[entry.record.id] = entry
        let host = (entry.job == .removal ? entry.removalReport?.host : entry.plan?.report.host) ?? ""
        actions.append(.submit(key(entry), host: host, after: .zero))
    }

    private func key(_ entry: Entry) -> JobKey {
        JobKey(id: entry.record.id, generation: entry.generation)
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
