import Crypto
import PushBackend
import PushConfig
import PushScheduler
import PushTemplates
import PushSystem

/// Microsoft Customer Insights – Journeys device registration (SPEC §9.2, seed 000): each
/// account that names a `customer-insights-journeys` service registers its device token for
/// its `userId`, alone or in batches of up to `batchSize`; tracked registrations are polled
/// until confirmed; a dropped subscription, or a replaced token, is cleaned up.
///
/// Guide: docs/journeys.md. The parts: `JourneysSettings`, `JourneysPlanner`, `JourneysSender`
/// (and `JourneysPoller`, the webhook in `JourneysBackend+Webhook.swift`).
public struct JourneysBackend: Backend {
    public static let type = "customer-insights-journeys"
    public var type: String { Self.type }

    public var settingsSchema: SettingsSchema? {
        SettingsSchema(doc: "Microsoft Customer Insights - Journeys device registration (docs/journeys.md).",
                       keys: JourneysSettings.keys, required: ["publicEndpoint", "orgId", "mobileAppId", "apiToken"], described: [
            .init("publicEndpoint", .url, "The organization's public endpoint, https://public-eur.mkt.dynamics.com or the like."),
            .init("orgId", .text, "The organization's id."),
            .init("mobileAppId", .text, "The mobile app's id in Customer Insights - Journeys."),
            .init("apiToken", .text, "The app's API token; a secret: !credential NAME, !file PATH or !env NAME."),
            .init("trackRegistration", .boolean, "Whether registrations are tracked and their status polled (default true)."),
            .init("callbackUrl", .url, "Where Journeys calls back with a registration's status (the agent's webhook)."),
            .init("callbackHeaders", .mapping, "Headers Journeys sends with its callback."),
            .init("batchSize", .integer(minimum: 1, maximum: JourneysSettings.batchLimit), "Registrations per request, 1-100 (default 100)."),
            .init("statusInterval", .durationOrOff, "How often pending registrations are asked about (default 1m), or off."),
            .init("statusTimeout", .duration, "How long a registration may stay pending before it is unconfirmed (default 24h)."),
        ])
    }

    public init() {}

    /// The services of this type in `context` whose settings can be used; problems go to `diagnostics`.
    static func services(_ context: BackendContext, diagnostics: inout DiagnosticList) -> [String: JourneysSettings] {
        var services: [String: JourneysSettings] = [:]
        for definition in context.services(ofType: type) {
            if let settings = JourneysSettings(definition, diagnostics: &diagnostics) { services[definition.name] = settings }
        }
        return services
    }

    public func check(_ context: BackendContext, skipping passedEarly: [Bool]?, diagnostics: inout DiagnosticList) {
        let definitions = context.services(ofType: type)
        guard !definitions.isEmpty else { return }
        let planner = JourneysPlanner(context, diagnostics: &diagnostics)
        let accounts = context.configuration.accounts
        var named = Set<String>()
        for account in accounts where account.isEnabled { named.formUnion(account.services.keys) }
        // Rendering each registration is most of checking them: in runs on every processor, as
        // planning does, the diagnostics joined in account order.
        let found = Processors.inRuns(count: accounts.count, runs: Processors.runs(accounts: accounts.count)) { range in
            var copy = planner
            var found = DiagnosticList()
            for index in range { copy.check(accounts[index], diagnostics: &found) }
            return found
        }
        for run in found { diagnostics.append(contentsOf: run.all) }
        for definition in definitions where !named.contains(definition.name) {
            diagnostics.warning("no enabled account names the service '\(definition.name)', so nothing is registered with it",
                                file: definition.file, at: definition.position)
        }
    }

    public func planner(_ context: BackendContext, diagnostics: inout DiagnosticList) -> any SubscriptionPlanner {
        JourneysPlanner(context, diagnostics: &diagnostics)
    }

    public func send(_ requests: [SubscriptionRequest], transport: any HTTPTransport, defaultTimeout: Duration) async -> [Outcome] {
        let items = requests.compactMap { $0.payload as? JourneysItem }
        guard items.count == requests.count else {
            return requests.map { _ in .rejected("the request was not prepared by the Journeys backend") }
        }
        return await JourneysSender.send(items[...], transport: transport, timeout: requests.first?.timeout ?? defaultTimeout)
    }

    public func deliveredParts(of delivery: SubscriptionRequest) -> DeliveredParts? {
        guard let item = delivery.payload as? JourneysItem else { return nil }
        var parts = DeliveredParts()
        parts.addURL(item.url)
        for header in item.headers { parts.addHeader(header.name, header.value) }
        parts.addBody(item.object)
        return parts
    }

    public func cleanupRequest(account: String, service: String, stored: String) -> SubscriptionRequest? {
        guard let cleanup = StoredCleanup(text: stored) else { return nil }
        return Self.request(cleanup.item, account: account, service: service, batchSize: cleanup.batchSize)
    }

    public func pollers(_ context: BackendContext) -> [any ConfirmationPoller] {
        var ignored = DiagnosticList()
        return Self.services(context, diagnostics: &ignored).values.sorted { $0.service < $1.service }.compactMap { settings in
            guard settings.trackRegistration, let interval = settings.statusInterval else { return nil }
            return JourneysPoller(service: settings.service, interval: interval, timeout: settings.statusTimeout,
                                  statusURL: settings.baseURL + "/devices/status/", mobileAppId: settings.mobileAppId.text,
                                  apiToken: settings.apiToken.text)
        }
    }

    /// A Journeys item as the agent schedules it: batched with the items that share its
    /// endpoint and headers, paused with its service on a 429 or 503.
    static func request(_ item: JourneysItem, account: String, service: String, batchSize: Int) -> SubscriptionRequest {
        var shapes = ShapeCache()
        return request(item, account: account, service: service, batchSize: batchSize, shapes: &shapes)
    }

    /// As ``request(_:account:service:batchSize:)``, sharing the shapes of `shapes`.
    static func request(_ item: JourneysItem, account: String, service: String, batchSize: Int,
                        shapes: inout ShapeCache) -> SubscriptionRequest {
        var group = SHA256()
        group.update(data: Array((item.batchURL + "\u{0}" + item.headers.map { $0.name + ":" + $0.value }.joined(separator: "\n")).utf8))
        let batching = batchSize > 1 ? Batching(group: "\(service)/\(item.kind.rawValue)/" + Fingerprint.hex(group.finalize()).prefix(16), limit: batchSize) : nil
        let shape = shapes.shape(family: type, purpose: item.kind == .registration ? .delivery : .cleanup,
                                 label: "\(service) \(item.kind.rawValue)", host: URLText.hostAndPort(of: item.url),
                                 batch: batching, pauseLabel: service)
        return SubscriptionRequest(account: account, service: service, shape: shape, payload: item)
    }
}
