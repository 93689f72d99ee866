/// The outcome of one attempt to deliver a report, as the scheduler's `perform` closure returns it.
public enum AttemptResult: Sendable, Hashable {
    /// The report was delivered (SPEC §4: a 2xx with a body that matches its type); it is done.
    case delivered
    /// The attempt failed; the report is retried after the delay ``ReportAttempts`` decides.
    case failed(AttemptFailure)
}
