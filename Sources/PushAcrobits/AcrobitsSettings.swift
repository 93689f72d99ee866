import PushBackend
import PushConfig

/// The settings of the Acrobits web services (SPEC §2, §9.1): an account's own are its account
/// keys (`pushTokenReporterUrl`, … of ``Reporter`` and ``WebServiceKey``); a `type: acrobits`
/// service is a shared receiver whose settings are account keys too, defaults for the accounts
/// that name it.
enum AcrobitsSettings {
    /// The `type: acrobits` services of `context`, by name: shared receivers whose settings are
    /// account keys.
    static func services(_ context: BackendContext) -> [String: ServiceDefinition] {
        Dictionary(uniqueKeysWithValues: context.services(ofType: AcrobitsBackend.type).map { ($0.name, $0) })
    }
}
