import PushAcrobits
import PushBackend
import PushState

/// What `run --once` sends and what it then writes to the state: every planned report and every
/// removal the state owes, decided by the same ``AgentBook`` as the long-running agent.
public struct OnceBatch: Sendable {
    /// The requests to send: each account's report, and the removals owed.
    public let reports: [PlannedReport]
    /// Accounts whose stored removal request could not be read (they are forgotten).
    public let unreadableRemovals: [String]

    private var book: AgentBook
    /// Per account, the position of its request in `reports`.
    private let positions: [(id: String, index: Int)]
    private var saved: [String: AccountRecord] = [:]
    private var forgotten: Set<String> = []

    public init(plans: [AccountPlan], records: [AccountRecord], defaultTimeout: Duration) {
        var book = AgentBook(defaultTimeout: defaultTimeout, reportInterval: nil)
        let actions = book.start(plans: plans, records: records)
        var positions: [(id: String, index: Int)] = []
        var reports: [PlannedReport] = []
        for case .submit(let id, _, _) in actions {
            // One request per account: an account owing several removals gets the first (the
            // oldest report's) now and the next ones on the following runs, in order.
            guard let request = book.currentRequest(id) else { continue }
            positions.append((id, reports.count))
            reports.append(request)
        }
        self.book = book
        self.positions = positions
        self.reports = reports
        unreadableRemovals = book.unreadableRemovals
        record(actions)
    }

    /// The records to save and the accounts to forget before anything is sent (the removal
    /// requests of the reports about to be sent among them). Taken: `records(after:now:)`
    /// then gives only what sending changed.
    public mutating func takeRecordsBeforeSending() -> (save: [AccountRecord], forget: [String]) {
        defer {
            saved = [:]
            forgotten = []
        }
        return (Array(saved.values), Array(forgotten))
    }

    /// The records to save and the accounts to forget once `outcome` is known (since
    /// `takeRecordsBeforeSending()`, when it was called).
    public mutating func records(after outcome: OnceOutcome, now: Int64) -> (save: [AccountRecord], forget: [String]) {
        var undelivered: [Int: OnceOutcome.Undelivered] = [:]
        for failure in outcome.undelivered { undelivered[failure.index] = failure }
        for (id, index) in positions {
            _ = book.beginAttempt(id)
            if let failure = undelivered[index] {
                if failure.attempts > 0, let (actions, _) = book.failed(id, attempt: failure.attempts, reason: failure.reason,
                                                                       retryIn: nil, now: now) {
                    record(actions)
                }
            } else if let (actions, _) = book.delivered(id, now: now) {
                record(actions)
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
