import Logging
import PushBackend
import PushConfig
import PushState
import PushTransport
import ServiceLifecycle
import UnixSignals

/// The long-running agent with everything that runs beside it (the state recorder, the
/// watchdog, the endpoint, the backends' own services and the shutdown backstop), as one
/// group of services ready to run. `run` builds it with SIGTERM and SIGINT as what stops it; the
/// in-process harness of the tests builds it without signals and stops it with ``stop()``.
public struct AssembledAgent: Sendable {
    public let agent: Agent<ContinuousClock>
    private let group: ServiceGroup
    private let recorder: StateRecorder<ContinuousClock>
    private let ownTransport: CurlTransport?

    init(agent: Agent<ContinuousClock>, group: ServiceGroup, recorder: StateRecorder<ContinuousClock>,
         ownTransport: CurlTransport?) {
        self.agent = agent
        self.group = group
        self.recorder = recorder
        self.ownTransport = ownTransport
    }

    /// Runs until stopped (a signal of the group's, or ``stop()``); throws when it stopped on
    /// an error (logged). The transport it made itself is shut down when it returns.
    public func run() async throws(AgentRuntime.Failure) {
        defer { ownTransport?.shutdown() }
        do {
            try await group.run()
            // Stopped: the last writes are done (the recorder stops last).
            recorder.compactStoreOnClose()
        } catch {
            recorder.flush()
            throw AgentRuntime.Failure(description: "the agent stopped: \(String(describing: error))")
        }
    }

    /// Stops it as SIGTERM does: no new request starts, those in flight get the grace period,
    /// the state is written.
    public func stop() async {
        await group.triggerGracefulShutdown()
    }
}

extension AgentRuntime {
    /// The long-running agent, as a group of services that stops on SIGTERM or SIGINT; returns
    /// once it has stopped, throwing when it stopped on an error (logged).
    ///
    /// - Parameters:
    ///   - environment: the process environment: `NOTIFY_SOCKET` and `WATCHDOG_USEC` are read from it.
    ///   - load: loads the configuration again, for a reload.
    ///   - reloadSources: what asks for reloads (SIGHUP, changed files).
    public func runService(_ start: consuming AgentStart, environment: [String: String],
                           load: @escaping @Sendable () -> ConfigurationLoad,
                           reloadSources: [Agent<ContinuousClock>.ReloadSource]) async throws(Failure) {
        try await assemble(consume start, environment: environment, load: load, reloadSources: reloadSources).run()
    }

    /// The long-running agent and what runs beside it, its start booked and written (so that it
    /// throws when the state cannot be written), not yet running.
    ///
    /// - Parameters:
    ///   - environment: the process environment: `NOTIFY_SOCKET` and `WATCHDOG_USEC` are read from it.
    ///   - transport: what sends; nil for libcurl, made here and shut down once it has run.
    ///   - load: loads the configuration again, for a reload.
    ///   - reloadSources: what asks for reloads (SIGHUP, changed files).
    ///   - stopSignals: the signals that stop it.
    ///   - whenStuck: what ends it when it has not stopped within the backstop's limit
    ///     (``ShutdownBackstop``): the process exits, unless a test says otherwise.
    public func assemble(_ start: consuming AgentStart, environment: [String: String], transport: (any HTTPTransport)? = nil,
                         load: @escaping @Sendable () -> ConfigurationLoad,
                         reloadSources: [Agent<ContinuousClock>.ReloadSource],
                         stopSignals: [UnixSignal] = [.sigterm, .sigint],
                         whenStuck: @escaping @Sendable () -> Void = ShutdownBackstop.exitProcess) async throws(Failure) -> AssembledAgent {
        let ownTransport = transport == nil ? try makeTransport() : nil
        let transport = transport ?? ownTransport!
        let notifier = SystemdNotifier(environment: environment)
        let recorder = StateRecorder(store: store, logger: logger, clock: ContinuousClock())
        let agent = Agent(start: consume start, settings: settings, backends: backends, transport: transport,
                          recorder: recorder, shared: shared, notifier: notifier, logger: logger, clock: ContinuousClock(),
                          load: load, reloadSources: reloadSources, gracePeriod: gracePeriod,
                          // `remove --held` while the agent runs: its reload sends them.
                          releaseRequested: { [directory] in directory?.takeReleaseRequest() ?? false })
        do {
            try await agent.begin()
        } catch {
            ownTransport?.shutdown()
            throw Failure(description: error.description)
        }
        // The recorder first: a group stops its services in reverse order, so the last flush
        // comes after the agent's last change; the watchdog next, so that it pings to the end.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: recorder)]
        if let interval = SystemdNotifier.watchdogInterval(environment: environment) {
            services.append(.init(service: Watchdog(notifier: notifier, interval: interval, clock: ContinuousClock())))
        }
        services += agent.services
        if let address = settings.listen {
            // Ending early (it could not listen) must not stop the agent.
            services.append(.init(service: AgentEndpoint(address: address, agent: agent, logger: logger),
                                  successTerminationBehavior: .ignore))
        }
        // The backends' own services (the tracking spool), stopped before the agent's.
        let backendServices: [any BackendService]
        do throws(Failure) {
            backendServices = try self.backendServices(transport: transport)
        } catch {
            ownTransport?.shutdown()
            throw error
        }
        for service in backendServices { services.append(.init(service: service)) }
        // Very last: told first of a graceful shutdown. No new request starts from then, in the
        // agent or the spool, and the process ends within its limit whatever the others do.
        services.append(.init(service: ShutdownBackstop(limit: gracePeriod + .seconds(10), logger: logger, whenStopping: {
            agent.beginStopping()
            for service in backendServices { service.beginStopping() }
        }, exit: whenStuck), successTerminationBehavior: .ignore))
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .warning)
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: stopSignals, logger: quiet))
        return AssembledAgent(agent: agent, group: group, recorder: recorder, ownTransport: ownTransport)
    }

    /// The services the backends run beside the agent, given what they share of it.
    private func backendServices(transport: any HTTPTransport) throws(Failure) -> [any BackendService] {
        do throws(BackendServiceFailure) {
            let directory = self.directory
            return try backends.services(BackendServiceContext(
                settings: settings, transport: transport, logger: logger, gracePeriod: gracePeriod, stateDirectory: directory?.path,
                sentOnceLedger: { () throws(BackendServiceFailure) -> any SentOnceLedger in
                    guard let directory else { throw BackendServiceFailure("there is no state directory of this machine") }
                    do throws(StateError) {
                        return try SQLiteTrackedActions(directory: directory)
                    } catch {
                        throw BackendServiceFailure(error.description)
                    }
                }))
        } catch {
            throw Failure(description: error.description)
        }
    }
}
