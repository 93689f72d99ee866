import PushTransport
import PushConfig

/// One kind of receiver (SPEC §9.0): the Acrobits web services, Customer Insights – Journeys, ….
///
/// A backend owns everything vendor-specific: it reads and checks the settings of its
/// `services:` entries and the per-account values (with `file:line:column` diagnostics), renders
/// each subscription's delivery and cleanup, sends them (alone or in batches) and judges the
/// answers, and reads back the cleanups it kept in state. The agent knows subscriptions only
/// through it; a backend never imports another.
public protocol Backend: Sendable {
    /// The `type:` its `services:` entries name (`acrobits`, `customer-insights-journeys`).
    var type: String { get }

    /// Checks the configuration's services of this type and every subscription of them, as
    /// `validate` does: every problem rendering would find, each once. `passedEarly` (indexed
    /// like the accounts) marks accounts checked while they loaded and found without a problem.
    func check(_ context: BackendContext, skipping passedEarly: [Bool]?, diagnostics: inout DiagnosticList)

    /// Something that renders this backend's subscriptions one account at a time (`run`,
    /// `preview`, `remove`); problems of the services' settings go to `diagnostics`.
    func planner(_ context: BackendContext, diagnostics: inout DiagnosticList) -> any SubscriptionPlanner

    /// Whether accounts have subscriptions of this backend without a `services:` entry of its
    /// type (the Acrobits web services of the account itself); else, with no such entry, it
    /// plans nothing and is not asked to.
    var plansWithoutServices: Bool { get }

    /// Whether its planner reads every account of the context when it is made (FCM's device
    /// groups span accounts): planning then keeps the accounts until it is done, instead of
    /// letting each go once it is planned.
    var plannerReadsEveryAccount: Bool { get }

    /// Sends `requests` (one, or a batch of one `Batching`, all of this backend) and says
    /// what became of each, in order.
    func send(_ requests: [SubscriptionRequest], transport: any HTTPTransport, defaultTimeout: Duration) async -> [Outcome]

    /// The cleanup `stored` in state (as a plan's ``SubscriptionPlan/cleanup`` wrote it), ready to
    /// send; nil when it is not one of this backend's, or cannot be read.
    func cleanupRequest(account: String, service: String, stored: String) -> SubscriptionRequest?

    /// The named parts of `delivery`, one of this backend's requests, for `plan` to name what
    /// changed (``DeliveredParts``); nil (the default) when it cannot name them.
    func deliveredParts(of delivery: SubscriptionRequest) -> DeliveredParts?

    /// How its requests go when each is one HTTP request judged by its answer alone (an
    /// Acrobits report): the agent then hands many to the transport at once and takes their
    /// answers in batches, without a task each. Nil (the default): ``send(_:transport:defaultTimeout:)``.
    var directSending: (any DirectSending)? { get }

    /// What asks the receiver about accepted subscriptions, one per configured service that
    /// confirms later; none for a backend whose answers are final.
    func pollers(_ context: BackendContext) -> [any ConfirmationPoller]

    /// What the state kept for subscriptions (``Outcome/deliveredKeeping(_:)``), of every backend,
    /// given once when the agent starts and before anything is sent: a backend that remembers
    /// across subscriptions (FCM's group keys) takes back what is its own.
    func restore(_ kept: [KeptData])

    /// A table `status` shows after its own, from what the state keeps for the delivered
    /// subscriptions (of every backend; each takes what is its own); nil for none.
    func statusTable(_ kept: [KeptData]) -> StatusTable?

    /// The account keys this backend acts on, beyond the device values (SPEC §2): a key that is
    /// a near miss of one is a typo (`pushTokenReporterURL`).
    var accountKeys: [String] { get }

    /// Told of each configuration loaded for the agent, at start and on every reload, before it
    /// is planned: what a backend's services read from it (Adobe's ECIDs) is taken here.
    func configure(_ context: BackendContext)

    /// The long-running services of its own the agent runs (none for most): the tracking spool.
    func services(_ context: BackendServiceContext) throws(BackendServiceFailure) -> [any BackendService]

    /// Whether ``services(_:)`` gives any with these settings: the agent has work then even when
    /// no subscription is planned.
    func hasServices(_ settings: AgentSettings) -> Bool

    /// What checks each account as it loads, for `validate` (``ConfigurationLoader/earlyChecker``):
    /// an account it passes has no problem for this backend; nil when it has no such check.
    func earlyChecker(hostname: String) -> (@Sendable (Configuration) -> any EarlyAccountChecker)?

    /// What it sends, when not subscriptions on start (Adobe's tracking of received payloads): a
    /// clause the agent adds when nothing is reported on start.
    var sendsInstead: String? { get }

    /// What its `services:` entries may hold, for `pushreporter schema`; nil for a backend
    /// that has no `type:` of its own.
    var settingsSchema: SettingsSchema? { get }
}

extension Backend {
    public func pollers(_ context: BackendContext) -> [any ConfirmationPoller] { [] }
    public func restore(_ kept: [KeptData]) {}
    public func statusTable(_ kept: [KeptData]) -> StatusTable? { nil }
    public var plansWithoutServices: Bool { false }
    public var plannerReadsEveryAccount: Bool { false }
    public var accountKeys: [String] { [] }
    public func configure(_ context: BackendContext) {}
    public func services(_ context: BackendServiceContext) throws(BackendServiceFailure) -> [any BackendService] { [] }
    public func hasServices(_ settings: AgentSettings) -> Bool { false }
    public func earlyChecker(hostname: String) -> (@Sendable (Configuration) -> any EarlyAccountChecker)? { nil }
    public var sendsInstead: String? { nil }
    public var settingsSchema: SettingsSchema? { nil }
    public func deliveredParts(of delivery: SubscriptionRequest) -> DeliveredParts? { nil }
    public var directSending: (any DirectSending)? { nil }
}

