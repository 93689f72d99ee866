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
struct AgentBook {
    /// What is scheduled for a subscription.
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

    /// The most cleanups of earlier deliveries kept per subscription (the oldest go first).
    static let pastCleanupLimit = 8

    private(set) var entries = EntryTable()
    /// Subscriptions a reload changed whose state is not written yet: no attempt may start.
    /// Each with the reload that held it last (``reloads``).
    private(set) var held: [SubscriptionKey: UInt64] = [:]
    /// What the reloads submit, kept until their state is written (``releaseHeld(through:)``),
    /// in the order they made it, each with its reload.
    private var heldSubmissions: [(reload: UInt64, submission: Submission)] = []
    /// How many reloads the book has taken: what a release of held subscriptions counts up to.
    private(set) var reloads: UInt64 = 0
    /// The subscriptions a release will submit (``releaseHeld(through:)``), for the checks.
    var heldSubmissionKeys: Set<SubscriptionKey> { Set(heldSubmissions.map(\.submission.key)) }
    /// With state shared by several agents (SPEC §11): the subscriptions this agent holds the
    /// lease of, the only ones it sends; nil when its state is its own and it holds them all.
    private(set) var owned: Set<SubscriptionKey>?
    private var lastGeneration: UInt64 = 0
    /// `agent.reportInterval`: a delivered subscription is delivered again this long after.
    var reportInterval: Duration?
    /// How many deliveries a receiver has accepted, to confirm later: `run --once` asks about
    /// them once more if one came while it was asking.
    private(set) var acceptances: UInt64 = 0
    /// Services whose credentials were refused (SPEC §9.0), with why: nothing of theirs is sent
    /// until a reload.
    private(set) var stoppedServices: [String: String] = [:]
    /// Records whose stored cleanup could not be read (forgotten without one), for the log.
    private(set) var unreadableCleanups: [SubscriptionKey] = []
    /// Reads a stored cleanup back into a request; nil when it cannot.
    private let decodeCleanup: @Sendable (SubscriptionKey, String) -> SubscriptionRequest?

    init(reportInterval: Duration?, decodeCleanup: @escaping @Sendable (SubscriptionKey, String) -> SubscriptionRequest?) {
        self.reportInterval = reportInterval
        self.decodeCleanup = decodeCleanup
    }

    // MARK: Configurations

    /// The first configuration after a start: every planned subscription is delivered (changed
    /// or not), and every stored one that left the configuration gets its cleanup.
    mutating func start(plans: [SubscriptionPlan], records: [SubscriptionRecord]) -> [Action] {
        start(plans: plans, records: records, firstRun: .max).actions
    }

    /// ``start(plans:records:)`` for a start the agent hands to the scheduler in runs (SPEC §6
    /// still holds: each run is written before it is submitted), so that the first run leaves
    /// before the rest is booked or written: the first `firstRun` submissions come in
    /// ``Start/actions`` with their writes and those of the removals and forgotten records; the
    /// removals past the first run go to the feeder without theirs, which are written as they
    /// are fed (``unsent(_:generation:)``); and the plans after the first run are kept, to be
    /// booked while it is sent (``bookRestOfStart(upTo:)``); the feeder takes both with
    /// ``nextStartRun(_:)``. Only when there is more than a run after the first one: a smaller
    /// rest goes in the first run too.
    mutating func start(plans: [SubscriptionPlan], records: [SubscriptionRecord], firstRun: Int) -> Start {
        var start = Start(firstRun: firstRun)
        // A first start stores nothing yet: no set of the planned keys to build.
        var planned = Set<SubscriptionKey>()
        var stored: [SubscriptionKey: SubscriptionRecord] = [:]
        if !records.isEmpty {
            planned.reserveCapacity(plans.count)
            for index in plans.indices { planned.insert(plans[index].key) }
            stored.reserveCapacity(records.count)
        }
        // Room for every subscription once: the stored ones are mostly the planned ones again.
        entries.reserveCapacity(plans.count + records.lazy.filter { !planned.contains($0.key) }.count)
        start.actions.reserveCapacity(min(firstRun, plans.count) * 2 + records.count)
        for record in records {
            if planned.contains(record.key) {
                stored[record.key] = record
            } else {
                bookCleanup(of: record, into: &start)
            }
        }
        var next = plans.startIndex
        while next < plans.endIndex {
            // The first run full and more than a run to come: the rest is booked while it is sent.
            if start.isFull && plans.endIndex - next > start.firstRun {
                let rest = plans[next...]
                restOfStart = RestOfStart(plans: rest, stored: stored, jobs: rest.lazy.filter { $0.delivery != nil }.count)
                break
            }
            bookPlanned(plans[next], stored: stored[plans[next].key], into: &start)
            next += 1
        }
        return finished(start)
    }

    /// Books a plan of a start, with the record stored for it if any.
    private mutating func bookPlanned(_ plan: SubscriptionPlan, stored old: SubscriptionRecord?, into start: inout Start) {
        var record = old ?? SubscriptionRecord(key: plan.key)
        plan.apply(to: &record)
        if plan.delivery != nil, let reason = stoppedServices[plan.service] {
            // Booked after its service stopped (its credentials refused while the first run was
            // sent): as ``stop(_:reason:)`` leaves the entries it stops, its job kept for the
            // reload that resumes the service, and nothing submitted.
            record.state = .stopped
            record.lastOutcome = reason
            record.nextDueAt = nil
            var entry = Entry(record: record, plan: plan, job: .delivery)
            entry.isStartJob = true
            startJobs += 1
            start.add(record, submission: nil, generation: store(entry).generation)
            return
        }
        book(Entry(record: record, plan: plan, job: plan.delivery == nil ? nil : .delivery), written: record != old, into: &start)
    }

