import Synchronization
import Logging
import PushBackend
import PushConfig
import PushListener
import PushScheduler
import PushState
import ServiceLifecycle
import PushSystem

/// What loading the configuration gave, for a reload.
public enum ConfigurationLoad: Sendable {
    /// A valid configuration: its subscriptions, what polls its services, and its agent settings.
    case loaded(plans: [SubscriptionPlan], pollers: [any ConfirmationPoller], settings: AgentSettings, warnings: [Diagnostic] = [])
    /// An invalid one, with a sentence that says why (the first error, where it is, and how many).
    case invalid(reason: String)
}

/// What the agent starts with.
public enum AgentStart: Sendable {
    /// A configuration (`run`, `run --once`): every planned subscription is delivered, and
    /// every stored one that left gets its cleanup.
    case configuration(plans: [SubscriptionPlan], records: [SubscriptionRecord], pollers: [any ConfirmationPoller])
    /// The removal of stored subscriptions (`remove`): each gets its cleanups, then is forgotten;
    /// nothing else is touched.
    case removal(records: [SubscriptionRecord])
}

/// The agent (`pushreporter run`, SPEC §5, §8, §9.0): delivers every subscription on start,
/// retries for as long as it runs, polls accepted ones, reloads on request, sends cleanups,
/// and keeps systemd told; or, with ``runOnce(deadline:output:stop:)``, one round that ends.
///
/// A small shell: its parts share one ``AgentCore`` (the book, the scheduler, the recorder,
/// one state behind one lock), and each long-running part is a `Service` of its own, which
/// ``services`` lists in the order a `ServiceGroup` must run them: ``LeaseKeeper``,
/// ``StatusReporter``, ``ConfirmationPolling``, ``ReloadService``, ``StartFeeder`` and
/// ``SenderService``. Call ``begin()`` first; list the ``StateRecorder`` before the services
/// so that the state is flushed after they stop, and call ``beginStopping()`` from whatever is
/// told of a graceful shutdown first (``ShutdownBackstop``), so that no new request starts from
/// that moment.
public final class Agent<C: Clock>: Sendable where C.Duration == Duration {
    /// A source of reload requests (SIGHUP, changed files): it yields a reason each time, and
    /// returns when its task is cancelled.
    public typealias ReloadSource = @Sendable (AsyncStream<String>.Continuation) async -> Void

    let core: AgentCore<C>
    private let load: @Sendable () -> ConfigurationLoad
    private let reloadSources: [ReloadSource]

    /// The state cannot be written at start: nothing is sent.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// - Parameters:
    ///   - start: what to start with (see ``AgentStart``).
    ///   - wallClock: Unix time in milliseconds, for the state and `Retry-After` dates.
    ///   - load: loads the configuration again, for a reload (it reads files: it is called off
    ///     Swift's pool).
    ///   - reloadSources: what asks for reloads.
    ///   - gracePeriod: how long requests in flight may finish once stopping begins, or once a
    ///     round is stopped (``runOnce(deadline:output:stop:)``).
    ///   - statusInterval: the least time between two `STATUS=` messages.
    ///   - startRunSize: how many of a large start's submissions go to the scheduler first; the
    ///     rest follow in runs (``StartFeeder``).
    ///   - feedWait: the longest the feeder waits for the scheduler to begin what it was given
    ///     before it hands over the next run anyway.
    public init(start: AgentStart, settings: AgentSettings, backends: Backends, transport: any HTTPTransport,
                recorder: StateRecorder<C>, shared: (any SharedStateStore)? = nil,
                notifier: any ServiceManagerNotifier = NoNotifier(), logger: Logger, clock: C,
                wallClock: @escaping @Sendable () -> Int64 = WallClock.epochMilliseconds,
                load: @escaping @Sendable () -> ConfigurationLoad = { .invalid(reason: "no reload") },
                reloadSources: [ReloadSource] = [],
                gracePeriod: Duration = .seconds(10), statusInterval: Duration = .seconds(1), startRunSize: Int = 1_000,
                feedWait: Duration = .seconds(1), releaseRequested: @escaping @Sendable () -> Bool = { false }) {
        core = AgentCore(start: start, settings: settings, backends: backends, transport: transport, recorder: recorder,
                         shared: shared, notifier: notifier, logger: logger, clock: clock, wallClock: wallClock,
                         gracePeriod: gracePeriod, statusInterval: statusInterval, startRunSize: startRunSize, feedWait: feedWait)
        core.releaseRequested = releaseRequested
        self.load = load
        self.reloadSources = reloadSources
    }

    /// Books the start and writes what it decided, before anything is sent; throws when the
    /// state cannot be written (the cleanups must be in the state before any delivery is sent).
    public func begin() async throws(Failure) {
        guard await core.begin().written else {
            throw Failure(description: "the state cannot be written, so nothing is sent; see the error above")
        }
    }

    /// The agent's long-running parts, in the order a `ServiceGroup` runs them (it stops them
    /// in reverse: the sender first, the leases last).
    public var services: [ServiceGroupConfiguration.ServiceConfiguration] {
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        // Stopped after the sender, so that what is in flight finishes under a live lease.
        if core.shared != nil { services.append(.init(service: LeaseKeeper(core: core))) }
        services.append(.init(service: StatusReporter(core: core)))
        services.append(.init(service: ConfirmationPolling(core: core)))
        services.append(.init(service: ReloadService(core: core, load: load, sources: reloadSources)))
        services.append(.init(service: StartFeeder(core: core)))
        services.append(.init(service: SenderService(core: core)))
        return services
    }

    /// Stopping (SIGTERM): `STOPPING=1`, and no new request starts from now on; those in flight
    /// have the grace period from now.
    public func beginStopping() {
        core.beginStopping()
    }

    /// One round (`run --once`, `remove`): sends every due delivery and cleanup, retries until
    /// each is settled or `deadline` passes, asks once more about accepted subscriptions if time
    /// allows, then writes the state. `output` draws a progress line on a terminal.
    ///
    /// `stop` (SIGTERM or SIGINT) ends the round early, as SPEC §8 stops the agent: no new
    /// request starts from the moment it is requested, those in flight (a confirmation query
    /// too) get the grace period to finish, and the state is written. Cancelling the task ends
    /// it at once, with the state written too.
    public func runOnce(deadline: Duration, output: LogOutput? = nil, stop: RoundStop? = nil) async -> OnceOutcome {
        await RunOnce(core: core).run(deadline: deadline, output: output, stop: stop)
    }
}
