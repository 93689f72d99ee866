/// Agent-wide settings: the `agent:` block. Only one file may set a given key.
public struct AgentSettings: Sendable, Hashable {
    /// `stateDirectory`: where state lives. Default `$STATE_DIRECTORY`, else `/var/lib/pushreporter`.
    public var stateDirectory: String?
    /// `timeout`: per request, unless `<prefix>Timeout` says otherwise. Default 30s.
    public var timeout: Duration = .seconds(30)
    /// `concurrency`: requests in flight, all hosts together. Default 32.
    public var concurrency: Int = 32
    /// `perHostConcurrency`: requests in flight to one host. Default 8.
    public var perHostConcurrency: Int = 8
    /// `retry`: the backoff of failed reports.
    public var retry = RetryPolicy()
    /// `reportInterval`: report again although nothing changed; nil (`off`, the default) never.
    public var reportInterval: Duration?
    /// `tls.caFile`: a PEM file of private CAs trusted besides the system store.
    public var tlsCAFile: String?
    /// `state`: a `postgres://` URI (libpq) of the database several agents share (SPEC §11); nil
    /// keeps the state in the state directory (SQLite). Never with a password in it.
    public var state: String?
    /// `statePassword`: the database's password, from `!credential`, `!file` or `!env` (else
    /// libpq reads `PGPASSWORD` or `~/.pgpass`). A secret.
    public var statePassword: String?
    /// `leaseTimeout`: how long a subscription stays with an agent that stopped renewing its
    /// lease (with shared state). Default 30s.
    public var leaseTimeout: Duration = .seconds(30)
    /// `listen`: where the agent's HTTP endpoint answers (`/metrics`, `/health`, webhooks);
    /// nil (the default) serves none.
    public var listen: ListenAddress?
    /// `trackingSpool`: a directory the long-running agent drains of push payloads to track
    /// (`*.json` files with an `event` key, SPEC §9.4), each deleted once all its actions are
    /// delivered; relative to the file that sets it. nil (the default): none.
    public var trackingSpool: String?
    /// `metrics.perAccount`: whether `/metrics` also writes each subscription's series (three
    /// per subscription: 300,000 lines a scrape at 100,000 accounts). Off by default: the
    /// endpoint's metrics are then the same size whatever the number of accounts.
    public var metricsPerAccount = false
    /// `removalGuard`: how many removals one start or reload may send before they are held
    /// (SPEC §14); nil (`off`) never holds any.
    public var removalGuard: RemovalGuard? = RemovalGuard()

    public init() {}

    /// Where the state is (SPEC §11): `agent.state` (a database), else the state directory.
    public func resolvedState(environment: [String: String]) -> String {
        state ?? resolvedStateDirectory(environment: environment)
    }

    /// The state directory to use: the configured one, else `$STATE_DIRECTORY`, else the default.
    public func resolvedStateDirectory(environment: [String: String]) -> String {
        if let stateDirectory { return stateDirectory }
        if let fromSystemd = environment["STATE_DIRECTORY"], !fromSystemd.isEmpty {
            // systemd may list several directories separated by colons; the first is ours.
            return String(fromSystemd.split(separator: ":").first ?? Substring(fromSystemd))
        }
        return "/var/lib/pushreporter"
    }
}

/// `retry:` — nominal delay `min(max, initial × multiplier^(attempt−1))`, drawn in `[nominal/2, nominal]`.
public struct RetryPolicy: Sendable, Hashable {
    /// `initial`: the first retry's nominal delay. Default 5s.
    public var initial: Duration = .seconds(5)
    /// `multiplier`: growth per attempt. Default 2.
    public var multiplier: Double = 2
    /// `max`: the longest nominal delay. Default 30m.
    public var max: Duration = .seconds(1800)
    /// `maxRetryAfter`: the longest a `Retry-After` is honoured. Default 1h.
    public var maxRetryAfter: Duration = .seconds(3600)

    public init() {}
}

