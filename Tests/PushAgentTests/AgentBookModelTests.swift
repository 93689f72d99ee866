@testable import PushAgent
@testable import PushAcrobits
import PushBackend
import PushConfig
import PushScheduler
import PushState
import PushTestSupport
import PushTransport
import Testing
import PushTestThreads

/// The book against a model of everything around it (the scheduler, the feeder, the state
/// writes that release a reload's holds), driven by random interleavings of its events from a
/// seeded generator: a start (with stored records), the feeder taking and submitting runs,
/// booking ahead, reloads (unchanged, changed, removed, added, a service's credentials mended),
/// attempts and their answers (delivered, retried, rejected, credentials refused, confirmed
/// later), and the state written while reloads come. After every step each subscription with
/// something to send has a next step: queued in the scheduler, in flight, held for a release
/// that will submit it, still the feeder's, or waiting for its stopped service; and after the
/// events stop, everything owed is delivered, rejected or stopped with its reason.
@Suite(.blockingThreads) struct AgentBookModelTests {
    /// The world around the book, as the agent and the scheduler make it.
    struct World {
        var book = AgentBookTests.book()
        var random: SeededGenerator
        var trace: [String] = []

        // The configuration: account → token ("" waits for a token), and which accounts also
        // have a second service, whose changed token cleans up the old one.
        var tokens: [String: String] = [:]
        var second: Set<String> = []
        var nextAccount = 0
        var version = 0

        // The scheduler: what waits, and what is in flight (with whether its result counts).
        var queued: Set<SubscriptionKey> = []
        var inFlight: [SubscriptionKey: (attempt: Int, discarded: Bool)] = [:]
        var attempts: [SubscriptionKey: Int] = [:]

        // The feeder: a run taken (its records written) and not submitted yet, and whether it is done.
        var feederRun: [AgentBook.Unsent]?
        var feederDone = false
        // A state write in progress: the reloads it covers.
        var flushing: UInt64?
        var now: Int64 = 1_000

        // With ``AgentBook/cleanupTextsInStateOnly``: the cleanup texts the state holds, the
        // records saved and not written yet (nil: forgotten), as the recorder keeps them, and
        // what went wrong with the texts.
        var stored: [SubscriptionKey: String] = [:]
        var unwritten: [SubscriptionKey: SubscriptionRecord?] = [:]
        var textProblems: [String] = []

        init(seed: UInt64, lettingGoOfTexts: Bool = false) {
            random = SeededGenerator(seed: seed)
            book.cleanupTextsInStateOnly = lettingGoOfTexts
        }

        /// The recorder's save: a record that let its text go keeps the text of the one before.
        mutating func save(_ record: SubscriptionRecord) {
            var record = record
            if record.cleanupInState != nil, let earlier = unwritten[record.key] ?? nil, let text = earlier.cleanup {
                record.setCleanup(text)
            }
            unwritten[record.key] = .some(record)
        }

        /// The recorder's write of everything saved, and what it tells the book.
        mutating func writeState() {
            var withText: [SubscriptionKey] = []
            for (key, record) in unwritten {
                guard let record else {
                    stored[key] = nil
                    continue
                }
                if record.cleanupInState != nil {
                    if stored[key] == nil { textProblems.append("\(key) written without its text, and none is stored") }
                } else {
                    stored[key] = record.cleanup
                    if record.cleanup != nil { withText.append(key) }
                }
            }
            unwritten = [:]
            book.letGoOfWrittenCleanups(withText)
        }

        /// The text the state will hold for `key`: one saved and not written yet, else the stored one.
        func latestText(_ key: SubscriptionKey) -> String? {
            if let pending = unwritten[key] { return pending?.cleanup ?? (pending?.cleanupInState != nil ? stored[key] : nil) }
            return stored[key]
        }

        static let services = [SubscriptionKey.acrobits, "svc2"]

        func plans() -> [SubscriptionPlan] {
            tokens.keys.sorted().flatMap { account -> [SubscriptionPlan] in
                let token = tokens[account]!
                var plans = [Self.plan(account, token: token, service: SubscriptionKey.acrobits)]
                if second.contains(account) { plans.append(Self.plan(account, token: token, service: "svc2")) }
                return plans
            }
        }

