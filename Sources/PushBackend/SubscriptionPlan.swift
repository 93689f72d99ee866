/// What the configuration asks of one subscription (an account and a service, SPEC §9.0):
/// what to deliver, and the cleanup to keep should that delivery reach the receiver.
public struct SubscriptionPlan: Sendable {
    public var account: String
    public var service: String
    /// Fingerprint of what is delivered, secrets included: a change means it is delivered again.
    public var fingerprint: String
    /// What to send; nil while the subscription waits for a value it needs (``waiting`` says which).
    public var delivery: SubscriptionRequest?
    /// Why nothing is sent yet, as a sentence for `status` (e.g. no device token yet).
    public var waiting: String?
    /// Why it is never sent as it stands (SPEC §12: a secret that cannot be masked, bound for
    /// plain http): the subscription is *rejected* with this sentence, without a delivery.
    public var refusal: String?
    /// The cleanup rendered from the same values, as the backend reads it back
    /// (``Backend/cleanupRequest(account:service:stored:defaultTimeout:)``); nil when it has none.
    public var cleanup: String?
    /// Whether the cleanup of a replaced delivery is sent once the new one is delivered (a
    /// changed device token cleans up the old one); else it is dropped then, as an Acrobits
    /// report replaces the one before it.
    public var cleansUpReplaced: Bool
    /// Whether nothing reads the delivery's request once it is delivered, until a new plan
    /// replaces it: the agent then lets the request go (without a report interval, and with
    /// state of its own), and keeps only what tells a change. Acrobits; not Journeys, whose
    /// webhook checks a call against the registration sent.
    public var deliveryUnreadOnceDelivered = false
    /// True when secrets are sent as `********` because the receiver is plain http and not
    /// loopback (SPEC §2): the agent warns about it at start.
    public var secretsWithheld = false

    public init(account: String, service: String, fingerprint: String, delivery: SubscriptionRequest?,
                waiting: String? = nil, cleanup: String?, cleansUpReplaced: Bool = false) {
        self.account = account
        self.service = service
        self.fingerprint = fingerprint
        self.delivery = delivery
        self.waiting = waiting
        self.cleanup = cleanup
        self.cleansUpReplaced = cleansUpReplaced
    }
}
