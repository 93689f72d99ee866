import PushBackend
import PushConfig

/// A receiver made up for the documentation and the tests: each account that names an
/// `example-webhook` service has its device token POSTed to the service's `url` as
/// `{"account": …, "token": …}`, and when it leaves (or its token changes) the same object with
/// `"removed": true`. It is the smallest backend with every part a real one has (settings read
/// with positions, a planner, a sender, cleanups kept in state), and docs/adding-a-backend.md
/// walks through it. It is not in `Backends.standard`: the tests register it beside the others
/// with one line, as a new backend would be.
///
/// ```yaml
/// services:
///   hook: {type: example-webhook, url: "https://hooks.example.com/devices"}
/// accounts:
///   - id: alice
///     pushTokenOther: "…"
///     services:
///       hook: {}                       # token: defaults to %pushTokenOther%
/// ```
public struct ExampleWebhookBackend: Backend {
    public static let type = "example-webhook"
    public var type: String { Self.type }

    public var settingsSchema: SettingsSchema? {
        SettingsSchema(doc: "The example backend of docs/adding-a-backend.md.", keys: ExampleWebhookSettings.keys,
                       required: ["url"], described: [.init("url", .url, "Where each device is POSTed.")])
    }

    public init() {}

    public func check(_ context: BackendContext, skipping passedEarly: [Bool]?, diagnostics: inout DiagnosticList) {
        guard !context.services(ofType: type).isEmpty else { return }
        // Checking is planning with the plans thrown away: every problem rendering finds.
        var planner = ExampleWebhookPlanner(context, diagnostics: &diagnostics)
        for account in context.configuration.accounts {
            _ = planner.plans(for: account, diagnostics: &diagnostics)
        }
    }

    public func planner(_ context: BackendContext, diagnostics: inout DiagnosticList) -> any SubscriptionPlanner {
        ExampleWebhookPlanner(context, diagnostics: &diagnostics)
    }

    public func send(_ requests: [SubscriptionRequest], transport: any HTTPTransport, defaultTimeout: Duration) async -> [Outcome] {
        var outcomes: [Outcome] = []
        for request in requests {
            guard let item = request.payload as? ExampleWebhookItem else {
                outcomes.append(.rejected("the request was not prepared by the example-webhook backend"))
                continue
            }
            outcomes.append(await ExampleWebhookSender.send(item, transport: transport, timeout: request.timeout ?? defaultTimeout))
        }
        return outcomes
    }

    public func deliveredParts(of delivery: SubscriptionRequest) -> DeliveredParts? {
        guard let item = delivery.payload as? ExampleWebhookItem else { return nil }
        var parts = DeliveredParts()
        parts.addURL(item.url)
        parts.addBody(item.body)
        return parts
    }

    public func cleanupRequest(account: String, service: String, stored: String) -> SubscriptionRequest? {
        guard let item = StoredJSON.decode(ExampleWebhookItem.self, from: stored, backend: Self.type) else { return nil }
        return Self.request(item, account: account, service: service, purpose: .cleanup)
    }

    /// `item` as the agent schedules it: alone (no batching), its host's concurrency its own.
    static func request(_ item: ExampleWebhookItem, account: String, service: String, purpose: SubscriptionRequest.Purpose,
                        shapes: inout ShapeCache) -> SubscriptionRequest {
        let shape = shapes.shape(family: type, purpose: purpose, label: purpose == .delivery ? "\(service) token" : "\(service) removal",
                                 host: URLText.hostAndPort(of: item.url))
        return SubscriptionRequest(account: account, service: service, shape: shape, payload: item)
    }

    static func request(_ item: ExampleWebhookItem, account: String, service: String,
                        purpose: SubscriptionRequest.Purpose) -> SubscriptionRequest {
        var shapes = ShapeCache()
        return request(item, account: account, service: service, purpose: purpose, shapes: &shapes)
    }
}