    /// The plans of a large start after its first run, booked after the first run is
    /// submitted (``bookRestOfStart(upTo:)``, ``nextStartRun(_:)``), so that it leaves without
    /// waiting for every entry (booking 100,000 took 0.2 s); nil once all are booked.
    private var restOfStart: RestOfStart?
    /// Later runs of the start not taken by the feeder yet: the removals past the first run,
    /// and plans booked before it asked (``bookRestOfStart(upTo:)``), first in what it takes next.
    private var bookedForFeeder: [Unsent] = []
    /// How many of ``bookedForFeeder`` the feeder took.
    private var takenByFeeder = 0

    private struct RestOfStart {
        var plans: ArraySlice<SubscriptionPlan>
        /// The stored records of the planned subscriptions (of the first run too).
        var stored: [SubscriptionKey: SubscriptionRecord]
        /// How many of `plans` have something to deliver: jobs of the start to come.
        var jobs: Int
    }

    /// Whether the start has plans not booked yet: until it has none, the book is not settled,
    /// and the whole book is known only after ``bookRestOfStart()``.
    var startIsBooked: Bool { restOfStart == nil }

    /// How many subscriptions the start gives a job, those not booked yet included.
    var startJobsToCome: Int { startJobs + (restOfStart?.jobs ?? 0) }

    /// Whether the feeder has anything to take (``nextStartRun(_:)``).
    var hasStartToFeed: Bool { restOfStart != nil || takenByFeeder < bookedForFeeder.count }

    /// The feeder's next run of the start: up to `size` submissions, those booked already
    /// first, else `size` plans booked now (fewer submissions when some submit nothing).
    /// `actions` writes the records of plans booked now that submit nothing (waiting for a
    /// device token, or their service stopped); the run's own records are written from
    /// ``unsent(_:generation:)`` as before. The start is all fed once the run is empty and
    /// ``hasStartToFeed`` is false.
    mutating func nextStartRun(_ size: Int) -> (actions: [Action], run: [Unsent]) {
        if takenByFeeder < bookedForFeeder.count {
            let run = Array(bookedForFeeder[takenByFeeder..<min(takenByFeeder + size, bookedForFeeder.count)])
            takenByFeeder += run.count
            if takenByFeeder == bookedForFeeder.count {
                bookedForFeeder = []
                takenByFeeder = 0
            }
            return ([], run)
        }
        return bookRest(upTo: size)
    }

    /// The feeder's next run of the start (``nextStartRun(_:)``), with the records to write
    /// before it is submitted: those of the plans booked now that submit nothing, and those of
    /// the run's subscriptions as they stand now. Once they are written, ``submitStartRun(_:)``
    /// gives what of the run is still to submit.
    mutating func takeStartRun(_ size: Int) -> (writes: [Action], run: [Unsent]) {
        var (writes, run) = nextStartRun(size)
        for item in run where awaitsFeed(item.key) {
            if let (record, _) = unsent(item.key, generation: item.generation) { writes.append(.save(record)) }
        }
        return (writes, run)
    }

    /// The submissions of a run ``takeStartRun(_:)`` gave that are still the start's to make,
    /// once its records are written: a reload, a stopped service or an attempt may have moved
    /// some on meanwhile (``unsent(_:generation:)``), and those submitted since by anything else
    /// are not the feeder's any more (``awaitsFeed(_:)``). Each one given is handed over.
    mutating func submitStartRun(_ run: [Unsent]) -> [Action] {
        run.compactMap { item -> Action? in
            guard awaitsFeed(item.key), let (_, submission) = unsent(item.key, generation: item.generation) else { return nil }
            handedOver(item.key)
            return .submit(submission)
        }
    }

    /// Books the plans of the start not booked yet, up to `size` submissions of them (all by
    /// default), for the feeder to take: what needs the whole book (a reload, the round's
    /// outcome) calls this first, and the agent books ahead of the feeder with it, so that the
    /// plans go once booked, not once fed. Returns the writes of those that submit nothing.
    mutating func bookRestOfStart(upTo size: Int = .max) -> [Action] {
        // Room for every submission to come at once: grown by doubling, the list held up to
        // twice what it needs while the sending began.
        if bookedForFeeder.isEmpty, let rest = restOfStart { bookedForFeeder.reserveCapacity(rest.jobs) }
        let (actions, run) = bookRest(upTo: size)
        bookedForFeeder += run
        return actions
    }

    /// Books up to `size` plans of the rest of the start (fewer submissions when some submit
    /// nothing): their submissions, and the writes of those that submit nothing. The actions
    /// are only writes.
    private mutating func bookRest(upTo size: Int) -> (actions: [Action], run: [Unsent]) {
        guard var rest = restOfStart else { return ([], []) }
        restOfStart = nil
        // A start with no room in its first run: every submission goes in `later`.
        var start = Start(firstRun: 0)
        var booked = 0
        while booked < size, let plan = rest.plans.first {
            booked += 1
            rest.plans.removeFirst()
            if plan.delivery != nil { rest.jobs -= 1 }
            bookPlanned(plan, stored: rest.stored[plan.key], into: &start)
        }
        if !rest.plans.isEmpty { restOfStart = rest }
        return (start.actions, start.later)
    }

    /// `start` with a rest of no more than a run taken into its first run (the feeder's second
    /// transaction would buy nothing), and its actions in the order they are applied. A longer
    /// rest goes to the feeder, before the plans still to book (``nextStartRun(_:)``).
    private mutating func finished(_ start: consuming Start) -> Start {
        if !start.later.isEmpty && start.later.count <= start.firstRun {
            for item in start.later {
                handedOver(item.key)
                guard let (record, submission) = unsent(item.key, generation: item.generation) else { continue }
                if item.written { start.actions.append(.save(record)) }
                start.actions.append(.submit(submission))
            }
        } else {
            bookedForFeeder = start.later
        }
        start.later = []
        start.actions = Self.savesFirst(start.actions)
        return start
    }

