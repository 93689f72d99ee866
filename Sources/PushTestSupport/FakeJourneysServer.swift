import Foundation

/// Microsoft Customer Insights – Journeys' device-registration API (SPEC §9.2, `seeds/000_*`)
/// played on 127.0.0.1: it checks each request as strictly as the seed allows, answers as the seed
/// shows, records what it accepted, and can be scripted to fail.
///
/// Five endpoints under `/api/v1.0/orgs/{orgId}/pushdeviceregistration/` take `POST` with
/// `Content-Type: application/json` (see `Endpoint`):
///
/// | endpoint | body | answer |
/// |---|---|---|
/// | `devices` | `{"MobileAppId","UserId","ApiToken","ApnsDeviceToken"}` (or `FcmDeviceToken`) | 202 |
/// | `devices/batch` | an array of 1 to 100 such objects | 202 |
/// | `devices/status/` | `{"RegistrationRequestIds":[1 to 100 ids],"MobileAppId","ApiToken"}` | 200, `[{"Status","FailureReason"}]` |
/// | `devices/cleanup` | `{"MobileAppId","ApiToken","UserId","DeviceToken"}` (`DeviceToken` optional) | 202 |
/// | `devices/cleanup/batch` | a non-empty array of such objects | 202 |
///
/// A registration with `x-ms-track-registration: true` is answered `{"RegistrationRequestId":"<guid>"}`
/// (a batch: an array of those in request order), else an empty body. A status query answers each
/// id with the status scripted for its request id, else for its device token, else
/// `defaultStatus`; an id the fake never gave answers `Pending`, as the real service does when it
/// kept no history.
///
/// A request is checked in this order, and the first failure answers; nothing of a refused request
/// is recorded but the raw request, and a batch is accepted or refused whole:
/// 1. another path, or another `orgId`: 404; another method than `POST`: 405 with `Allow: POST`;
/// 2. a reply scripted with `answerNext(_:of:with:)` is sent;
/// 3. a `Content-Type` other than `application/json` (parameters aside), a body that is not JSON,
///    a batch of the wrong size, or an `x-ms-callback-url-headers` that is not a JSON object of
///    strings: 400;
/// 4. each object in turn: a missing, unknown, repeated, empty or non-string key (a registration
///    has exactly one of the two device-token keys): 400; an `ApiToken` other than `apiToken`:
///    `wrongApiTokenStatus` (401); another `MobileAppId`: 400;
/// 5. a device token given to `rejectRequests(containing:)`: 400.
///
/// A 4xx body is a line of plain text saying why, in the fake's words, not the service's.
///
/// ```swift
/// let journeys = try FakeJourneysServer()
/// journeys.setStatus(.failed(.duplicateExists), forToken: "apns-1")
/// // … set the service's publicEndpoint to journeys.baseURL, orgId to journeys.orgId, …
/// #expect(journeys.waitForRegistrations(1, timeout: .seconds(10)))
/// #expect(journeys.registrations(forToken: "apns-1").first?.platform == .ios)
/// ```
///
/// Thread-safe: scripting, reading and waiting may happen on any thread while requests are served.
/// `stop()` (also run when the fake is dropped) stops the server.
public final class FakeJourneysServer: Sendable {
    /// The `orgId` used when `init` is given none (the example of SPEC §9.0).
    public static let defaultOrgId = "0a1b2c3d-0000-0000-0000-000000000000"
    /// The `mobileAppId` used when `init` is given none (the seed's example).
    public static let defaultMobileAppId = "00000000-0000-0000-0000-000000000000"
    /// The `apiToken` used when `init` is given none.
    public static let defaultApiToken = "fake-journeys-api-token"
    /// The most objects `devices/batch` takes, and the most ids a status query may ask about.
    public static let batchLimit = 100

    /// The organization in the path of every endpoint.
    public let orgId: String
    /// The `MobileAppId` every body must carry.
    public let mobileAppId: String
    /// The `ApiToken` every body must carry.
    public let apiToken: String
    private let server: LoopbackHTTPServer
    private let ledger: Ledger

