import Crypto
import PushBackend
import PushConfig
import PushScheduler
import PushTemplates
import PushSystem

/// Renders the Journeys subscriptions of one account at a time (SPEC §9.2): its per-account
/// values (`userId`, `platform`, `deviceToken`) are templates over the account's keys.
struct JourneysPlanner: SubscriptionPlanner, Sendable {
    private var templates: AccountTemplates
    private let services: [String: JourneysSettings]
    /// The services whose settings have problems, from what they do say: their accounts'
    /// values are checked against them too, so that validate says every problem at once.
    private let checkedOnly: [String: JourneysSettings]
    /// What the requests have in common, shared.
    private var shapes = ShapeCache()

    /// Each account's registrations are its own: copies plan runs of accounts at once. (Planning
    /// 100,000 registrations took 2 s on one core while the other waited.)
    var forRuns: (any SubscriptionPlanner & Sendable)? { self }

    /// The per-account keys, and what each is.
    static let keys = ["userId", "platform", "deviceToken"]
    /// The most one registration may hold: a full batch of them stays under SPEC §12's 1 MiB.
    static let maximumObjectSize = (1 << 20) / JourneysSettings.batchLimit - 64
    static let maximumHeaderLineSize = 8 << 10

    /// What every registration and cleanup of a service sends to, made once: each kept
    /// registration held its own copies of these texts (some 350 bytes for each subscription).
    private struct Endpoints: Sendable {
        var registration: String
        var registrationBatch: String
        var cleanup: String
        var cleanupBatch: String
        var secrets: [String]

        init(_ settings: JourneysSettings) {
            let base = settings.baseURL + "/devices"
            registration = base
            registrationBatch = base + "/batch"
            cleanup = base + "/cleanup"
            cleanupBatch = base + "/cleanup/batch"
            secrets = [settings.apiToken.text]
        }
    }

    /// By service name.
    private let endpoints: [String: Endpoints]

    init(_ context: BackendContext, diagnostics: inout DiagnosticList) {
        templates = AccountTemplates(configuration: context.configuration, sources: context.sources,
                                     installID: context.installID, hostname: context.hostname)
        services = JourneysBackend.services(context, diagnostics: &diagnostics)
        endpoints = services.mapValues(Endpoints.init)
        var checkedOnly: [String: JourneysSettings] = [:]
        for definition in context.services(ofType: JourneysBackend.type) where services[definition.name] == nil {
            // Their problems were said just above.
            var said = DiagnosticList()
            guard var settings = JourneysSettings(definition, diagnostics: &said, evenIfUnusable: true) else { continue }
            // A callbackUrl found wrong would only be said again as a template.
            settings.callbackURL = nil
            checkedOnly[definition.name] = settings
        }
        self.checkedOnly = checkedOnly
    }

    /// What one subscription renders to, for sending or for showing.
    private struct Rendered {
        var registration: JourneysItem
        var cleanup: JourneysItem
        var deviceToken: String
    }

    mutating func plans(for account: Account, diagnostics: inout DiagnosticList) -> [SubscriptionPlan] {
        guard account.isEnabled else { return [] }
        var plans: [SubscriptionPlan] = []
        for name in account.services.keys.sorted() {
            if services[name] == nil, let settings = checkedOnly[name], let values = account.services[name] {
                _ = render(account, settings: settings, values: values, display: .asSent, diagnostics: &diagnostics)
                continue
            }
            guard let settings = services[name], let values = account.services[name],
                  let sent = render(account, settings: settings, values: values, display: .asSent, diagnostics: &diagnostics)
            else { continue }
            let fingerprint = Self.fingerprint(sent.registration)
            let request = JourneysBackend.request(sent.registration, account: account.id, service: name, batchSize: settings.batchSize,
                                                  shapes: &shapes)
            if sent.deviceToken.isEmpty {
                plans.append(SubscriptionPlan(account: account.id, service: name, fingerprint: fingerprint, delivery: nil,
                                              waiting: "no device token yet (deviceToken renders empty)", cleanup: nil))
            } else {
                plans.append(SubscriptionPlan(account: account.id, service: name, fingerprint: fingerprint, delivery: request,
                                              cleanup: StoredCleanup(item: sent.cleanup, batchSize: settings.batchSize).text,
                                              cleansUpReplaced: true))
            }
        }
        return plans
    }

