#if canImport(Glibc)
import Glibc
#endif
import PushBackend
import PushConfig
import PushScheduler

/// Firebase Cloud Messaging device groups (SPEC §9.3, seed 002): each account that names an
/// `fcm-device-group` service is a member of its group (`group`, by default its username) with
/// its device token. Groups are created when FCM does not know them, filled and emptied as
/// accounts come, change their token and leave, one request per group for the changes due at
/// once; their `notification_key`s are kept in state. Requests are authorised with OAuth 2
/// access tokens of a service account, or the legacy server key.
///
/// Guide: docs/fcm.md. The parts: `FCMSettings`, `FCMPlanner`, `FCMSender` (and `FCMMemory`, the
/// groups' keys it keeps across subscriptions).
public struct FCMBackend: Backend {
    public static let type = "fcm-device-group"
    public var type: String { Self.type }

    public var settingsSchema: SettingsSchema? {
        SettingsSchema(doc: "Firebase Cloud Messaging device groups (docs/fcm.md); Google deprecates them.",
                       keys: FCMSettings.keys, described: [
            .init("endpoint", .url, "Where device groups are managed (default https://fcm.googleapis.com/fcm/notification)."),
            .init("projectId", .text, "The Firebase project's number, sent as project_id."),
            .init("serviceAccount", .text, "The service account's JSON key (!file PATH or !credential NAME), for OAuth 2.0."),
            .init("serverKey", .text, "A legacy server key, instead of serviceAccount; a secret."),
            .init("tokenUri", .url, "Where OAuth 2.0 tokens are asked for, with serviceAccount (default: the key's token_uri)."),
        ])
    }
    /// The device groups: which accounts share one is known only from all of them.
    public var plannerReadsEveryAccount: Bool { true }

    /// What the backend remembers across subscriptions: keys, wanted members, access tokens.
    let memory = FCMMemory()
    /// Unix time in milliseconds: for the JWT's `iat` and the access tokens' expiry.
    let wallClock: @Sendable () -> Int64

    /// - Parameter wallClock: Unix time in milliseconds (the agent's wall clock).
    public init(wallClock: @escaping @Sendable () -> Int64 = FCMBackend.systemMilliseconds) {
        self.wallClock = wallClock
    }

