import Prometheus
import PushConfig
import PushState
import PushSystem
import Synchronization

/// The agent's metrics for `/metrics` (SPEC §9.5), in a registry of its own: counters and a
/// histogram that the sending path adds to as it goes, and gauges set from the agent's counts
/// when a scrape asks. Its text is the same size whatever the number of accounts: a few series
/// per service and state, none per account.
///
/// Each agent has its own registry rather than swift-metrics' process-wide `MetricsSystem`: that
/// can be bootstrapped once per process, and tests run many agents in one.
final class AgentMetrics: Sendable {
    /// How an attempt that reached its receiver ended, for `pushreporter_attempts_total`.
    enum AttemptOutcome: String, CaseIterable {
        /// Delivered, or accepted to be confirmed later.
        case delivered
        /// A failure the agent tries again.
        case retry
        /// Refused for good: rejected values, refused credentials, a cleanup given up.
        case rejected
    }

    /// What the gauges are set from at a scrape: taken from the agent under its lock, small.
    struct Reading {
        /// Subscriptions by service and state (the services configured now).
        var subscriptions: [String: [SubscriptionState: Int]]
        /// Whether the state store took the last write (and, with PostgreSQL, answers).
        var stateUp: Bool
        /// With shared state: the subscriptions whose leases this agent holds; nil without.
        var leasesHeld: Int?
        /// With shared state: the removals the guard holds for the group (nobody holds their
        /// leases, so they are in no agent's `subscriptions`); nil without.
        var groupRemovalsHeld: Int? = nil
        /// Removals the removal guard holds (SPEC §14).
        var removalsHeld: Int {
            groupRemovalsHeld ?? subscriptions.values.reduce(0) { $0 + ($1[.held] ?? 0) }
        }
    }

    private let registry = PrometheusCollectorRegistry()
    /// The services whose gauges the last scrape set: one that is gone since is unregistered.
    private let servicesShown = Mutex<Set<String>>([])
    /// Each service's counters and histogram, made once: the registry checks names and labels
    /// and looks them up under its lock on every `make…`, which the sending path need not.
    private let perService = Mutex<[String: ServiceSeries]>([:])

    private struct ServiceSeries: Sendable {
        let attempts: [AttemptOutcome: Counter]
        let duration: DurationHistogram
    }

    private static var attempts: MetricNameDescriptor { MetricNameDescriptor(
        namespace: "pushreporter", metricName: "attempts", unitName: "total",
        helpText: "Requests sent, by service and by how they ended (delivered, retry, rejected).") }
    private static var requestDuration: MetricNameDescriptor { MetricNameDescriptor(
        namespace: "pushreporter", metricName: "request_duration", unitName: "seconds",
        helpText: "How long the receivers took to answer, by service (requests that got no answer included).") }
    private static var subscriptions: MetricNameDescriptor { MetricNameDescriptor(
        namespace: "pushreporter", metricName: "subscriptions", unitName: "",
        helpText: "Subscriptions by service and by where their delivery stands.") }
    private static var reloadSuccessful: MetricNameDescriptor { MetricNameDescriptor(
        namespace: "pushreporter", subsystem: "config", metricName: "last_reload_successful", unitName: "",
        helpText: "Whether the last reload of the configuration succeeded (1) or kept the previous one (0).") }
    private static var reloadSuccessTime: MetricNameDescriptor { MetricNameDescriptor(
        namespace: "pushreporter", subsystem: "config", metricName: "last_reload_success_timestamp", unitName: "seconds",
        helpText: "When the configuration was last loaded successfully, at start or by a reload.") }
    private static var stateUp: MetricNameDescriptor { MetricNameDescriptor(
        namespace: "pushreporter", subsystem: "state", metricName: "up", unitName: "",
        helpText: "Whether the state store answers (1) or its last write failed (0).") }
    private static var removalsHeld: MetricNameDescriptor { MetricNameDescriptor(
        namespace: "pushreporter", metricName: "removals_held", unitName: "",
        helpText: "Removals agent.removalGuard holds: sent once released (pushreporter remove --held), dropped when their accounts come back.") }
    private static var leasesHeld: MetricNameDescriptor { MetricNameDescriptor(
        namespace: "pushreporter", metricName: "leases_held", unitName: "",
        helpText: "Subscriptions whose leases this agent holds (state shared in PostgreSQL).") }