        static func plan(_ account: String, token: String, service: String) -> SubscriptionPlan {
            var plan = AgentBookTests.plan(account, token: token.isEmpty ? "none" : token, removal: account.hasSuffix("r") || service == "svc2")
            plan.service = service
            plan.cleansUpReplaced = service == "svc2"
            if token.isEmpty {
                plan.delivery = nil
                plan.waiting = "no device token yet"
            }
            return plan
        }

        mutating func coin(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &random) < percent }

        // MARK: What the agent does with the book's actions

        mutating func apply(_ actions: [AgentBook.Action]) {
            for action in actions {
                switch action {
                case .submit(let submission):
                    book.handedOver(submission.key)
                    queued.insert(submission.key)
                    attempts[submission.key] = 0
                    // A key in flight runs its new submission after; the old result is ignored.
                    if inFlight[submission.key] != nil { inFlight[submission.key]!.discarded = true }
                case .cancel(let key):
                    queued.remove(key)
                    if inFlight[key] != nil { inFlight[key]!.discarded = true }
                case .save(let record):
                    save(record)
                case .forget(let key):
                    unwritten[key] = .some(nil)
                }
            }
        }

        // MARK: Events

        mutating func start(accounts: Int, firstRun: Int) {
            var records: [SubscriptionRecord] = []
            for index in 0..<accounts {
                let account = "a\(index)" + (index % 3 == 0 ? "r" : "")
                tokens[account] = index % 7 == 6 ? "" : "t0"
                if index % 4 == 1 { second.insert(account) }
                // Some were delivered before the restart, some with other values.
                if index % 5 == 2 {
                    let plan = Self.plan(account, token: index % 2 == 0 ? "t0" : "old", service: SubscriptionKey.acrobits)
                    records.append(SubscriptionRecord(key: plan.key, fingerprint: plan.fingerprint, deliveredFingerprint: plan.fingerprint,
                                                      state: .delivered, cleanup: plan.cleanup))
                }
            }
            nextAccount = accounts
            // Accounts gone while the agent was down: their removals are owed.
            for index in 0..<3 {
                let plan = Self.plan("gone\(index)r", token: "g", service: SubscriptionKey.acrobits)
                records.append(SubscriptionRecord(key: plan.key, fingerprint: plan.fingerprint, deliveredFingerprint: plan.fingerprint,
                                                  state: .delivered, cleanup: plan.cleanup))
            }
            for record in records { stored[record.key] = record.cleanup }
            let started = book.start(plans: plans(), records: records, firstRun: firstRun)
            apply(started.actions)
            trace.append("start \(accounts) accounts, first run \(firstRun)")
        }

        mutating func takeRun() {
            guard feederRun == nil, !feederDone else { return }
            let size = Int.random(in: 1...4, using: &random)
            let (writes, run) = book.takeStartRun(size)
            // Written before the run is submitted (the feeder waits for it).
            apply(writes)
            writeState()
            if run.isEmpty && !book.hasStartToFeed {
                feederDone = true
                book.endFeed()
                trace.append("feeder done")
            } else {
                feederRun = run
                trace.append("feeder takes \(run.map(\.key.description))")
            }
        }

        mutating func submitRun() {
            guard let run = feederRun else { return }
            feederRun = nil
            apply(book.submitStartRun(run))
            trace.append("feeder submits \(run.count)")
        }

        mutating func bookAhead() {
            _ = book.bookRestOfStart(upTo: Int.random(in: 1...5, using: &random))
            trace.append("booked ahead")
        }

        mutating func reload() {
            version += 1
            var said: [String] = []
            for account in tokens.keys.sorted() {
                if coin(15) {
                    tokens[account] = coin(20) ? "" : "t\(version)"
                    said.append("\(account)→\(tokens[account]!)")
                } else if coin(8) {
                    tokens[account] = nil
                    second.remove(account)
                    said.append("-\(account)")
                } else if coin(5) {
                    if second.contains(account) { second.remove(account) } else { second.insert(account) }
                    said.append("±svc2 \(account)")
                }
            }
            for _ in 0..<Int.random(in: 0...2, using: &random) {
                let account = "n\(nextAccount)" + (coin(50) ? "r" : "")
                nextAccount += 1
                tokens[account] = "t\(version)"
                if coin(30) { second.insert(account) }
                said.append("+\(account)")
            }
            // The texts the book let go of that this reload replaces or removes, read back first.
            let asked = book.beginReadingBack(for: plans())
            var texts: [SubscriptionKey: String] = [:]
            for key in asked { texts[key] = latestText(key) }
            let missing = book.restoreCleanups(texts, asked: asked)
            if !missing.isEmpty { textProblems.append("reload \(book.reloads + 1) found no text for \(missing)") }
            let (actions, _) = book.reload(plans: plans(), reportInterval: nil, now: now)
            apply(actions)
            let unwritten = unwritten
            book.endReadingBack(isPending: { unwritten[$0] != nil })
            trace.append("reload \(book.reloads): \(said.joined(separator: " "))\(asked.isEmpty ? "" : " (read back \(asked.count))")")
        }

