import PushScheduler

/// A request a backend prepared for one subscription, self-contained: sending it needs only
/// the backend that made it (``family``) and a transport, so a cleanup kept in state can be
/// sent after its service has left the configuration.
public struct SubscriptionRequest: Sendable {
    /// What the request does for its subscription.
    public enum Purpose: Sendable, Equatable {
        /// Delivers the subscription's current values.
        case delivery
        /// Cleans up what an earlier delivery registered.
        case cleanup
    }

    public var account: String
    public var service: String
    /// The `type:` of the backend that sends it.
    public var family: String
    public var purpose: Purpose
    /// What logs call it: `pushTokenReporter`, `removal`, `registration`, `cleanup`.
    public var label: String
    /// `host:port` of its URL, lowercased: the unit of `perHostConcurrency`, and what logs name.
    public var host: String
    /// Requests with the same batching may go in one request to the receiver, up to its
    /// limit; nil: always alone.
    public var batch: Batching?
    /// A label whose 429 or 503 pauses every request carrying it (a service), or nil when only
    /// the request itself waits (an Acrobits report: one slow host never holds others back).
    public var pauseLabel: String?
    /// How long one attempt may take; nil for `agent.timeout`.
    public var timeout: Duration?
    /// The backend's own description of what to send.
    public var payload: any Sendable

    public init(account: String, service: String, family: String, purpose: Purpose, label: String, host: String,
                batch: Batching? = nil, pauseLabel: String? = nil, timeout: Duration? = nil, payload: any Sendable) {
        self.account = account
        self.service = service
        self.family = family
        self.purpose = purpose
        self.label = label
        self.host = host
        self.batch = batch
        self.pauseLabel = pauseLabel
        self.timeout = timeout
        self.payload = payload
    }
}