    /// Starts serving on 127.0.0.1.
    ///
    /// - Parameters:
    ///   - port: The port to listen on; 0 (the default) takes a free one.
    ///   - recording: Whether `requests`, `registrations`, `cleanups` and `statusQueries` keep what
    ///     they saw. A long-running server passes `false`; the counts the waits use, and the request
    ///     ids status queries look up, are kept either way.
    ///   - orgId: The organization in the path.
    ///   - mobileAppId: The `MobileAppId` every body must carry.
    ///   - apiToken: The `ApiToken` every body must carry.
    ///   - checksCredentials: `false` accepts any `orgId`, `MobileAppId` and `ApiToken` (the demo
    ///     receiver, which cannot know the configuration sent to it).
    ///   - handler: Called on the connection's thread with each request, its 0-based index and the
    ///     fake's reply, `nil` when the path is not under `/api/v1.0/orgs/{org}/pushdeviceregistration`;
    ///     returns what to send. The fake has already recorded what its reply accepts. Without a
    ///     handler the fake's reply is sent, and 404 for other paths.
    /// - Throws: `LoopbackHTTPServer.SocketError` when the socket cannot be set up.
    public init(port: Int = 0, recording: Bool = true, orgId: String = defaultOrgId,
                mobileAppId: String = defaultMobileAppId, apiToken: String = defaultApiToken,
                checksCredentials: Bool = true,
                handler: (@Sendable (_ request: Request, _ index: Int, _ journeys: Reply?) -> Reply)? = nil) throws {
        self.orgId = orgId
        self.mobileAppId = mobileAppId
        self.apiToken = apiToken
        let ledger = Ledger(State())
        self.ledger = ledger
        let api = API(orgId: orgId, mobileAppId: mobileAppId, apiToken: apiToken,
                      checksCredentials: checksCredentials, recording: recording, ledger: ledger)
        server = try LoopbackHTTPServer(port: port, recording: recording) { request, index in
            let reply = api.reply(to: request, index: index)
            return handler?(request, index, reply) ?? reply ?? .status(404)
        }
    }

    /// A request as the loopback server records it.
    public typealias Request = LoopbackHTTPServer.Request
    /// An answer as the loopback server sends it.
    public typealias Reply = LoopbackHTTPServer.Reply

    // MARK: Where it listens

    /// `http://127.0.0.1:<port>`: what a service's `publicEndpoint` is set to.
    public var baseURL: String { server.baseURL }

    /// The port the server listens on.
    public var port: Int { server.port }

    /// The full URL of `endpoint` for this fake's `orgId`.
    public func url(_ endpoint: Endpoint) -> String {
        "\(baseURL)/api/v1.0/orgs/\(orgId)/pushdeviceregistration/\(endpoint.rawValue)"
    }

    /// Stops the server (see `LoopbackHTTPServer.stop()`); waits in progress return `false`.
    /// Idempotent.
    public func stop() {
        ledger.stop()
        server.stop()
    }

    // MARK: Scripting

    /// What a status query answers for a registration with nothing scripted for its request id or
    /// device token; `.success` at first.
    public var defaultStatus: RegistrationStatus {
        get { ledger.read { $0.defaultStatus } }
        set { ledger.update { $0.defaultStatus = newValue } }
    }

    /// Makes status queries answer `status` for every registration of `token`, past and future
    /// (unless its request id has a status of its own).
    public func setStatus(_ status: RegistrationStatus, forToken token: String) {
        ledger.update { $0.statusByToken[token] = status }
    }

    /// Makes status queries answer `status` for `requestId`, whether or not the fake gave that id.
    public func setStatus(_ status: RegistrationStatus, forRequestId requestId: String) {
        ledger.update { $0.statusById[requestId] = status }
    }

    /// Makes every registration or cleanup request that contains device token `token` answer 400,
    /// a batch as a whole, so a client must split the batch to find it. Nothing of it is recorded.
    public func rejectRequests(containing token: String) {
        ledger.update { _ = $0.rejectedTokens.insert(token) }
    }

    /// The status answered to a body whose `ApiToken` is not `apiToken`: 401 at first; set 403 to
    /// play the other refusal the SPEC names.
    public var wrongApiTokenStatus: Int {
        get { ledger.read { $0.wrongApiTokenStatus } }
        set { ledger.update { $0.wrongApiTokenStatus = newValue } }
    }

