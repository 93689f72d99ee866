import PushBackend
import PushConfig
import PushTemplates
import PushSystem

/// Turns accounts into HTTP requests (SPEC §4): compiles each web-service template once per
/// builder (each copy that checks a run of accounts compiles its own), reports template
/// problems at their file, line and column, and renders requests for any account.
public struct RequestBuilder: Sendable {
    /// The account templates this builder compiles and renders with.
    var templates: AccountTemplates
    public var configuration: Configuration { templates.configuration }

    /// The targets of the last URL template text and the last rendered URL: a file's accounts
    /// share them, and reading them again for each account was much of the time to plan one.
    var templateTargets = URLTargetCache()
    var renderedTargets = URLTargetCache()
    /// Answers about template texts whose answer is the same for all values.
    var hostAnswers = RecentAnswers<String, Bool>(capacity: answerCount)
    /// URL templates read by ``literalProblem(of:)``, with their answers: the accounts of a file
    /// nearly all share their URL templates (`defaults`), one a reporter.
    var literalAnswers = RecentAnswers<String, (offset: Int, problem: URLText.LiteralProblem)?>(capacity: answerCount)
    /// JSON body templates that render to JSON whatever the values.
    var wellFormedJSONBodies = RecentAnswers<String, Void>(capacity: answerCount)
    /// Custom headers texts whose lines read without a problem, with those lines: accounts of a
    /// file share their `defaults:` headers, and reading them for each was a tenth of the time
    /// to check a JSON request.
    var headerLineAnswers = RecentAnswers<String, [HeaderLine]>(capacity: answerCount)
    /// How many answers each of those keeps.
    static let answerCount = 8

    /// `host:port` of a URL this builder rendered (``URLText/hostAndPort(of:)``), one string
    /// shared by the requests to one host.
    mutating func hostAndPort(of url: String) -> String {
        renderedTargets.hostAndPort(of: url)
    }

    /// A custom header's name and its compiled value.
    struct HeaderTemplate {
        var name: String
        var value: PlacedTemplate
    }

    /// - Parameters:
    ///   - installID: the `%installid%` value (read from the state directory), nil to show `<installid>`.
    public init(configuration: Configuration, sources: [String: SourceText], installID: String?, hostname: String) {
        templates = AccountTemplates(configuration: configuration, sources: sources, installID: installID, hostname: hostname)
    }

    /// The `User-Agent` of every request (SPEC §4).
    static let userAgent = PushReporterVersion.userAgent
    /// The headers of a request that adds none.
    static let userAgentHeaders: [(name: String, value: String)] = [("User-Agent", userAgent)]

    // MARK: Checking (validate)

    /// Compiles every request of every enabled account and reports what rendering it would
    /// report (rendering only where values can matter), each problem once.
    ///
    /// Large configurations are checked on every processor: in runs of accounts, each with its
    /// own copy of the builder, taken by whichever thread is free (accounts differ in cost, so
    /// halves would not end together). The diagnostics are joined in account order, so the
    /// result is the same as checking one account after another. The copies' compiled templates
    /// are not kept (each copy numbers its variables itself), so a later `request(for:)` compiles
    /// again and reports a template's problems again.
    ///
    /// Accounts whose `passed` is true are left out: checked while they loaded, they were found
    /// to have no problem (see ``passesWithoutRendering(_:)``). `passed` is indexed like
    /// `configuration.accounts`; nil checks every account.
    ///
    /// Those checks render `%installid%` as `<installid>`, and a passed account used the values
    /// of built-in variables only to look for a byte a header cannot hold (CR, LF, NUL), where a
    /// header inserts values as they are: if one of this builder's holds such a byte, every
    /// account is checked.
    public mutating func checkAll(into diagnostics: inout DiagnosticList, skipping passed: [Bool]? = nil) {
        // Runs sized by the accounts left to check: each run's builder compiles every template.
        let remaining = stillPassed(passed).map { $0.count { !$0 } } ?? configuration.accounts.count
        checkAll(into: &diagnostics, runs: Processors.runs(accounts: remaining), skipping: passed)
    }

    /// `checkAll` in `runs` runs (tests compare it with one run).
    mutating func checkAll(into diagnostics: inout DiagnosticList, runs: Int, skipping passed: [Bool]? = nil) {
        let passed = stillPassed(passed)
        let accounts = configuration.accounts
        precondition(passed == nil || passed?.count == accounts.count, "passed is not indexed like the accounts")
        precondition(passed != nil || configuration.accountsLeftOut.count == 0,
                     "accounts left out while loading must be checked again: load them without leaving them out")
        guard runs > 1, !accounts.isEmpty else {
            check(accounts.indices, of: accounts, skipping: passed, into: &diagnostics)
            return
        }
        let builder = self
        let found = Processors.inRuns(count: accounts.count, runs: runs) { range in
            var copy = builder
            var found = DiagnosticList()
            copy.check(range, of: accounts, skipping: passed, into: &found)
            return found
        }
        for run in found {
            diagnostics.append(contentsOf: run.all)
        }
    }

