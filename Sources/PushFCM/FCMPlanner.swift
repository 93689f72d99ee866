import PushBackend
import PushConfig
import PushTemplates

/// Renders the FCM subscriptions (SPEC §9.3). A subscription is the membership of an account's
/// device token in its group, and a group's wanted members are the tokens of every enabled
/// account naming it; so every subscription is rendered once when the planner is made, the
/// groups are counted (the first 20 members by account id are kept, the accounts beyond are
/// refused), and the plans are read from that.
struct FCMPlanner: SubscriptionPlanner {
    /// The per-account keys.
    static let keys = ["group", "deviceToken"]
    /// The most members a device group has (Firebase's device-group page).
    static let memberLimit = 20
    /// Limits of rendered values (SPEC §12): 20 tokens and a name stay far under 1 MiB a request.
    static let maximumTokenSize = 4 << 10
    static let maximumGroupSize = 1 << 10

    private var templates: AccountTemplates
    private let services: [String: FCMSettings]
    /// What the requests have in common, shared.
    private var shapes = ShapeCache()
    /// Every subscription of an enabled account, rendered as sent: by account id, then service.
    private var members: [String: [String: Member]] = [:]
    /// The groups with more members than FCM allows.
    private(set) var overfull: [Overfull] = []
    /// The accounts refused for that, with why: by service, then account id.
    private var refused: [String: [String: String]] = [:]

    /// One subscription as rendered: its group and device token (empty: none yet).
    struct Member {
        var group: String
        var token: String
        /// Where the account's values for the service are.
        var file: String
        var position: SourcePosition
    }

    /// A group of more than ``memberLimit`` members.
    struct Overfull {
        var service: String
        var group: String
        /// Every account naming it with a token, by id.
        var accounts: [String]
        /// The sentence `validate` says and refused subscriptions show.
        var message: String
        /// Where the first refused account names the service.
        var file: String
        var position: SourcePosition
    }

    init(_ context: BackendContext, memory: FCMMemory, diagnostics: inout DiagnosticList) {
        templates = AccountTemplates(configuration: context.configuration, sources: context.sources,
                                     installID: context.installID, hostname: context.hostname)
        var services: [String: FCMSettings] = [:]
        for definition in context.services(ofType: FCMBackend.type) {
            if let settings = FCMSettings(definition, diagnostics: &diagnostics) { services[definition.name] = settings }
        }
        self.services = services
        // A service whose settings have problems (said above) still has its accounts' values
        // checked, so that validate says every problem at once; nothing is planned for it.
        let checkedOnly = Set(context.services(ofType: FCMBackend.type).map(\.name)).subtracting(services.keys)
        guard !services.isEmpty || !checkedOnly.isEmpty else { return }
        for account in context.configuration.accounts where account.isEnabled {
            for name in account.services.keys.sorted() {
                guard let values = account.services[name] else { continue }
                if checkedOnly.contains(name) {
                    _ = render(account, service: name, values: values, display: .asSent, diagnostics: &diagnostics)
                    continue
                }
                guard services[name] != nil,
                      let rendered = render(account, service: name, values: values, display: .asSent, diagnostics: &diagnostics)
                else { continue }
                members[account.id, default: [:]][name] = Member(group: rendered.group, token: rendered.token,
                                                                  file: values.file, position: values.position)
            }
        }
        countMembers(memory: memory)
    }

