import PushScheduler

/// A request a backend prepared for one subscription, self-contained: sending it needs only
/// the backend that made it (``family``) and a transport, so a cleanup kept in state can be
/// sent after its service has left the configuration.
///
/// What the requests of a service have in common (backend, label, host, batching, pause label,
/// timeout) is one ``Shape`` they share: the agent keeps a request for every subscription, and
/// these fields held inline were 112 of its 184 bytes.
public struct SubscriptionRequest: Sendable {
    /// What the request does for its subscription.
    public enum Purpose: Sendable, Hashable {
        /// Delivers the subscription's current values.
        case delivery
        /// Cleans up what an earlier delivery registered.
        case cleanup
    }

    /// What many requests have in common, shared by reference (``ShapeCache`` hands out one
    /// instance for equal shapes).
    public final class Shape: Sendable {
        public let family: String
        public let purpose: Purpose
        public let label: String
        public let host: String
        public let batch: Batching?
        public let pauseLabel: String?
        public let timeout: Duration?
        /// What log lines call it, when not its `label` (an Acrobits `accountRemovalReporter`
        /// is a `removal` there).
        public let logLabel: String

        public init(family: String, purpose: Purpose, label: String, host: String, batch: Batching? = nil,
                    pauseLabel: String? = nil, timeout: Duration? = nil, logLabel: String? = nil) {
            self.family = family
            self.purpose = purpose
            self.label = label
            self.logLabel = logLabel ?? label
            self.host = host
            self.batch = batch
            self.pauseLabel = pauseLabel
            self.timeout = timeout
        }
    }

    public var account: String
    public var service: String
    /// The backend's own description of what to send.
    public var payload: any Sendable
    /// What it has in common with the other requests of its service.
    public let shape: Shape

    /// The `type:` of the backend that sends it.
    public var family: String { shape.family }
    /// What the request does for its subscription.
    public var purpose: Purpose { shape.purpose }
    /// What it is called: `pushTokenReporter`, `accountRemovalReporter`, `registration`, `cleanup`.
    public var label: String { shape.label }
    /// What log lines call it: the label, or the backend's shorter word for it (`removal`).
    public var logLabel: String { shape.logLabel }
    /// `host:port` of its URL, lowercased: the unit of `perHostConcurrency`, and what logs name.
    public var host: String { shape.host }
    /// Requests with the same batching may go in one request to the receiver, up to its
    /// limit; nil: always alone.
    public var batch: Batching? { shape.batch }
    /// A label whose 429 or 503 pauses every request carrying it (a service), or nil when only
    /// the request itself waits (an Acrobits report: one slow host never holds others back).
    public var pauseLabel: String? { shape.pauseLabel }
    /// How long one attempt may take; nil for `agent.timeout`.
    public var timeout: Duration? { shape.timeout }

    /// A request of the shape `shape` (from a ``ShapeCache``, when many are made).
    public init(account: String, service: String, shape: Shape, payload: any Sendable) {
        self.account = account
        self.service = service
        self.shape = shape
        self.payload = payload
    }

    /// A request with a shape of its own.
    public init(account: String, service: String, family: String, purpose: Purpose, label: String, host: String,
                batch: Batching? = nil, pauseLabel: String? = nil, timeout: Duration? = nil, payload: any Sendable) {
        self.init(account: account, service: service,
                  shape: Shape(family: family, purpose: purpose, label: label, host: host, batch: batch,
                               pauseLabel: pauseLabel, timeout: timeout),
                  payload: payload)
    }
}

/// A payload kept in memory shared with the payloads planned beside it (Acrobits requests,
/// packed into blocks): the memory goes back only when none of them is kept. The agent gives a
/// payload it keeps for long memory of its own (a subscription retrying while those beside it
/// are delivered and let go).
public protocol SharedPayload: Sendable {
    /// Whether the payload has its memory to itself already.
    var isAlone: Bool { get }
    /// The same payload, in memory of its own.
    func alone() -> any Sendable
}

/// Hands out one ``SubscriptionRequest/Shape`` for equal shapes: a planner keeps one, so that
/// the requests of a service share theirs. Its lifetime is the planner's; nothing is global.
public struct ShapeCache: Sendable {
    fileprivate struct Key: Hashable, Sendable {
        var family: String
        var purpose: SubscriptionRequest.Purpose
        var label: String
        var host: String
        var batch: Batching?
        var pauseLabel: String?
        var timeout: Duration?
        var logLabel: String?
    }

    private var shapes: [Key: SubscriptionRequest.Shape] = [:]
    /// The shape handed out last, and its key: most requests in a row share it, and comparing
    /// is cheaper than hashing.
    private var last: (key: Key, shape: SubscriptionRequest.Shape)?

    public init() {}

    /// The shared shape with these fields.
    public mutating func shape(family: String, purpose: SubscriptionRequest.Purpose, label: String, host: String,
                               batch: Batching? = nil, pauseLabel: String? = nil,
                               timeout: Duration? = nil, logLabel: String? = nil) -> SubscriptionRequest.Shape {
        let key = Key(family: family, purpose: purpose, label: label, host: host, batch: batch, pauseLabel: pauseLabel,
                      timeout: timeout, logLabel: logLabel)
        if let last, last.key == key { return last.shape }
        let shape = shapes[key] ?? {
            let made = SubscriptionRequest.Shape(family: family, purpose: purpose, label: label, host: host, batch: batch,
                                                 pauseLabel: pauseLabel, timeout: timeout, logLabel: logLabel)
            shapes[key] = made
            return made
        }()
        last = (key, shape)
        return shape
    }
}
