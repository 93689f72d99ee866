import PushBackend
import PushConfig
import PushTemplates

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