    /// Counts each group's members: the first ``memberLimit`` distinct tokens by account id are
    /// kept (and told to `memory`), the accounts beyond are refused.
    private mutating func countMembers(memory: FCMMemory) {
        var byGroup: [String: [String: [(account: String, member: Member)]]] = [:]
        for (account, subscriptions) in members {
            for (service, member) in subscriptions where !member.token.isEmpty {
                byGroup[service, default: [:]][member.group, default: []].append((account, member))
            }
        }
        for (service, settings) in services {
            var wanted: [GroupID: [String]] = [:]
            for (group, named) in (byGroup[service] ?? [:]).sorted(by: { $0.key < $1.key }) {
                let ordered = named.sorted { $0.account < $1.account }
                var kept: [String] = []
                var beyond: [(account: String, member: Member)] = []
                for entry in ordered {
                    if kept.contains(entry.member.token) { continue }
                    if kept.count < Self.memberLimit { kept.append(entry.member.token) } else { beyond.append(entry) }
                }
                wanted[settings.target.group(group)] = kept
                guard let first = beyond.first else { continue }
                let distinct = kept.count + Set(beyond.map(\.member.token)).count
                let accounts = ordered.map(\.account)
                let message = "the device group '\(group)' of service '\(service)' would have \(distinct) members, more than the "
                    + "\(Self.memberLimit) FCM allows (accounts \(accounts.joined(separator: ", "))); the first \(Self.memberLimit) "
                    + "by account id are kept, so \(beyond.map(\.account).joined(separator: ", ")) \(beyond.count == 1 ? "is" : "are") not added"
                overfull.append(Overfull(service: service, group: group, accounts: accounts, message: message,
                                         file: first.member.file, position: first.member.position))
                for entry in beyond { refused[service, default: [:]][entry.account] = message }
            }
            memory.setWanted(service: service, wanted)
        }
    }

    mutating func plans(for account: Account, diagnostics: inout DiagnosticList) -> [SubscriptionPlan] {
        guard account.isEnabled, let subscriptions = members[account.id] else { return [] }
        var plans: [SubscriptionPlan] = []
        for (service, member) in subscriptions.sorted(by: { $0.key < $1.key }) {
            guard let settings = services[service] else { continue }
            let target = settings.target
            let fingerprint = Fingerprint.subscription([target.fingerprint, member.group, member.token])
            if member.token.isEmpty {
                plans.append(SubscriptionPlan(account: account.id, service: service, fingerprint: fingerprint, delivery: nil,
                                              waiting: "no device token yet (deviceToken renders empty)", cleanup: nil))
            } else if let why = refused[service]?[account.id] {
                var plan = SubscriptionPlan(account: account.id, service: service, fingerprint: "refused:" + fingerprint,
                                            delivery: nil, cleanup: nil)
                plan.refusal = why
                plans.append(plan)
            } else {
                let add = FCMItem(operation: .add, target: target, group: member.group, token: member.token)
                var removal = add
                removal.operation = .remove
                plans.append(SubscriptionPlan(account: account.id, service: service, fingerprint: fingerprint,
                                              delivery: FCMBackend.request(add, account: account.id, service: service, shapes: &shapes),
                                              cleanup: StoredRemoval(removal).text, cleansUpReplaced: true))
            }
        }
        return plans
    }

    /// Each subscription's delivery as it goes when its group is new (`create`), then its
    /// cleanup (`remove`, with the group's key as it will be known then).
    mutating func preview(_ account: Account, display: SecretDisplay, diagnostics: inout DiagnosticList) -> [RenderedRequest] {
        guard account.isEnabled, let subscriptions = members[account.id] else { return [] }
        var requests: [RenderedRequest] = []
        // Every problem was reported when the planner was made.
        var reported = DiagnosticList()
        for service in subscriptions.keys.sorted() {
            guard let settings = services[service], let values = account.services[service],
                  let shown = render(account, service: service, values: values, display: display, diagnostics: &reported),
                  !shown.token.isEmpty, refused[service]?[account.id] == nil
            else { continue }
            let keepMarkers = display == .shellVariables
            func json(_ text: String) -> String { JSONText.string(text, keepingMarkers: keepMarkers) }
            let ids = "[" + json(shown.shownToken) + "]"
            let create = JSONText.compactObject([("operation", json("create")), ("notification_key_name", json(shown.group)),
                                                 ("registration_ids", ids)], keepingMarkers: keepMarkers)
            let remove = JSONText.compactObject([("operation", json("remove")), ("notification_key_name", json(shown.group)),
                                                 ("notification_key", json("<notification_key>")), ("registration_ids", ids)],
                                                keepingMarkers: keepMarkers)
            for (body, isCleanup) in [(create, false), (remove, true)] {
                var request = RenderedRequest(account: account.id, service: service, reporter: service, method: "POST",
                                              url: settings.endpoint,
                                              headers: [("User-Agent", PushReporterVersion.userAgent), ("Content-Type", "application/json")]
                                                  + FCMAuthorization.previewHeaders(settings, display: display),
                                              body: body)
                request.hasSecretMarkers = keepMarkers
                // Named as the log names it (FCMBackend's label).
                request.kind = isCleanup ? "group removal" : "group membership"
                request.isCleanup = isCleanup
                requests.append(request)
            }
        }
        return requests
    }