    /// What a start gives the agent: what to apply before the scheduler runs. The submissions
    /// after its first run are the feeder's (``AgentBook/nextStartRun(_:)``).
    struct Start {
        /// The writes to make and the submissions of the first run, to apply at once.
        var actions: [Action] = []
        /// While booking: the submissions past the first run, each with its job's generation,
        /// whose records are written when they are fed (``AgentBook/unsent(_:generation:)``).
        /// Handed to the feeder when the start is finished, so empty in what it returns.
        var later: [Unsent] = []
        /// How many submissions `actions` takes.
        let firstRun: Int
        private var submitted = 0
        /// Whether the first run is full: a submission added now goes in ``later``.
        var isFull: Bool { submitted >= firstRun }

        init(firstRun: Int) {
            self.firstRun = firstRun
        }

        /// `written`, when given, is written first; `submission` goes in the first run while
        /// there is room.
        mutating func add(_ written: SubscriptionRecord?, submission: Submission?, generation: UInt64) {
            if let submission, submitted >= firstRun {
                later.append(Unsent(key: submission.key, generation: generation, written: written != nil))
                return
            }
            if let written { actions.append(.save(written)) }
            if let submission {
                actions.append(.submit(submission))
                submitted += 1
            }
        }

    }

    /// A submission of a start not given to the scheduler yet: its key and its job's generation
    /// then, from which the book gives the submission back (``unsent(_:generation:)``). Kept
    /// whole, a submission made each of 99,000 later ones 160 bytes instead of 48.
    struct Unsent: Sendable {
        var key: SubscriptionKey
        var generation: UInt64
        /// Whether the start changed its record (the feeder writes it whichever).
        var written: Bool
    }

    /// A submission of ``start(plans:records:firstRun:)`` the scheduler has not been given yet (the agent
    /// hands a large start over in runs), by its key and generation: its key's record as it stands
    /// now, to be written before it is submitted, and the submission, as the start made it. Nil
    /// when the book has moved on since: a reload replaced or removed the job (and submitted its
    /// own), its service stopped (a reload brings it back: ``stop(_:reason:)`` marks the entries
    /// booked, ``bookPlanned`` those booked after), or an attempt began. The agent also
    /// skips a key that anything else submitted meanwhile.
    func unsent(_ key: SubscriptionKey, generation: UInt64) -> (record: SubscriptionRecord, submission: Submission)? {
        // (Whether it still awaits the feeder is ``awaitsFeed(_:)``: the agent hands a key over
        // whenever it submits it, which the book does not see.)
        guard held[key] == nil, isOwned(key), stoppedServices[key.service] == nil else { return nil }
        return entries.read(key) { entry in
            guard entry.pointee.job != nil, entry.pointee.generation == generation, entry.pointee.sentGeneration == nil,
                  let request = Self.request(at: entry) else { return nil }
            return (entry.pointee.record, Self.submission(key, request, after: .zero))
        } ?? nil
    }

    /// How many subscriptions the start gave a job (``Entry/isStartJob``): each submitted once,
    /// in its first run or a later one.
    private(set) var startJobs = 0

    /// How many entries a start booked for a later run that the scheduler has not been given
    /// (``Entry/awaitsFeed``): while there are any, every submission is looked up to tell.
    private(set) var awaitingFeed = 0

    /// Whether `key` was booked by a start for a later run and has not been handed to the
    /// scheduler since (by the feeder, or by a reload's submission of it).
    func awaitsFeed(_ key: SubscriptionKey) -> Bool {
        awaitingFeed > 0 && entries.read(key) { $0.pointee.awaitsFeed } == true
    }

    /// `key` is handed to the scheduler (or never will be by the feeder): it no longer awaits it.
    mutating func handedOver(_ key: SubscriptionKey) {
        guard awaitingFeed > 0 else { return }
        let was = entries.update(key) { entry in
            defer { entry.awaitsFeed = false }
            return entry.awaitsFeed
        }
        if was == true { awaitingFeed -= 1 }
    }

    /// The feeder is done, or gave up: nothing awaits it any more. The flags it leaves are
    /// read only while ``awaitingFeed`` is above zero.
    mutating func endFeed() {
        awaitingFeed = 0
    }

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
    mutating func acquire(_ claimed: [PostgresStateStore.ClaimedSubscription], now: Int64)
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

    /// The removal of stored subscriptions (`pushreporter remove`): each gets its cleanups, then
    /// is forgotten.
    mutating func startCleanup(of records: [SubscriptionRecord]) -> [Action] {
        startCleanup(of: records, firstRun: .max).actions
    }

    /// ``startCleanup(of:)`` handed to the scheduler in runs, as ``start(plans:records:firstRun:)``.
    mutating func startCleanup(of records: [SubscriptionRecord], firstRun: Int) -> Start {
        var start = Start(firstRun: firstRun)
        for record in records { bookCleanup(of: record, into: &start) }
        return finished(start)
    }

