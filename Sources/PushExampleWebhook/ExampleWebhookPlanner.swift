import PushBackend
import PushConfig
import PushTemplates

/// What one request of the example webhook sends; kept in state, as JSON, for a cleanup.
struct ExampleWebhookItem: Codable, Sendable {
    /// Names the backend in the stored text (``StoredJSON/decode(_:from:backend:)`` looks for it).
    var backend = ExampleWebhookBackend.type
    var url: String
    /// The JSON object sent.
    var body: String
}

/// Renders the example-webhook subscriptions of one account at a time: its `token` value (a
/// template over the account's keys, `%pushTokenOther%` when not given) for each service it names.
struct ExampleWebhookPlanner: SubscriptionPlanner, Sendable {
    private var templates: AccountTemplates
    private let services: [String: ExampleWebhookSettings]
    private var shapes = ShapeCache()

    /// The per-account values an account may give under the service.
    static let keys = ["token"]

    init(_ context: BackendContext, diagnostics: inout DiagnosticList) {
        templates = AccountTemplates(configuration: context.configuration, sources: context.sources,
                                     installID: context.installID, hostname: context.hostname)
        services = ExampleWebhookSettings.services(context, diagnostics: &diagnostics)
    }

    mutating func plans(for account: Account, diagnostics: inout DiagnosticList) -> [SubscriptionPlan] {
        guard account.isEnabled else { return [] }
        var plans: [SubscriptionPlan] = []
        for name in account.services.keys.sorted() {
            guard let settings = services[name], let values = account.services[name],
                  let token = render(account, values: values, service: name, display: .asSent, diagnostics: &diagnostics)
            else { continue }
            let delivery = Self.item(settings, account: account.id, token: token, removed: false)
            let fingerprint = Fingerprint.subscription([delivery.url, delivery.body])
            guard !token.isEmpty else {
                plans.append(SubscriptionPlan(account: account.id, service: name, fingerprint: fingerprint, delivery: nil,
                                              waiting: "no device token yet (token renders empty)", cleanup: nil))
                continue
            }
            let request = ExampleWebhookBackend.request(delivery, account: account.id, service: name, purpose: .delivery, shapes: &shapes)
            let cleanup = Self.item(settings, account: account.id, token: token, removed: true)
            // A changed token removes the old one once the new one is delivered.
            plans.append(SubscriptionPlan(account: account.id, service: name, fingerprint: fingerprint, delivery: request,
                                          cleanup: StoredJSON.encode(cleanup), cleansUpReplaced: true))
        }
        return plans
    }

    mutating func preview(_ account: Account, display: SecretDisplay, diagnostics: inout DiagnosticList) -> [RenderedRequest] {
        guard account.isEnabled else { return [] }
        var requests: [RenderedRequest] = []
        for name in account.services.keys.sorted() {
            guard let settings = services[name], let values = account.services[name],
                  let token = render(account, values: values, service: name, display: display, diagnostics: &diagnostics),
                  !token.isEmpty
            else { continue }
            for removed in [false, true] {
                let item = Self.item(settings, account: account.id, token: token, removed: removed,
                                     keepingMarkers: display == .shellVariables)
                var request = RenderedRequest(account: account.id, service: name, reporter: name, method: "POST", url: item.url,
                                              headers: ExampleWebhookSender.headers, body: item.body)
                request.kind = removed ? "removal" : "token"
                request.isCleanup = removed
                request.hasSecretMarkers = display == .shellVariables
                requests.append(request)
            }
        }
        return requests
    }

    /// The account's token for `service`, as `display` shows it; nil (with diagnostics) when it
    /// cannot be rendered.
    private mutating func render(_ account: Account, values: ServiceValues, service: String, display: SecretDisplay,
                                 diagnostics: inout DiagnosticList) -> String? {
        let known = values.checkKeys(Self.keys, service: service, type: ExampleWebhookBackend.type, account: account.id,
                                     diagnostics: &diagnostics)
        let value = values.values["token"]
            ?? ConfigValue(text: "%pushTokenOther%", origin: ValueOrigin(file: values.file, position: values.position))
        templates.beginRequest()
        let template = templates.compile(value, kind: .plain, diagnostics: &diagnostics)
        templates.checkAccountReferences(account: account, diagnostics: &diagnostics)
        guard known, let template else { return nil }
        let accountValues = templates.values(for: account)
        do throws(RenderFailure) {
            return try templates.render(template, accountValues, templates.masking(display, values: accountValues, maySendSecrets: true),
                                        origin: value)
        } catch {
            templates.reportRenderFailure(error, account: account.id, diagnostics: &diagnostics)
            return nil
        }
    }

    /// What is sent for the account's token, or for its removal; `keepingMarkers` keeps the
    /// `${…}` of secrets shown as shell variables (`preview --secrets=env`).
    static func item(_ settings: ExampleWebhookSettings, account: String, token: String, removed: Bool,
                     keepingMarkers: Bool = false) -> ExampleWebhookItem {
        var fields = [("account", JSONText.string(account, keepingMarkers: keepingMarkers)),
                      ("token", JSONText.string(token, keepingMarkers: keepingMarkers))]
        if removed { fields.append(("removed", "true")) }
        return ExampleWebhookItem(url: settings.url, body: JSONText.compactObject(fields, keepingMarkers: keepingMarkers))
    }
}