    /// What one subscription renders to: the group and token as sent, and the token as `display` shows it.
    private struct Rendered {
        var group: String
        var token: String
        var shownToken: String
    }

    /// The group and token of `account` for one service; nil (with diagnostics) when they
    /// cannot be rendered.
    private mutating func render(_ account: Account, service: String, values: ServiceValues, display: SecretDisplay,
                                 diagnostics: inout DiagnosticList) -> Rendered? {
        // An unknown key leaves nothing to send, but the values are still checked: the user
        // hears of every problem of the account at once.
        let keysKnown = values.checkKeys(Self.keys, service: service, type: FCMBackend.type,
                                         account: account.id, diagnostics: &diagnostics)
        let origin = ValueOrigin(file: values.file, position: values.position)
        let groupValue = values.values["group"] ?? ConfigValue(text: "%account[username]%", origin: origin)
        let tokenValue = values.values["deviceToken"] ?? ConfigValue(text: "%pushTokenOther%", origin: origin)
        templates.beginRequest()
        let groupTemplate = templates.compile(groupValue, kind: .plain, diagnostics: &diagnostics)
        let tokenTemplate = templates.compile(tokenValue, kind: .plain, diagnostics: &diagnostics)
        var references = DiagnosticList()
        templates.checkAccountReferences(account: account, diagnostics: &references)
        diagnostics.append(contentsOf: references.all)
        // A key no account has was said; what the template renders to would only say it again.
        guard let groupTemplate, let tokenTemplate, !references.hasErrors else { return nil }
        let accountValues = templates.values(for: account)
        do throws(RenderFailure) {
            let group = try templates.render(groupTemplate, accountValues, .reveal, origin: groupValue)
            let token = try templates.render(tokenTemplate, accountValues, .reveal, origin: tokenValue)
            func refuse(_ message: String, at value: ConfigValue) -> Rendered? {
                templates.report(.error, message, at: value, diagnostics: &diagnostics, account: account.id)
                return nil
            }
            if group.isEmpty {
                return refuse("group renders empty for this account (the default is %account[username]%)", at: groupValue)
            }
            if try templates.render(groupTemplate, accountValues, .stars, origin: groupValue) != group {
                return refuse("group renders from a secret; a group's name is kept in the state and shown by status, so it cannot be one",
                              at: groupValue)
            }
            if group.utf8.count > Self.maximumGroupSize {
                return refuse("the rendered group is \(group.utf8.count) bytes, more than the limit of 1 KiB for a group name", at: groupValue)
            }
            if token.utf8.count > Self.maximumTokenSize {
                return refuse("the rendered deviceToken is \(token.utf8.count) bytes, more than the limit of 4 KiB for a registration token",
                              at: tokenValue)
            }
            guard keysKnown else { return nil }
            let masking = templates.masking(display, values: accountValues, maySendSecrets: true)
            let shownToken = try templates.render(tokenTemplate, accountValues, masking, origin: tokenValue)
            return Rendered(group: group, token: token, shownToken: shownToken)
        } catch {
            templates.reportRenderFailure(error, account: account.id, diagnostics: &diagnostics)
            return nil
        }
    }
}