    /// A new configuration while running: new and changed subscriptions are delivered now
    /// (replacing a pending retry), unchanged ones keep their schedule (a rejected one stays
    /// rejected), those of a stopped service are sent again, and those that left get their
    /// cleanup. The actions cancel, then save and forget, to apply at once; what the reload
    /// submits is kept, and the subscriptions it changes are held (no attempt starts), until
    /// the caller has written the state and calls ``releaseHeld(through:)`` with this reload's
    /// number (``reloads``), so that no request leaves before its cleanup is written (SPEC §6).
    /// `reportInterval` is the new configuration's.
    mutating func reload(plans: [SubscriptionPlan], reportInterval newInterval: Duration?, now: Int64) -> ([Action], ReloadSummary) {
        reloads += 1
        let (actions, summary) = decideReload(plans: plans, reportInterval: newInterval, now: now)
        var immediate: [Action] = []
        immediate.reserveCapacity(actions.count)
        for action in actions {
            if case .submit(let submission) = action {
                heldSubmissions.append((reloads, submission))
            } else {
                immediate.append(action)
            }
        }
        return (immediate, summary)
    }

    /// Lets the subscriptions the reloads up to number `reload` held start attempts, once
    /// the state they recorded is written: what they submitted, each key once (its latest), and
    /// only while it still has something to send. Those held by a later reload stay held.
    mutating func releaseHeld(through reload: UInt64) -> [Action] {
        held = held.filter { $0.value > reload }
        var released: [Submission] = []
        var latest: [SubscriptionKey: Int] = [:]
        var kept: [(reload: UInt64, submission: Submission)] = []
        for item in heldSubmissions {
            guard item.reload <= reload else {
                kept.append(item)
                continue
            }
            if let earlier = latest[item.submission.key] {
                released[earlier] = item.submission
            } else {
                latest[item.submission.key] = released.count
                released.append(item.submission)
            }
        }
        heldSubmissions = kept
        return released.compactMap { submission in
            let key = submission.key
            guard held[key] == nil, isOwned(key), stoppedServices[key.service] == nil,
                  entries.read(key, { $0.pointee.job != nil }) == true else { return nil }
            return .submit(submission)
        }
    }

    /// ``reload(plans:reportInterval:now:)``'s decisions: cancels, saves, forgets and submits.
    private mutating func decideReload(plans: [SubscriptionPlan], reportInterval newInterval: Duration?, now: Int64) -> ([Action], ReloadSummary) {
        // Compared with the whole book: the start's plans not booked yet are booked first
        // (the feeder still submits those the reload leaves as they are).
        var actions: [Action] = bookRestOfStart()
        var summary = ReloadSummary()
        let intervalChanged = newInterval != reportInterval
        reportInterval = newInterval
        let wereStopped = stoppedServices
        stoppedServices = [:]
        var planned = Set<SubscriptionKey>()
        planned.reserveCapacity(plans.count)
        let letsGo = letsGoOfDeliveredRequests
        for plan in plans {
            let key = plan.key
            planned.insert(key)
            // Most of a reload: the same delivery, nothing to redo. The new plan replaces the old
            // where the entry lies (the general path below does the same, copying the entry).
            if !intervalChanged, reportInterval == nil, isOwned(key), entries.update(key, { entry in
                guard Self.keepsDelivery(entry, plan, serviceWasStopped: wereStopped[key.service] != nil),
                      entry.record.cleanup == plan.cleanup else { return false }
                entry.plan = Booking(plan)
                Self.keepRequestLean(&entry, mayLetGo: letsGo)
                return true
            }) == true {
                summary.unchanged += 1
                continue
            }
            guard var entry = entries[key], isOwned(key) else {
                if entries[key] == nil { summary.count(.added, key) } else { summary.unchanged += 1 }
                var record = entries[key]?.record ?? SubscriptionRecord(key: key)
                plan.apply(to: &record)
                guard owned == nil else {
                    // Shared state: known, to be sent by whichever agent claims it.
                    entries.set(Entry(record: record, plan: plan, job: nil), for: key)
                    continue
                }
                actions.append(.save(record))
                schedule(Entry(record: record, plan: plan, job: plan.delivery == nil ? nil : .delivery), actions: &actions)
                held[key] = reloads
                continue
            }
            let wasRemoving = entry.record.isRemoving
            if Self.keepsDelivery(entry, plan, serviceWasStopped: wereStopped[key.service] != nil) {
                summary.unchanged += 1
                entry.plan = Booking(plan)
                var changed = false
                var (submitted, cancelled) = (false, false)
                let hadJob = entry.job != nil
                let cleanupChanged = entry.record.cleanup != plan.cleanup
                if cleanupChanged {
                    // The same delivery, with a cleanup written differently (a fixed URL, say).
                    entry.record.cleanup = plan.cleanup
                    changed = true
                }
                // Only a delivery the interval repeats, or none: a job owed now (a start's report,
                // a cleanup) keeps its place whatever the interval.
                if entry.record.state == .delivered, entry.job == nil || entry.repeatsOnInterval,
                   intervalChanged || (entry.job == nil && reportInterval != nil) {
                    if let reportInterval, let lastSuccess = entry.record.lastSuccessAt, let delivery = plan.delivery {
                        let due = Swift.max(0, lastSuccess + reportInterval.milliseconds - now)
                        entry.job = .delivery
                        // Overdue: owed now, not a repeat for later.
                        entry.repeatsOnInterval = due > 0
                        entry.record.nextDueAt = now + due
                        actions.append(.submit(Self.submission(key, delivery, after: .milliseconds(due))))
                        submitted = true
                    } else if reportInterval == nil, entry.job != nil {
                        entry.job = nil
                        entry.record.nextDueAt = nil
                        actions.append(.cancel(key))
                        cancelled = true
                    }
                    changed = true
                }
                if cleanupChanged, hadJob {
                    // Its new cleanup is written before the job can send anything (SPEC §6): off
                    // the scheduler until the reload's state is written, then submitted again
                    // for when it is due (the agent submits a reload's jobs after writing).
                    if !cancelled { actions.append(.cancel(key)) }
                    if !submitted, entry.job != nil, let request = Self.request(of: entry) {
                        let due = entry.record.nextDueAt.map { Swift.max(0, $0 - now) } ?? 0
                        actions.append(.submit(Self.submission(key, request, after: .milliseconds(due))))
                    }
                    held[key] = reloads
                }
                if changed { actions.append(.save(entry.record)) }
                keepRequestLean(&entry)
                entries.set(entry, for: key)
                continue
            }
            summary.count(wasRemoving ? .added : .changed, key)
            if entry.job != nil { actions.append(.cancel(key)) }
            if wasRemoving {
                // Back before its cleanups all went out: they stay owed for a later removal.
                entry.record.pastCleanups = entry.cleanups.map(\.text)
                entry.record.cleanup = nil
            }
            plan.apply(to: &entry.record)
            entry.plan = Booking(plan)
            entry.job = plan.delivery == nil ? nil : .delivery
            entry.cleanups = []
            actions.append(.save(entry.record))
            schedule(entry, actions: &actions)
            held[key] = reloads
        }
        // Removals a stopped service held back (their jobs were cancelled, not dropped): the
        // service is resumed, so they are submitted again (before the subscriptions leaving now
        // begin theirs, which are submitted once).
        if !wereStopped.isEmpty {
            let resumed = entries.compactMapBorrowing { key, _ in
                wereStopped[key.service] != nil && !planned.contains(key) && isOwned(key) ? key : nil
            }
            for key in resumed {
                guard let entry = entries[key], entry.record.isRemoving, entry.job != nil else { continue }
                schedule(entry, actions: &actions)
            }
        }
        // Taken out first: changing `entries` while iterating it would copy the whole book.
        let leaving = entries.compactMapBorrowing { key, entry in
            !planned.contains(key) && !entry.pointee.record.isRemoving ? (key, entry.pointee) : nil
        }
        for (key, entry) in leaving {
            summary.count(.removed, key)
            guard isOwned(key) else {
                // Shared state: the agent that holds it cleans it up.
                entries[key] = nil
                continue
            }
            if entry.job != nil { actions.append(.cancel(key)) }
            entries[key] = nil
            beginCleanup(entry.record, actions: &actions)
            held[key] = reloads
        }
        return (Self.savesFirst(actions), summary)
    }


