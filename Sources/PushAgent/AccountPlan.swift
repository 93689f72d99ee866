import PushAcrobits
import PushBackend
import PushConfig
import PushState

/// What the configuration asks of one account: its report, and the removal request that would
/// be kept if that report is delivered.
public struct AccountPlan: Sendable {
    /// The account's `id`.
    public var id: String { report.account }
    /// The `pushTokenReporter` request, rendered as sent.
    public var report: PlannedReport
    /// The `accountRemovalReporter` request rendered from the same values, as state text; nil
    /// when the account has no `accountRemovalReporterUrl`.
    public var removal: String?

    /// The plans of every enabled account that has a `pushTokenReporterUrl`. Accounts whose
    /// requests cannot be rendered add diagnostics and are left out.
    public static func plans(builder: inout RequestBuilder, defaultTimeout: Duration,
                             diagnostics: inout DiagnosticList) -> [AccountPlan] {
        var plans: [AccountPlan] = []
        plans.reserveCapacity(builder.configuration.accounts.count)
        for account in builder.configuration.accounts where account.isEnabled {
            guard let rendered = builder.request(for: account, reporter: .pushTokenReporter, display: .asSent,
                                                 diagnostics: &diagnostics) else { continue }
            var removal: String?
            if account.values.contains(Reporter.accountRemovalReporter.key(.url)) {
                // Kept as text, not compared: it needs no fingerprint.
                guard let request = builder.request(for: account, reporter: .accountRemovalReporter, display: .asSent,
                                                    fingerprinted: false, diagnostics: &diagnostics) else { continue }
                removal = StoredRequest(request).text
            }
            plans.append(AccountPlan(report: PlannedReport(rendered, defaultTimeout: defaultTimeout), removal: removal))
        }
        return plans
    }

    /// The removal report kept in a state record, ready to send; nil when the text is not one.
    public static func removalReport(account: String, storedText: String, defaultTimeout: Duration) -> PlannedReport? {
        StoredRequest(text: storedText).map { PlannedReport($0.rendered(account: account), defaultTimeout: defaultTimeout) }
    }

    /// The removal reports a stored record owes, in the order they are to be sent (those of
    /// earlier reports first), and how many stored removals could not be read.
    public static func removalReports(of record: AccountRecord, defaultTimeout: Duration) -> (reports: [PlannedReport], unreadable: Int) {
        let (owed, unreadable) = AgentBook.removals(of: record, defaultTimeout: defaultTimeout)
        return (owed.map(\.report), unreadable)
    }
}
