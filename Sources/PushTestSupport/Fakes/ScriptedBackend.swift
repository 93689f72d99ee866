import PushBackend
import PushConfig
import PushTransport

/// A backend whose every answer comes from the test: it plans nothing from a configuration (the
/// tests hand the agent its plans), checks nothing, and answers each batch of requests with
/// `answer`. For the agent's own behaviour (refused credentials, confirmations later), where a
/// real backend's wire format would only be in the way.
public struct ScriptedBackend: Backend {
    public let type: String
    private let answer: @Sendable ([SubscriptionRequest]) async -> [Outcome]

    /// - Parameters:
    ///   - type: the `type:` its services have.
    ///   - answer: the outcome of each request of a batch, in order.
    public init(type: String, answer: @escaping @Sendable ([SubscriptionRequest]) async -> [Outcome]) {
        self.type = type
        self.answer = answer
    }

    /// Answers every request with `outcome`.
    public init(type: String, always outcome: Outcome) {
        self.init(type: type) { requests in requests.map { _ in outcome } }
    }

    /// A planner with nothing to plan.
    public struct NoPlans: SubscriptionPlanner {
        public init() {}
        public mutating func plans(for account: Account, diagnostics: inout DiagnosticList) -> [SubscriptionPlan] { [] }
        public mutating func preview(_ account: Account, display: SecretDisplay, diagnostics: inout DiagnosticList) -> [RenderedRequest] { [] }
    }

    public func check(_ context: BackendContext, skipping passedEarly: [Bool]?, diagnostics: inout DiagnosticList) {}
    public func planner(_ context: BackendContext, diagnostics: inout DiagnosticList) -> any SubscriptionPlanner { NoPlans() }
    public func cleanupRequest(account: String, service: String, stored: String) -> SubscriptionRequest? { nil }

    public func send(_ requests: [SubscriptionRequest], transport: any HTTPTransport, defaultTimeout: Duration) async -> [Outcome] {
        await answer(requests)
    }
}
