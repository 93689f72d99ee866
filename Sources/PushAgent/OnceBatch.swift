import PushState

/// What `run --once` sends and what it then writes to the state: every planned report and every
/// removal the state owes, decided by the same ``AgentBook`` as the long-running agent.
public struct OnceBatch: Sendable {
    /// The requests to send: each account's report, and the removals owed.
    public let reports: [PlannedReport]
    /// Accounts whose stored removal request could not be read (they are forgotten).
    public let unreadableRemovals: [String]

    private var book: AgentBook
    private let keys: [JobKey]
    private var saved: [String: AccountRecord] = [:]
    private var forgotten: Set<String> = []

    public init(plans: [AccountPlan], records: [AccountRecord], defaultTimeout: Duration) {
        var book = AgentBook(defaultTimeout: defaultTimeout, reportInterval: nil)
        let actions = book.start(plans: plans, records: records)
        var keys: [JobKey] = []
        var reports: [PlannedReport] = []
        for action in actions {
            if case .submit(let key, _, _) = action, let report = book.request(for: key) {
                keys.append(key)
                reports.append(report)
            }
        }
        self.book = book
        self.keys = keys
        self.reports = reports
        unreadableRemovals = book.unreadableRemovals
        record(actions)
    }

    /// The records to save and the accounts to forget before anything is sent (the removal
    /// requests of the reports about to be sent among them).
    public var recordsBeforeSending: (save: [AccountRecord], forget: [String]) {
        (Array(saved.values), Array(forgotten))
    }

    /// The records to save and the accounts to forget once `outcome` is known.
    public mutating func records(after outcome: OnceOutcome, now: Int64) -> (save: [AccountRecord], forget: [String]) {
        var undelivered: [String: OnceOutcome.Undelivered] = [:]
        for failure in outcome.undelivered { undelivered[failure.account] = failure }
        for key in keys {
            if let failure = undelivered[key.id] {
                guard failure.attempts > 0 else { continue }
                record(book.failed(key, attempt: failure.attempts, reason: failure.reason, retryIn: .zero, now: now))
            } else {
                record(book.delivered(key, now: now))
            }
        }
        return (Array(saved.values), Array(forgotten))
    }

    private mutating func record(_ actions: [AgentBook.Action]) {
        for action in actions {
            switch action {
            case .save(let record):
                saved[record.id] = record
                forgotten.remove(record.id)
            case .forget(let id):
                saved[id] = nil
                forgotten.insert(id)
            case .submit, .cancel:
                break
            }
        }
    }
}
