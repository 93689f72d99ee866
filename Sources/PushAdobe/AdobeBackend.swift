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
public struct AdobeBackend: Backend, CommandContributor {
    public static let type = "adobe-campaign"
    public var type: String { Self.type }
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

/// Reads the per-account values of the `adobe-campaign` services (SPEC §9.4): `ecid`, a
/// template over the account's keys. There is nothing to deliver per account, so its plans
/// are empty; its preview shows each account's tracking request, the payload's values as
/// `<_mId>`, `<_dId>` and `<action>`.
struct AdobePlanner: SubscriptionPlanner {
    private var templates: AccountTemplates
    let services: [String: AdobeSettings]
    /// The services whose settings have problems (said when they were read): their accounts' values
    /// are still checked, so that validate says every problem at once; nothing is tracked with them.
    private let checkedOnly: Set<String>

    /// The per-account keys.
    static let keys = ["ecid"]

    init(_ context: BackendContext, diagnostics: inout DiagnosticList) {
        templates = AccountTemplates(configuration: context.configuration, sources: context.sources,
                                     installID: context.installID, hostname: context.hostname)
        services = context.settings(ofType: AdobeBackend.type, diagnostics: &diagnostics) { AdobeSettings($0, diagnostics: &$1) }
        checkedOnly = Set(context.services(ofType: AdobeBackend.type).map(\.name)).subtracting(services.keys)
    }

    /// Renders the ECIDs, so that `run` refuses what `validate` refuses; nothing is delivered.
    mutating func plans(for account: Account, diagnostics: inout DiagnosticList) -> [SubscriptionPlan] {
        if account.isEnabled { _ = ecids(of: account, display: .asSent, diagnostics: &diagnostics) }
        return []
    }

    mutating func preview(_ account: Account, display: SecretDisplay, diagnostics: inout DiagnosticList) -> [RenderedRequest] {
        guard account.isEnabled else { return [] }
        let shown = ecids(of: account, display: display, diagnostics: &diagnostics)
        // As sent too, to tell a masked ECID (written as it is) from one to encode; its
        // problems were just reported.
        var again = DiagnosticList()
        let sent = display == .asSent ? shown : ecids(of: account, display: .asSent, diagnostics: &again)
        return shown.keys.sorted().compactMap { name in
            guard let settings = services[name], let ecid = shown[name], !ecid.isEmpty else { return nil }
            let masked = sent[name] != ecid
            var request = RenderedRequest(account: account.id, service: name, reporter: name, method: "GET",
                                          url: TrackingRequest.base(settings.trackingServer, ids: "<_mId>,<_dId>,<action>")
                                              + (masked ? ecid : TrackingRequest.queryEncoded(ecid)),
                                          headers: TrackingRequest.headers, body: nil, timeout: settings.timeout)
            request.hasSecretMarkers = display == .shellVariables
            request.kind = "tracking"
            return request
        }
    }

    /// The `ecid` of `account` for each usable `adobe-campaign` service it names, rendered as
    /// `display` shows it; a service whose values have a problem (reported) is left out.
    mutating func ecids(of account: Account, display: SecretDisplay, diagnostics: inout DiagnosticList) -> [String: String] {
        var found: [String: String] = [:]
        for name in account.services.keys.sorted() {
            let settings = services[name]
            guard settings != nil || checkedOnly.contains(name), let values = account.services[name] else { continue }
            // A misspelt key leaves nothing to track, but the ecid is still checked; a misspelt
            // ecid is said once, not also as a missing one.
            let keysKnown = values.checkKeys(Self.keys, service: name, type: AdobeBackend.type, account: account.id,
                                             diagnostics: &diagnostics)
            guard let value = values.values["ecid"] else {
                if keysKnown && values.keyPositions["ecid"] == nil {
                    diagnostics.error("the service '\(name)' needs 'ecid' for each account that names it (the Experience Cloud id)",
                                      file: values.file, at: values.position, account: account.id)
                }
                continue
            }
            let said = diagnostics.all.count
            templates.beginRequest()
            let template = templates.compile(value, kind: .plain, diagnostics: &diagnostics)
            templates.checkAccountReferences(account: account, diagnostics: &diagnostics)
            guard let template else { continue }
            let accountValues = templates.values(for: account)
            let masking = templates.masking(display, values: accountValues,
                                            maySendSecrets: settings.map { URLText.maySendSecrets(to: $0.trackingServer) } ?? true)
            do throws(RenderFailure) {
                let ecid = try templates.render(template, accountValues, masking, origin: value)
                // Unless what makes it empty was just said (a key the account lacks).
                if ecid.isEmpty && display == .asSent && diagnostics.all.count == said {
                    templates.report(.warning, "ecid renders empty for this account, so its payloads are not tracked",
                                     at: value, diagnostics: &diagnostics, account: account.id)
                }
                if settings != nil && keysKnown { found[name] = ecid }
            } catch {
                templates.reportRenderFailure(error, account: account.id, diagnostics: &diagnostics)
            }
        }
        return found
    }
}
