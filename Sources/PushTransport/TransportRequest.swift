/// One HTTP request for a transport to send: everything already rendered and encoded.
public struct TransportRequest: Sendable {
    /// Credentials for HTTP authentication: Digest, or Basic when the server offers only Basic
    /// and the URL is https (Basic never goes over plain http).
    public struct Credentials: Sendable, Hashable {
        public var username: String
        public var password: String

        public init(username: String, password: String) {
            self.username = username
            self.password = password
        }
    }

    /// `GET`, `POST`, `PUT`, `HEAD` or `DELETE`.
    public var method: String
    /// An absolute `http` or `https` URL.
    public var url: String
    /// Header lines in sending order. `Expect: 100-continue` is never sent.
    public var headers: [(name: String, value: String)]
    /// The request body; nil sends none.
    public var body: [UInt8]?
    public var credentials: Credentials?
    /// The whole exchange, connecting and redirects included.
    public var timeout: Duration
    /// Names (lowercased) of the headers that carry a secret: a redirect to another host drops
    /// them, as it drops `Authorization`, `Cookie` and the credentials.
    public var secretHeaders: Set<String> = []

    public init(method: String, url: String, headers: [(name: String, value: String)] = [], body: [UInt8]? = nil,
                credentials: Credentials? = nil, timeout: Duration = .seconds(30)) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.credentials = credentials
        self.timeout = timeout
    }
}
