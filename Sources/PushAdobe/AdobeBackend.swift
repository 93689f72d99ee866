import ArgumentParser
import PushBackend
import PushCommandKit
import PushConfig
import PushTemplates
import PushSystem

/// Adobe Campaign Standard push tracking (SPEC §9.4, seeds 001 and 003): an `adobe-campaign`
/// service names the tracking server, and each account that names it gives its Experience
/// Cloud id (`ecid`). Nothing is registered per account: the service has no subscriptions, so
/// the agent sends nothing for it on start. What it sends are the tracking actions of received
/// push payloads, given to `pushreporter track` or dropped in the agent's tracking spool
/// (``TrackingRun``, ``TrackingSpool``). `validate` checks its settings and every account's
/// `ecid`; `preview` shows the shape of each account's tracking request.
///
/// Guide: docs/adobe.md. The parts: `AdobeSettings`, `AdobePlanner`, `AdobeSender`, and its own
/// service (``TrackingSpool``) and commands (`track`, `payload`).
public struct AdobeBackend: Backend, CommandContributor {
    public static let type = "adobe-campaign"
    public var type: String { Self.type }

    public var settingsSchema: SettingsSchema? {
        SettingsSchema(doc: "Adobe Campaign Standard push tracking (docs/adobe.md).",
                       keys: AdobeSettings.keys, required: ["trackingServer"], described: [
            .init("trackingServer", .url, "The Campaign instance's tracking server, https://…"),
            .init("timeout", .duration, "How long a tracking request may take (default 5s)."),
        ])
    }
    /// What the tracking spool resolves payloads with: the configuration loaded last
    /// (``configure(_:)``), at start and on every reload.
    public let targets = TrackingTargets.Current()

    public init() {}

    /// `pushreporter track` and `pushreporter payload`.
    public var commands: [any ParsableCommand.Type] { [TrackCommand.self, PayloadCommand.self] }

    public var sendsInstead: String? {
        "an adobe-campaign service sends the tracking of received push payloads, with pushreporter track or agent.trackingSpool, not devices"
    }

    public func configure(_ context: BackendContext) {
        targets.replace(with: Self.trackingTargets(context))
    }

    public func hasServices(_ settings: AgentSettings) -> Bool {
        settings.trackingSpool != nil
    }

    /// The tracking spool, with `agent.trackingSpool`: payload files dropped there are tracked.
    public func services(_ context: BackendServiceContext) throws(BackendServiceFailure) -> [any BackendService] {
        guard let directory = context.settings.trackingSpool else { return [] }
        guard context.stateDirectory != nil else {
            throw BackendServiceFailure("agent.trackingSpool needs a state directory of this machine for what it has sent; give agent.stateDirectory")
        }
        let ledger = try context.sentOnceLedger()
        return [TrackingSpool(directory: directory, targets: targets, ledger: SentOnceTrackingLedger(ledger), transport: context.transport,
                              concurrency: context.settings.perHostConcurrency, logger: context.logger, clock: ContinuousClock(),
                              wallClock: WallClock.epochMilliseconds, gracePeriod: context.gracePeriod)]
    }

    public func check(_ context: BackendContext, skipping passedEarly: [Bool]?, diagnostics: inout DiagnosticList) {
        guard !context.services(ofType: type).isEmpty else { return }
        var planner = AdobePlanner(context, diagnostics: &diagnostics)
        for account in context.configuration.accounts where account.isEnabled {
            _ = planner.ecids(of: account, display: .asSent, diagnostics: &diagnostics)
        }
    }

    public func planner(_ context: BackendContext, diagnostics: inout DiagnosticList) -> any SubscriptionPlanner {
        AdobePlanner(context, diagnostics: &diagnostics)
    }

    /// Never called: the service plans no subscription.
    public func send(_ requests: [SubscriptionRequest], transport: any HTTPTransport, defaultTimeout: Duration) async -> [Outcome] {
        requests.map { _ in .rejected("an adobe-campaign service has no registration to deliver") }
    }

    public func cleanupRequest(account: String, service: String, stored: String) -> SubscriptionRequest? {
        nil
    }

    /// What tracking resolves payloads with in `context`: its usable services, and the ECID
    /// of every enabled account for each service it names (problems are left to `validate`).
    public static func trackingTargets(_ context: BackendContext) -> TrackingTargets {
        var ignored = DiagnosticList()
        var planner = AdobePlanner(context, diagnostics: &ignored)
        var ecids: [String: [String: TrackingTargets.ECID]] = [:]
        var accounts: [String: Bool] = [:]
        // Without an adobe-campaign service no payload resolves, so no account is looked up: a
        // table of 100,000 accounts would only cost a reload 45 ms and the agent 4.5 MB.
        for account in context.configuration.accounts where !planner.services.isEmpty {
            accounts[account.id] = account.isEnabled
            guard account.isEnabled else { continue }
            let sent = planner.ecids(of: account, display: .asSent, diagnostics: &ignored)
            let shown = planner.ecids(of: account, display: .stars, diagnostics: &ignored)
            for (service, ecid) in sent {
                ecids[service, default: [:]][account.id] = TrackingTargets.ECID(sent: ecid, shown: shown[service] ?? "********")
            }
        }
        let services = planner.services.mapValues {
            TrackingTargets.Service(name: $0.service, trackingServer: $0.trackingServer, timeout: $0.timeout)
        }
        let others = context.configuration.services.values.filter { $0.type != type }.reduce(into: [String: String]()) {
            $0[$1.name] = $1.type
        }
        return TrackingTargets(services: services, otherServices: others, ecids: ecids, accounts: accounts,
                               retry: context.configuration.agent.retry)
    }
}
