import PushAcrobits
import PushBackend
import PushConfig
import PushState

/// The agent's decisions about accounts (SPEC §5), as a pure state machine: it takes the plans
/// of a configuration, the stored records and the scheduler's outcomes, and returns what to
/// submit, cancel, save and forget. The ``Agent`` applies the actions; tests call it directly.
///
/// - The scheduler knows an account only by its id, so an account never has two requests in
///   flight: a job that replaces one in flight starts after it returns, and the old result is
///   dropped. Each job has a generation; ``beginAttempt(_:)`` notes which generation is sent, and
///   an outcome counts only when it is the current one.
/// - The removal request is rendered with each report, from the same values, and the caller
///   saves it before that report is sent (the actions list saves before it submits; a reload
///   holds the accounts it changes until ``releaseHeld()``). A report that reached a server
///   therefore always has its removal in the state, whatever moment the agent is killed at.
/// - When a changed report replaces one that may have reached a server, the earlier removal is
///   kept in the record's `pastRemovals` until a newer report is delivered; when the account
///   leaves, they are sent one after the other, oldest first.
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
        /// The removals still to send, first one next, when `job` is `.removal`.
        var removals: [OwedRemoval] = []
        /// Changes whenever the job is replaced.
        var generation: UInt64 = 0
        /// The generation of the attempt the scheduler last started.
        var sentGeneration: UInt64?
    }

    /// A removal owed: its stored text and the request it reads as.
    struct OwedRemoval {
        var text: String
        var report: PlannedReport
    }

    enum Action: Equatable {
        case submit(String, host: String, after: Duration)
        case cancel(String)
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

    /// The most removals of earlier reports kept per account (the oldest go first).
    static let pastRemovalLimit = 8

    private(set) var entries: [String: Entry] = [:]
    /// Accounts a reload changed whose state is not written yet: no attempt of theirs may start.
    private(set) var held: Set<String> = []
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
        actions.reserveCapacity(2 * plans.count + records.count)
        var planned = Set<String>()
        planned.reserveCapacity(plans.count)
        for plan in plans { planned.insert(plan.id) }
        // Room for every account once: the stored ones are mostly the planned ones again.
        entries.reserveCapacity(plans.count + records.lazy.filter { !planned.contains($0.id) }.count)
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
            plan.apply(to: &record)
            if record != old { actions.append(.save(record)) }
            schedule(Entry(record: record, plan: plan, job: .report), actions: &actions)
        }
        return Self.savesFirst(actions)
    }

    /// A new configuration while running: new and changed accounts are reported now (replacing
    /// a pending retry), unchanged ones keep their schedule, and accounts that left get their
    /// removal. The actions cancel, then save, then submit.
    /// Every account it (re)schedules is held until ``releaseHeld()``: the caller writes the state
    /// first. `reportInterval` is the new configuration's.
    mutating func reload(plans: [AccountPlan], reportInterval newInterval: Duration?, now: Int64) -> ([Action], ReloadSummary) {
        var actions: [Action] = []
        var summary = ReloadSummary()
        let intervalChanged = newInterval != reportInterval
        reportInterval = newInterval
        var planned = Set<String>()
        planned.reserveCapacity(plans.count)
        for plan in plans {
            planned.insert(plan.id)
            guard var entry = entries[plan.id] else {
                summary.added += 1
                var record = AccountRecord(id: plan.id)
                plan.apply(to: &record)
                actions.append(.save(record))
                schedule(Entry(record: record, plan: plan, job: .report), actions: &actions)
                held.insert(plan.id)
                continue
            }
            let wasRemoving = entry.record.isRemoving
            if !wasRemoving && entry.record.fingerprint == plan.report.rendered.fingerprint {
                summary.unchanged += 1
                entry.plan = plan
                var changed = false
                if entry.record.removal != plan.removal {
                    // The same report, with a removal written differently (a fixed URL, say).
                    entry.record.removal = plan.removal
                    changed = true
                }
                if entry.record.phase == .delivered && (intervalChanged || (entry.job == nil && reportInterval != nil)) {
                    if let reportInterval, let lastSuccess = entry.record.lastSuccessAt {
                        let due = Swift.max(0, lastSuccess + reportInterval.milliseconds - now)
                        entry.job = .report
                        entry.record.nextDueAt = now + due
                        actions.append(.submit(plan.id, host: plan.report.host, after: .milliseconds(due)))
                    } else if reportInterval == nil, entry.job != nil {
                        entry.job = nil
                        entry.record.nextDueAt = nil
                        actions.append(.cancel(plan.id))
                    }
                    changed = true
                }
                if changed { actions.append(.save(entry.record)) }
                entries[plan.id] = entry
                continue
            }
            if wasRemoving { summary.added += 1 } else { summary.changed += 1 }
            if entry.job != nil { actions.append(.cancel(plan.id)) }
            if wasRemoving {
                // Back before its removals all went out: they stay owed for a later removal.
                entry.record.isRemoving = false
                entry.record.pastRemovals = entry.removals.map(\.text)
                entry.record.removal = nil
            }
            plan.apply(to: &entry.record)
            entry.plan = plan
            entry.job = .report
            entry.removals = []
            actions.append(.save(entry.record))
            schedule(entry, actions: &actions)
            held.insert(plan.id)
        }
        // Taken out first: changing `entries` while iterating it would copy the whole book.
        let leaving = entries.filter { !planned.contains($0.key) && !$0.value.record.isRemoving }
        for (id, entry) in leaving {
            summary.removed += 1
            if entry.job != nil { actions.append(.cancel(id)) }
            entries[id] = nil
            beginRemoval(entry.record, actions: &actions)
            held.insert(id)
        }
        return (Self.savesFirst(actions), summary)
    }

    /// Lets the accounts the last reload changed start attempts, once its state is written.
    mutating func releaseHeld() {
        held.removeAll()
    }

    /// The scheduler starts an attempt of `id`: the request to send (nil when there is nothing
    /// to send any more), noted as sent with the job's current generation.
    mutating func beginAttempt(_ id: String) -> PlannedReport? {
        guard !held.contains(id), var entry = entries[id], let request = Self.request(of: entry) else { return nil }
        entry.sentGeneration = entry.generation
        entries[id] = entry
        return request
    }

    /// The request the current job of `id` sends, without starting an attempt.
    func currentRequest(_ id: String) -> PlannedReport? {
        entries[id].flatMap(Self.request(of:))
    }

    /// The last attempt of `id` delivered at `now` (Unix milliseconds). Nil when that attempt
    /// belonged to a job that was replaced since; else the actions and the request delivered.
    mutating func delivered(_ id: String, now: Int64) -> (actions: [Action], report: PlannedReport)? {
        guard var entry = entries[id], let job = entry.job, entry.sentGeneration == entry.generation,
              let report = Self.request(of: entry) else { return nil }
        if job == .removal {
            let sent = entry.removals.removeFirst().text
            if entry.removals.isEmpty {
                entries[id] = nil
                return ([.forget(id)], report)
            }
            // The next removal: the record keeps only what is still to send.
            entry.record.pastRemovals.removeAll { $0 == sent }
            if entry.record.removal == sent { entry.record.removal = nil }
            entry.record.attempts = 0
            entry.record.lastAttemptAt = now
            entry.record.lastOutcome = "delivered"
            entry.generation = nextGeneration()
            entries[id] = entry
            return ([.save(entry.record), .submit(id, host: entry.removals[0].report.host, after: .zero)], report)
        }
        var actions: [Action] = []
        entry.record.deliveredFingerprint = entry.record.fingerprint
        // This report replaces what earlier ones registered: only its own removal is owed now.
        entry.record.pastRemovals = []
        entry.record.attempts = 0
        entry.record.lastAttemptAt = now
        entry.record.lastOutcome = "delivered"
        entry.record.lastSuccessAt = now
        if let reportInterval {
            entry.record.nextDueAt = now + reportInterval.milliseconds
            actions.append(.submit(id, host: report.host, after: reportInterval))
        } else {
            entry.record.nextDueAt = nil
            entry.job = nil
        }
        entries[id] = entry
        actions.insert(.save(entry.record), at: 0)
        return (actions, report)
    }

    /// Attempt `attempt` of `id` failed at `now`; the scheduler tries again `retryIn` later (nil:
    /// not before the next run). Nil when that attempt belonged to a replaced job.
    mutating func failed(_ id: String, attempt: Int, reason: String, retryIn: Duration?, now: Int64)
        -> (actions: [Action], report: PlannedReport)? {
        guard var entry = entries[id], entry.job != nil, entry.sentGeneration == entry.generation,
              let report = Self.request(of: entry) else { return nil }
        entry.record.attempts = attempt
        entry.record.lastAttemptAt = now
        entry.record.lastOutcome = reason
        entry.record.nextDueAt = retryIn.map { now + $0.milliseconds }
        entries[id] = entry
        return ([.save(entry.record)], report)
    }

    /// How many accounts stand where.
    var counts: AccountCounts {
        AccountCounts(entries.values.lazy.map(\.record))
    }

    /// The removals a stored record owes, in the order they are sent (those of earlier reports
    /// first), and how many of its stored removals could not be read (they are dropped).
    static func removals(of record: AccountRecord, defaultTimeout: Duration) -> (owed: [OwedRemoval], unreadable: Int) {
        var texts: [String] = []
        for text in record.pastRemovals + [record.removal].compactMap({ $0 }) where !texts.contains(text) {
            texts.append(text)
        }
        var owed: [OwedRemoval] = []
        var unreadable = 0
        for text in texts {
            if let report = AccountPlan.removalReport(account: record.id, storedText: text, defaultTimeout: defaultTimeout) {
                owed.append(OwedRemoval(text: text, report: report))
            } else {
                unreadable += 1
            }
        }
        return (owed, unreadable)
    }

    /// Starts the removal of a stored account that left the configuration, or forgets it when
    /// it has no removal to send.
    private mutating func beginRemoval(_ stored: AccountRecord, actions: inout [Action]) {
        let (owed, unreadable) = Self.removals(of: stored, defaultTimeout: defaultTimeout)
        if unreadable > 0 { unreadableRemovals.append(stored.id) }
        guard !owed.isEmpty else {
            actions.append(.forget(stored.id))
            return
        }
        var record = stored
        if !record.isRemoving { record.attempts = 0 }
        record.isRemoving = true
        record.fingerprint = ""
        record.nextDueAt = nil
        if record != stored { actions.append(.save(record)) }
        schedule(Entry(record: record, plan: nil, job: .removal, removals: owed), actions: &actions)
    }

    /// Takes the list of unreadable removals, for the log.
    mutating func takeUnreadableRemovals() -> [String] {
        defer { unreadableRemovals = [] }
        return unreadableRemovals
    }

    /// Gives `entry` a new generation, stores it and submits its job now.
    private mutating func schedule(_ entry: Entry, actions: inout [Action]) {
        var entry = entry
        entry.generation = nextGeneration()
        entries[entry.record.id] = entry
        let host = Self.request(of: entry)?.host ?? ""
        actions.append(.submit(entry.record.id, host: host, after: .zero))
    }

    private mutating func nextGeneration() -> UInt64 {
        lastGeneration += 1
        return lastGeneration
    }

    private static func request(of entry: Entry) -> PlannedReport? {
        switch entry.job {
        case .report: entry.plan?.report
        case .removal: entry.removals.first?.report
        case nil: nil
        }
    }

    /// Cancels first, then saves and forgets, then submits, keeping each group's order.
    private static func savesFirst(_ actions: [Action]) -> [Action] {
        var cancels: [Action] = [], writes: [Action] = [], submits: [Action] = []
        for action in actions {
            switch action {
            case .cancel: cancels.append(action)
            case .save, .forget: writes.append(action)
            case .submit: submits.append(action)
            }
        }
        return cancels + writes + submits
    }
}

extension AccountPlan {
    /// Makes `record` describe this plan's report, not yet attempted, with its removal.
    func apply(to record: inout AccountRecord) {
        let fingerprint = report.rendered.fingerprint
        if record.fingerprint != fingerprint, let old = record.removal, old != removal, !record.pastRemovals.contains(old) {
            // The report it replaces may have reached the server: its removal stays owed.
            record.pastRemovals.append(old)
            record.pastRemovals.removeFirst(max(0, record.pastRemovals.count - AgentBook.pastRemovalLimit))
        }
        if let removal { record.pastRemovals.removeAll { $0 == removal } }
        record.fingerprint = fingerprint
        record.isRemoving = false
        record.attempts = 0
        record.removal = removal
        if record.phase != .delivered { record.nextDueAt = nil }
    }
}