        mutating func beginWrite() {
            guard flushing == nil else { return }
            flushing = book.reloads
            trace.append("write begins (through reload \(book.reloads))")
        }

        mutating func endWrite() {
            guard let through = flushing else { return }
            flushing = nil
            writeState()
            apply(book.releaseHeld(through: through))
            trace.append("written: release through reload \(through)")
        }

        mutating func startAttempt() {
            let startable = queued.filter { inFlight[$0] == nil }.sorted()
            guard let key = startable.randomElement(using: &random) else { return }
            queued.remove(key)
            let attempt = (attempts[key] ?? 0) + 1
            attempts[key] = attempt
            if book.beginAttempt(key) == nil {
                // Nothing to send any more: done as far as the scheduler goes.
                trace.append("start \(key): nothing to send")
                return
            }
            inFlight[key] = (attempt, false)
            trace.append("start \(key) attempt \(attempt)")
        }

        mutating func answer() {
            guard let key = inFlight.keys.sorted().randomElement(using: &random) else { return }
            let (attempt, discarded) = inFlight.removeValue(forKey: key)!
            now += 100
            if discarded {
                trace.append("answer \(key): ignored (replaced or cancelled)")
                return
            }
            let roll = Int.random(in: 0..<100, using: &random)
            if roll < 25 {
                // The scheduler queues the retry, then tells the agent, which tells the book.
                queued.insert(key)
                if let (actions, _) = book.failed(key, attempt: attempt, reason: "HTTP 503", retryIn: .seconds(5), now: now) {
                    apply(actions)
                }
                trace.append("answer \(key): retry")
                return
            }
            let outcome: Outcome = roll < 80 ? .delivered : roll < 92 ? .rejected("HTTP 400") : roll < 96 ? .accepted("id-\(key.account)")
                : .stopped("HTTP 401")
            if let (actions, _, _) = book.settle(key, outcome, attempt: attempt, now: now) { apply(actions) }
            trace.append("answer \(key): \(outcome)")
        }

        mutating func confirm() {
            let accepted = book.entries.values.filter { $0.record.state == .accepted }.map(\.record).sorted { $0.key < $1.key }
            guard let record = accepted.randomElement(using: &random), let data = record.backendData else { return }
            let outcome: Outcome = coin(70) ? .delivered : coin(50) ? .retry(.http(500)) : .rejected("DeviceTokenTooLong")
            if let (actions, _) = book.confirmed(record.key, data: data, outcome, now: now) { apply(actions) }
            trace.append("confirm \(record.key): \(outcome)")
        }