    /// Answers the next `count` requests to `endpoint` (any endpoint when `nil`) with `reply`
    /// before looking at them, e.g. `.status(429, headers: [("Retry-After", "1")])`, `.status(503)`
    /// or `.hang`. Nothing of them is recorded but the raw request.
    ///
    /// Scripts are used in the order given: a request takes the first whose endpoint matches and
    /// that has answers left. Only requests to one of the five endpoints, with `POST` and the right
    /// `orgId`, take them.
    public func answerNext(_ count: Int = 1, of endpoint: Endpoint? = nil, with reply: Reply) {
        ledger.update { $0.scripts.append(count, of: endpoint, with: reply) }
    }

    // MARK: Observations

    /// Every request the server received, in order, Journeys or not, accepted or not.
    public var requests: [Request] { server.requests }

    /// Every registration object accepted, in the order accepted (a batch's in its order).
    public var registrations: [Registration] { ledger.read { $0.registrations } }

    /// The accepted registrations of device token `token`, in order.
    public func registrations(forToken token: String) -> [Registration] {
        ledger.read { $0.registrations.filter { $0.deviceToken == token } }
    }

    /// Every cleanup object accepted, in the order accepted.
    public var cleanups: [Cleanup] { ledger.read { $0.cleanups } }

    /// Every status query answered, in order.
    public var statusQueries: [StatusQuery] { ledger.read { $0.statusQueries } }

    /// Blocks until at least `count` registration objects have been accepted or `timeout` has
    /// passed, and returns whether they were. A registration counts before its 202 is sent.
    /// Returns `false` at once once the fake is stopped.
    public func waitForRegistrations(_ count: Int, timeout: Duration) -> Bool {
        ledger.wait(timeout: timeout) { $0.registrationCount >= count }
    }

    /// Blocks until at least `count` cleanup objects have been accepted or `timeout` has passed,
    /// and returns whether they were; like `waitForRegistrations(_:timeout:)`.
    public func waitForCleanups(_ count: Int, timeout: Duration) -> Bool {
        ledger.wait(timeout: timeout) { $0.cleanupCount >= count }
    }

    /// Blocks until at least `count` status queries have been answered or `timeout` has passed,
    /// and returns whether they were; like `waitForRegistrations(_:timeout:)`.
    public func waitForStatusQueries(_ count: Int, timeout: Duration) -> Bool {
        ledger.wait(timeout: timeout) { $0.statusQueryCount >= count }
    }

    /// Blocks until at least `count` requests of any kind have arrived; see
    /// `LoopbackHTTPServer.waitForRequests(_:timeout:)`.
    public func waitForRequests(_ count: Int, timeout: Duration) -> Bool {
        server.waitForRequests(count, timeout: timeout)
    }

    /// Blocks until at least `count` replies of any kind are done; see
    /// `LoopbackHTTPServer.waitForReplies(_:timeout:)`.
    public func waitForReplies(_ count: Int, timeout: Duration) -> Bool {
        server.waitForReplies(count, timeout: timeout)
    }
}

extension FakeJourneysServer {
    /// Everything the fake remembers and is scripted with.
    struct State {
        var defaultStatus = RegistrationStatus.success
        var statusByToken: [String: RegistrationStatus] = [:]
        var statusById: [String: RegistrationStatus] = [:]
        /// The device token of every request id given, kept even when not recording.
        var tokenById: [String: String] = [:]
        var rejectedTokens: Set<String> = []
        var wrongApiTokenStatus = 401
        var scripts = ReplyScripts<Endpoint>()
        var registrations: [Registration] = []
        var cleanups: [Cleanup] = []
        var statusQueries: [StatusQuery] = []
        var registrationCount = 0
        var cleanupCount = 0
        var statusQueryCount = 0

        /// What a status query answers for `id`.
        func status(of id: String) -> RegistrationStatus {
            if let status = statusById[id] { return status }
            guard let token = tokenById[id] else { return .pending }
            return statusByToken[token] ?? defaultStatus
        }
    }

    /// `State` behind one lock, with waits for it to change.
    typealias Ledger = WaitableState<State>
}
