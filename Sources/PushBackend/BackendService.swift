import Logging
import PushConfig
import ServiceLifecycle

/// A long-running service of a backend's own, that the agent runs beside its own (SPEC §9.4's
/// tracking spool): in its service group, told to stop like the others, and told first, with
/// ``beginStopping()``, when no new work may start any more.
public protocol BackendService: Service {
    /// Stopping begins (SIGTERM): nothing new starts from now on, and what is in flight has the
    /// grace period from now.
    func beginStopping()
}

/// What the agent gives a backend's services (``Backend/services(_:)``).
public struct BackendServiceContext: Sendable {
    /// The agent's settings as it started.
    public var settings: AgentSettings
    public var transport: any HTTPTransport
    public var logger: Logger
    /// How long what is in flight may finish once stopping begins.
    public var gracePeriod: Duration
    /// The state directory of this machine (with shared state, the one `agent.stateDirectory`
    /// names), nil when there is none.
    public var stateDirectory: String?
    /// Opens the record of what was sent once, kept in ``stateDirectory`` (the state database's
    /// `tracked_actions`).
    public var sentOnceLedger: @Sendable () throws(BackendServiceFailure) -> any SentOnceLedger

    public init(settings: AgentSettings, transport: any HTTPTransport, logger: Logger, gracePeriod: Duration,
                stateDirectory: String?, sentOnceLedger: @escaping @Sendable () throws(BackendServiceFailure) -> any SentOnceLedger) {
        self.settings = settings
        self.transport = transport
        self.logger = logger
        self.gracePeriod = gracePeriod
        self.stateDirectory = stateDirectory
        self.sentOnceLedger = sentOnceLedger
    }
}

/// Why a backend's service cannot start, as a sentence.
public struct BackendServiceFailure: Error, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// What a backend sends once and remembers (Adobe's tracking actions, SPEC §9.4): kept in the
/// state database, so that after a crash only what was not acknowledged is sent again.
public protocol SentOnceLedger: Sendable {
    /// Where it is, for messages (the state database's path).
    var location: String { get }
    /// Whether `key` was sent and acknowledged before.
    func wasSent(_ key: String) throws -> Bool
    /// Remembers, durably before it returns, that `entry` was sent and acknowledged.
    func recordSent(_ entry: SentOnceEntry) throws
}

/// One thing sent once, as ``SentOnceLedger`` keeps it.
public struct SentOnceEntry: Sendable, Equatable {
    /// What tells it from every other (a payload's ids and its action).
    public var key: String
    public var service: String
    /// The message it is about, and the delivery of that message.
    public var messageId: String
    public var deliveryId: String
    /// What was done (a tracking action).
    public var action: String
    /// When, in Unix milliseconds.
    public var sentAt: Int64

    public init(key: String, service: String, messageId: String, deliveryId: String, action: String, sentAt: Int64) {
        self.key = key
        self.service = service
        self.messageId = messageId
        self.deliveryId = deliveryId
        self.action = action
        self.sentAt = sentAt
    }
}
