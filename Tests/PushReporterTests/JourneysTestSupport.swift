import Foundation
import PushTestSupport
import Testing

/// One account of a Journeys test configuration (SPEC §9.2): its device token, platform and the
/// Journeys services it names.
struct JourneysAccount: Sendable {
    var id: String
    /// `pushTokenOther`, the default `deviceToken`; nil leaves it out.
    var token: String?
    var platform = "ios"
    /// The services it names under its own `services:`, each with `userId: user-ID` unless
    /// `userIds` says otherwise.
    var services = ["journeys"]
    var userIds: [String: String] = [:]
    /// Further account lines, e.g. an Acrobits `pushTokenReporterUrl: …`.
    var extra: [String] = []

    init(_ id: String, token: String?, platform: String = "ios", services: [String] = ["journeys"],
         userIds: [String: String] = [:], extra: [String] = []) {
        self.id = id
        self.token = token
        self.platform = platform
        self.services = services
        self.userIds = userIds
        self.extra = extra
    }

    /// `user-ID`, or what `userIds` gives for `service`.
    func userId(_ service: String = "journeys") -> String { userIds[service] ?? "user-\(id)" }

    var yaml: String {
        var lines = ["  - id: \(id)"]
        if let token { lines.append("    pushTokenOther: \(token)") }
        lines += extra.map { "    " + $0 }
        if !services.isEmpty {
            lines.append("    services:")
            lines += services.map { "      \($0): {userId: \(userId($0)), platform: \(platform)}" }
        }
        return lines.joined(separator: "\n")
    }
}

/// A `customer-insights-journeys` entry under `services:`, pointed at a fake.
struct JourneysService: Sendable {
    var name = "journeys"
    /// Further settings, e.g. `batchSize: 1`; they come after the required ones.
    var settings: [String] = []
    /// The `apiToken` written; nil: the one the fake expects.
    var apiToken: String?
    /// `statusInterval` (small, so tests see the polls); nil leaves it out.
    var statusInterval: String? = "1s"

    init(_ name: String = "journeys", settings: [String] = [], apiToken: String? = nil, statusInterval: String? = "1s") {
        self.name = name
        self.settings = settings
        self.apiToken = apiToken
        self.statusInterval = statusInterval
    }

    func yaml(for fake: FakeJourneysServer) -> String {
        var lines = [
            "  \(name):",
            "    type: customer-insights-journeys",
            "    publicEndpoint: \(fake.baseURL)",
            "    orgId: \(fake.orgId)",
            "    mobileAppId: \(fake.mobileAppId)",
            "    apiToken: \(apiToken ?? fake.apiToken)",
        ]
        if let statusInterval { lines.append("    statusInterval: \(statusInterval)") }
        lines += settings.map { "    " + $0 }
        return lines.joined(separator: "\n")
    }
}

/// One row of `status --format json` (SPEC §9.0).
struct JourneysStatusRow: Decodable, Sendable {
    var account: String
    var service: String
    var state: String
    var attempts: Int
    var lastSuccess: String?
    var nextAttempt: String?
    var detail: String?
}

/// A fake Journeys server, a temporary directory with the configuration and the state, and the
/// commands the tests run against them.
final class JourneysBench: Sendable {
    let fake: FakeJourneysServer
    let files = TemporaryDirectory(prefix: "pushreporter-journeys")

    /// Fast retries: a test never waits for the default backoff.
    static let agentBlock = "agent:\n  retry: {initial: 100ms, multiplier: 2, max: 1s, maxRetryAfter: 5s}"

    init(_ fake: FakeJourneysServer? = nil) throws {
        self.fake = try fake ?? FakeJourneysServer()
    }

    var state: String { files.path + "/state" }
    var config: String { files.path + "/journeys.yaml" }

    /// A configuration of `services` (all on the fake) and `accounts`; `agent` adds lines under `agent:`.
    func yaml(_ accounts: [JourneysAccount], services: [JourneysService] = [JourneysService()], agent: [String] = []) -> String {
        ([Self.agentBlock] + agent.map { "  " + $0 } + ["services:"] + services.map { $0.yaml(for: fake) }
            + ["accounts:"] + accounts.map(\.yaml)).joined(separator: "\n") + "\n"
    }

    /// Writes the configuration file (see `yaml(_:services:agent:)`).
    func write(_ accounts: [JourneysAccount], services: [JourneysService] = [JourneysService()], agent: [String] = []) {
        files.write("journeys.yaml", yaml(accounts, services: services, agent: agent))
    }

    /// Writes the configuration of `accounts` and reloads the running `agent` with SIGHUP;
    /// waits for its summary line, `reloaded: N new, …` (SPEC §5).
    func reload(_ agent: RunningProcess, to accounts: [JourneysAccount], services: [JourneysService] = [JourneysService()],
                expecting summary: String, sourceLocation: SourceLocation = #_sourceLocation) {
        write(accounts, services: services)
        agent.signal(SIGHUP)
        #expect(agent.waitForStderr("reloaded: " + summary), "\(agent.stderr)", sourceLocation: sourceLocation)
    }

    /// `pushreporter ARGUMENTS --config FILE`, plus `--state-dir` for the commands that take it.
    func pushreporter(_ arguments: [String]) throws -> ProcessOutput {
        let takesState = ["run", "status", "remove"].contains(arguments.first ?? "")
        return try ProcessRunner.pushreporter(arguments + (arguments.first == "status" ? [] : ["--config", config])
            + (takesState ? ["--state-dir", state] : []))
    }

