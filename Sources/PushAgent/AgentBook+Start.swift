import PushBackend
import PushConfig
import PushScheduler
import PushState

/// The start (SPEC §5: every subscription delivered, every stored one that left cleaned up),
/// handed to the scheduler in runs by the feeder, and `remove`'s start.
extension AgentBook {
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
    /// booked as the feeder takes them (``nextStartRun(_:)``), or all at once by what needs the
    /// whole book (``bookRestOfStart(upTo:)``). Only when there is more than a run after the
    /// first one: a smaller rest goes in the first run too.
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
        var leaving: [SubscriptionRecord] = []
        for record in records {
            if planned.contains(record.key) {
                stored[record.key] = record
            } else {
                leaving.append(record)
            }
        }
        // Removals decided before (already removing) go on; the others are the guard's to hold.
        let undecided = leaving.filter { !$0.isRemoving }
        if holdsRemovals(undecided.map(\.key), accountsInState: Set(records.lazy.map(\.key.account)).count) {
            let accounts = Set(undecided.lazy.map(\.key.account)).count
            heldThisTime = Self.newlyHeld(undecided)
            for record in leaving {
                guard !record.isRemoving else {
                    bookCleanup(of: record, into: &start)
                    continue
                }
                let held = heldRecord(record, accounts: accounts)
                book(Entry(record: held, plan: nil, job: nil), written: held != record, into: &start)
            }
        } else {
            for record in leaving { bookCleanup(of: record, into: &start) }
        }
        var next = plans.startIndex
        while next < plans.endIndex {
            // The first run full and more than a run to come: the rest is booked as it is fed.
            if start.isFull && plans.endIndex - next > start.firstRun {
                let rest = plans[next...]
                restOfStart = RestOfStart(plans: PlanRuns(rest), stored: stored, jobs: rest.lazy.filter { $0.delivery != nil }.count)
                break
            }
            bookPlanned(plans[next], stored: stored[plans[next].key], into: &start)
            next += 1
        }
        return finished(start)
    }

    /// Books a plan of a start, with the record stored for it if any.
    mutating func bookPlanned(_ plan: SubscriptionPlan, stored old: SubscriptionRecord?, into start: inout Start) {
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


    struct RestOfStart {
        var plans: PlanRuns
        /// The stored records of the planned subscriptions (of the first run too).
        var stored: [SubscriptionKey: SubscriptionRecord]
        /// How many of `plans` have something to deliver: jobs of the start to come.
        var jobs: Int
    }

    /// The plans of a start still to book, in order, in runs each freed once booked: a slice
    /// of the start's list kept all of it (17.6 MB at 100,000 richer accounts) until the feeder
    /// had booked the last plan.
    struct PlanRuns {
        /// Plans a run: 1,024 of them take more than the 128 KB from which glibc maps a block on
        /// its own, so each run's memory goes back to the system as soon as it is freed.
        static var runSize: Int { 1024 }

        /// The runs not booked yet, the next one last.
        private var runs: [[SubscriptionPlan]]
        /// Where the next plan is in the last run.
        private var next = 0

        init(_ plans: ArraySlice<SubscriptionPlan>) {
            runs = stride(from: plans.startIndex, to: plans.endIndex, by: Self.runSize).reversed().map { start in
                Array(plans[start..<min(start + Self.runSize, plans.endIndex)])
            }
        }

        var isEmpty: Bool { runs.isEmpty }

        /// How many runs are left (for tests).
        var runsLeft: Int { runs.count }

        /// The next plan; its run is freed once this is the run's last.
        mutating func popFirst() -> SubscriptionPlan? {
            guard !runs.isEmpty else { return nil }
            let plan = runs[runs.count - 1][next]
            next += 1
            if next == runs[runs.count - 1].count {
                runs.removeLast()
                next = 0
            }
            return plan
        }
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
    /// outcome, `/metrics`) calls this first. Returns the writes of those that submit nothing.
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
    mutating func bookRest(upTo size: Int) -> (actions: [Action], run: [Unsent]) {
        guard var rest = restOfStart else { return ([], []) }
        restOfStart = nil
        // A start with no room in its first run: every submission goes in `later`.
        var start = Start(firstRun: 0)
        var booked = 0
        while booked < size, let plan = rest.plans.popFirst() {
            booked += 1
            if plan.delivery != nil { rest.jobs -= 1 }
            bookPlanned(plan, stored: rest.stored[plan.key], into: &start)
        }
        if !rest.plans.isEmpty { restOfStart = rest }
        return (start.actions, start.later)
    }

    /// `start` with a rest of no more than a run taken into its first run (the feeder's second
    /// transaction would buy nothing), and its actions in the order they are applied. A longer
    /// rest goes to the feeder, before the plans still to book (``nextStartRun(_:)``).
    mutating func finished(_ start: consuming Start) -> Start {
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

    /// ``schedule(_:actions:)`` for a start: `entry`'s record is written first when `written`.
    mutating func book(_ entry: consuming Entry, written: Bool, into start: inout Start) {
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
        // A record the start leaves as stored: its cleanup text is the state's.
        if !written { letGoOfCleanupText(&entry) }
        let (submission, generation) = store(entry)
        start.add(record, submission: submission, generation: generation)
    }

    /// ``beginCleanup(_:actions:)`` for a start.
    mutating func bookCleanup(of stored: SubscriptionRecord, into start: inout Start) {
        if let entry = cleanupEntry(of: stored) {
            book(entry, written: entry.record != stored, into: &start)
        } else {
            start.actions.append(.forget(stored.key))
        }
    }
}
