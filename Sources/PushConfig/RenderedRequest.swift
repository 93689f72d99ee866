/// An HTTP request rendered from an account's web-service keys, ready for a transport.
public struct RenderedRequest: Sendable, Hashable {
    /// HTTP credentials from `<prefix>AuthUsername`/`<prefix>AuthPassword`: Digest, or Basic
    /// where the server offers only Basic over https.
    public struct Credentials: Sendable, Hashable {
        public var username: String
        public var password: String

        public init(username: String, password: String) {
            self.username = username
            self.password = password
        }
    }

    public var account: String
    public var reporter: Reporter
    public var method: String
    public var url: String
    /// Headers in sending order; `User-Agent` first, then `Content-Type` with a body, then custom ones.
    public var headers: [(name: String, value: String)]
    public var body: String?
    public var credentials: Credentials?
    /// `<prefix>Timeout`, else nil for the agent's default.
    public var timeout: Duration?
    /// SHA-256 (hex) of what is sent, secrets included: a change means the account is reported again.
    public var fingerprint: String
    /// True when the request held secrets that were replaced by `********` because the URL is
    /// plain http to a host that is not loopback.
    public var secretsWithheld: Bool
    /// True when secrets are shown as ``RequestBuilder/secretMarker(_:)`` markers (a preview's
    /// `.shellVariables` display): then, and only then, each U+0001 in the text is a marker's.
    public var hasSecretMarkers = false

    public init(account: String, reporter: Reporter, method: String, url: String,
                headers: [(name: String, value: String)], body: String?, credentials: Credentials? = nil,
                timeout: Duration? = nil, fingerprint: String = "", secretsWithheld: Bool = false) {
        self.account = account
        self.reporter = reporter
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.credentials = credentials
        self.timeout = timeout
        self.fingerprint = fingerprint
        self.secretsWithheld = secretsWithheld
    }

    public static func == (lhs: RenderedRequest, rhs: RenderedRequest) -> Bool {
        lhs.fingerprint == rhs.fingerprint && lhs.account == rhs.account && lhs.reporter == rhs.reporter
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(fingerprint)
        hasher.combine(account)
        hasher.combine(reporter)
    }

    /// The value of the first header called `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// The version pushreporter reports in `User-Agent` and `%version%`.
public enum PushReporterVersion {
    public static let current = "0.1.0"
}