        /// One random event.
        mutating func step() {
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<12: takeRun()
            case 12..<24: submitRun()
            case 24..<28: bookAhead()
            case 28..<33: reload()
            case 33..<38: beginWrite()
            case 38..<44: endWrite()
            case 44..<70: startAttempt()
            case 70..<95: answer()
            default: confirm()
            }
        }

        /// Runs every event but reloads until nothing is left to do: the world after an outage.
        mutating func drain() {
            for _ in 0..<100_000 {
                if let run = feederRun {
                    feederRun = nil
                    apply(book.submitStartRun(run))
                } else if !feederDone {
                    takeRun()
                } else if flushing != nil {
                    endWrite()
                } else if !book.heldSubmissionKeys.isEmpty || !book.held.isEmpty {
                    beginWrite()
                    endWrite()
                } else if !inFlight.isEmpty {
                    let key = inFlight.keys.sorted()[0]
                    let (attempt, discarded) = inFlight.removeValue(forKey: key)!
                    if !discarded, let (actions, _, _) = book.settle(key, .delivered, attempt: attempt, now: now) { apply(actions) }
                } else if let key = queued.sorted().first {
                    queued.remove(key)
                    let attempt = (attempts[key] ?? 0) + 1
                    attempts[key] = attempt
                    if book.beginAttempt(key) != nil { inFlight[key] = (attempt, false) }
                } else if let accepted = book.entries.values.first(where: { $0.record.state == .accepted }), let data = accepted.record.backendData {
                    if let (actions, _) = book.confirmed(accepted.record.key, data: data, .delivered, now: now) { apply(actions) }
                } else {
                    return
                }
            }
            Issue.record("the world did not come to rest")
        }

        // MARK: The invariant

        /// Each subscription with something to send has a next step; each without one says why.
        func problems() -> [String] {
            var problems: [String] = textProblems
            let heldSubmissions = book.heldSubmissionKeys
            for entry in book.entries.values {
                let key = entry.record.key
                // A text let go of is the one the state holds (or will, once written).
                if let digest = entry.record.cleanupInState,
                   latestText(key).map(SubscriptionRecord.cleanupDigest) != digest {
                    problems.append("\(key) let go of a text the state does not hold")
                }
                let owed = entry.job != nil
                if owed {
                    let next = queued.contains(key) || inFlight[key].map { !$0.discarded } == true
                        || heldSubmissions.contains(key)
                        || (entry.awaitsFeed && !feederDone)
                        || book.stoppedServices[key.service] != nil
                    if !next { problems.append("\(key) owes \(entry.job!) (\(entry.record.state)) with no next step") }
                } else {
                    switch entry.record.state {
                    case .retrying, .removing:
                        problems.append("\(key) is \(entry.record.state) with nothing scheduled")
                    case .pending where entry.plan?.delivery != nil:
                        problems.append("\(key) is pending with a request and nothing scheduled")
                    case .pending, .rejected, .stopped, .unconfirmed, .held:
                        // A held removal waits for its release, with its reason.
                        if entry.record.lastOutcome == nil { problems.append("\(key) is \(entry.record.state) without a reason") }
                    case .delivered, .accepted:
                        break
                    }
                }
            }
            // Every configured subscription is in the book once the start is booked.
            if book.startIsBooked {
                for plan in plans() where book.entries[plan.key] == nil {
                    problems.append("\(plan.key) is configured but not in the book")
                }
            }
            return problems
        }

        /// After the drain: nothing owed but what waits for a stopped service.
        func restProblems() -> [String] {
            book.entries.values.compactMap { entry in
                guard entry.job != nil, book.stoppedServices[entry.record.key.service] == nil else { return nil }
                return "\(entry.record.key) still owes \(entry.job!) (\(entry.record.state)) after everything settled"
            }
        }
    }

    @Test(arguments: 0..<200)
    func everySubscriptionAlwaysHasANextStep(seed: Int) {
        Self.run(World(seed: UInt64(seed)), seed: seed)
    }

    /// The same, the book letting go of written cleanup texts (as the agent with a state of its
    /// own does), with the state's writes modelled: a text let go of is always the one the state
    /// will hold, and every one a reload replaces or removes is read back.
    @Test(arguments: 0..<200)
    func everySubscriptionAlwaysHasANextStepAndItsTextWhenTheStateHoldsIt(seed: Int) {
        Self.run(World(seed: UInt64(seed), lettingGoOfTexts: true), seed: seed)
    }

    static func run(_ world: consuming World, seed: Int) {
        var world = world
        world.start(accounts: 6 + seed % 25, firstRun: 1 + seed % 4)
        for step in 0..<300 {
            world.step()
            let problems = world.problems()
            if !problems.isEmpty {
                Issue.record("seed \(seed), step \(step): \(problems.joined(separator: "; "))\n\(world.trace.suffix(25).joined(separator: "\n"))")
                return
            }
        }
        // Credentials mended: one more reload resumes a stopped service, then everything drains.
        world.reload()
        world.drain()
        let problems = world.problems() + world.restProblems()
        #expect(problems.isEmpty, "seed \(seed): \(problems.joined(separator: "; "))\n\(world.trace.suffix(25).joined(separator: "\n"))")
    }
}
