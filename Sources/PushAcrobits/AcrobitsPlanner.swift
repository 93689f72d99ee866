import PushBackend
import PushConfig
import PushScheduler
import PushTransport

/// What an Acrobits request sends, as the transport takes it, and nothing more: the agent
/// keeps one for every subscription. (It kept the whole ``RenderedRequest``: 224 bytes, with
/// the account, the names and the fingerprint its subscription holds already.) Packed
/// (``PackedRequest``), and read back at each attempt; the timeout is the request's, set when it
/// is sent.
struct AcrobitsPayload: SharedPayload {
    let packed: PackedRequest

    init(_ packed: PackedRequest) {
        self.packed = packed
    }

    var request: TransportRequest { packed.request }

    var isAlone: Bool { packed.isAlone }

    func alone() -> any Sendable {
        AcrobitsPayload(packed.alone())
    }
}

/// Renders the Acrobits subscriptions of one account at a time: its own web services, and
/// those of each shared receiver (`type: acrobits` service) it names.
struct AcrobitsPlanner: SubscriptionPlanner, Sendable {
    var builder: RequestBuilder
    /// The `type: acrobits` services, by name.
    var services: [String: ServiceDefinition]
    /// What the requests have in common, shared.
    var shapes = ShapeCache()
    /// Where the requests are kept (each copy planning a run packs into blocks of its own).
    var packer = RequestPacker()

    /// Each account's requests are its own: copies plan runs of accounts at once (as
    /// `validate` checks them, ``RequestBuilder/checkAll(into:skipping:)``).
    var forRuns: (any SubscriptionPlanner & Sendable)? { self }

    /// `account` as the service `name` sees it.
    func sharedAccount(_ account: Account, service name: String) -> Account {
        account.withDefaults(services[name]?.settings ?? [:], over: account.services[name])
    }

    /// Each subscription of `account`: its own (`acrobits`), then the shared receivers it names.
    private func subscriptions(of account: Account) -> [(service: String, account: Account)] {
        [(AcrobitsBackend.type, account)]
            + account.services.keys.sorted().filter { services[$0] != nil }.map { ($0, sharedAccount(account, service: $0)) }
    }

    mutating func plans(for account: Account, diagnostics: inout DiagnosticList) -> [SubscriptionPlan] {
        guard account.isEnabled else { return [] }
        return subscriptions(of: account).compactMap { plan(service: $0.service, account: $0.account, diagnostics: &diagnostics) }
    }

    private mutating func plan(service: String, account: Account, diagnostics: inout DiagnosticList) -> SubscriptionPlan? {
        guard var report = builder.request(for: account, reporter: .pushTokenReporter, display: .asSent,
                                           diagnostics: &diagnostics) else { return nil }
        report.service = service
        var removal: String?
        if account.values.contains(Reporter.accountRemovalReporter.tableKey(.url)) {
            // Kept as text, not compared: it needs no fingerprint.
            guard let request = builder.request(for: account, reporter: .accountRemovalReporter, display: .asSent,
                                                fingerprinted: false, diagnostics: &diagnostics) else { return nil }
            removal = StoredRequest(request).text
        }
        var plan = SubscriptionPlan(account: account.id, service: service, fingerprint: report.fingerprint,
                                    delivery: AcrobitsBackend.request(report, service: service, purpose: .delivery,
                                                                      host: builder.hostAndPort(of: report.url), shapes: &shapes,
                                                                      packer: &packer),
                                    cleanup: removal)
        plan.secretsWithheld = report.secretsWithheld
        plan.deliveryUnreadOnceDelivered = true
        if let refusal = report.refusal {
            plan.delivery = nil
            plan.refusal = refusal
        }
        return plan
    }

    mutating func preview(_ account: Account, display: SecretDisplay, diagnostics: inout DiagnosticList) -> [RenderedRequest] {
        guard account.isEnabled else { return [] }
        var requests: [RenderedRequest] = []
        for (service, seen) in subscriptions(of: account) {
            for reporter in Reporter.allCases {
                guard var request = builder.request(for: seen, reporter: reporter, display: display, diagnostics: &diagnostics) else { continue }
                request.service = service
                requests.append(request)
            }
        }
        return requests
    }
}