    /// `pushreporter run --once`.
    func runOnce(_ arguments: [String] = []) throws -> ProcessOutput {
        try pushreporter(["run", "--once"] + arguments)
    }

    /// The long-running `pushreporter run`, logging at debug: a confirmed registration is a
    /// debug line (see `RunningProcess.waitForConfirmation(of:count:)`).
    func startAgent(_ arguments: [String] = []) throws -> RunningProcess {
        try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", state, "--log-level", "debug"] + arguments)
    }

    /// `status --format json`, by `account/service`.
    func status() throws -> [String: JourneysStatusRow] {
        let output = try pushreporter(["status", "--format", "json"])
        #expect(output.status == 0, "\(output.stderr)")
        let rows = try JSONDecoder().decode([JourneysStatusRow].self, from: Data(output.stdout.utf8))
        return Dictionary(rows.map { ("\($0.account)/\($0.service)", $0) }) { first, _ in first }
    }

    /// The state of each subscription, by `account/service`.
    func states() throws -> [String: String] {
        try status().mapValues(\.state)
    }

    // MARK: What the fake received

    /// The endpoint of each request the fake received (`devices/batch`, `devices/status/`, …),
    /// from index `from`.
    func endpoints(from: Int = 0) -> [String] {
        fake.requests.dropFirst(from).map(Self.endpoint)
    }

    /// The path below `…/pushdeviceregistration/`, or the whole path for any other.
    static func endpoint(_ request: FakeJourneysServer.Request) -> String {
        guard let range = request.path.range(of: "/pushdeviceregistration/") else { return request.path }
        return String(request.path[range.upperBound...])
    }

    /// The requests whose body carries `text` (a device token, an API token).
    func requests(containing text: String) -> [FakeJourneysServer.Request] {
        fake.requests.filter { $0.bodyText.contains(text) }
    }

    /// The device tokens of the registrations accepted, in order.
    var registeredTokens: [String] { fake.registrations.map(\.deviceToken) }

    /// The device tokens of the cleanups accepted, in order.
    var cleanedTokens: [String?] { fake.cleanups.map(\.deviceToken) }

    /// The objects of the last request to `endpoint` (e.g. `devices/cleanup/batch`), or nil when
    /// there was none.
    func lastBatch(_ endpoint: String) -> [String]? {
        fake.requests.last { Self.endpoint($0) == endpoint }.map { Self.objects(inBatch: $0.bodyText) }
    }

    /// The objects of a batch body (`[{…},{…}]`) as sent, in order; the order of a batch is not
    /// the SPEC's, so tests compare them as a set.
    static func objects(inBatch body: String) -> [String] {
        guard body.hasPrefix("[{"), body.hasSuffix("}]") else { return [body] }
        let parts = body.dropFirst(2).dropLast(2).components(separatedBy: "},{")
        return parts.map { "{" + $0 + "}" }
    }

    /// The JSON registration object the agent sends for `account` (SPEC §9.2: keys in the seed's order).
    func registration(_ account: JourneysAccount, service: String = "journeys") -> String {
        let tokenKey = account.platform == "ios" ? "ApnsDeviceToken" : "FcmDeviceToken"
        return #"{"MobileAppId":"\#(fake.mobileAppId)","UserId":"\#(account.userId(service))","ApiToken":"\#(fake.apiToken)","\#(tokenKey)":"\#(account.token ?? "")"}"#
    }

    /// The JSON cleanup object of `account` with `token` (SPEC §9.2: keys in the seed's order).
    func cleanup(_ account: JourneysAccount, token: String, service: String = "journeys") -> String {
        #"{"MobileAppId":"\#(fake.mobileAppId)","ApiToken":"\#(fake.apiToken)","UserId":"\#(account.userId(service))","DeviceToken":"\#(token)"}"#
    }
}

extension RunningProcess {
    /// Stops the agent with SIGTERM and expects it to exit 0.
    func terminate(sourceLocation: SourceLocation = #_sourceLocation) {
        signal(SIGTERM)
        #expect(waitForExit() == 0, "\(stderr)", sourceLocation: sourceLocation)
    }

    /// Waits until the agent has logged `count` confirmations (or 202s without tracking) of the
    /// `service` registration of `account`: the agent itself has settled it, not only the fake
    /// answered. Needs `--log-level debug`.
    @discardableResult
    func waitForConfirmation(of account: String, service: String = "journeys", count: Int = 1,
                             sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        let confirmed = waitForStderr("\(account): \(service) registration delivered to ", count: count)
        #expect(confirmed, "\(account) not confirmed \(count) times: \(stderr)", sourceLocation: sourceLocation)
        return confirmed
    }

    /// Waits until the agent has sent every cleanup of `subscription` (`account/service`) and forgotten it.
    func waitForForgotten(_ subscription: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(waitForStderr("\(subscription): every cleanup delivered; the subscription is forgotten"), "\(stderr)",
                sourceLocation: sourceLocation)
    }
}

extension String {
    /// How many times the text holds `part`.
    func occurrences(of part: String) -> Int {
        components(separatedBy: part).count - 1
    }
}
