import PushBackend
import PushConfig

/// Where a device-group request goes and how it is authorised: a service's endpoint, project
/// and credential, as planned (a cleanup kept in state carries its own).
struct FCMTarget: Sendable, Codable, Hashable {
    var service: String
    /// `endpoint`: `POST` for create/add/remove, `GET ?notification_key_name=` to retrieve a key.
    var endpoint: String
    /// `projectId`: the `project_id` header.
    var projectId: String
    var credential: FCMCredential

    /// The group `name` of this project at this endpoint.
    func group(_ name: String) -> GroupID {
        GroupID(endpoint: endpoint, projectId: projectId, group: name)
    }

    /// SHA-256 (hex) of everything here, secrets included: requests batch together only when equal.
    var fingerprint: String {
        Fingerprint.sha256([service, endpoint, projectId] + credential.parts)
    }
}

/// How requests are authorised (SPEC §9.3).
enum FCMCredential: Sendable, Codable, Hashable {
    /// OAuth 2: `Authorization: Bearer` with an access token from the key's `token_uri`.
    case serviceAccount(ServiceAccountKey)
    /// The legacy server key: `Authorization: key=…`.
    case serverKey(String)

    /// Its kind, then its values.
    var parts: [String] {
        switch self {
        case .serviceAccount(let key): ["serviceAccount", key.clientEmail, key.privateKey, key.tokenURI]
        case .serverKey(let key): ["serverKey", key]
        }
    }

    /// What of it is secret: never repeated from an answer into a log.
    var secrets: [String] {
        switch self {
        case .serviceAccount(let key): [key.privateKey]
        case .serverKey(let key): [key]
        }
    }
}

/// One subscription's change to its group: its token added (the delivery) or removed (the
/// cleanup). The payload of a ``PushBackend/SubscriptionRequest``, self-contained.
struct FCMItem: Sendable, Codable {
    enum Operation: String, Sendable, Codable {
        case add, remove
    }

    var operation: Operation
    var target: FCMTarget
    /// The `notification_key_name`.
    var group: String
    /// The device's registration token.
    var token: String
}

/// A cleanup as the state keeps it: the removal to send, and that this backend sends it.
struct StoredRemoval: Codable {
    /// Always ``FCMBackend/type``: tells this backend's cleanups from other backends'.
    var backend: String
    var item: FCMItem

    init(_ item: FCMItem) {
        backend = FCMBackend.type
        self.item = item
    }

    var text: String { StoredJSON.encode(self) }

    /// Reads a cleanup of this backend; nil for any other text.
    init?(text: String) {
        guard let decoded = StoredJSON.decode(StoredRemoval.self, from: text, backend: FCMBackend.type),
              decoded.backend == FCMBackend.type else { return nil }
        self = decoded
    }
}

/// What a delivered subscription keeps in state (``PushBackend/Outcome/deliveredKeeping(_:)``):
/// its group and the group's `notification_key`, which the backend takes back at start and
/// `status` shows.
struct KeptGroup: Codable, Equatable {
    /// Always ``FCMBackend/type``.
    var backend: String
    var endpoint: String
    var project: String
    var group: String
    var key: String

    init(_ group: GroupID, key: String) {
        backend = FCMBackend.type
        endpoint = group.endpoint
        project = group.projectId
        self.group = group.group
        self.key = key
    }

    var id: GroupID { GroupID(endpoint: endpoint, projectId: project, group: group) }

    var text: String { StoredJSON.encode(self) }

    /// Reads what this backend kept; nil for any other text.
    init?(text: String) {
        guard let decoded = StoredJSON.decode(KeptGroup.self, from: text, backend: FCMBackend.type),
              decoded.backend == FCMBackend.type else { return nil }
        self = decoded
    }
}
