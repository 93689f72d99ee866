import PushBackend
import PushConfig
import PushScheduler
import PushState

/// The agent's decisions about subscriptions (SPEC §5, §9.0), as a pure state machine: it takes
/// the plans of a configuration, the stored records and the outcomes of attempts, and returns
/// what to submit, cancel, save and forget. The ``Agent`` applies the actions; tests call it
/// directly.
///
/// - The scheduler knows a subscription only by its key, so one never has two requests in
///   flight: a job that replaces one in flight starts after it returns, and the old result is
///   dropped. Each job has a generation; ``beginAttempt(_:)`` notes which generation is sent, and
///   an outcome counts only when it is the current one.
/// - The cleanup is rendered with each delivery, from the same values, and the caller saves it
///   before that delivery is sent (the actions list saves before it submits; a reload holds the
///   subscriptions it changes until ``releaseHeld()``). A delivery that reached a receiver
///   therefore always has its cleanup in the state, whatever moment the agent is killed at.
/// - When a changed delivery replaces one that may have reached the receiver, the earlier
///   cleanup is kept in the record's `pastCleanups`. Once the new one is delivered they are
///   dropped (an Acrobits report replaces the one before it), or sent first (a backend whose
///   plan ``SubscriptionPlan/cleansUpReplaced``: a changed device token cleans up the old one).
///   When the subscription leaves, they are sent one after the other, oldest first.
///
/// The book is cut into files by concern, as one state machine: this one holds its state and the
/// helpers every part uses; `AgentBook+Entry` what it keeps of a subscription and the actions it
/// returns; `+Start` the start and the feeder's runs; `+Reload` reloads and their holds;
/// `+Attempts` outcomes, confirmations and stopped services; `+Leases` shared state; `+Cleanups`
/// what a subscription owes when it leaves. Its state is module-internal so that those files
/// reach it; only the ``Agent`` drives it, through the methods the files document.
struct AgentBook {
    /// The most cleanups of earlier deliveries kept per subscription (the oldest go first).
    static let pastCleanupLimit = 8

    var entries = EntryTable()
    /// Subscriptions a reload changed whose state is not written yet: no attempt may start.
    /// Each with the reload that held it last (``reloads``).
    var held: [SubscriptionKey: UInt64] = [:]
    /// What the reloads submit, kept until their state is written (``releaseHeld(through:)``),
    /// in the order they made it, each with its reload.
    var heldSubmissions: [(reload: UInt64, submission: Submission)] = []
    /// How many reloads the book has taken: what a release of held subscriptions counts up to.
    var reloads: UInt64 = 0
    /// The subscriptions a release will submit (``releaseHeld(through:)``), for the checks.
    var heldSubmissionKeys: Set<SubscriptionKey> { Set(heldSubmissions.map(\.submission.key)) }
    /// With state shared by several agents (SPEC §11): the subscriptions this agent holds the
    /// lease of, the only ones it sends; nil when its state is its own and it holds them all.
    var owned: Set<SubscriptionKey>?
    var lastGeneration: UInt64 = 0
    /// `agent.reportInterval`: a delivered subscription is delivered again this long after.
    var reportInterval: Duration?
    /// `agent.removalGuard` of the configuration loaded last (``AgentBook+Guard``); nil: off.
    var removalGuard: RemovalGuard? = RemovalGuard()
    /// How many accounts' removals the last start or reload newly held (not those held before),
    /// until the agent has said so (``takeHeldNotice()``).
    var heldThisTime: Int?
    /// What the state keeps of a delivery's parts, delivered as a fingerprint (the backends'
    /// ``Backends/deliveredSignature(of:fingerprint:)``); nil keeps none.
    var deliveredSignature: (@Sendable (SubscriptionRequest, String) -> String?)?
    /// With shared state: the removals the guard holds for the group, as the database said last.
    var sharedHeld = 0
    /// With shared state: subscriptions this agent held whose removal a reload would hold, handed
    /// back in the book; given up in the database once the configuration is published.
    var releaseAfterPublish: [SubscriptionKey] = []
    /// How many deliveries a receiver has accepted, to confirm later: `run --once` asks about
    /// them once more if one came while it was asking.
    var acceptances: UInt64 = 0
    /// Services whose credentials were refused (SPEC §9.0), with why: nothing of theirs is sent
    /// until a reload.
    var stoppedServices: [String: String] = [:]
    /// Records whose stored cleanup could not be read (forgotten without one), for the log.
    var unreadableCleanups: [SubscriptionKey] = []
    /// Whether the cleanup texts of written records are let go, the state holding them
    /// (``AgentBook+CleanupTexts``): set by the agent whose state is its own (with shared state,
    /// another agent's reload would not read them back here); tests of the book keep them.
    var cleanupTextsInStateOnly = false
    /// While a reload reads texts back: none is let go (``AgentBook+CleanupTexts``); those that
    /// would have been wait in ``cleanupTextsToLetGo``.
    var holdsCleanupTexts = false
    var cleanupTextsToLetGo: [SubscriptionKey] = []
    /// Reads a stored cleanup back into a request; nil when it cannot.
    let decodeCleanup: @Sendable (SubscriptionKey, String) -> SubscriptionRequest?