    /// The system's real-time clock, in Unix milliseconds.
    @Sendable public static func systemMilliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec / 1_000_000)
    }

    public func check(_ context: BackendContext, skipping passedEarly: [Bool]?, diagnostics: inout DiagnosticList) {
        let definitions = context.services(ofType: type)
        guard !definitions.isEmpty else { return }
        // Checking counts the groups as a plan would, but keeps what it learns to itself.
        let planner = FCMPlanner(context, memory: FCMMemory(), diagnostics: &diagnostics)
        for group in planner.overfull {
            diagnostics.error(group.message, file: group.file, at: group.position)
        }
        let named = Set(context.configuration.accounts.filter(\.isEnabled).flatMap(\.services.keys))
        for definition in definitions where !named.contains(definition.name) {
            diagnostics.warning("no enabled account names the service '\(definition.name)', so no device group is managed with it",
                                file: definition.file, at: definition.position)
        }
    }

    public func planner(_ context: BackendContext, diagnostics: inout DiagnosticList) -> any SubscriptionPlanner {
        FCMPlanner(context, memory: memory, diagnostics: &diagnostics)
    }

    public func send(_ requests: [SubscriptionRequest], transport: any HTTPTransport, defaultTimeout: Duration) async -> [Outcome] {
        let items = requests.compactMap { $0.payload as? FCMItem }
        guard let first = items.first, items.count == requests.count,
              items.allSatisfy({ $0.operation == first.operation && $0.target == first.target && $0.group == first.group }) else {
            return requests.map { _ in .rejected("the request was not prepared by the FCM backend") }
        }
        let exchange = FCMSender(target: first.target, group: first.group, memory: memory, transport: transport,
                                   timeout: requests[0].timeout ?? defaultTimeout, wallClock: wallClock)
        // Two accounts on one device share a token: it is sent once.
        var tokens: [String] = []
        for item in items where !tokens.contains(item.token) { tokens.append(item.token) }
        let outcomes = first.operation == .add ? await exchange.add(tokens) : await exchange.remove(tokens)
        let byToken = Dictionary(zip(tokens, outcomes), uniquingKeysWith: { first, _ in first })
        return items.map { byToken[$0.token] ?? .retry(AttemptFailure(status: nil, reason: "no answer for this token")) }
    }

    public func deliveredParts(of delivery: SubscriptionRequest) -> DeliveredParts? {
        guard let item = delivery.payload as? FCMItem else { return nil }
        var parts = DeliveredParts()
        parts.add("endpoint", item.target.endpoint)
        parts.add("project_id", item.target.projectId)
        parts.add("credential", item.target.credential.parts.joined(separator: "\u{0}"))
        parts.add("notification_key_name", item.group)
        parts.add("registration token", item.token)
        return parts
    }

    public func cleanupRequest(account: String, service: String, stored: String) -> SubscriptionRequest? {
        guard let removal = StoredRemoval(text: stored) else { return nil }
        return Self.request(removal.item, account: account, service: service)
    }

    public func restore(_ kept: [KeptData]) {
        var keys: [GroupID: String] = [:]
        for data in kept {
            guard let group = KeptGroup(text: data.data) else { continue }
            keys[group.id] = group.key
        }
        memory.restoreKeys(keys)
    }

    /// Each group of the delivered subscriptions: its service, name, members and the first 8
    /// characters of its key (the one most of them keep).
    public func statusTable(_ kept: [KeptData]) -> StatusTable? {
        struct Row: Hashable {
            var service: String
            var group: String
        }
        var keys: [Row: [String: Int]] = [:]
        var members: [Row: Int] = [:]
        for data in kept {
            guard let group = KeptGroup(text: data.data) else { continue }
            let row = Row(service: data.service, group: group.group)
            members[row, default: 0] += 1
            keys[row, default: [:]][group.key, default: 0] += 1
        }
        guard !members.isEmpty else { return nil }
        let rows = members.keys.sorted { ($0.service, $0.group) < ($1.service, $1.group) }.map { row in
            let common = keys[row, default: [:]].max { ($0.value, $1.key) < ($1.value, $0.key) }?.key ?? ""
            return [row.service, row.group, "\(members[row] ?? 0)", String(common.prefix(8)) + (common.count > 8 ? "…" : "")]
        }
        return StatusTable(title: "Firebase device groups:", header: ["SERVICE", "GROUP", "MEMBERS", "KEY"], rows: rows)
    }

    /// A device-group change as the agent schedules it: batched with the changes of the same
    /// kind to the same group (FCM takes up to 20 tokens a request), paused with its service on
    /// a 429 or 503.
    static func request(_ item: FCMItem, account: String, service: String) -> SubscriptionRequest {
        var shapes = ShapeCache()
        return request(item, account: account, service: service, shapes: &shapes)
    }

    /// As ``request(_:account:service:)``, sharing the shapes of `shapes`.
    static func request(_ item: FCMItem, account: String, service: String, shapes: inout ShapeCache) -> SubscriptionRequest {
        let group = Fingerprint.sha256([item.target.fingerprint, item.group]).prefix(16)
        let shape = shapes.shape(family: type, purpose: item.operation == .add ? .delivery : .cleanup,
                                 label: "\(service) group \(item.operation == .add ? "membership" : "removal")",
                                 host: URLText.hostAndPort(of: item.target.endpoint),
                                 batch: Batching(group: "\(service)/\(item.operation.rawValue)/\(group)", limit: FCMPlanner.memberLimit),
                                 pauseLabel: service)
        return SubscriptionRequest(account: account, service: service, shape: shape, payload: item)
    }
}
