import _CryptoExtras
import Foundation
import Synchronization

/// Firebase Cloud Messaging's device-group API and a Google OAuth 2 token endpoint (SPEC §9.3,
/// `seeds/002_*`, SPEC §10's errors) played on 127.0.0.1: groups with their members and keys,
/// checked and answered as Firebase's device-group page says, and scriptable to fail.
///
/// | endpoint | request | answer |
/// |---|---|---|
/// | `POST /fcm/notification` | `{"operation":"create","notification_key_name","registration_ids":[…]}` | 200 `{"notification_key"}` |
/// | `POST /fcm/notification` | `{"operation":"add"\|"remove","notification_key_name","notification_key","registration_ids":[…]}` | 200 `{"notification_key"}` |
/// | `GET /fcm/notification?notification_key_name=…` | | 200 `{"notification_key"}`, a new string each time, all valid |
/// | `POST /token` | form `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT` | 200 `{"access_token","expires_in","token_type"}` |
///
/// Errors come as SPEC §10 says, 400 with `{"error":"…"}`: `notification_key already exists`
/// (create of a known name), `notification_key not found` (add or remove with a key the group was
/// never given, or of a group that is gone; a retrieval of an unknown name), `no valid registration
/// ids` (none of the ids is one FCM accepts: see ``rejectRegistrationIds(_:)``), and, in this fake's
/// words, `too many registration ids` (a group over 20). A group whose last member is removed is
/// deleted, as FCM does.
///
/// A device-group request is checked in this order, and the first failure answers:
/// 1. a scripted reply (``answerNext(_:of:with:)``);
/// 2. the credentials, unless `checksCredentials` is false: `project_id` must be `projectId`, and
///    `Authorization` either `Bearer` with an access token this fake issued and has not revoked,
///    together with `access_token_auth: true`, or `key=` with `serverKey`: else 401;
/// 3. the body: JSON with the keys of its operation, no other: else 400.
///
/// The token endpoint verifies the assertion's RS256 signature with `publicKey`, and checks
/// `iss` (`clientEmail`), `scope` (`…/auth/firebase.messaging`), `aud` (its own URL), `iat` and
/// `exp` (one hour at most, not expired): else 400 `{"error":"invalid_grant"}`.
///
/// Thread-safe: scripting, reading and waiting may happen on any thread while requests are served.
public final class FakeFCMServer: Sendable {
    public static let defaultProjectId = "fake-project-1234"
    public static let defaultClientEmail = "pushreporter@fake-project-1234.iam.gserviceaccount.com"
    /// Where device groups are managed.
    public static let notificationPath = "/fcm/notification"
    /// Where access tokens are issued.
    public static let tokenPath = "/token"
    /// The scope the assertion must ask for.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// The most members a group has.
    public static let memberLimit = 20

    /// The `project_id` every device-group request must carry.
    public let projectId: String
    /// The `iss` every assertion must carry.
    public let clientEmail: String
    private let server: LoopbackHTTPServer
    private let ledger: Ledger

    /// Starts serving on 127.0.0.1.
    ///
    /// - Parameters:
    ///   - port: The port to listen on; 0 (the default) takes a free one.
    ///   - recording: Whether `requests`, `operations` and `tokenRequests` keep what they saw (the
    ///     groups, the counts the waits use and the issued tokens are kept either way).
    ///   - publicKey: The service account's public key, to verify assertions with; nil accepts
    ///     no assertion unless `checksCredentials` is false.
    ///   - serverKey: A legacy server key `Authorization: key=` may carry; nil accepts none.
    ///   - accessTokenPrefix: What each issued access token starts with (a number follows).
    ///   - accessTokenLifetime: The `expires_in` of issued tokens, in seconds.
    ///   - checksCredentials: `false` accepts any assertion, token, key and project (the demo
    ///     receiver, which cannot know the configuration sent to it).
    public init(port: Int = 0, recording: Bool = true, projectId: String = defaultProjectId,
                clientEmail: String = defaultClientEmail, publicKey: _RSA.Signing.PublicKey? = nil, serverKey: String? = nil,
                accessTokenPrefix: String = "ya29.fake-access-token-", accessTokenLifetime: Int = 3599,
                checksCredentials: Bool = true) throws {
        self.projectId = projectId
        self.clientEmail = clientEmail
        let ledger = Ledger(State())
        self.ledger = ledger
        let listening = Mutex<Int>(0)
        let api = API(projectId: projectId, clientEmail: clientEmail, publicKey: publicKey, serverKey: serverKey,
                      accessTokenPrefix: accessTokenPrefix, accessTokenLifetime: accessTokenLifetime,
                      checksCredentials: checksCredentials, recording: recording, ledger: ledger,
                      tokenURL: { "http://127.0.0.1:\(listening.withLock { $0 })\(FakeFCMServer.tokenPath)" })
        let server = try LoopbackHTTPServer(port: port, recording: recording) { request, index in
            api.reply(to: request, index: index) ?? .status(404)
        }
        listening.withLock { $0 = server.port }
        self.server = server
        self.api = api
    }