    // MARK: Attempts

    /// The scheduler starts an attempt of `key`: the request to send (nil when there is nothing
    /// to send any more), noted as sent with the job's current generation.
    mutating func beginAttempt(_ key: SubscriptionKey) -> SubscriptionRequest? {
        guard held[key] == nil, isOwned(key), stoppedServices[key.service] == nil else { return nil }
        return entries.update(key) { entry in
            guard let request = Self.request(of: entry) else { return nil }
            assert(!(request.payload is RequestLetGo), "a request let go of is sent: \(key)")
            entry.sentGeneration = entry.generation
            return request
        } ?? nil
    }

    /// The request the current job of `key` sends, without starting an attempt.
    func currentRequest(_ key: SubscriptionKey) -> SubscriptionRequest? {
        entries.read(key) { Self.request(at: $0) } ?? nil
    }

    /// The last attempt of `key` ended with a final outcome (anything but a retry) at `now`
    /// (Unix milliseconds). Nil when that attempt belonged to a job replaced since; else the
    /// actions, the request it was about and how it settled.
    mutating func settle(_ key: SubscriptionKey, _ outcome: Outcome, attempt: Int, now: Int64)
        -> (actions: [Action], request: SubscriptionRequest, settlement: Settlement)? {
        guard var entry = entries[key], let job = entry.job, entry.sentGeneration == entry.generation,
              let request = Self.request(of: entry) else { return nil }
        entry.record.lastAttemptAt = now
        if job != .delivery {
            // A cleanup: delivered, or refused by the receiver and given up.
            let refused: String?
            switch outcome {
            case .delivered, .deliveredKeeping, .accepted: refused = nil
            case .rejected(let why): refused = why
            case .stopped(let why):
                entry.record.attempts = attempt
                entries.set(entry, for: key)
                return (stop(key.service, reason: why), request, .stopped(why))
            case .retry: preconditionFailure("a retry is not a final outcome")
            }
            let sent = entry.cleanups.removeFirst().text
            entry.record.pastCleanups.removeAll { $0 == sent }
            if job == .cleanup, entry.record.cleanup == sent { entry.record.cleanup = nil }
            entry.record.attempts = 0
            let settlement: Settlement = refused.map { .cleanupRefused($0) } ?? .cleanedUp(forgotten: false)
            if entry.cleanups.isEmpty {
                if job == .cleanup {
                    entries[key] = nil
                    owned?.remove(key)
                    return ([.forget(key)], request, refused.map { .cleanupRefused($0) } ?? .cleanedUp(forgotten: true))
                }
                // The replaced deliveries are cleaned up: the subscription is done until it changes.
                entry.job = nil
                entry.record.nextDueAt = nil
                var actions: [Action] = []
                scheduleReportInterval(&entry, now: now, actions: &actions)
                entries.set(entry, for: key)
                return ([.save(entry.record)] + actions, request, settlement)
            }
            entry.generation = nextGeneration()
            entries.set(entry, for: key)
            return ([.save(entry.record), .submit(Self.submission(key, entry.cleanups[0].request, after: .zero))], request, settlement)
        }
        var actions: [Action] = []
        let settlement: Settlement
        switch outcome {
        case .delivered, .deliveredKeeping, .accepted:
            entry.record.attempts = 0
            if case .accepted(let data) = outcome {
                acceptances &+= 1
                entry.record.state = .accepted
                entry.record.backendData = data
                entry.record.lastOutcome = "accepted; awaiting confirmation"
                settlement = .accepted
            } else {
                entry.record.state = .delivered
                entry.record.deliveredFingerprint = entry.record.fingerprint
                entry.record.lastSuccessAt = now
                entry.record.backendData = outcome.kept
                entry.record.lastOutcome = "delivered"
                settlement = .delivered
            }
            entry.record.nextDueAt = nil
            entry.job = nil
            if entry.plan?.cleansUpReplaced == true, !entry.record.pastCleanups.isEmpty {
                // The replaced deliveries (an old device token) are cleaned up now.
                let (owed, unreadable) = owedCleanups(key, texts: entry.record.pastCleanups)
                if unreadable > 0 { unreadableCleanups.append(key) }
                entry.record.pastCleanups = owed.map(\.text)
                if let first = owed.first {
                    entry.cleanups = owed
                    entry.job = .replacedCleanup
                    entry.generation = nextGeneration()
                    actions.append(.submit(Self.submission(key, first.request, after: .zero)))
                }
            } else {
                // This delivery replaces what earlier ones registered: only its own cleanup is owed now.
                entry.record.pastCleanups = []
            }
            if entry.job == nil, entry.record.state == .delivered { scheduleReportInterval(&entry, now: now, actions: &actions) }
            keepRequestLean(&entry)
        case .rejected(let why):
            entry.record.state = .rejected
            entry.record.attempts = attempt
            entry.record.lastOutcome = why
            entry.record.nextDueAt = nil
            entry.job = nil
            settlement = .rejected(why)
            keepRequestLean(&entry)
        case .stopped(let why):
            entry.record.attempts = attempt
            entries.set(entry, for: key)
            return (stop(key.service, reason: why), request, .stopped(why))
        case .retry:
            preconditionFailure("a retry is not a final outcome")
        }
        entries.set(entry, for: key)
        actions.insert(.save(entry.record), at: 0)
        return (actions, request, settlement)
    }