    init(reportInterval: Duration?, decodeCleanup: @escaping @Sendable (SubscriptionKey, String) -> SubscriptionRequest?) {
        self.reportInterval = reportInterval
        self.decodeCleanup = decodeCleanup
    }


    // MARK: The start, as the feeder takes it (AgentBook+Start.swift)


    /// The plans of a large start after its first run, booked as the feeder takes them
    /// (``nextStartRun(_:)``), or at once by what needs the whole book
    /// (``bookRestOfStart(upTo:)``), so that the first run leaves without waiting for every
    /// entry (booking 100,000 took 0.2 s); nil once all are booked.
    var restOfStart: RestOfStart?
    /// Later runs of the start not taken by the feeder yet: the removals past the first run,
    /// and plans booked before it asked (``bookRestOfStart(upTo:)``), first in what it takes next.
    var bookedForFeeder: [Unsent] = []
    /// How many of ``bookedForFeeder`` the feeder took.
    var takenByFeeder = 0

    /// How many subscriptions the start gave a job (``Entry/isStartJob``): each submitted once,
    /// in its first run or a later one.
    var startJobs = 0

    /// How many entries a start booked for a later run that the scheduler has not been given
    /// (``Entry/awaitsFeed``): while there are any, every submission is looked up to tell.
    var awaitingFeed = 0

    // MARK: Counts

    /// How many subscriptions stand where (with shared state: those this agent holds).
    var counts: SubscriptionCounts {
        guard let owned else {
            return SubscriptionCounts(accounts: entries.accountCount, subscriptions: entries.count, byState: entries.stateCounts)
        }
        var counts = SubscriptionCounts(owned.lazy.compactMap { self.entries[$0]?.record })
        if sharedHeld > 0 { counts.byState[.held] = sharedHeld }
        return counts
    }

    /// How many subscriptions of each service stand in each state (with shared state: those this
    /// agent holds).
    var countsByService: [String: [SubscriptionState: Int]] {
        guard let owned else { return entries.stateCountsByService }
        var counts: [String: [SubscriptionState: Int]] = [:]
        for key in owned {
            if let state = entries[key]?.record.state { counts[key.service, default: [:]][state, default: 0] += 1 }
        }
        return counts
    }

    /// `run --once` is over: nothing is attempted before the next run, so no subscription has
    /// an attempt due (`status` showed the time a retry would have come, past once it ran).
    /// Returns the records it changed, to write.
    mutating func endOfRun() -> [SubscriptionRecord] {
        let due = entries.compactMapBorrowing { key, entry in entry.pointee.record.nextDueAt != nil && isOwned(key) ? key : nil }
        return due.compactMap { key in
            entries.update(key) { entry in
                entry.record.nextDueAt = nil
                return entry.record
            }
        }
    }

    /// Whether every delivery has had its first attempt answered: what a start or a reload
    /// sends at once is over, though some may be retrying.
    var firstAttemptsAnswered: Bool { startIsBooked && entries.firstAttemptsDue == 0 }

    /// Whether nothing is left to send: every job is done (or waits on a stopped service), but
    /// for the deliveries `agent.reportInterval` repeats later.
    var isSettled: Bool {
        startIsBooked && entries.jobsByService.allSatisfy { service, jobs in jobs == 0 || stoppedServices[service] != nil }
    }


    // MARK: Helpers

    /// Gives `entry` a new generation, stores it and submits its job now.
    mutating func schedule(_ entry: consuming Entry, actions: inout [Action]) {
        if let submission = store(entry).submission { actions.append(.submit(submission)) }
    }