    private let api: API

    /// A request as the loopback server records it.
    public typealias Request = LoopbackHTTPServer.Request
    /// An answer as the loopback server sends it.
    public typealias Reply = LoopbackHTTPServer.Reply

    // MARK: Where it listens

    /// `http://127.0.0.1:<port>`.
    public var baseURL: String { server.baseURL }
    public var port: Int { server.port }
    /// What a service's `endpoint` is set to.
    public var endpoint: String { baseURL + Self.notificationPath }
    /// What a service account's `token_uri` (or a service's `tokenUri`) is set to.
    public var tokenURL: String { baseURL + Self.tokenPath }

    /// A Google service-account JSON key for `privateKey`, in the shape Google writes, whose
    /// `token_uri` is this fake's token endpoint.
    public func serviceAccountJSON(privateKey: _RSA.Signing.PrivateKey, privateKeyId: String = "0123456789abcdef") -> String {
        let fields: [String: String] = [
            "type": "service_account", "project_id": projectId, "private_key_id": privateKeyId,
            "private_key": privateKey.pkcs8PEMRepresentation, "client_email": clientEmail, "client_id": "100000000000000000001",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": tokenURL,
        ]
        let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
        return data.map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// The answer this fake gives `request`, for a server of another's (the demo receiver serves
    /// Journeys and FCM on one port); nil when its path is neither of this fake's.
    public func reply(to request: Request, index: Int) -> Reply? {
        api.reply(to: request, index: index)
    }

    /// Stops the server; waits in progress return `false`. Idempotent.
    public func stop() {
        ledger.stop()
        server.stop()
    }

    // MARK: Scripting

    /// Answers the next `count` requests to `endpoint` (either when nil) with `reply` before
    /// looking at them: `.status(429, headers: [("Retry-After", "1")])`, `.status(401)`, `.hang`, …
    /// Scripts are used in the order given.
    public func answerNext(_ count: Int = 1, of endpoint: Endpoint? = nil, with reply: Reply) {
        ledger.update { $0.scripts.append(count, of: endpoint, with: reply) }
    }

    /// Creates group `name` with `members` as if someone else had, and returns its key.
    @discardableResult
    public func addGroup(_ name: String, members: [String]) -> String {
        ledger.update { state in state.createGroup(name, members: members) }
    }

    /// Deletes group `name`, as FCM does when a group expires: its keys are no longer found.
    public func deleteGroup(_ name: String) {
        ledger.update { _ = $0.groups.removeValue(forKey: name) }
    }

    /// Makes `ids` registration ids FCM does not accept: left out of every create, add and
    /// remove; a request with only such ids is answered `no valid registration ids`.
    public func rejectRegistrationIds(_ ids: [String]) {
        ledger.update { $0.invalidIds.formUnion(ids) }
    }

    /// Makes every access token issued so far refused (401), as when Google revokes them.
    public func revokeAccessTokens() {
        ledger.update { $0.validAccessTokens.removeAll() }
    }

    // MARK: Observations

    /// Every request the server received, in order.
    public var requests: [Request] { server.requests }

    /// Every device-group request answered (scripted ones aside), in order.
    public var operations: [Operation] { ledger.read { $0.operations } }

    /// Every assertion sent to the token endpoint (scripted ones aside), in order.
    public var tokenRequests: [TokenRequest] { ledger.read { $0.tokenRequests } }

    /// The members of group `name`, in the order they joined; nil when there is no such group.
    public func members(of name: String) -> [String]? {
        ledger.read { $0.groups[name]?.members }
    }

    /// The names of the groups there are.
    public var groupNames: [String] { ledger.read { $0.groups.keys.sorted() } }

    /// The key group `name` was created with; nil when there is no such group.
    public func key(of name: String) -> String? {
        ledger.read { $0.groups[name]?.keys.first }
    }

    /// Blocks until at least `count` device-group requests were answered (scripted ones aside),
    /// or `timeout` passed; returns whether they were.
    public func waitForOperations(_ count: Int, timeout: Duration) -> Bool {
        ledger.wait(timeout: timeout) { $0.operationCount >= count }
    }

    /// Blocks until at least `count` assertions reached the token endpoint (scripted ones aside).
    public func waitForTokenRequests(_ count: Int, timeout: Duration) -> Bool {
        ledger.wait(timeout: timeout) { $0.tokenRequestCount >= count }
    }

    /// Blocks until at least `count` requests of any kind have arrived.
    public func waitForRequests(_ count: Int, timeout: Duration) -> Bool {
        server.waitForRequests(count, timeout: timeout)
    }
}
