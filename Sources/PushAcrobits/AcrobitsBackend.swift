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
///
/// Guide: docs/configuration.md (the account keys), docs/templates.md, docs/sending.md.
/// The parts: ``AcrobitsSettings``, ``AcrobitsPlanner`` (``RequestBuilder``), ``AcrobitsSender``.
public struct AcrobitsBackend: Backend {
    public static let type = "acrobits"
    public var type: String { Self.type }

    /// A `type: acrobits` service is a shared receiver: its settings are account keys, the
    /// defaults of the accounts that name it.
    public var settingsSchema: SettingsSchema? {
        SettingsSchema(doc: "A shared Acrobits-style web service: its settings are account keys, defaults for the accounts that name it.",
                       keys: ["type"] + accountKeys, described: accountKeyDocs, acceptsOtherSettings: true)
    }

    /// The web-service keys, with what they are (SPEC §2, docs/configuration.md).
    public var accountKeyDocs: [SettingsSchema.Setting] {
        Reporter.allCases.flatMap { reporter in
            WebServiceKey.allCases.map { key -> SettingsSchema.Setting in
                let name = reporter.key(key)
                let what = reporter == .pushTokenReporter ? "the token report" : "the removal report"
                return switch key {
                case .url: .init(name, .text, "The URL of \(what): a template over the account's values (%pushTokenOther%, %account[KEY]%).")
                case .postData: .init(name, .text, "The body of \(what), a template; sent with POST or PUT.")
                case .contentType: .init(name, .text, "The Content-Type of \(what)'s body, which decides how values are encoded in it.")
                case .method: .init(name, .oneOf(["GET", "POST", "PUT", "DELETE", "HEAD"]), "The method of \(what) (default GET, or POST with a body).")
                case .customHeaders: .init(name, .text, "Header lines of \(what), one per line, templates.")
                case .authUsername: .init(name, .text, "The HTTP Digest (or Basic over https) user of \(what).")
                case .authPassword: .init(name, .text, "The HTTP Digest (or Basic over https) password of \(what); a secret.")
                case .timeout: .init(name, .duration, "How long \(what) may take, instead of agent.timeout.")
                }
            }
        }
    }
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
        let services = AcrobitsSettings.services(context)
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
        AcrobitsPlanner(builder: RequestBuilder(context), services: AcrobitsSettings.services(context))
    }


    public func send(_ requests: [SubscriptionRequest], transport: any HTTPTransport, defaultTimeout: Duration) async -> [Outcome] {
        await AcrobitsSender.send(requests, transport: transport, defaultTimeout: defaultTimeout)
    }

    public var directSending: (any DirectSending)? { AcrobitsDirectSending() }

    public func deliveredParts(of delivery: SubscriptionRequest) -> DeliveredParts? {
        guard let payload = delivery.payload as? AcrobitsPayload else { return nil }
        var parts = DeliveredParts()
        parts.add(payload.request)
        return parts
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

extension RequestBuilder {
    /// A builder for the configuration of `context`.
    init(_ context: BackendContext) {
        self.init(configuration: context.configuration, sources: context.sources, installID: context.installID,
                  hostname: context.hostname)
    }
}