    /// Attempt `attempt` of `key` failed at `now`; the scheduler tries again `retryIn` later (nil:
    /// not before the next run). Nil when that attempt belonged to a replaced job.
    mutating func failed(_ key: SubscriptionKey, attempt: Int, reason: String, retryIn: Duration?, now: Int64)
        -> (actions: [Action], request: SubscriptionRequest)? {
        guard var entry = entries[key], entry.job != nil, entry.sentGeneration == entry.generation,
              let request = Self.request(of: entry) else { return nil }
        entry.record.attempts = attempt
        entry.record.lastAttemptAt = now
        entry.record.lastOutcome = reason
        var actions: [Action] = []
        if stoppedServices[key.service] != nil {
            // In flight when its service stopped: it waits for a reload with the others.
            if !entry.record.isRemoving { entry.record.state = .stopped }
            entry.record.nextDueAt = nil
            actions.append(.cancel(key))
        } else {
            if entry.job == .delivery { entry.record.state = .retrying }
            entry.record.nextDueAt = retryIn.map { now + $0.milliseconds }
        }
        keepRequestLean(&entry)
        entries.set(entry, for: key)
        return ([.save(entry.record)] + actions, request)
    }

    // MARK: Confirmations

    /// The accepted subscriptions of `service`: their keys, backend data and when they were accepted.
    func awaitingConfirmation(service: String) -> [(key: SubscriptionKey, data: String, acceptedAt: Int64)] {
        entries.compactMapBorrowing { key, entry -> (key: SubscriptionKey, data: String, acceptedAt: Int64)? in
            guard key.service == service, entry.pointee.record.state == .accepted, let data = entry.pointee.record.backendData,
                  isOwned(key) else { return nil }
            return (key, data, entry.pointee.record.lastAttemptAt ?? 0)
        }.sorted { $0.key < $1.key }
    }

    /// What the receiver said of an accepted subscription: delivered, send again (`.retry`),
    /// rejected or stopped; nil when it is no longer awaiting that confirmation.
    mutating func confirmed(_ key: SubscriptionKey, data: String, _ outcome: Outcome, now: Int64)
        -> (actions: [Action], settlement: Settlement?)? {
        guard isOwned(key), var entry = entries[key], entry.record.state == .accepted, entry.record.backendData == data else { return nil }
        switch outcome {
        case .delivered, .deliveredKeeping, .accepted:
            entry.record.state = .delivered
            entry.record.deliveredFingerprint = entry.record.fingerprint
            entry.record.lastSuccessAt = now
            entry.record.backendData = outcome.kept
            entry.record.lastOutcome = "delivered"
            var actions: [Action] = []
            if entry.job == nil { scheduleReportInterval(&entry, now: now, actions: &actions) }
            entries.set(entry, for: key)
            return ([.save(entry.record)] + actions, .delivered)
        case .retry(let failure):
            // The receiver could not keep it: delivered again.
            entry.record.state = .retrying
            entry.record.backendData = nil
            entry.record.lastOutcome = failure.reason
            entry.record.nextDueAt = now
            entries.set(entry, for: key)
            guard let delivery = entry.plan?.delivery else { return ([.save(entry.record)], nil) }
            entry.job = .delivery
            entry.cleanups = []
            entry.generation = nextGeneration()
            entries.set(entry, for: key)
            return ([.save(entry.record), .submit(Self.submission(key, delivery, after: .zero))], nil)
        case .rejected(let why):
            entry.record.state = .rejected
            entry.record.backendData = nil
            entry.record.lastOutcome = why
            entries.set(entry, for: key)
            return ([.save(entry.record)], .rejected(why))
        case .stopped(let why):
            return (stop(key.service, reason: why), .stopped(why))
        }
    }

