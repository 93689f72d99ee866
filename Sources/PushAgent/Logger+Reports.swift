import Logging
import PushBackend
import PushConfig
import PushScheduler
import PushState

extension Logger {
    /// A settled attempt: cleanups and deliveries that took retries at `notice`, first-time
    /// deliveries and cleanups at `debug`, a rejection at `error` (once: it is not sent again), a stopped
    /// service at `error`. Names the subscription, what was sent and the host, never a URL,
    /// header or body.
    func settled(_ request: SubscriptionRequest, key: SubscriptionKey, as settlement: AgentBook.Settlement, attempts: Int) {
        let retries = attempts > 1 ? " after \(attempts) attempts" : ""
        let what = Self.describe(request, key: key)
        switch settlement {
        case .delivered where attempts > 1:
            notice("\(what) delivered to \(request.host)\(retries)", metadata: Self.fields(key, host: request.host))
        case .delivered:
            debug("\(what) delivered to \(request.host)", metadata: Self.fields(key, host: request.host))
        case .accepted:
            debug("\(what) accepted by \(request.host)\(retries); awaiting its confirmation", metadata: Self.fields(key, host: request.host))
        case .cleanedUp(let forgotten):
            // One line per removal is a count's flood (a reload removing 200 accounts): the agent
            // says how many once they are done; a removal that took retries is said here.
            let level: Logger.Level = attempts > 1 ? .notice : .debug
            log(level: level, "\(what) delivered to \(request.host)\(retries)", metadata: Self.fields(key, host: request.host))
            if forgotten {
                if key.service == SubscriptionKey.acrobits {
                    debug("\(key.account.displayEscaped): every removal delivered; the account is forgotten", metadata: Self.fields(key, host: request.host))
                } else {
                    debug("\(key.description.displayEscaped): every cleanup delivered; the subscription is forgotten", metadata: Self.fields(key, host: request.host))
                }
            }
        case .rejected(let why):
            error("\(what) rejected by \(request.host): \(why); it is not sent again until its values change", metadata: Self.fields(key, host: request.host))
        case .cleanupRefused(let why):
            error("\(what) refused by \(request.host): \(why); it is given up", metadata: Self.fields(key, host: request.host))
        case .stopped(let why):
            error("\(key.service.displayEscaped): \(request.host) refused the service's credentials (\(why)); nothing of this service is sent until a reload or restart", metadata: Self.fields(key, host: request.host))
        }
    }

    /// When a failed attempt is tried again.
    enum NextAttempt {
        case after(Duration)
        /// Not in this round: its retry would come after `run --once`'s deadline.
        case pastTheDeadline
        /// Not before the agent or the round stops (SIGTERM): it failed in the grace period.
        case stopping
    }

    /// A failed attempt: at `warning` on attempts 1, 2, 4, 8, … and at `debug` otherwise, so a
    /// dead host is reported, not flooded; always at `warning` when it is the last (`next` is
    /// not ``NextAttempt/after(_:)``: past `run --once`'s deadline, or stopping).
    func failed(_ request: SubscriptionRequest, key: SubscriptionKey, attempt: Int, failure: AttemptFailure, next: NextAttempt) {
        let said = switch next {
        case .after(let delay): "next attempt in \(DurationText(delay))"
        case .pastTheDeadline: "no time is left for another before the deadline"
        case .stopping: "not tried again before stopping"
        }
        let message: Logger.Message = """
            \(Self.describe(request, key: key)) to \(request.host) failed: \(failure.reason) \
            (attempt \(attempt)); \(said)
            """
        let isLast = if case .after = next { false } else { true }
        if isLast || attempt & (attempt - 1) == 0 { warning(message, metadata: Self.fields(key, host: request.host)) } else { debug(message, metadata: Self.fields(key, host: request.host)) }
    }

    /// A stored cleanup that cannot be read (written by another version, say): it is dropped,
    /// so the receiver never hears of the removal.
    package func unreadableCleanup(of key: SubscriptionKey) {
        if key.service == SubscriptionKey.acrobits {
            error("\(key.account.displayEscaped): a stored removal request cannot be read, so it is not sent")
        } else {
            error("\(key.description.displayEscaped): a stored cleanup cannot be read, so it is not sent")
        }
    }

    /// The subscription and host of a line about one attempt, as fields of a JSON log line for
    /// a collector to filter on (a text line names them in its sentence: ``AgentLogHandler``
    /// leaves them out there).
    static func fields(_ key: SubscriptionKey, host: String) -> Logger.Metadata {
        ["account": "\(key.account)", "service": "\(key.service)", "host": "\(host)"]
    }

    /// `alice: pushTokenReporter`, `alice: removal`, `alice: journeys registration`: the
    /// request's ``SubscriptionRequest/logLabel``.
    static func describe(_ request: SubscriptionRequest, key: SubscriptionKey) -> String {
        "\(key.account.displayEscaped): \(request.logLabel.displayEscaped)"
    }
}
