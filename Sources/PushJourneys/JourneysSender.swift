import FoundationEssentials
import PushBackend
import PushConfig
import PushScheduler
import PushTransport

/// One registration or cleanup for the Journeys API (SPEC §9.2): the payload of a
/// ``SubscriptionRequest``, self-contained (a cleanup is read back from state this way).
struct JourneysItem: Sendable, Codable {
    enum Kind: String, Sendable, Codable {
        case registration, cleanup
    }

    var kind: Kind
    /// The endpoint of one object (`…/devices`, `…/devices/cleanup`).
    var url: String
    /// The endpoint of an array of them (`…/devices/batch`, `…/devices/cleanup/batch`).
    var batchURL: String
    /// The object, compact JSON, keys in the seed's order.
    var object: String
    /// Headers besides `User-Agent` and `Content-Type` (tracking and callbacks).
    var headers: [Header]
    /// Whether the answer carries registration request ids (`x-ms-track-registration: true`).
    var tracked: Bool
    /// The secrets the object carries (the API token): never repeated from an answer into a log.
    var secrets: [String] = []

    struct Header: Sendable, Codable, Equatable {
        var name: String
        var value: String
    }
}

/// A cleanup as the state keeps it: what to send, and that this backend sends it.
struct StoredCleanup: Codable {
    /// Always ``JourneysBackend/type``: tells this backend's cleanups from other backends'.
    var backend: String
    var item: JourneysItem
    /// The service's `batchSize` when it was rendered.
    var batchSize: Int