    /// An accepted subscription still unconfirmed after the backend's time: given up as
    /// *unconfirmed* (not sent again until it changes).
    mutating func unconfirmed(_ key: SubscriptionKey, reason: String) -> [Action] {
        guard isOwned(key), var entry = entries[key], entry.record.state == .accepted else { return [] }
        entry.record.state = .unconfirmed
        entry.record.lastOutcome = reason
        entries.set(entry, for: key)
        return [.save(entry.record)]
    }

    // MARK: Services

    /// The credentials of `service` were refused: every subscription of it that has something
    /// to send, or awaits a confirmation, waits as *stopped* until a reload.
    mutating func stop(_ service: String, reason: String) -> [Action] {
        guard stoppedServices[service] == nil else { return [] }
        stoppedServices[service] = reason
        var actions: [Action] = []
        let keys = entries.compactMapBorrowing { key, _ in key.service == service ? key : nil }
        for key in keys {
            // What has something to send, and what awaits a confirmation that will not come.
            guard isOwned(key), var entry = entries[key], entry.job != nil || entry.record.state == .accepted else { continue }
            if entry.job != nil { actions.append(.cancel(key)) }
            if !entry.record.isRemoving { entry.record.state = .stopped }
            entry.record.lastOutcome = reason
            entry.record.nextDueAt = nil
            entries.set(entry, for: key)
            actions.append(.save(entry.record))
        }
        return actions
    }

    // MARK: Counts

