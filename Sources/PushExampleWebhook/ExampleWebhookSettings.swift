import PushBackend
import PushConfig

/// The settings of one `services:` entry of `type: example-webhook`: its `url`.
struct ExampleWebhookSettings: Sendable {
    var service: String
    /// Where tokens are POSTed: `https://…` (plain http only to loopback).
    var url: String

    /// Every setting an entry may give.
    static let keys = ["type", "url"]

    /// Reads `definition`, every problem said at its file, line and column; nil when the service
    /// cannot be used.
    init?(_ definition: ServiceDefinition, diagnostics: inout DiagnosticList) {
        service = definition.name
        var reader = SettingsReader(definition, keys: Self.keys, diagnostics: &diagnostics)
        url = ""
        if let value = reader.required("url", needs: "url", diagnostics: &diagnostics) {
            if let problem = URLText.endpointProblem(value.text) {
                reader.error("url \(problem), not '\(value.shown)'", at: "url", diagnostics: &diagnostics)
            }
            url = value.text
        }
        guard reader.usable else { return nil }
    }

    /// The usable services of this type in `context`; the others' problems go to `diagnostics`.
    static func services(_ context: BackendContext, diagnostics: inout DiagnosticList) -> [String: ExampleWebhookSettings] {
        var services: [String: ExampleWebhookSettings] = [:]
        for definition in context.services(ofType: ExampleWebhookBackend.type) {
            if let settings = ExampleWebhookSettings(definition, diagnostics: &diagnostics) { services[definition.name] = settings }
        }
        return services
    }
}
