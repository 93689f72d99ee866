import Logging
import PushConfig
import PushScheduler

extension Logger {
    /// A delivered report or removal: removals and deliveries that took retries at `notice`,
    /// the rest at `debug`.
    func delivered(_ report: PlannedReport, attempts: Int) {
        let retries = attempts > 1 ? " after \(attempts) attempts" : ""
        if report.reporter == Reporter.accountRemovalReporter.rawValue {
            notice("\(report.account): removal delivered to \(report.host)\(retries)")
        } else if attempts > 1 {
            notice("\(report.account): \(report.reporter) delivered to \(report.host)\(retries)")
        } else {
            debug("\(report.account): \(report.reporter) delivered to \(report.host)")
        }
    }

    /// A failed attempt: at `warning` on attempts 1, 2, 4, 8, … and at `debug` otherwise, so a
    /// dead host is reported, not flooded. Names the account, reporter, host and reason, never
    /// a URL, header or body.
    func failed(_ report: PlannedReport, attempt: Int, failure: AttemptFailure, retryIn: Duration) {
        let message: Logger.Message = """
            \(report.account): \(report.reporter) to \(report.host) failed: \(failure.reason) \
            (attempt \(attempt)); next attempt in \(DurationText(retryIn))
            """
        if attempt & (attempt - 1) == 0 { warning(message) } else { debug(message) }
    }

    /// A stored removal request that cannot be read (written by another version, say): it is
    /// dropped, so the web service never hears of the removal.
    package func unreadableRemoval(of account: String) {
        error("\(account): a stored removal request cannot be read, so it is not sent")
    }
}