    /// The early passes that still hold with this builder's built-in values (see ``checkAll(into:skipping:)``).
    func stillPassed(_ passed: [Bool]?) -> [Bool]? {
        templates.builtinsHoldHeaderForbiddenBytes ? nil : passed
    }

    mutating func check(_ indices: Range<Int>, of accounts: [Account], skipping passed: [Bool]?,
                                into diagnostics: inout DiagnosticList) {
        for index in indices where passed?[index] != true {
            check(accounts[index], into: &diagnostics)
        }
    }

    mutating func check(_ account: Account, into diagnostics: inout DiagnosticList) {
        guard account.isEnabled else { return }
        // Its template's error says it all: what the template would have given is not known.
        let missesATemplate = account.missesATemplate
        var hasPushURL = false
        for reporter in Reporter.allCases where account.values.contains(reporter.tableKey(.url)) {
            if reporter == .pushTokenReporter { hasPushURL = true }
            checkRequest(for: account, reporter: reporter, diagnostics: &diagnostics)
        }
        // A value written but unreadable (an unset !env) was reported where it is written.
        if !hasPushURL && account.services.isEmpty && !account.writes(Reporter.pushTokenReporter.tableKey(.url)) && !missesATemplate {
            diagnostics.warning("the account has no pushTokenReporterUrl and no services, so nothing is reported for it",
                                file: account.file, at: account.position, account: account.id)
        }
        if hasPushURL, !missesATemplate, !account.writes(Self.selectorKey),
           !account.writes(Self.pushTokenOtherKey), !account.writes(Self.pushTokenIncomingCallKey) {
            diagnostics.warning("the account has no device values (selector, pushTokenOther, pushTokenIncomingCall); its report carries no token",
                                file: account.file, at: account.position, account: account.id)
        }
    }

    static let selectorKey = AccountValueTable.PreparedKey("selector")
    static let pushTokenOtherKey = AccountValueTable.PreparedKey("pushTokenOther")
    static let pushTokenIncomingCallKey = AccountValueTable.PreparedKey("pushTokenIncomingCall")

    // MARK: Checking while loading

    /// Set while ``passesWithoutRendering(_:)`` checks: a request that needs rendering with its
    /// values is not rendered, and `deferredRendering` says so.
    var defersRendering = false
    var deferredRendering = false

    /// Whether checking `account` finds no problem at all, when that is known without rendering
    /// a request with its values; false when it finds one, or only `checkAll` can tell.
    ///
    /// For checking accounts while they load, with a builder made of the configuration loaded
    /// so far (its accounts left out). An account that passes passes with the whole
    /// configuration too: globals of later files only add names (a template naming one would
    /// not have passed), the key list of all accounts is read only for a key an account lacks
    /// (a problem), and file positions only place problems. Validate does not check such an
    /// account again.
    public mutating func passesWithoutRendering(_ account: Account) -> Bool {
        var found = DiagnosticList()
        defersRendering = true
        deferredRendering = false
        templates.resetIssueFlag()
        defer { defersRendering = false }
        check(account, into: &found)
        return found.all.isEmpty && !deferredRendering && !templates.sawTemplateIssues
    }

    // MARK: Helpers

    static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
    }

    /// SHA-256 (lower hex) of every field of `request` that is sent, each followed by a NUL byte.
    ///
    /// The fields are gathered into one buffer and hashed at once: one `update` call per field
    /// cost more in the calls (exclusivity checks, copy-on-write checks of the hasher) than in
    /// the hashing, and this runs for every request of every reload. The bytes hashed are the
    /// same, so the fingerprints kept in state stay valid.
    static func fingerprint(of request: RenderedRequest) -> String {
        let timeout = request.timeout.map { "\($0)" } ?? ""
        var fields: [String] = [request.reporter, request.method, request.url]
        fields.reserveCapacity(7 + 2 * request.headers.count)
        for header in request.headers {
            fields.append(header.name)
            fields.append(header.value)
        }
        fields.append(request.body ?? "\u{0}none")
        fields.append(request.credentials?.username ?? "")
        fields.append(request.credentials?.password ?? "")
        fields.append(timeout)
        return Fingerprint.subscription(fields)
    }
}

extension RequestBuilder: EarlyAccountChecker {
    /// What `validate` checks accounts with while they load: a builder of the configuration
    /// loaded so far, with `hostname` and no installation id (`%installid%` as `<installid>`).
    public static func earlyChecker(hostname: String) -> @Sendable (Configuration) -> any EarlyAccountChecker {
        { configuration in RequestBuilder(configuration: configuration, sources: [:], installID: nil, hostname: hostname) }
    }
}