/// What the state keeps of one subscription for its backend: ``Outcome/deliveredKeeping(_:)``'s text.
public struct KeptData: Sendable, Equatable {
    public var account: String
    public var service: String
    public var data: String

    public init(account: String, service: String, data: String) {
        self.account = account
        self.service = service
        self.data = data
    }
}

/// A table of a backend's own for `status` (text format): a title line, then aligned columns.
public struct StatusTable: Sendable, Equatable {
    public var title: String
    public var header: [String]
    /// Cells as shown; `status` escapes control characters in them.
    public var rows: [[String]]

    public init(title: String, header: [String], rows: [[String]]) {
        self.title = title
        self.header = header
        self.rows = rows
    }
}

/// Renders a backend's subscriptions for one account at a time, compiling each template once.
public protocol SubscriptionPlanner {
    /// The subscriptions of `account` this backend delivers (none for a disabled account),
    /// rendered as sent. A subscription whose requests cannot be rendered adds diagnostics and
    /// is left out.
    mutating func plans(for account: Account, diagnostics: inout DiagnosticList) -> [SubscriptionPlan]

    /// The requests `preview` shows for `account`: each delivery, then its cleanup.
    mutating func preview(_ account: Account, display: SecretDisplay, diagnostics: inout DiagnosticList) -> [RenderedRequest]

    /// This planner as one that copies of can plan runs of accounts on other threads at once;
    /// nil (the default) when an account's plans depend on the accounts planned before it.
    var forRuns: (any SubscriptionPlanner & Sendable)? { get }
}

extension SubscriptionPlanner {
    public var forRuns: (any SubscriptionPlanner & Sendable)? { nil }
}

/// Asks a receiver what became of accepted subscriptions (SPEC §9.2's status endpoint).
public protocol ConfirmationPoller: Sendable {
    /// The service it asks about.
    var service: String { get }
    /// How often accepted subscriptions are asked about.
    var interval: Duration { get }
    /// How long after acceptance a subscription still unconfirmed is given up as *unconfirmed*.
    var timeout: Duration { get }

    /// Asks about the accepted subscriptions whose backend data (``Outcome/accepted(_:)``) is
    /// `pending`, and answers one outcome per item in order: nil while one is still pending (or
    /// the receiver could not be asked this time).
    func poll(_ pending: [String], transport: any HTTPTransport, defaultTimeout: Duration) async -> [Outcome?]
}

/// What backends render with: the loaded configuration and what fills its built-in variables.
public struct BackendContext: Sendable {
    public var configuration: Configuration
    public var sources: [String: SourceText]
    /// `%installid%`; nil shows `<installid>`.
    public var installID: String?
    public var hostname: String

    public init(configuration: Configuration, sources: [String: SourceText], installID: String?, hostname: String) {
        self.configuration = configuration
        self.sources = sources
        self.installID = installID
        self.hostname = hostname
    }

    /// The services of `type`, by name.
    public func services(ofType type: String) -> [ServiceDefinition] {
        configuration.services.values.filter { $0.type == type }.sorted { $0.name < $1.name }
    }

    /// The settings of the services of `type` that `read` can use, by name; `read` reports the
    /// problems of each (at their file, line and column) and gives nil for one it cannot use.
    public func settings<Settings>(ofType type: String, diagnostics: inout DiagnosticList,
                                   _ read: (ServiceDefinition, inout DiagnosticList) -> Settings?) -> [String: Settings] {
        var found: [String: Settings] = [:]
        for definition in services(ofType: type) {
            if let settings = read(definition, &diagnostics) { found[definition.name] = settings }
        }
        return found
    }
}

/// A backend whose receiver calls the agent back (SPEC §9.5): `POST /{webhookPath}/{service}/{account}`
/// on the agent's endpoint settles an accepted subscription at once.
public protocol WebhookReceiver: Sendable {
    /// The first path segment of its calls (`journeys`).
    var webhookPath: String { get }

    /// Reads a call about the subscription whose current delivery is `delivery`: the outcome it
    /// settles (nil while the receiver says it is still pending), or why the call is refused.
    func webhook(body: [UInt8], delivery: SubscriptionRequest) -> WebhookAnswer
}

/// What a webhook call comes to.
public enum WebhookAnswer: Sendable, Equatable {
    /// A genuine call: the outcome it settles, or nil when it settles nothing yet.
    case settled(Outcome?)
    /// Not a genuine call (401: its signature does not match) or not a call at all (400), with why.
    case refused(status: Int, reason: String)
}

/// A backend whose every request is one HTTP request, sent alone and judged by its answer alone
/// (``Backend/directSending``).
public protocol DirectSending: Sendable {
    /// The HTTP request `request` (one of this backend's) is, with `defaultTimeout` unless it has
    /// its own; nil when it is not one of this backend's.
    func transportRequest(_ request: SubscriptionRequest, defaultTimeout: Duration) -> TransportRequest?
    /// What the answer to `sent` (or the error that stopped it) means for its subscription.
    func outcome(of result: Result<TransportResponse, TransportError>, for sent: TransportRequest) -> Outcome
}