    /// Gives `entry` a new generation and stores it: the submission of its job now (nil without
    /// one), and that generation.
    mutating func store(_ entry: consuming Entry) -> (submission: Submission?, generation: UInt64) {
        entry.generation = nextGeneration()
        let key = entry.record.key
        let submission = Self.request(of: entry).map { Self.submission(key, $0, after: .zero) }
        let generation = entry.generation
        entries.set(entry, for: key)
        return (submission, generation)
    }

    /// ``keepRequestLean(_:mayLetGo:)`` with this book's ``letsGoOfDeliveredRequests``.
    func keepRequestLean(_ entry: inout Entry) {
        Self.keepRequestLean(&entry, mayLetGo: letsGoOfDeliveredRequests)
    }

    /// Whether a delivered request may be let go of at all: no report interval sends it again,
    /// and no other agent may hand the lease back (state of its own).
    var letsGoOfDeliveredRequests: Bool { reportInterval == nil && owned == nil }

    /// Keeps as little of `entry`'s request as what is to come needs:
    /// - delivered (or rejected by its receiver), with no job, and `mayLetGo`: nothing reads the
    ///   request before a new plan replaces it (``SubscriptionPlan/deliveryUnreadOnceDelivered``),
    ///   so it is let go of; the record's fingerprint tells a change. At 100,000 delivered
    ///   Acrobits subscriptions, their requests were 23 MB of the idle agent's 99.
    /// - retrying, maybe for long: its request moves to memory of its own (``SharedPayload``),
    ///   so as not to hold the memory of the requests planned beside it, delivered and let go
    ///   of (with 1 % of 100,000 accounts retrying, every block of packed requests stayed).
    /// (Static, for the reload to call while the entry is borrowed from the table.)
    static func keepRequestLean(_ entry: inout Entry, mayLetGo: Bool) {
        guard entry.plan?.delivery != nil else { return }
        if mayLetGo, entry.job == nil, entry.record.state == .delivered || entry.record.state == .rejected,
           entry.plan?.unreadOnceDelivered == true {
            entry.plan?.delivery?.payload = requestLetGo
        } else if entry.job == .delivery, entry.record.state == .retrying,
                  let shared = entry.plan?.delivery?.payload as? any SharedPayload, !shared.isAlone {
            entry.plan?.delivery?.payload = shared.alone()
        }
    }

    /// What a request let go of holds instead of its payload. A backend handed it refuses it,
    /// as any payload it did not make.
    static let requestLetGo = RequestLetGo()

    final class RequestLetGo: Sendable {}

    /// With `reportInterval`, schedules a delivered subscription's next delivery.
    func scheduleReportInterval(_ entry: inout Entry, now: Int64, actions: inout [Action]) {
        guard let reportInterval, let delivery = entry.plan?.delivery else { return }
        entry.job = .delivery
        entry.repeatsOnInterval = true
        entry.record.nextDueAt = now + reportInterval.milliseconds
        actions.append(.submit(Self.submission(entry.record.key, delivery, after: reportInterval)))
    }

    mutating func nextGeneration() -> UInt64 {
        lastGeneration += 1
        return lastGeneration
    }

    static func submission(_ key: SubscriptionKey, _ request: SubscriptionRequest, after delay: Duration) -> Submission {
        Submission(key: key, host: request.host, batch: request.batch, pauseLabel: request.pauseLabel, after: delay)
    }

    static func request(of entry: Entry) -> SubscriptionRequest? {
        withUnsafePointer(to: entry) { request(at: $0) }
    }

    /// ``request(of:)`` of an entry read in the table, field by field (``EntryTable/read(_:_:)``).
    static func request(at entry: UnsafePointer<Entry>) -> SubscriptionRequest? {
        switch entry.pointee.job {
        case .delivery: entry.pointee.plan?.delivery
        case .cleanup, .replacedCleanup: entry.pointee.cleanups.first?.request
        case nil: nil
        }
    }

    /// Cancels first, then saves and forgets, then submits, keeping each group's order.
    static func savesFirst(_ actions: [Action]) -> [Action] {
        // One array in three passes: three arrays and their concatenation held 2.5 times the
        // actions at once (the start of 100,000 subscriptions: 76 MB, heaptrack).
        func rank(_ action: Action) -> Int {
            switch action {
            case .cancel: 0
            case .save, .forget: 1
            case .submit: 2
            }
        }
        var ordered: [Action] = []
        ordered.reserveCapacity(actions.count)
        for pass in 0...2 {
            for action in actions where rank(action) == pass { ordered.append(action) }
        }
        return ordered
    }
}