    /// Compact JSON with sorted keys, as `StoredJSON.encode` writes it (JSONEncoder was a fifth
    /// of planning 100,000 registrations, perf): one text per subscription, compared at each
    /// reload, so the bytes stay those of earlier versions (a test holds them to JSONEncoder's).
    /// JSONText escapes a few characters JSONEncoder writes otherwise (U+0008, U+000C, DEL, C1
    /// controls, U+2028/9): a text with any of them is left to JSONEncoder, since a stored cleanup
    /// that reads as different is kept as a replaced one, and sent after the next delivery.
    var text: String {
        let fields = [backend, item.batchURL, item.object, item.url] + item.secrets + item.headers.flatMap { [$0.name, $0.value] }
        guard !fields.contains(where: Self.escapesDifferently) else { return StoredJSON.encode(self) }
        // Appended to one string with room for it all: a chain of `+` made a string at each step
        // (15 % of checking 100,000 registrations, perf).
        var out = ""
        out.reserveCapacity(160 + fields.reduce(0) { $0 + $1.utf8.count } + item.object.utf8.count / 4)
        out.append(#"{"backend":"#)
        JSONText.append(backend, to: &out)
        out.append(#","batchSize":"#)
        out.append(String(batchSize))
        out.append(#","item":{"batchURL":"#)
        JSONText.append(item.batchURL, to: &out)
        out.append(#","headers":["#)
        for (index, header) in item.headers.enumerated() {
            out.append(index == 0 ? #"{"name":"# : #",{"name":"#)
            JSONText.append(header.name, to: &out)
            out.append(#","value":"#)
            JSONText.append(header.value, to: &out)
            out.append("}")
        }
        out.append(#"],"kind":"#)
        JSONText.append(item.kind.rawValue, to: &out)
        out.append(#","object":"#)
        JSONText.append(item.object, to: &out)
        out.append(#","secrets":["#)
        for (index, secret) in item.secrets.enumerated() {
            if index > 0 { out.append(",") }
            JSONText.append(secret, to: &out)
        }
        out.append(#"],"tracked":"#)
        out.append(item.tracked ? "true" : "false")
        out.append(#","url":"#)
        JSONText.append(item.url, to: &out)
        out.append("}}")
        return out
    }

    /// Whether `text` has a byte that may start a character JSONText escapes unlike JSONEncoder.
    private static func escapesDifferently(_ text: String) -> Bool {
        text.utf8.contains { $0 == 0x08 || $0 == 0x0C || $0 == 0x7F || $0 == 0xC2 || $0 == 0xE2 }
    }

    init(item: JourneysItem, batchSize: Int) {
        backend = JourneysBackend.type
        self.item = item
        self.batchSize = batchSize
    }

    /// Reads a cleanup of this backend; nil for any other text.
    init?(text: String) {
        guard let decoded = StoredJSON.decode(StoredCleanup.self, from: text, backend: JourneysBackend.type),
              decoded.backend == JourneysBackend.type else { return nil }
        self = decoded
    }
}

/// Sending to the Journeys API and reading its answers (SPEC §9.2).
enum JourneysSender {
    /// Sends `items` (one kind, one batch): one object to the single endpoint, several as an
    /// array to the batch endpoint. A 400 on a batch is split in halves, each sent again, until
    /// single requests isolate the bad ones.
    static func send(_ items: ArraySlice<JourneysItem>, transport: any HTTPTransport, timeout: Duration) async -> [Outcome] {
        guard let first = items.first else { return [] }
        let single = items.count == 1
        let body = single ? first.object : "[" + items.map(\.object).joined(separator: ",") + "]"
        var headers: [(name: String, value: String)] = [("User-Agent", PushReporterVersion.userAgent),
                                                        ("Content-Type", "application/json")]
        headers += first.headers.map { ($0.name, $0.value) }
        let request = TransportRequest(method: "POST", url: single ? first.url : first.batchURL, headers: headers,
                                       body: Array(body.utf8), timeout: timeout)
        let response: TransportResponse
        do {
            response = try await transport.send(request)
        } catch {
            let outcome = ReceiverAnswer.outcome(of: error)
            return items.map { _ in outcome }
        }
        switch response.status {
        case 202:
            guard first.kind == .registration, first.tracked else {
                return items.map { _ in .delivered }
            }
            guard let ids = registrationIDs(response.body, single: single), ids.count == items.count else {
                let failure = AttemptFailure(status: 202, reason: "HTTP 202, but the body does not hold \(items.count) registration request \(items.count == 1 ? "id" : "ids")")
                return items.map { _ in .retry(failure) }
            }
            return ids.map { .accepted($0) }
        case 400 where items.count > 1:
            let middle = items.startIndex + items.count / 2
            let left = await send(items[..<middle], transport: transport, timeout: timeout)
            let right = await send(items[middle...], transport: transport, timeout: timeout)
            return left + right
        case 400:
            let why = "HTTP 400" + (ReceiverAnswer.excerpt(response.body, hiding: first.secrets).map { ": \($0)" } ?? "")
            return [first.kind == .registration ? .rejected("\(why) (Journeys refuses this registration)") : .rejected(why)]
        case 401, 403:
            return items.map { _ in .stopped("HTTP \(response.status): Journeys refused the API token") }
        default:
            let failure = ReceiverAnswer.failure(response)
            return items.map { _ in .retry(failure) }
        }
    }

    /// The registration request ids of a tracked 202: one object, or an array of them.
    static func registrationIDs(_ body: [UInt8], single: Bool) -> [String]? {
        struct Answer: Decodable {
            var RegistrationRequestId: String
        }
        let data = Data(body)
        if single, let answer = try? JSONDecoder().decode(Answer.self, from: data) { return [answer.RegistrationRequestId] }
        return try? JSONDecoder().decode([Answer].self, from: data).map(\.RegistrationRequestId)
    }
}

/// Asks Journeys what became of tracked registrations (SPEC §9.2): `POST …/devices/status/`
/// with at most 100 ids a request.
struct JourneysPoller: ConfirmationPoller {
    var service: String
    var interval: Duration
    var timeout: Duration
    var statusURL: String
    var mobileAppId: String
    var apiToken: String

    func poll(_ pending: [String], transport: any HTTPTransport, defaultTimeout: Duration) async -> [Outcome?] {
        var answers: [Outcome?] = []
        var start = pending.startIndex
        while start < pending.endIndex {
            let end = min(start + JourneysSettings.batchLimit, pending.endIndex)
            let chunk = Array(pending[start..<end])
            answers += await ask(chunk, transport: transport, timeout: defaultTimeout)
            start = end
        }
        return answers
    }

    private func ask(_ ids: [String], transport: any HTTPTransport, timeout: Duration) async -> [Outcome?] {
        let body = JSONText.compactObject([
            ("RegistrationRequestIds", "[" + ids.map { JSONText.string($0) }.joined(separator: ",") + "]"),
            ("MobileAppId", JSONText.string(mobileAppId)),
            ("ApiToken", JSONText.string(apiToken)),
        ])
        let request = TransportRequest(method: "POST", url: statusURL,
                                       headers: [("User-Agent", PushReporterVersion.userAgent), ("Content-Type", "application/json")],
                                       body: Array(body.utf8), timeout: timeout)
        guard let response = try? await transport.send(request) else { return ids.map { _ in nil } }
        if response.status == 401 || response.status == 403 {
            return ids.map { _ in .stopped("HTTP \(response.status) on the status endpoint: Journeys refused the API token") }
        }
        guard response.status == 200, let statuses = Self.statuses(response.body), statuses.count == ids.count else {
            return ids.map { _ in nil }
        }
        return statuses.map(Self.outcome)
    }

    struct Status: Decodable {
        var Status: String?
        var FailureReason: String?
    }

    static func statuses(_ body: [UInt8]) -> [Status]? {
        try? JSONDecoder().decode([Status].self, from: Data(body))
    }

    /// What one status says (SPEC §9.2): nil while it is pending.
    static func outcome(_ status: Status) -> Outcome? {
        let state = ReceiverAnswer.trimmed(status.Status ?? "")
        let reason = ReceiverAnswer.trimmed(status.FailureReason ?? "")
        switch state.lowercased() {
        case "success":
            return .delivered
        case "pending", "":
            return nil
        case "failed":
            switch reason {
            case "DuplicateExists": return .delivered
            case "FailedToStoreDevice": return .retry(AttemptFailure(status: nil, reason: "Journeys failed to store the device (FailedToStoreDevice)"))
            case "DeviceTokenTooLong": return .rejected("Journeys: the device token is too long (DeviceTokenTooLong)")
            case "DryRunSendingFailed": return .rejected("Journeys could not send a test notification to the device (DryRunSendingFailed)")
            case "ApiTokenNotValid": return .stopped("Journeys: the API token is not valid (ApiTokenNotValid)")
            default: return .rejected("Journeys failed the registration: '\(reason.isEmpty ? "no reason given" : reason)'")
            }
        default:
            return .rejected("Journeys answered the status '\(state)'")
        }
    }
}