    /// Buckets from 5 ms to a minute: receivers answer in tens of milliseconds, and a timeout
    /// is 30 s by default.
    private static let buckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .milliseconds(2_500), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]

    /// - Parameter loadedAt: Unix time (seconds) of the configuration the agent started with.
    init(loadedAt: Double) {
        registry.makeGauge(descriptor: MetricNameDescriptor(
            namespace: "pushreporter", metricName: "build_info", unitName: "",
            helpText: "pushreporter's version, as a label; always 1."), labels: [("version", PushReporterVersion.current)]).set(Int64(1))
        if let start = ProcessStart.unixSeconds {
            registry.makeGauge(descriptor: MetricNameDescriptor(
                metricName: "process_start_time", unitName: "seconds",
                helpText: "When the process started, in seconds since the Unix epoch.")).set(start)
        }
        reloaded(successfully: true, at: loadedAt)
    }

    /// An attempt of `service` that reached its receiver ended so.
    func attempted(_ service: String, _ outcome: AttemptOutcome, count: Int = 1) {
        guard count > 0 else { return }
        series(of: service).attempts[outcome]?.increment(by: Int64(count))
    }

    /// A request of `service` took `duration`, from its start to its answer (or to the error).
    func requestTook(_ duration: Duration, service: String) {
        series(of: service).duration.record(duration)
    }

    private func series(of service: String) -> ServiceSeries {
        perService.withLock { known in
            if let series = known[service] { return series }
            let attempts = Dictionary(uniqueKeysWithValues: AttemptOutcome.allCases.map { outcome in
                (outcome, registry.makeCounter(descriptor: Self.attempts, labels: [("service", service), ("outcome", outcome.rawValue)]))
            })
            let series = ServiceSeries(attempts: attempts, duration: registry.makeDurationHistogram(
                descriptor: Self.requestDuration, labels: [("service", service)], buckets: Self.buckets))
            known[service] = series
            return series
        }
    }

    /// A reload (or the start) loaded its configuration, or kept the previous one; `at` in Unix seconds.
    func reloaded(successfully: Bool, at seconds: Double) {
        registry.makeGauge(descriptor: Self.reloadSuccessful).set(Int64(successfully ? 1 : 0))
        if successfully { registry.makeGauge(descriptor: Self.reloadSuccessTime).set(seconds) }
    }

    /// The metrics' text, the gauges set from `reading` first.
    func text(_ reading: Reading) -> [UInt8] {
        servicesShown.withLock { shown in
            for service in reading.subscriptions.keys {
                let counts = reading.subscriptions[service] ?? [:]
                for state in SubscriptionState.allCases {
                    subscriptionGauge(service, state).set(Int64(counts[state] ?? 0))
                }
            }
            for gone in shown.subtracting(reading.subscriptions.keys) {
                for state in SubscriptionState.allCases { registry.unregisterGauge(subscriptionGauge(gone, state)) }
            }
            shown = Set(reading.subscriptions.keys)
        }
        registry.makeGauge(descriptor: Self.stateUp).set(Int64(reading.stateUp ? 1 : 0))
        if let held = reading.leasesHeld { registry.makeGauge(descriptor: Self.leasesHeld).set(Int64(held)) }
        registry.makeGauge(descriptor: Self.removalsHeld).set(Int64(reading.removalsHeld))
        return registry.emitToBuffer()
    }

    private func subscriptionGauge(_ service: String, _ state: SubscriptionState) -> Gauge {
        registry.makeGauge(descriptor: Self.subscriptions, labels: [("service", service), ("state", state.rawValue)])
    }
}
