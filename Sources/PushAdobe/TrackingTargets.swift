import PushConfig
import PushTemplates
import Synchronization

/// What tracking resolves a payload with (SPEC §9.4): the configuration's `adobe-campaign`
/// services, the ECID of each account for each service it names, and `agent.retry`. Built by
/// ``AdobeBackend/trackingTargets(_:)`` from a loaded configuration; ``Current`` holds the one
/// in force while the agent runs, replaced on reload.
public struct TrackingTargets: Sendable {
    /// An `adobe-campaign` service.
    public struct Service: Sendable {
        public var name: String
        /// `https://host[:port]`, without a trailing slash.
        public var trackingServer: String
        public var timeout: Duration
    }

    /// An ECID as sent, and as a masked rendering shows it.
    struct ECID: Sendable {
        var sent: String
        var shown: String
    }

    /// The usable `adobe-campaign` services, by name.
    public private(set) var services: [String: Service] = [:]
    /// The type of every other service, by name (to say why one cannot be tracked with).
    var otherServices: [String: String] = [:]
    /// Service → account → ECID, for the enabled accounts that name the service.
    var ecids: [String: [String: ECID]] = [:]
    /// Every account id, and whether it is enabled.
    var accounts: [String: Bool] = [:]
    /// `agent.retry`.
    public var retry = RetryPolicy()

    /// No service, no account.
    public init() {}

    init(services: [String: Service], otherServices: [String: String], ecids: [String: [String: ECID]],
         accounts: [String: Bool], retry: RetryPolicy) {
        self.services = services
        self.otherServices = otherServices
        self.ecids = ecids
        self.accounts = accounts
        self.retry = retry
    }

    /// The service `name` names, or without a name the only `adobe-campaign` service; else why
    /// there is none, as a sentence (`key` is how the caller names the choice: `--service`).
    public func service(named name: String?, key: String) -> Result<Service, Unresolved> {
        guard let name else {
            switch services.count {
            case 1: return .success(services.values.first!)
            case 0: return .failure(Unresolved("the configuration has no adobe-campaign service"))
            default: return .failure(Unresolved("the configuration has several adobe-campaign services (\(services.keys.sorted().joined(separator: ", "))); give \(key) to name one"))
            }
        }
        if let service = services[name] { return .success(service) }
        if let type = otherServices[name] {
            return .failure(Unresolved("the service '\(name.displayEscaped)' is of type \(type.displayEscaped); tracking needs an adobe-campaign service"))
        }
        var message = "no service '\(name.displayEscaped)' in the configuration"
        if let nearest = NameSuggester.nearest(to: name, among: services.keys) { message += "; did you mean '\(nearest)'?" }
        else if services.isEmpty { message += ", and no adobe-campaign service at all" }
        return .failure(Unresolved(message))
    }

    /// What a payload is tracked with for `service`: the ECID given, or the one of `account`.
    public enum Resolution: Sendable, Equatable {
        /// Tracked with this ECID (as sent, and as shown with secrets masked).
        case known(sent: String, shown: String)
        /// Not tracked: no ECID is known, for the reason given (a sentence).
        case unknown(String)
    }

    /// The ECID to track with, or why there is none; fails when the request itself is wrong
    /// (both given, or an account that does not exist). `hint` says how to give one.
    public func ecid(given: String?, account: String?, service: Service, hint: String) -> Result<Resolution, Unresolved> {
        switch (given, account) {
        case (.some, .some):
            return .failure(Unresolved("give an account or an ECID, not both"))
        case (let ecid?, nil):
            return .success(ecid.isEmpty ? .unknown("the ECID given is empty") : .known(sent: ecid, shown: ecid))
        case (nil, let id?):
            guard let enabled = accounts[id] else {
                var message = "no account '\(id.displayEscaped)' in the configuration"
                if let nearest = NameSuggester.nearest(to: id, among: accounts.keys) { message += "; did you mean '\(nearest.displayEscaped)'?" }
                return .failure(Unresolved(message))
            }
            guard enabled else { return .success(.unknown("the account '\(id.displayEscaped)' is disabled")) }
            guard let ecid = ecids[service.name]?[id] else {
                return .success(.unknown("the account '\(id.displayEscaped)' does not name the service '\(service.name.displayEscaped)' under its services:, so it has no ECID for it"))
            }
            guard !ecid.sent.isEmpty else {
                return .success(.unknown("the ecid of the account '\(id.displayEscaped)' for the service '\(service.name.displayEscaped)' renders empty"))
            }
            return .success(.known(sent: ecid.sent, shown: ecid.shown))
        case (nil, nil):
            return .success(.unknown("no ECID is known (\(hint))"))
        }
    }

    /// Why a payload cannot be resolved, as a sentence.
    public struct Unresolved: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String

        init(_ description: String) {
            self.description = description
        }
    }

    /// The targets in force, replaced when the configuration is loaded again.
    public final class Current: Sendable {
        private let targets: Mutex<TrackingTargets>

        public init(_ targets: TrackingTargets = TrackingTargets()) {
            self.targets = Mutex(targets)
        }

        public var value: TrackingTargets { targets.withLock { $0 } }

        public func replace(with targets: TrackingTargets) {
            self.targets.withLock { $0 = targets }
        }
    }
}

extension TrackingTargets.Service {
    /// The requests of `event` for `payload` tracked with `ecid`, or why it is not tracked
    /// (every reason, as sentences; SPEC §9.4).
    public func requests(_ event: TrackingEvent, for payload: PushPayload,
                         ecid: TrackingTargets.Resolution) -> Result<[TrackingRequest], NotTracked> {
        var reasons = payload.whyNotTracked
        if case .unknown(let why) = ecid { reasons.append(why) }
        guard reasons.isEmpty, case .known(let sent, let shown) = ecid, let messageId = payload.messageId,
              let deliveryId = payload.deliveryId else {
            return .failure(NotTracked(reasons: reasons))
        }
        return .success(event.actions.map { action in
            TrackingRequest(service: name, trackingServer: trackingServer, timeout: timeout, action: action,
                            messageId: messageId, deliveryId: deliveryId, ecid: (sent, shown))
        })
    }
}

/// Why a payload is not tracked: one sentence or more.
public struct NotTracked: Error, Sendable, CustomStringConvertible {
    public var reasons: [String]

    public var description: String { reasons.joined(separator: "; ") }
}
