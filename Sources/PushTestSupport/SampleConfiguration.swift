/// The configuration most agent tests run: accounts that report their token with GET to
/// `/report/ID?token=…` and their removal with DELETE to `/remove/ID?token=…` on a server of the
/// test's, and a retry policy quick enough for a test.
public enum SampleConfiguration {
    /// One account, as an entry of `accounts:`.
    public static func account(_ id: String, token: String, base: String) -> String {
        """
          - id: \(id)
            pushTokenOther: \(token)
            pushTokenReporterUrl: \(base)/report/%account[id]%?token=%pushTokenOther%
            accountRemovalReporterUrl: \(base)/remove/%account[id]%?token=%pushTokenOther%
            accountRemovalReporterMethod: DELETE
        """
    }

    /// A whole file of `accounts` (id, token) reporting to `base`; `agent` adds lines under `agent:`.
    public static func config(_ accounts: [(String, String)], base: String, agent: String = "") -> String {
        """
        agent:
          retry: {initial: 50ms, multiplier: 2, max: 500ms, maxRetryAfter: 1s}
        \(agent)
        accounts:
        \(accounts.map { account($0.0, token: $0.1, base: base) }.joined(separator: "\n"))

        """
    }
}