/// `agent.listen`: a host (a numeric IPv4 or IPv6 address, or `localhost`) and a port.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    /// Reads `127.0.0.1:9180`, `[::1]:9180`, `0.0.0.0:9180` or `localhost:9180`; nil otherwise.
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            return nil
        }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
            guard host.contains(":"), host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return nil }
        } else if host != "localhost" {
            let parts = host.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 4, parts.allSatisfy({ UInt8($0) != nil }) else { return nil }
        }
        self.host = host
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

extension AgentSettings {
    /// The `agent:` keys with what each holds, for `pushreporter schema`: exactly the keys the
    /// loader takes (a test holds the two lists equal).
    public static let schemaKeys: [SettingsSchema.Setting] = [
        .init("stateDirectory", .text, "Where the state (SQLite) and installid live (default $STATE_DIRECTORY, else /var/lib/pushreporter)."),
        .init("state", .text, "A postgres:// URI of the database several agents share (no password in it)."),
        .init("statePassword", .text, "The database's password: only as !credential NAME, !file PATH or !env NAME."),
        .init("leaseTimeout", .duration, "With PostgreSQL: how long a subscription stays with an agent that stopped renewing (at least 3s; default 30s)."),
        .init("timeout", .duration, "Per request, unless an account's <prefix>Timeout says otherwise (default 30s)."),
        .init("concurrency", .integer(minimum: 1, maximum: 100_000), "Requests in flight, all hosts together (default 32)."),
        .init("perHostConcurrency", .integer(minimum: 1, maximum: 100_000), "Requests in flight to one host (default 8)."),
        .init("retry", .object([
            .init("initial", .duration, "The first retry's nominal delay (default 5s)."),
            .init("multiplier", .text, "Growth per attempt, 1-100 (default 2)."),
            .init("max", .duration, "The longest nominal delay (default 30m)."),
            .init("maxRetryAfter", .duration, "The longest a server's Retry-After is honoured (default 1h)."),
        ]), "The backoff of failed reports."),
        .init("reportInterval", .durationOrOff, "Report again although nothing changed, e.g. 24h (default off)."),
        .init("tls", .object([.init("caFile", .text, "A PEM file of private CAs, trusted besides the system store (relative to the file).")]),
              "TLS settings."),
        .init("listen", .text, "The agent's HTTP endpoint, HOST:PORT (127.0.0.1:9180): /metrics, /livez, /readyz, webhooks (default off)."),
        .init("trackingSpool", .text, "A directory the agent drains of Adobe Campaign tracking payloads (*.json)."),
        .init("metrics", .object([.init("perAccount", .boolean, "Each subscription's series on /metrics too (default false).")]),
              "What /metrics writes."),
        .init("removalGuard", .guarded([
            .init("count", .integer(minimum: 0, maximum: 10_000_000), "More removed accounts than this in one start or reload are held (default 100)."),
            .init("share", .text, "And more than this share of the accounts in the state, a percentage such as 10% (default 10%)."),
        ]), "Holds a start's or reload's removals past a count and a share (SPEC §14), or off."),
    ]

    /// The `agent:` keys the loader takes.
    public static var loaderKeys: [String] { AgentKey.allCases.map(\.rawValue) }
}

/// The keys the loader takes at the top of a file.
public enum ConfigurationKeys {
    public static var topLevel: [String] { TopLevelKey.allCases.map(\.rawValue) }
}

/// `agent.removalGuard` (SPEC §14): a start or reload that would remove more than `count`
/// accounts and more than `share` of the accounts in the state holds those removals.
public struct RemovalGuard: Sendable, Hashable {
    /// More removed accounts than this may be held (default 100).
    public var count = 100
    /// And more than this share of the accounts in the state, from 0 to 1 (default 10 %).
    public var share = 0.10

    public init(count: Int = 100, share: Double = 0.10) {
        self.count = count
        self.share = share
    }

    /// Whether removing `removing` accounts of the `total` in the state is held.
    public func holds(removing: Int, of total: Int) -> Bool {
        removing > count && Double(removing) > share * Double(total)
    }

    /// `10%` as `10 %`, for messages.
    public var shareText: String {
        let percent = share * 100
        return percent == percent.rounded() ? "\(Int(percent))%" : "\(percent)%"
    }
}