    /// What ``plans(for:diagnostics:)`` says of `account`, without making its plans: checking
    /// needs only what rendering finds (the plans' stored cleanups, fingerprints and requests
    /// were half of `validate` of 100,000 registrations, perf).
    mutating func check(_ account: Account, diagnostics: inout DiagnosticList) {
        guard account.isEnabled else { return }
        for name in account.services.keys.sorted() {
            guard let settings = services[name] ?? checkedOnly[name], let values = account.services[name] else { continue }
            _ = render(account, settings: settings, values: values, display: .asSent, diagnostics: &diagnostics)
        }
    }

    mutating func preview(_ account: Account, display: SecretDisplay, diagnostics: inout DiagnosticList) -> [RenderedRequest] {
        guard account.isEnabled else { return [] }
        var requests: [RenderedRequest] = []
        for name in account.services.keys.sorted() {
            guard let settings = services[name], let values = account.services[name],
                  let shown = render(account, settings: settings, values: values, display: display, diagnostics: &diagnostics),
                  // Nothing is sent without a device token (the warning says so).
                  !shown.deviceToken.isEmpty
            else { continue }
            for item in [shown.registration, shown.cleanup] {
                var request = RenderedRequest(account: account.id, service: name, reporter: name, method: "POST", url: item.url,
                                              headers: [("User-Agent", PushReporterVersion.userAgent), ("Content-Type", "application/json")]
                                                  + item.headers.map { ($0.name, $0.value) },
                                              body: item.object)
                request.hasSecretMarkers = display == .shellVariables
                // Named as the log names it (JourneysPlanner's label).
                request.kind = item.kind.rawValue
                request.isCleanup = item.kind == .cleanup
                requests.append(request)
            }
        }
        return requests
    }

