import PushBackend
import PushConfig
import PushScheduler
import PushState

/// A new configuration while the agent runs (SPEC §5): what changed is sent, held until its
/// state is written; what left is cleaned up.
extension AgentBook {
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
    mutating func decideReload(plans: [SubscriptionPlan], reportInterval newInterval: Duration?, now: Int64) -> ([Action], ReloadSummary) {
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
                      entry.record.hasCleanup(plan.cleanup) else { return false }
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
            if entry.record.state == .held, plan.delivery != nil, plan.refusal == nil,
               SubscriptionRecord.sameBytes(entry.record.deliveredFingerprint, plan.fingerprint) {
                // Its account is back as it was delivered: no longer held, and nothing is sent.
                summary.unchanged += 1
                plan.apply(to: &entry.record)
                entry.record.lastOutcome = "delivered"
                entry.plan = Booking(plan)
                entry.job = nil
                entry.cleanups = []
                actions.append(.save(entry.record))
                keepRequestLean(&entry)
                entries.set(entry, for: key)
                continue
            }
            let wasRemoving = entry.record.isRemoving
            if Self.keepsDelivery(entry, plan, serviceWasStopped: wereStopped[key.service] != nil) {
                summary.unchanged += 1
                entry.plan = Booking(plan)
                var changed = false
                var (submitted, cancelled) = (false, false)
                let hadJob = entry.job != nil
                let cleanupChanged = !entry.record.hasCleanup(plan.cleanup)
                if cleanupChanged {
                    // The same delivery, with a cleanup written differently (a fixed URL, say).
                    entry.record.setCleanup(plan.cleanup)
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
                entry.record.setCleanup(nil)
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
        if holdsRemovals(leaving.map(\.0), accountsInState: entries.accountCount) {
            guard owned == nil else {
                // Shared state: the database decides for the group when this configuration is
                // published (``PostgresStateStore/publish(_:holdingRemovals:)``). Meanwhile
                // nothing of them is sent here: those this agent holds are handed back once it
                // is published, held there or claimed for their cleanup.
                for (key, entry) in leaving {
                    summary.held += 1
                    if isOwned(key) {
                        if entry.job != nil { actions.append(.cancel(key)) }
                        owned!.remove(key)
                        releaseAfterPublish.append(key)
                    }
                    entries[key] = nil
                }
                return (Self.savesFirst(actions), summary)
            }
            // Held, not removed: the record stays, its job cancelled; nothing is sent.
            let accounts = Set(leaving.lazy.map(\.0.account)).count
            heldThisTime = Self.newlyHeld(leaving.map(\.1.record))
            for (key, entry) in leaving {
                summary.held += 1
                if entry.job != nil { actions.append(.cancel(key)) }
                let record = heldRecord(entry.record, accounts: accounts)
                entries[key] = Entry(record: record, plan: nil, job: nil)
                if record != entry.record { actions.append(.save(record)) }
            }
            return (Self.savesFirst(actions), summary)
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



    /// Whether a reload's `plan` leaves `entry`'s delivery as it is: it is not being removed, not
    /// stopped with its service, and sends the same (or, as before, nothing yet).
    static func keepsDelivery(_ entry: Entry, _ plan: SubscriptionPlan, serviceWasStopped: Bool) -> Bool {
        !entry.record.isRemoving && !(serviceWasStopped && entry.record.state == .stopped)
            && entry.record.fingerprint == plan.fingerprint && (plan.delivery != nil) == (entry.plan?.delivery != nil)
    }
}
