#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What loading may consult outside the files: environment variables and the template search path.
///
/// Tests build one in code; the CLI uses ``current()``.
public struct LoaderEnvironment: Sendable {
    /// Environment variables (`!env NAME`, `$CREDENTIALS_DIRECTORY`, `$STATE_DIRECTORY`).
    public var variables: [String: String]
    /// Folders searched for `use:` templates after the `templates/` folder beside the config file.
    public var templateSearchPath: [String]
    /// The `%hostname%` built-in.
    public var hostname: String
    /// The account keys the backends act on, beyond the device values and an account's own
    /// keys (`id`, `username`, …): a key that is a near miss of one is a typo (SPEC §2). The
    /// backends give them (``PushBackend/Backend``); loading alone knows none.
    public var backendAccountKeys: [String]

    public init(variables: [String: String] = [:], templateSearchPath: [String] = LoaderEnvironment.installedTemplates,
                hostname: String = "localhost", backendAccountKeys: [String] = []) {
        self.variables = variables
        self.templateSearchPath = templateSearchPath
        self.hostname = hostname
        self.backendAccountKeys = backendAccountKeys
    }

    /// Where `make install` puts the shipped templates.
    public static let installedTemplates = ["/usr/share/pushreporter/templates", "/usr/local/share/pushreporter/templates"]

    /// The process environment; `$PUSHREPORTER_TEMPLATES` (colon-separated) comes before the installed folders.
    public static func current() -> LoaderEnvironment {
        var variables: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            pointer += 1
        }
        var path = (variables["PUSHREPORTER_TEMPLATES"] ?? "").split(separator: ":").map(String.init)
        path += installedTemplates
        var name = [CChar](repeating: 0, count: 256)
        let hostname = gethostname(&name, name.count) == 0
            ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "localhost"
        return LoaderEnvironment(variables: variables, templateSearchPath: path, hostname: hostname)
    }
}