    /// The registration and cleanup of `account` for one service, as `display` shows them; nil
    /// (with diagnostics) when they cannot be rendered.
    private mutating func render(_ account: Account, settings: JourneysSettings, values: ServiceValues, display: SecretDisplay,
                                 diagnostics: inout DiagnosticList) -> Rendered? {
        let service = settings.service
        // An unknown key leaves nothing to send, but the values are still checked: the user
        // hears of every problem of the account at once.
        let keysKnown = values.checkKeys(Self.keys, service: service, type: JourneysBackend.type,
                                         account: account.id, diagnostics: &diagnostics)
        var usable = true
        func required(_ key: String) -> ConfigValue? {
            guard let value = values.values[key] else {
                diagnostics.error("the service '\(service)' needs '\(key)' for each account (userId and platform)",
                                  file: values.file, at: values.position, account: account.id)
                usable = false
                return nil
            }
            return value
        }
        let userIdValue = required("userId")
        let platformValue = required("platform")
        let tokenValue = values.values["deviceToken"]
            ?? ConfigValue(text: "%pushTokenOther%", origin: ValueOrigin(file: values.file, position: values.position))
        templates.beginRequest()
        let userIdTemplate = userIdValue.flatMap { templates.compile($0, kind: .plain, diagnostics: &diagnostics) }
        let platformTemplate = platformValue.flatMap { templates.compile($0, kind: .plain, diagnostics: &diagnostics) }
        let tokenTemplate = templates.compile(tokenValue, kind: .plain, diagnostics: &diagnostics)
        let callbackTemplate = settings.callbackURL.flatMap { templates.compile($0, kind: .url, diagnostics: &diagnostics) }
        templates.checkAccountReferences(account: account, diagnostics: &diagnostics)
        guard usable, let userIdTemplate, let platformTemplate, let tokenTemplate, let userIdValue, let platformValue,
              settings.callbackURL == nil || callbackTemplate != nil else { return nil }

        let accountValues = templates.values(for: account)
        let masking = templates.masking(display, values: accountValues, maySendSecrets: true)
        do throws(RenderFailure) {
            let userId = try templates.render(userIdTemplate, accountValues, .reveal, origin: userIdValue)
            let platform = try templates.render(platformTemplate, accountValues, .reveal, origin: platformValue).lowercased()
            let token = try templates.render(tokenTemplate, accountValues, .reveal, origin: tokenValue)
            // Each said, not the first alone.
            if userId.isEmpty {
                templates.report(.error, "userId renders empty for this account", at: userIdValue, diagnostics: &diagnostics, account: account.id)
            }
            if platform != "ios" && platform != "android" {
                templates.report(.error, "platform must be ios or android, not '\(platformValue.isSecret ? "********" : platform)'",
                                 at: platformValue, diagnostics: &diagnostics, account: account.id)
            }
            guard keysKnown, !userId.isEmpty, platform == "ios" || platform == "android" else { return nil }
            if token.isEmpty {
                // Not an error: the account waits for its device (SPEC §9.2), as `status` says.
                let why = values.values["deviceToken"] != nil ? "deviceToken renders empty for this account"
                    : account.values["pushTokenOther"] == nil ? "the account has no pushTokenOther, which deviceToken defaults to"
                    : "the account's pushTokenOther, which deviceToken defaults to, is empty"
                templates.report(.warning, "\(why), so '\(service)' does not register it until it has one",
                                 at: tokenValue, diagnostics: &diagnostics, account: account.id)
            }
            let keepMarkers = display == .shellVariables
            func json(_ text: String) -> String { JSONText.string(text, keepingMarkers: keepMarkers) }
            let shownUserId = try templates.render(userIdTemplate, accountValues, masking, origin: userIdValue)
            let shownToken = try templates.render(tokenTemplate, accountValues, masking, origin: tokenValue)
            let appId = settings.mobileAppId.displayed(display, key: "mobileAppId", maySendSecrets: true)
            let apiToken = settings.apiToken.displayed(display, key: "apiToken", maySendSecrets: true)
            let registration = JSONText.compactObject([
                ("MobileAppId", json(appId)), ("UserId", json(shownUserId)), ("ApiToken", json(apiToken)),
                (platform == "ios" ? "ApnsDeviceToken" : "FcmDeviceToken", json(shownToken)),
            ], keepingMarkers: keepMarkers)
            let cleanup = JSONText.compactObject([
                ("MobileAppId", json(appId)), ("ApiToken", json(apiToken)), ("UserId", json(shownUserId)), ("DeviceToken", json(shownToken)),
            ], keepingMarkers: keepMarkers)
            // A batch of them must stay under the 1 MiB a request may hold (SPEC §12).
            let largest = JourneysPlanner.maximumObjectSize
            if display == .asSent, registration.utf8.count > largest {
                templates.report(.error, "the rendered registration is \(registration.utf8.count) bytes, more than the limit of \(largest / 1024) KiB for one (a batch of 100 must stay under 1 MiB)",
                                 at: tokenValue, diagnostics: &diagnostics, account: account.id)
                return nil
            }
            var headers: [JourneysItem.Header] = []
            if settings.trackRegistration { headers.append(.init(name: "x-ms-track-registration", value: "true")) }
            if let callbackTemplate, let callbackValue = settings.callbackURL {
                let callback = try templates.render(callbackTemplate, accountValues, masking, origin: callbackValue)
                // The page names the header both ways (SPEC §10): both are sent.
                headers.append(.init(name: "x-ms-callback-url", value: callback))
                headers.append(.init(name: "x-ms-status-callback-url", value: callback))
                if !settings.callbackHeaders.isEmpty {
                    let fields = settings.callbackHeaders.map { ($0.key, json($0.value.displayed(display, key: $0.key, maySendSecrets: true))) }
                    headers.append(.init(name: "x-ms-callback-url-headers", value: JSONText.compactObject(fields, keepingMarkers: keepMarkers)))
                }
            }
            if let long = headers.first(where: { $0.name.utf8.count + 2 + $0.value.utf8.count > JourneysPlanner.maximumHeaderLineSize }) {
                templates.report(.error, "the rendered header \(long.name) is more than the limit of 8 KiB for a header line",
                                 at: settings.callbackURL ?? userIdValue, diagnostics: &diagnostics, account: account.id)
                return nil
            }
            let sent = endpoints[service] ?? Endpoints(settings)
            return Rendered(
                registration: JourneysItem(kind: .registration, url: sent.registration, batchURL: sent.registrationBatch,
                                           object: registration, headers: headers, tracked: settings.trackRegistration,
                                           secrets: sent.secrets),
                cleanup: JourneysItem(kind: .cleanup, url: sent.cleanup, batchURL: sent.cleanupBatch, object: cleanup,
                                      headers: [], tracked: false, secrets: sent.secrets),
                deviceToken: token)
        } catch {
            templates.reportRenderFailure(error, account: account.id, diagnostics: &diagnostics)
            return nil
        }
    }

    /// The fingerprint (SHA-256) of what a registration sends, secrets included.
    static func fingerprint(_ item: JourneysItem) -> String {
        var hasher = SHA256()
        hasher.update(data: Array((item.url + "\u{0}" + item.object + "\u{0}"
            + item.headers.map { $0.name + ":" + $0.value }.joined(separator: "\n")).utf8))
        return Fingerprint.subscription(digest: hasher.finalize())
    }
}
