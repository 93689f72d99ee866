import PushConfig

/// The web-service key suffixes of an Acrobits account (`<prefix>Url`, …).
public enum WebServiceKey: String, CaseIterable, Sendable {
    case url = "Url"
    case postData = "PostData"
    case contentType = "ContentType"
    case method = "Method"
    case customHeaders = "CustomHeaders"
    case authUsername = "AuthUsername"
    case authPassword = "AuthPassword"
    case timeout = "Timeout"

    /// A distinct index from 0 (a table position; not necessarily the order of `allCases`).
    var index: Int {
        switch self {
        case .url: 0
        case .postData: 1
        case .contentType: 2
        case .method: 3
        case .customHeaders: 4
        case .authUsername: 5
        case .authPassword: 6
        case .timeout: 7
        }
    }
}

/// The web services the agent acts on.
public enum Reporter: String, CaseIterable, Sendable, Codable {
    /// Reports the tokens.
    case pushTokenReporter
    /// Reports that an account is gone (SPEC §5).
    case accountRemovalReporter

    /// The account key `<prefix><suffix>`, e.g. `pushTokenReporterUrl`. Looked up several times
    /// for every account, so kept in a table of string literals: a literal is never reference
    /// counted, where a key built by concatenation would be one object shared by every thread.
    public func key(_ suffix: WebServiceKey) -> String {
        switch self {
        case .pushTokenReporter: Self.pushTokenReporterKeys[suffix.index]
        case .accountRemovalReporter: Self.accountRemovalReporterKeys[suffix.index]
        }
    }

    /// ``key(_:)`` for looking it up in an account's values.
    public func tableKey(_ suffix: WebServiceKey) -> AccountValueTable.PreparedKey {
        switch self {
        case .pushTokenReporter: Self.pushTokenReporterTableKeys[suffix.index]
        case .accountRemovalReporter: Self.accountRemovalReporterTableKeys[suffix.index]
        }
    }

    private static let pushTokenReporterTableKeys = pushTokenReporterKeys.map(AccountValueTable.PreparedKey.init)
    private static let accountRemovalReporterTableKeys = accountRemovalReporterKeys.map(AccountValueTable.PreparedKey.init)

    /// By `WebServiceKey.index` (a test checks each is `rawValue + suffix.rawValue`).
    static let pushTokenReporterKeys = [
        "pushTokenReporterUrl", "pushTokenReporterPostData", "pushTokenReporterContentType", "pushTokenReporterMethod",
        "pushTokenReporterCustomHeaders", "pushTokenReporterAuthUsername", "pushTokenReporterAuthPassword",
        "pushTokenReporterTimeout",
    ]
    static let accountRemovalReporterKeys = [
        "accountRemovalReporterUrl", "accountRemovalReporterPostData", "accountRemovalReporterContentType",
        "accountRemovalReporterMethod", "accountRemovalReporterCustomHeaders", "accountRemovalReporterAuthUsername",
        "accountRemovalReporterAuthPassword", "accountRemovalReporterTimeout",
    ]
}
