import PushBackend
import PushConfig
import PushScheduler
import PushState

/// What the book keeps of each subscription, and what it tells the agent to do.
extension AgentBook {
    enum Job: Equatable {
        /// Its delivery.
        case delivery
        /// It left: its owed cleanups, then it is forgotten.
        case cleanup
        /// Still subscribed: the cleanups of deliveries it replaced, then it is done.
        case replacedCleanup
    }

    struct Entry {
        var record: SubscriptionRecord
        /// What the book keeps of the configuration's plan; nil once the subscription has left
        /// the configuration.
        var plan: Booking?
        /// What is scheduled; nil when nothing is (delivered, accepted, rejected, waiting).
        /// Setting it ends ``repeatsOnInterval``.
        var job: Job? {
            didSet { repeatsOnInterval = false }
        }
        /// Whether `job` is the delivery `agent.reportInterval` repeats, due that long after the
        /// last: nothing is owed meanwhile, so the book is settled with it ("all … reported").
        /// Only while the subscription stays delivered: a repeat that fails is owed again.
        var repeatsOnInterval = false
        /// Whether the book waits on this entry: a job, and not an interval's repeat.
        var isOwed: Bool { Self.isOwed(job: job, repeatsOnInterval: repeatsOnInterval, state: record.state) }

        static func isOwed(job: Job?, repeatsOnInterval: Bool, state: SubscriptionState) -> Bool {
            job != nil && !(repeatsOnInterval && state == .delivered)
        }
        /// The cleanups still to send, first one next, when `job` is a cleanup.
        var cleanups: [OwedCleanup] = []
        /// Changes whenever the job is replaced.
        var generation: UInt64 = 0
        /// The generation of the attempt the scheduler last started.
        var sentGeneration: UInt64?
        /// Booked by a start for a later run and not handed to the scheduler since: the
        /// feeder's to submit (``AgentBook/awaitsFeed(_:)``).
        var awaitsFeed = false
        /// Given a job by the start (``AgentBook/startJobs``): what `run --once` sums up.
        var isStartJob = false
        /// Not delivered, as `run --once` sums it up: a job left, refused, or its service stopped.
        var isUndelivered: Bool { Self.isUndelivered(job: job, state: record.state) }

        /// ``isUndelivered`` of these fields: an entry read in the table through its pointer
        /// (``EntryTable/read(_:_:)``) is copied whole to call a property of it.
        static func isUndelivered(job: Job?, state: SubscriptionState) -> Bool {
            job != nil || state == .rejected || state == .stopped
        }

        /// ``isUndelivered`` of an entry read in the table (``EntryTable/read(_:_:)``).
        static func isUndelivered(at entry: UnsafePointer<Entry>) -> Bool {
            isUndelivered(job: entry.pointee.job, state: entry.pointee.record.state)
        }

        init(record: SubscriptionRecord, plan: SubscriptionPlan?, job: Job?, cleanups: [OwedCleanup] = []) {
            self.record = record
            self.plan = plan.map(Booking.init)
            self.job = job
            self.cleanups = cleanups
        }
    }

    /// What the book keeps of a subscription's plan once it is booked: what it sends, and
    /// whether a delivery cleans up the ones it replaced. The rest of a plan is read as it is
    /// booked (names, reasons) or kept in the record (fingerprint, cleanup). The whole plan was
    /// 170 of an entry's 392 bytes, 8 MB of the idle agent's 100,000 entries.
    struct Booking {
        var delivery: SubscriptionRequest?
        var cleansUpReplaced: Bool
        /// The plan's ``SubscriptionPlan/deliveryUnreadOnceDelivered``.
        var unreadOnceDelivered: Bool
        /// The plan's ``SubscriptionPlan/waiting`` or ``SubscriptionPlan/refusal``.
        var reason: Reason?

        enum Reason {
            case waiting(String)
            case refusal(String)
        }

        init(_ plan: SubscriptionPlan) {
            delivery = plan.delivery
            cleansUpReplaced = plan.cleansUpReplaced
            unreadOnceDelivered = plan.deliveryUnreadOnceDelivered
            reason = plan.refusal.map(Reason.refusal) ?? plan.waiting.map(Reason.waiting)
        }

        /// The plan booked for `record`'s subscription, to apply again (a lease taken back):
        /// its fingerprint and cleanup are the record's. The plan was applied to the record when
        /// booked, and a later plan booked without being applied (a reload that keeps the
        /// delivery) has the same fingerprint and cleanup, the record keeping its own bytes of
        /// a text only canonically equal.
        func plan(for record: SubscriptionRecord) -> SubscriptionPlan {
            var plan = SubscriptionPlan(account: record.key.account, service: record.key.service, fingerprint: record.fingerprint,
                                        delivery: delivery, cleanup: record.cleanup, cleansUpReplaced: cleansUpReplaced)
            plan.deliveryUnreadOnceDelivered = unreadOnceDelivered
            switch reason {
            case .waiting(let why): plan.waiting = why
            case .refusal(let why): plan.refusal = why
            case nil: break
            }
            return plan
        }
    }

    /// A cleanup owed: its stored text and the request it reads as.
    struct OwedCleanup {
        var text: String
        var request: SubscriptionRequest
    }

    /// What the scheduler is told to schedule.
    struct Submission: Equatable, Sendable {
        var key: SubscriptionKey
        var host: String
        var batch: Batching?
        var pauseLabel: String?
        var after: Duration
    }

    enum Action: Equatable {
        case submit(Submission)
        case cancel(SubscriptionKey)
        case save(SubscriptionRecord)
        case forget(SubscriptionKey)
    }

    /// What a reload changed, for the log.
    struct ReloadSummary: Equatable {
        var added = 0
        var changed = 0
        var unchanged = 0
        var removed = 0
        /// Removals the guard held (SPEC §14), not sent.
        var held = 0
        /// The first few subscriptions of each kind, for the log to name.
        var named: [Kind: [SubscriptionKey]] = [:]

        enum Kind: String, CaseIterable {
            case added = "new", changed, removed
        }

        /// The most subscriptions of a kind the summary names.
        static let namedLimit = 10

        mutating func count(_ kind: Kind, _ key: SubscriptionKey) {
            switch kind {
            case .added: added += 1
            case .changed: changed += 1
            case .removed: removed += 1
            }
            if named[kind, default: []].count < Self.namedLimit { named[kind, default: []].append(key) }
        }
    }

    /// How an outcome settled a subscription, for the log.
    enum Settlement: Equatable {
        case delivered
        /// A cleanup was delivered, and the subscription is forgotten when `forgotten`.
        case cleanedUp(forgotten: Bool)
        case accepted
        case rejected(String)
        /// A cleanup the receiver refused, given up.
        case cleanupRefused(String)
        case stopped(String)
    }
}
