import PushBackend
import PushConfig
import PushScheduler
import PushState

/// Attempts and their outcomes, confirmations that come later, and services whose credentials
/// are refused (SPEC §9.0).
extension AgentBook {
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
            if job == .cleanup, entry.record.cleanup == sent { entry.record.setCleanup(nil) }
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
        var saved = entry.record
        if settlement == .delivered || settlement == .accepted, let deliveredSignature {
            // Written with the record, not kept in the book: what `plan` names as changed later.
            saved.deliveredParts = deliveredSignature(request, saved.fingerprint)
        }
        actions.insert(.save(saved), at: 0)
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
}
