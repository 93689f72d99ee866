import PushConfig
import PushTransport

/// An HTTP request a backend rendered for a subscription: what `preview` prints and, as sent,
/// what the transport sends.
public struct RenderedRequest: Sendable, Hashable {
    /// HTTP credentials (Acrobits `<prefix>AuthUsername`/`<prefix>AuthPassword`): Digest, or
    /// Basic where the server offers only Basic over https.
    public struct Credentials: Sendable, Hashable {
        public var username: String
        public var password: String

        public init(username: String, password: String) {
            self.username = username
            self.password = password
        }
    }

    public var account: String
    /// The service the request belongs to (SPEC §9.0); `acrobits` for an account's own web services.
    public var service: String
    /// What the request does, as `preview` names it: `pushTokenReporter` or
    /// `accountRemovalReporter` for an account's own web services, else the service's name
    /// (SPEC §9.0).
    public var reporter: String
    /// Of another service's request, what it is there, as the log names it (`registration`,
    /// `group removal`): `preview`'s titles add it.
    public var kind: String?
    /// Whether it is a cleanup (a removal): what `preview --reporter accountRemovalReporter`
    /// shows of every service.
    public var isCleanup = false
    public var method: String
    public var url: String
    /// Headers in sending order; `User-Agent` first.
    public var headers: [(name: String, value: String)]
    public var body: String?
    public var credentials: Credentials?
    /// How long an attempt may take; nil for the agent's default.
    public var timeout: Duration?
    /// SHA-256 (hex) of what is sent, secrets included: a change means it is sent again.
    public var fingerprint: String
    /// True when the request held secrets that were replaced by `********` because the URL is
    /// plain http to a host that is not loopback.
    public var secretsWithheld: Bool
    /// True when secrets are shown as ``AccountTemplates/secretMarker(_:)`` markers (a preview's
    /// `.shellVariables` display): then, and only then, each U+0001 in the text is a marker's.
    public var hasSecretMarkers = false
    /// The headers that carry a secret: dropped when a redirect leaves for another host.
    public var secretHeaders: [String] = []
    /// Why the request is not sent (SPEC §12: a value that is a secret as a whole, bound for
    /// plain http to a host that is not loopback), or nil.
    public var refusal: String?

    public init(account: String, service: String = "acrobits", reporter: String, method: String, url: String,
                headers: [(name: String, value: String)], body: String?, credentials: Credentials? = nil,
                timeout: Duration? = nil, fingerprint: String = "", secretsWithheld: Bool = false) {
        self.account = account
        self.service = service
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
            && lhs.service == rhs.service
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

    /// `host:port` of the URL, lowercased: the unit of `perHostConcurrency`.
    public var host: String { URLText.hostAndPort(of: url) }

    /// What the transport sends, with `defaultTimeout` (`agent.timeout`) when the request has none.
    public func transportRequest(defaultTimeout: Duration) -> TransportRequest {
        var request = TransportRequest(
            method: method, url: url, headers: headers, body: body.map { Array($0.utf8) },
            credentials: credentials.map { .init(username: $0.username, password: $0.password) },
            timeout: timeout ?? defaultTimeout)
        request.secretHeaders = Set(secretHeaders.map { $0.lowercased() })
        return request
    }

    /// Whether the request's text holds U+0001 of its own (then a preview cannot mark secrets in it).
    public var containsMarkerCharacter: Bool {
        let texts = [url, body ?? "", credentials?.username ?? "", credentials?.password ?? ""] + headers.map(\.value)
        return texts.contains { $0.utf8.contains(0x01) }
    }
}
