import PushBackend
import PushConfig
import PushScheduler
import PushTransport

/// The Acrobits web services (SPEC §2–§5, §9.1) as a backend: an account's own
/// `pushTokenReporterUrl` is its subscription to the service `acrobits` (``type``), its
/// `accountRemovalReporterUrl` the cleanup kept for it.
///
/// Each report goes alone (the receiver is each account's own URL), and a 429 or 503 makes only
/// that report wait: one slow host never holds back others (SPEC §5).
public struct AcrobitsBackend: Backend {
    public static let type = "acrobits"
    public var type: String { Self.type }
    public var plansWithoutServices: Bool { true }

    public init() {}

    public func earlyChecker(hostname: String) -> (@Sendable (Configuration) -> any EarlyAccountChecker)? {
        RequestBuilder.earlyChecker(hostname: hostname)
    }

    /// The web-service keys of both reporters (`pushTokenReporterUrl`, …, SPEC §2): a near
    /// miss of one is a typo.
    public var accountKeys: [String] {
        Reporter.allCases.flatMap { reporter in WebServiceKey.allCases.map { reporter.key($0) } }
    }


    public func check(_ context: BackendContext, skipping passedEarly: [Bool]?, diagnostics: inout DiagnosticList) {
        var builder = RequestBuilder(context)
        builder.checkAll(into: &diagnostics, skipping: passedEarly)
        // The accounts of shared receivers (`type: acrobits` services), each as its service sees it.
        let services = Self.services(context)
        guard !services.isEmpty else { return }
        var planner = AcrobitsPlanner(builder: builder, services: services)
        for account in context.configuration.accounts where account.isEnabled {
            for name in account.services.keys.sorted() where services[name] != nil {
                let shared = planner.sharedAccount(account, service: name)
                if account.values.contains(Reporter.pushTokenReporter.tableKey(.url)), shared.values.contains(Reporter.pushTokenReporter.tableKey(.url)),
                   account.services[name]?.values[Reporter.pushTokenReporter.key(.url)] == nil {
                    diagnostics.warning("the account's own pushTokenReporterUrl goes over the one of the service '\(name)', so both send the same report",
                                        file: account.file, at: account.services[name]?.position ?? account.position, account: account.id)
                }
                for reporter in Reporter.allCases where shared.values.contains(reporter.tableKey(.url)) {
                    _ = planner.builder.request(for: shared, reporter: reporter, display: .asSent, fingerprinted: false,
                                                diagnostics: &diagnostics)
                }
            }
        }
    }

    public func planner(_ context: BackendContext, diagnostics: inout DiagnosticList) -> any SubscriptionPlanner {
        AcrobitsPlanner(builder: RequestBuilder(context), services: Self.services(context))
    }

    /// The `type: acrobits` services of `context`, by name: shared receivers whose settings are
    /// account keys.
    static func services(_ context: BackendContext) -> [String: ServiceDefinition] {
        Dictionary(uniqueKeysWithValues: context.services(ofType: type).map { ($0.name, $0) })
    }

    public func send(_ requests: [SubscriptionRequest], transport: any HTTPTransport, defaultTimeout: Duration) async -> [Outcome] {
        var outcomes: [Outcome] = []
        for request in requests {
            guard let payload = request.payload as? AcrobitsPayload else {
                outcomes.append(.rejected("the request was not prepared by the Acrobits backend"))
                continue
            }
            var sent = payload.request
            sent.timeout = request.timeout ?? defaultTimeout
            outcomes.append(await Self.send(sent, transport: transport))
        }
        return outcomes
    }

    /// One attempt: send the request, then judge the response by SPEC §4's success rule.
    static func send(_ request: TransportRequest, transport: any HTTPTransport) async -> Outcome {
        let result: AttemptResult
        do {
            result = ResponseJudge.judge(try await transport.send(request), method: request.method)
        } catch let error as TransportError where error.isPermanent {
            // Refused before it left (too large, not a URL): the same request fails every time.
            return .rejected(error.message)
        } catch let error as TransportError where !error.isCancellation {
            result = .failed(ResponseJudge.failure(error))
        } catch {
            result = .failed(.cancelled)
        }
        switch result {
        case .delivered: return .delivered
        case .failed(let failure): return .retry(failure)
        }
    }

    public func cleanupRequest(account: String, service: String, stored: String) -> SubscriptionRequest? {
        guard let request = StoredRequest(text: stored) else { return nil }
        return Self.request(request.rendered(account: account), service: service, purpose: .cleanup)
    }

    /// A rendered request as the agent schedules it; `host` is its ``RenderedRequest/host``, when
    /// the caller has it already, and `shapes` and `packer` the caller's, when it makes many
    /// requests.
    static func request(_ rendered: RenderedRequest, service: String, purpose: SubscriptionRequest.Purpose,
                        host: String? = nil, shapes: inout ShapeCache, packer: inout RequestPacker) -> SubscriptionRequest {
        SubscriptionRequest(account: rendered.account, service: service,
                            shape: shapes.shape(family: type, purpose: purpose, label: rendered.reporter,
                                                host: host ?? rendered.host, timeout: rendered.timeout,
                                                logLabel: rendered.reporter == Reporter.accountRemovalReporter.rawValue ? "removal" : nil),
                            payload: AcrobitsPayload(packer.pack(rendered.transportRequest(defaultTimeout: .zero))))
    }

    /// A rendered request as the agent schedules it, made alone (a shape and a block of its own).
    static func request(_ rendered: RenderedRequest, service: String, purpose: SubscriptionRequest.Purpose) -> SubscriptionRequest {
        var shapes = ShapeCache()
        var packer = RequestPacker(sharingBlocks: false)
        return request(rendered, service: service, purpose: purpose, shapes: &shapes, packer: &packer)
    }
}

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

extension RequestBuilder {
    /// A builder for the configuration of `context`.
    init(_ context: BackendContext) {
        self.init(configuration: context.configuration, sources: context.sources, installID: context.installID,
                  hostname: context.hostname)
    }
}
