import PushSystem
import Logging
import PushBackend
import PushConfig
import PushState
import PushTransport
#if canImport(Glibc)
import Glibc
#endif
import ServiceLifecycle
import UnixSignals

/// The agent, assembled in one place for `run`, `run --once` and `remove` (SPEC §5–§9): the
/// state (directory, installation id, store), the backends, the transport, the state recorder,
/// the watchdog and the agent, in that order. The commands parse arguments and print; this
/// does the rest, with the same rules for all three.
public struct AgentRuntime: Sendable {
    /// Why the agent cannot start: sentences for the log.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public let settings: AgentSettings
    /// The state directory; nil when the state is a shared database.
    public let directory: StateDirectory?
    /// Where the state is, for messages: the directory, or the database URI without a password.
    public let location: String
    public let store: any StateStore
    /// The shared database when several agents share the state (SPEC §11); nil otherwise.
    public let shared: (any SharedStateStore)?
    /// `%installid%`, generated once and kept with the state.
    public let installID: String
    public let backends: Backends
    public let logger: Logger

    /// Opens the state at `state`: a `postgres://` URI of a database several agents share
    /// (SPEC §11; its schema created or migrated, its installation id shared), or a state
    /// directory, created when missing: 0700, taken for this process alone (`state.lock`: a
    /// second writer fails, naming the first), with its installation id and its database
    /// (migrated from an earlier layout).
    /// `lockAdvice`: what the error says to do when another process holds the state directory
    /// (nil: as for a second agent).
    public init(settings: AgentSettings, state: String, backends: Backends, logger: Logger,
                lockAdvice: String? = nil) throws(Failure) {
        self.settings = settings
        self.backends = backends
        self.logger = logger
        if Self.isDatabase(state) {
            do {
                let database = try PostgresStateStore(uri: state, password: settings.statePassword, agent: Self.agentName)
                installID = try database.installID()
                store = database
                shared = database
                location = database.location
            } catch {
                throw Failure(description: error.description)
            }
            // A tracking spool's memory is the machine's own.
            directory = settings.trackingSpool == nil ? nil : try? StateDirectory(path: settings.resolvedStateDirectory(environment: [:]))
            return
        }
        shared = nil
        location = state
        let directory: StateDirectory
        do {
            directory = try StateDirectory(path: state)
            if let lockAdvice { try directory.lockForThisProcess(advice: lockAdvice) } else { try directory.lockForThisProcess() }
            installID = try directory.installID()
        } catch {
            throw Failure(description: error.description)
        }
        self.directory = directory
        do {
            store = try SQLiteStateStore(directory: directory)
        } catch {
            throw Failure(description: error.description)
        }
    }

    /// `the state directory /var/lib/pushreporter`, or `the state database postgres://…`.
    public var describedLocation: String {
        (shared == nil ? "the state directory " : "the state database ") + location
    }

    /// Whether `state` names a database (`postgres://…`) rather than a directory.
    public static func isDatabase(_ state: String) -> Bool {
        state.hasPrefix("postgres://") || state.hasPrefix("postgresql://")
    }

    /// This agent's name among several: `host:pid` (SPEC §11).
    public static let agentName: String = {
        var buffer = [UInt8](repeating: 0, count: 256)
        let named = buffer.withUnsafeMutableBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { gethostname($0.baseAddress!, $0.count) } == 0
        }
        let host = named ? String(decoding: buffer.prefix { $0 != 0 }, as: UTF8.self) : "localhost"
        return "\(host):\(getpid())"
    }()

    /// What backends render a loaded configuration with, with this installation's id.
    public func context(_ loaded: LoadResult, hostname: String) -> BackendContext {
        BackendContext(configuration: loaded.configuration, sources: loaded.sources, installID: installID, hostname: hostname)
    }

    /// The subscriptions and pollers of a loaded configuration, rendered as sent, letting each
    /// account go once it is planned (``Backends/plans(lettingGoOf:noting:diagnostics:)``;
    /// `context` is left without accounts unless FCM's device groups keep them). The problems of
    /// rendering go to `diagnostics`.
    public func plan(lettingGoOf context: inout BackendContext, noting note: @Sendable (Account) -> Bool,
                     diagnostics: inout DiagnosticList) -> (plans: [SubscriptionPlan], pollers: [any ConfirmationPoller], noted: [String]) {
        let pollers = backends.pollers(context)
        let planned = backends.plans(lettingGoOf: &context, noting: note, diagnostics: &diagnostics)
        return (planned.plans, pollers, planned.noted)
    }

    /// Every stored subscription.
    public func records() throws(Failure) -> [SubscriptionRecord] {
        do {
            return try store.records()
        } catch {
            throw Failure(description: error.description)
        }
    }

    func makeTransport() throws(Failure) -> CurlTransport {
        do {
            return try CurlTransport(settings: TransportSettings(caFile: settings.tlsCAFile))
        } catch {
            throw Failure(description: String(describing: error))
        }
    }

    /// With shared state, before `remove` sends anything: joins the agents (without starting a
    /// group) and takes `keys` for this process; throws, naming the agent, when a live agent
    /// holds one (it runs with the account: the removal is its business once it reloads).
    public func takeForRemoval(_ keys: [SubscriptionKey]) throws(Failure) {
        guard let shared else { return }
        let refused: [SubscriptionKey: String]
        do {
            _ = try shared.join(leaseTimeout: settings.leaseTimeout, startsGroups: false)
            refused = try shared.take(keys)
        } catch {
            throw Failure(description: error.description)
        }
        guard let key = refused.keys.sorted().first else { return }
        try? shared.release(nil)
        throw Failure(description: "\(key.account.displayEscaped) (\(key.service.displayEscaped)) is held by the agent "
                      + "\(refused[key]!.displayEscaped), which runs with it: delete it from the configuration and reload the agents, "
                      + "which then send its removal")
    }

    /// One round (`run --once`, `remove`): see ``Agent/runOnce(deadline:output:stop:)``.
    public func runOnce(_ start: consuming AgentStart, deadline: Duration, output: LogOutput? = nil,
                        stop: RoundStop? = nil) async throws(Failure) -> OnceOutcome {
        let transport = try makeTransport()
        defer { transport.shutdown() }
        let clock = ContinuousClock()
        let recorder = StateRecorder(store: store, logger: logger, clock: clock)
        let agent = Agent(start: consume start, settings: settings, backends: backends, transport: transport, recorder: recorder,
                          shared: shared, logger: logger, clock: clock, gracePeriod: gracePeriod)
        let outcome = await agent.runOnce(deadline: deadline, output: output, stop: stop)
        store.compactOnClose()
        return outcome
    }

    /// How long the requests in flight may finish once the agent or a round stops: the
    /// request timeout, at most 10 seconds.
    public var gracePeriod: Duration { min(settings.timeout, .seconds(10)) }
}