    /// How many subscriptions stand where (with shared state: those this agent holds).
    var counts: SubscriptionCounts {
        guard let owned else {
            return SubscriptionCounts(accounts: entries.accountCount, subscriptions: entries.count, byState: entries.stateCounts)
        }
        return SubscriptionCounts(owned.lazy.compactMap { self.entries[$0]?.record })
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

    // MARK: Cleanups

    /// The cleanups a stored record owes, in the order they are sent (those of earlier
    /// deliveries first), and how many of its stored cleanups could not be read (they are dropped).
    func cleanups(of record: SubscriptionRecord) -> (owed: [OwedCleanup], unreadable: Int) {
        var texts: [String] = []
        for text in record.pastCleanups + [record.cleanup].compactMap({ $0 }) where !texts.contains(text) {
            texts.append(text)
        }
        return owedCleanups(record.key, texts: texts)
    }

    private func owedCleanups(_ key: SubscriptionKey, texts: [String]) -> (owed: [OwedCleanup], unreadable: Int) {
        var owed: [OwedCleanup] = []
        var unreadable = 0
        for text in texts {
            if let request = decodeCleanup(key, text) {
                owed.append(OwedCleanup(text: text, request: request))
            } else {
                unreadable += 1
            }
        }
        return (owed, unreadable)
    }

    /// Starts the cleanup of a stored subscription that left the configuration, or forgets it
    /// when it has no cleanup to send.
    private mutating func beginCleanup(_ stored: SubscriptionRecord, actions: inout [Action]) {
        guard let entry = cleanupEntry(of: stored) else {
            actions.append(.forget(stored.key))
            return
        }
        if entry.record != stored { actions.append(.save(entry.record)) }
        schedule(entry, actions: &actions)
    }

    /// The entry of a stored subscription that left, sending its owed cleanups; nil when it owes
    /// none (it is forgotten, and no longer this agent's).
    private mutating func cleanupEntry(of stored: SubscriptionRecord) -> Entry? {
        let (owed, unreadable) = cleanups(of: stored)
        if unreadable > 0 { unreadableCleanups.append(stored.key) }
        guard !owed.isEmpty else {
            owned?.remove(stored.key)
            return nil
        }
        var record = stored
        if !record.isRemoving { record.attempts = 0 }
        record.state = .removing
        record.fingerprint = ""
        record.nextDueAt = nil
        record.backendData = nil
        return Entry(record: record, plan: nil, job: .cleanup, cleanups: owed)
    }

    /// Takes the list of unreadable cleanups, for the log.
    mutating func takeUnreadableCleanups() -> [SubscriptionKey] {
        defer { unreadableCleanups = [] }
        return unreadableCleanups
    }

    // MARK: Helpers

    /// ``schedule(_:actions:)`` for a start: `entry`'s record is written first when `written`.
    private mutating func book(_ entry: consuming Entry, written: Bool, into start: inout Start) {
        let record = written ? entry.record : nil
        var entry = entry
        if Self.request(of: entry) != nil {
            entry.isStartJob = true
            startJobs += 1
            // Its submission goes in a later run (``Start/add(_:submission:generation:)``).
            if start.isFull {
                entry.awaitsFeed = true
                awaitingFeed += 1
            }
        }
        let (submission, generation) = store(entry)
        start.add(record, submission: submission, generation: generation)
    }

    /// ``beginCleanup(_:actions:)`` for a start.
    private mutating func bookCleanup(of stored: SubscriptionRecord, into start: inout Start) {
        if let entry = cleanupEntry(of: stored) {
            book(entry, written: entry.record != stored, into: &start)
        } else {
            start.actions.append(.forget(stored.key))
        }
    }

    /// Gives `entry` a new generation, stores it and submits its job now.
    private mutating func schedule(_ entry: consuming Entry, actions: inout [Action]) {
        if let submission = store(entry).submission { actions.append(.submit(submission)) }
    }

    /// Gives `entry` a new generation and stores it: the submission of its job now (nil without
    /// one), and that generation.
    private mutating func store(_ entry: consuming Entry) -> (submission: Submission?, generation: UInt64) {
        entry.generation = nextGeneration()
        let key = entry.record.key
        let submission = Self.request(of: entry).map { Self.submission(key, $0, after: .zero) }
        let generation = entry.generation
        entries.set(entry, for: key)
        return (submission, generation)
    }

    /// ``keepRequestLean(_:mayLetGo:)`` with this book's ``letsGoOfDeliveredRequests``.
    private func keepRequestLean(_ entry: inout Entry) {
        Self.keepRequestLean(&entry, mayLetGo: letsGoOfDeliveredRequests)
    }

    /// Whether a delivered request may be let go of at all: no report interval sends it again,
    /// and no other agent may hand the lease back (state of its own).
    private var letsGoOfDeliveredRequests: Bool { reportInterval == nil && owned == nil }

    /// Keeps as little of `entry`'s request as what is to come needs:
    /// - delivered (or rejected by its receiver), with no job, and `mayLetGo`: nothing reads the
    ///   request before a new plan replaces it (``SubscriptionPlan/deliveryUnreadOnceDelivered``),
    ///   so it is let go of; the record's fingerprint tells a change. At 100,000 delivered
    ///   Acrobits subscriptions, their requests were 23 MB of the idle agent's 99.
    /// - retrying, maybe for long: its request moves to memory of its own (``SharedPayload``),
    ///   so as not to hold the memory of the requests planned beside it, delivered and let go
    ///   of (with 1 % of 100,000 accounts retrying, every block of packed requests stayed).
    /// (Static, for the reload to call while the entry is borrowed from the table.)
    private static func keepRequestLean(_ entry: inout Entry, mayLetGo: Bool) {
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
    private func scheduleReportInterval(_ entry: inout Entry, now: Int64, actions: inout [Action]) {
        guard let reportInterval, let delivery = entry.plan?.delivery else { return }
        entry.job = .delivery
        entry.repeatsOnInterval = true
        entry.record.nextDueAt = now + reportInterval.milliseconds
        actions.append(.submit(Self.submission(entry.record.key, delivery, after: reportInterval)))
    }

    /// Whether a reload's `plan` leaves `entry`'s delivery as it is: it is not being removed, not
    /// stopped with its service, and sends the same (or, as before, nothing yet).
    private static func keepsDelivery(_ entry: Entry, _ plan: SubscriptionPlan, serviceWasStopped: Bool) -> Bool {
        !entry.record.isRemoving && !(serviceWasStopped && entry.record.state == .stopped)
            && entry.record.fingerprint == plan.fingerprint && (plan.delivery != nil) == (entry.plan?.delivery != nil)
    }

    private mutating func nextGeneration() -> UInt64 {
        lastGeneration += 1
        return lastGeneration
    }

    private static func submission(_ key: SubscriptionKey, _ request: SubscriptionRequest, after delay: Duration) -> Submission {
        Submission(key: key, host: request.host, batch: request.batch, pauseLabel: request.pauseLabel, after: delay)
    }

    private static func request(of entry: Entry) -> SubscriptionRequest? {
        withUnsafePointer(to: entry) { request(at: $0) }
    }

    /// ``request(of:)`` of an entry read in the table, field by field (``EntryTable/read(_:_:)``).
    private static func request(at entry: UnsafePointer<Entry>) -> SubscriptionRequest? {
        switch entry.pointee.job {
        case .delivery: entry.pointee.plan?.delivery
        case .cleanup, .replacedCleanup: entry.pointee.cleanups.first?.request
        case nil: nil
        }
    }

    /// Cancels first, then saves and forgets, then submits, keeping each group's order.
    private static func savesFirst(_ actions: [Action]) -> [Action] {
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

extension Outcome {
    /// What the backend keeps in state for a delivered subscription (``Outcome/deliveredKeeping(_:)``).
    var kept: String? {
        if case .deliveredKeeping(let data) = self { data } else { nil }
    }
}

extension SubscriptionPlan {
    /// The subscription's key.
    var key: SubscriptionKey { SubscriptionKey(account: account, service: service) }

    /// Makes `record` describe this plan, not yet attempted, with its cleanup.
    func apply(to record: inout SubscriptionRecord) {
        if record.fingerprint != fingerprint, let old = record.cleanup, old != cleanup, !record.pastCleanups.contains(old) {
            // The delivery it replaces may have reached the receiver: its cleanup stays owed.
            record.pastCleanups.append(old)
            record.pastCleanups.removeFirst(max(0, record.pastCleanups.count - AgentBook.pastCleanupLimit))
        }
        if let cleanup { record.pastCleanups.removeAll { $0 == cleanup } }
        let staysDelivered = refusal == nil && delivery != nil && record.deliveredFingerprint == fingerprint
        record.fingerprint = fingerprint
        record.attempts = 0
        record.cleanup = cleanup
        // What the backend keeps for a delivery made again unchanged (a group's key) stays
        // while it is made again: `status` shows it, and a restart finds it.
        if !staysDelivered || record.state != .delivered { record.backendData = nil }
        // The fingerprint and cleanup are the plan's own now; a restart read the delivered one
        // from the state.
        if SubscriptionRecord.sameBytes(record.deliveredFingerprint, fingerprint) { record.deliveredFingerprint = fingerprint }
        if let refusal {
            // Never sent as it stands: rejected until it changes.
            record.state = .rejected
            record.lastOutcome = refusal
            record.nextDueAt = nil
        } else if delivery == nil {
            // Waiting for a value it needs: nothing is sent until it comes.
            record.state = .pending
            record.lastOutcome = waiting
            record.nextDueAt = nil
        } else if record.deliveredFingerprint == fingerprint {
            // Delivered already: it stays so while this delivery is made again.
            record.state = .delivered
        } else {
            record.state = .pending
            record.nextDueAt = nil
        }
    }
}

extension SubscriptionRecord {
    /// Whether both texts are there, with the same bytes (`==` holds canonically equivalent
    /// texts equal, and a record keeps the bytes the state has).
    static func sameBytes(_ text: String?, _ other: String?) -> Bool {
        guard let text, let other else { return false }
        return text.utf8.elementsEqual(other.utf8)
    }
}
