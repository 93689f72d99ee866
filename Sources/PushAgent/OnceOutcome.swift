import PushConfig
import PushState

/// What one round of the agent (`run --once`, `remove`) did.
public struct OnceOutcome: Sendable {
    /// A subscription whose delivery or cleanup was not settled by the deadline, or was refused.
    public struct Undelivered: Sendable {
        public var key: SubscriptionKey
        /// `bob: pushTokenReporter`, `bob: accountRemovalReporter`, `bob: journeys registration`.
        public var label: String
        public var host: String
        public var state: SubscriptionState
        /// Attempts that finished (0 when the only one was still running at the deadline).
        public var attempts: Int
        /// The last failure, or why it was refused, in words.
        public var reason: String

        /// One line of JSON: `account`, `service`, `host`, `state`, `attempts`, `reason`.
        public var json: String {
            JSONText.compactObject([
                ("account", JSONText.string(key.account)), ("service", JSONText.string(key.service)),
                ("host", JSONText.string(host)), ("state", JSONText.string(state.rawValue)),
                ("attempts", "\(attempts)"), ("reason", JSONText.string(reason)),
            ])
        }
    }

    /// Subscriptions that had something to send.
    public var total: Int
    /// Of those, how many were delivered (or accepted, or cleaned up).
    public var delivered: Int
    public var undelivered: [Undelivered]
    /// Every subscription by state, after the round.
    public var counts: SubscriptionCounts
    /// The same by service.
    public var countsByService: [String: [SubscriptionState: Int]] = [:]
    public var elapsed: Duration
    public var deadline: Duration
    /// False when the state could not be written: the outcomes are sent again next time.
    public var stateWritten: Bool
    /// The signal that ended the round before its deadline (`SIGTERM`), if one did.
    public var stoppedBy: String?

    /// The reason of a subscription whose attempt had no answer when the round ended.
    static let noResponse = "no response before the deadline"

    /// Whether the round succeeded: nothing left retrying, rejected or stopped, and the state
    /// written. Accepted subscriptions are confirmed by a later run or by the agent.
    public var succeeded: Bool { undelivered.isEmpty && stateWritten }

    /// The summary printed at the end: one line, then one line per subscription not delivered.
    public var summary: String {
        let seconds = DurationText(elapsed)
        var first = "Delivered \(delivered) of \(total) \(total == 1 ? "report" : "reports")"
        let accepted = counts[.accepted]
        var notes: [String] = []
        if accepted > 0 { notes.append("\(accepted) accepted, awaiting confirmation") }
        if counts[.unconfirmed] > 0 { notes.append("\(counts[.unconfirmed]) unconfirmed") }
        if undelivered.isEmpty {
            first += notes.isEmpty ? " in \(seconds)." : " in \(seconds) (\(notes.joined(separator: "; ")))."
            return first
        }
        let refused = undelivered.count { $0.state == .rejected || $0.state == .stopped }
        let late = undelivered.count - refused
        var parts: [String] = []
        if late > 0 {
            parts.append(stoppedBy.map { "\(late) not delivered before \($0) stopped the round" }
                         ?? "\(late) not delivered within the deadline (\(DurationText(deadline)))")
        }
        if refused > 0 { parts.append("\(refused) refused") }
        first += "; " + (parts + notes).joined(separator: "; ") + ":"
        return ([first] + undeliveredLines).joined(separator: "\n")
    }

    /// The summary as one JSON object (`run --once --format json`, SPEC §7): whether the round
    /// succeeded, how many reports it had and delivered, an integer for each state of SPEC §9.0,
    /// the same per service, and each subscription not delivered.
    public var json: String {
        func states(_ count: (SubscriptionState) -> Int) -> [(String, String)] {
            SubscriptionState.allCases.map { ($0.rawValue, "\(count($0))") }
        }
        let services = countsByService.keys.sorted().map { service in
            JSONText.compactObject([("service", JSONText.string(service))] + states { countsByService[service]?[$0] ?? 0 })
        }
        let failures = undelivered.map(\.json)
        return JSONText.object([
            ("succeeded", "\(succeeded)"),
            ("reports", "\(total)"),
            ("reportsDelivered", "\(delivered)"),
            ("elapsedSeconds", "\(Double(elapsed.milliseconds) / 1000)"),
            ("deadlineSeconds", "\(Double(deadline.milliseconds) / 1000)"),
            ("stateWritten", "\(stateWritten)"),
            ("stoppedBy", stoppedBy.map { JSONText.string($0) } ?? "null"),
        ] + states { counts[$0] } + [
            ("services", JSONText.array(services, indent: "  ")),
            ("undelivered", JSONText.array(failures, indent: "  ")),
        ])
    }

    /// One line per subscription not delivered: who, what, where, the last failure and attempts.
    public var undeliveredLines: [String] {
        undelivered.map { failure in
            let attempts = failure.attempts == 1 ? "1 attempt" : "\(failure.attempts) attempts"
            let state = failure.state == .rejected || failure.state == .stopped ? ", \(failure.state.rawValue)" : ""
            let reason = failure.reason == Self.noResponse ? stoppedBy.map { "no response before \($0)" } ?? failure.reason : failure.reason
            return "  \(failure.label) to \(failure.host): \(reason.displayEscaped) (\(attempts)\(state))"
        }
    }
}
