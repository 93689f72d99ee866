import PushBackend
import PushConfig
import PushTemplates
import PushSystem

/// Turns accounts into HTTP requests (SPEC §4): compiles each web-service template once per
/// builder (each copy that checks a run of accounts compiles its own), reports template
/// problems at their file, line and column, and renders requests for any account.
public struct RequestBuilder: Sendable {
    /// The account templates this builder compiles and renders with.
    private(set) var templates: AccountTemplates
    public var configuration: Configuration { templates.configuration }

    /// The targets of the last URL template text and the last rendered URL: a file's accounts
    /// share them, and reading them again for each account was much of the time to plan one.
    private var templateTargets = URLTargetCache()
    private var renderedTargets = URLTargetCache()

    /// `host:port` of a URL this builder rendered (``URLText/hostAndPort(of:)``), one string
    /// shared by the requests to one host.
    mutating func hostAndPort(of url: String) -> String {
        renderedTargets.hostAndPort(of: url)
    }

    /// A custom header's name and its compiled value.
    private struct HeaderTemplate {
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
    private static let userAgentHeaders: [(name: String, value: String)] = [("User-Agent", userAgent)]

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
    private func stillPassed(_ passed: [Bool]?) -> [Bool]? {
        templates.builtinsHoldHeaderForbiddenBytes ? nil : passed
    }

    private mutating func check(_ indices: Range<Int>, of accounts: [Account], skipping passed: [Bool]?,
                                into diagnostics: inout DiagnosticList) {
        for index in indices where passed?[index] != true {
            check(accounts[index], into: &diagnostics)
        }
    }

    private mutating func check(_ account: Account, into diagnostics: inout DiagnosticList) {
        guard account.isEnabled else { return }
        var hasPushURL = false
        for reporter in Reporter.allCases where account.values.contains(reporter.tableKey(.url)) {
            if reporter == .pushTokenReporter { hasPushURL = true }
            checkRequest(for: account, reporter: reporter, diagnostics: &diagnostics)
        }
        // A value written but unreadable (an unset !env) was reported where it is written.
        if !hasPushURL && account.services.isEmpty && !account.writes(Reporter.pushTokenReporter.tableKey(.url)) {
            diagnostics.warning("the account has no pushTokenReporterUrl and no services, so nothing is reported for it",
                                file: account.file, at: account.position, account: account.id)
        }
        if hasPushURL, !account.writes(Self.selectorKey),
           !account.writes(Self.pushTokenOtherKey), !account.writes(Self.pushTokenIncomingCallKey) {
            diagnostics.warning("the account has no device values (selector, pushTokenOther, pushTokenIncomingCall); its report carries no token",
                                file: account.file, at: account.position, account: account.id)
        }
    }

    private static let selectorKey = AccountValueTable.PreparedKey("selector")
    private static let pushTokenOtherKey = AccountValueTable.PreparedKey("pushTokenOther")
    private static let pushTokenIncomingCallKey = AccountValueTable.PreparedKey("pushTokenIncomingCall")

    // MARK: Checking while loading

    /// Set while ``passesWithoutRendering(_:)`` checks: a request that needs rendering with its
    /// values is not rendered, and `deferredRendering` says so.
    private var defersRendering = false
    private var deferredRendering = false

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

    // MARK: Rendering

    /// The request `reporter` sends for `account`, or nil when the account has no `<reporter>Url`
    /// or a problem (added to `diagnostics`) prevents it. Without `fingerprinted`, its
    /// ``RenderedRequest/fingerprint`` is left empty (it costs a SHA-256 of the request).
    public mutating func request(for account: Account, reporter: Reporter, display: SecretDisplay = .asSent,
                                 fingerprinted: Bool = true, diagnostics: inout DiagnosticList) -> RenderedRequest? {
        guard let prepared = prepare(account, reporter: reporter, diagnostics: &diagnostics) else { return nil }
        return render(prepared, account: account, reporter: reporter, display: display, fingerprinted: fingerprinted,
                      diagnostics: &diagnostics)
    }

    /// A request's templates compiled and its settings read, before any rendering.
    private struct PreparedRequest {
        var urlValue: ConfigValue
        var url: Template
        var contentType: String
        var bodyFormat: BodyFormat
        var postDataValue: ConfigValue?
        var body: Template?
        var method: String
        var headerTemplates: [HeaderTemplate]
        var authUsername: PlacedTemplate?
        var authPassword: PlacedTemplate?
        var timeout: Duration?
        /// Why the request is not sent (a value that is a secret as a whole, bound for plain http
        /// to a host that is not loopback), or nil.
        var refusal: String?
        /// The host, when the request goes over plain http to one that is not loopback: its
        /// secrets are sent as `********` (known from the template: no placeholder may stand in
        /// the host).
        var withholdingHost: String?
    }

    /// Validates what `reporter`'s keys say for `account` and compiles its templates; nil when
    /// the account has no `<reporter>Url` or a problem (added to `diagnostics`) prevents the request.
    private mutating func prepare(_ account: Account, reporter: Reporter, diagnostics: inout DiagnosticList) -> PreparedRequest? {
        guard let urlValue = account.values[reporter.tableKey(.url)] else { return nil }
        var failed = false
        templates.beginRequest()

        let contentTypeValue = account.values[reporter.tableKey(.contentType)]
        let contentType = contentTypeValue?.text ?? "application/x-www-form-urlencoded"
        let bodyFormat = BodyFormat(contentType: contentType)

        let hasScheme = URLText.hasHTTPPrefix(urlValue.text)
        if !hasScheme {
            templates.report(.error, "\(reporter.key(.url)) must start with http:// or https://", at: urlValue, diagnostics: &diagnostics)
            failed = true
        }
        // Without its scheme the URL's parts cannot be told apart: its placeholders are checked
        // as text, not reported as standing in a scheme or host they are not in.
        let url = templates.compile(urlValue, kind: hasScheme ? .url : .plain, diagnostics: &diagnostics)
        if url == nil { failed = true }
        if hasScheme, let url, let (offset, problem) = literalProblem(of: url) {
            templates.report(.error, "\(reporter.key(.url)) \(problem.message)", at: urlValue, offset: offset, diagnostics: &diagnostics)
            failed = true
        }

        var body: Template?
        let postDataValue = account.values[reporter.tableKey(.postData)]
        if let postData = postDataValue, !postData.text.isEmpty {
            body = templates.compile(postData, kind: .body(bodyFormat), diagnostics: &diagnostics)
            if body == nil { failed = true }
            if bodyFormat == .raw, let contentTypeValue {
                templates.report(.warning, "Content-Type '\(contentTypeValue.shown)' has no encoding rule, so values go into the body as they are",
                       at: contentTypeValue, diagnostics: &diagnostics)
            }
        }

        var method = body == nil ? "GET" : "POST"
        if let methodValue = account.values[reporter.tableKey(.method)] {
            let upper = methodValue.text.uppercased()
            if ["GET", "POST", "PUT", "HEAD", "DELETE"].contains(upper) {
                method = upper
                if body != nil, upper == "GET" || upper == "HEAD" {
                    templates.report(.warning, "\(upper) requests carry no body, so \(reporter.key(.postData)) is not sent",
                           at: methodValue, diagnostics: &diagnostics)
                    body = nil
                }
            } else {
                templates.report(.error, "\(reporter.key(.method)) must be GET, POST, PUT, HEAD or DELETE, not '\(methodValue.shown)'",
                       at: methodValue, diagnostics: &diagnostics)
                failed = true
            }
        }

        var headerTemplates: [HeaderTemplate] = []
        if let custom = account.values[reporter.tableKey(.customHeaders)] {
            if let parsed = customHeaders(custom, account: account, diagnostics: &diagnostics) {
                headerTemplates = parsed
            } else {
                failed = true
            }
        }

        var authUsername: PlacedTemplate?
        var authPassword: PlacedTemplate?
        if let username = account.values[reporter.tableKey(.authUsername)] {
            authUsername = templates.compile(username, kind: .plain, diagnostics: &diagnostics)
                .map { PlacedTemplate(template: $0, origin: username) }
            if authUsername == nil { failed = true }
            if let password = account.values[reporter.tableKey(.authPassword)] {
                authPassword = templates.compile(password, kind: .plain, diagnostics: &diagnostics)
                    .map { PlacedTemplate(template: $0, origin: password) }
                if authPassword == nil { failed = true }
            }
        }

        var timeout: Duration?
        if let timeoutValue = account.values[reporter.tableKey(.timeout)] {
            if let parsed = DurationParser.parse(timeoutValue.text), parsed > .zero {
                timeout = parsed
            } else {
                templates.report(.error, "\(reporter.key(.timeout)) must be a duration such as 10s, not '\(timeoutValue.shown)'",
                       at: timeoutValue, diagnostics: &diagnostics)
                failed = true
            }
        }
        // A value that is a secret as a whole cannot be masked: over plain http to a host that is
        // not loopback (the host cannot hold a placeholder, so it is known here), nothing is sent.
        var refusal: String?
        var withholdingHost: String?
        if let target = templateTargets.target(of: urlValue.text), target.scheme == "http", !target.isLoopback {
            withholdingHost = target.host
            let whole: [(ConfigValue?, WebServiceKey)] = [(urlValue, .url), (postDataValue, .postData),
                                                          (account.values[reporter.tableKey(.customHeaders)], .customHeaders),
                                                          (account.values[reporter.tableKey(.authUsername)], .authUsername)]
            if let (secret, suffix) = whole.first(where: { $0.0?.isSecret == true }), let secret {
                let why = "\(reporter.key(suffix)) is a secret and \(reporter.key(.url)) is plain http to \(target.host), "
                    + "which is not loopback, so the request is not sent; use https"
                refusal = why
                templates.report(.warning, why, at: secret, diagnostics: &diagnostics)
            }
        }
        // Checked before giving up on a failed request, so one run reports every problem.
        templates.checkAccountReferences(account: account, diagnostics: &diagnostics)
        guard !failed, let url else {
            // A JSON body is checked even so: its problem would otherwise show only once the
            // others are mended.
            if bodyFormat == .json, let body, let postDataValue {
                checkJSON(body, origin: postDataValue, account: account, reporter: reporter, diagnostics: &diagnostics)
            }
            return nil
        }
        return PreparedRequest(urlValue: urlValue, url: url, contentType: contentType, bodyFormat: bodyFormat,
                               postDataValue: postDataValue, body: body, method: method, headerTemplates: headerTemplates,
                               authUsername: authUsername, authPassword: authPassword, timeout: timeout, refusal: refusal,
                               withholdingHost: withholdingHost)
    }

    /// Renders a prepared request; nil when a value cannot stand where it is placed, or the
    /// result is not well-formed (problems added to `diagnostics`).
    private mutating func render(_ prepared: PreparedRequest, account: Account, reporter: Reporter, display: SecretDisplay,
                                 fingerprinted: Bool, diagnostics: inout DiagnosticList) -> RenderedRequest? {
        let id = account.id
        let (urlValue, url, contentType, bodyFormat) = (prepared.urlValue, prepared.url, prepared.contentType, prepared.bodyFormat)
        let (postDataValue, body, method, headerTemplates) = (prepared.postDataValue, prepared.body, prepared.method,
                                                              prepared.headerTemplates)
        let (authUsername, authPassword, timeout) = (prepared.authUsername, prepared.authPassword, prepared.timeout)
        let values = templates.values(for: account)
        do throws(RenderFailure) {
            let revealedURL = try templates.render(url, values, .reveal, origin: urlValue)
            guard let target = renderedTargets.target(of: revealedURL) else {
                reportNoHost(reporter: reporter, at: urlValue, diagnostics: &diagnostics)
                return nil
            }
            let withhold = target.scheme == "http" && !target.isLoopback
            let sendMasking: SecretMasking = withhold ? .stars : .reveal
            let displayMasking: SecretMasking
            switch display {
            case .asSent: displayMasking = sendMasking
            case .stars: displayMasking = .stars
            case .shellVariables where withhold:
                // The request withholds its secrets; a runnable preview must not send them either.
                displayMasking = .stars
            case .shellVariables:
                displayMasking = .replace { slot in slot.map { AccountTemplates.secretMarker(values.secretName(at: $0)) } ?? "********" }
            }

            /// A value of the request that is itself a secret (`…PostData: !env BODY`, a key named
            /// like a password), as `masking` shows it: whole, or not at all (SPEC §12: its
            /// placeholders are not the only secret in it).
            func renderPiece(_ template: Template, origin: ConfigValue, suffix: WebServiceKey,
                             _ masking: SecretMasking) throws(RenderFailure) -> String {
                guard origin.isSecret, case .replace = masking else {
                    return try templates.render(template, values, masking, origin: origin)
                }
                // Markers only for what a shell variable can stand for whole; header values get stars.
                guard suffix != .customHeaders, case .shellVariables = display, !withhold else { return "********" }
                return origin.displayed(.shellVariables, key: reporter.key(suffix), maySendSecrets: true)
            }

            /// Renders the whole request; credentials use `credentialMasking` (Digest never puts the
            /// password on the wire, so a request as sent fills it even over plain http).
            func renderAll(_ masking: SecretMasking, credentialMasking: SecretMasking,
                           renderedURL: String? = nil) throws(RenderFailure) -> RenderedRequest {
                // One array for every request that adds no header (most GET reports): each kept
                // request held a copy of its own.
                var headers = Self.userAgentHeaders
                var secretHeaders: [String] = []
                var renderedBody: String?
                if let body, let postDataValue { renderedBody = try renderPiece(body, origin: postDataValue, suffix: .postData, masking) }
                if renderedBody != nil { headers.append(("Content-Type", contentType)) }
                for header in headerTemplates {
                    let value = try renderPiece(header.value.template, origin: header.value.origin, suffix: .customHeaders, masking)
                    if header.value.origin.isSecret || header.value.template.references.contains(where: { values.isSecret(at: $0.slot) }) {
                        secretHeaders.append(header.name)
                    }
                    if header.name.lowercased() == "content-type", let index = headers.firstIndex(where: { $0.name == "Content-Type" }) {
                        headers[index] = (header.name, value)
                    } else {
                        headers.append((header.name, value))
                    }
                }
                var credentials: RenderedRequest.Credentials?
                if let authUsername {
                    credentials = .init(
                        username: try renderPiece(authUsername.template, origin: authUsername.origin, suffix: .authUsername,
                                                  credentialMasking),
                        password: try authPassword.map { (p) throws(RenderFailure) in
                            try renderPiece(p.template, origin: p.origin, suffix: .authPassword, credentialMasking)
                        } ?? "")
                }
                let finalURL: String
                if let renderedURL {
                    finalURL = renderedURL
                } else {
                    finalURL = try renderPiece(url, origin: urlValue, suffix: .url, masking)
                }
                var request = RenderedRequest(account: id, reporter: reporter.rawValue, method: method, url: finalURL,
                                              headers: headers, body: renderedBody, credentials: credentials, timeout: timeout,
                                              fingerprint: "", secretsWithheld: false)
                request.secretHeaders = secretHeaders
                return request
            }

            // Nothing withheld: the URL as sent is the one already rendered to find its host.
            var sent = try renderAll(sendMasking, credentialMasking: .reveal, renderedURL: withhold ? nil : revealedURL)
            if withhold {
                // Withheld only if a secret was actually in the request.
                let revealed = try renderAll(.reveal, credentialMasking: .reveal, renderedURL: revealedURL)
                sent.secretsWithheld = revealed.url != sent.url || revealed.body != sent.body
                    || !revealed.headers.elementsEqual(sent.headers) { $0.name == $1.name && $0.value == $1.value }
                // A value that is a secret as a whole cannot be sent masked: the request is not sent.
                sent.refusal = prepared.refusal
            }
            if bodyFormat == .json, let rendered = sent.body, let problem = JSONValidator.problem(in: rendered) {
                reportInvalidJSON(problem, reporter: reporter, at: postDataValue ?? urlValue, account: id, diagnostics: &diagnostics)
                return nil
            }
            if let problem = Self.sizeProblem(sent) {
                // Said where the large part is written: its header, else the body, else the URL.
                let place = problem.header.flatMap { name in prepared.headerTemplates.first { $0.name == name }?.value.origin }
                    ?? (problem.mostlyBody ? postDataValue : nil) ?? urlValue
                templates.report(.error, problem.message, at: place, diagnostics: &diagnostics, account: id)
                return nil
            }
            if fingerprinted { sent.fingerprint = Self.fingerprint(of: sent) }
            if case .asSent = display { return sent }
            var shownMasking = displayMasking
            var markers = false
            if case .shellVariables = display, !withhold {
                // Markers only where the request's own text has no U+0001 to confuse them with.
                markers = !sent.containsMarkerCharacter
                if !markers { shownMasking = .stars }
            }
            var shown = try renderAll(shownMasking, credentialMasking: shownMasking)
            shown.fingerprint = sent.fingerprint
            shown.hasSecretMarkers = markers
            return shown
        } catch {
            templates.reportRenderFailure(error, account: id, diagnostics: &diagnostics)
            return nil
        }
    }

    /// Renders a JSON body alone and reports it if it is not JSON, or cannot be rendered.
    private mutating func checkJSON(_ body: Template, origin: ConfigValue, account: Account, reporter: Reporter,
                                    diagnostics: inout DiagnosticList) {
        let values = templates.values(for: account)
        do throws(RenderFailure) {
            let rendered = try templates.render(body, values, .reveal, origin: origin)
            if let problem = JSONValidator.problem(in: rendered) {
                reportInvalidJSON(problem, reporter: reporter, at: origin, account: account.id, diagnostics: &diagnostics)
            }
        } catch {
            templates.reportRenderFailure(error, account: account.id, diagnostics: &diagnostics)
        }
    }

    private func reportNoHost(reporter: Reporter, at urlValue: ConfigValue, diagnostics: inout DiagnosticList) {
        templates.report(.error, "the rendered \(reporter.key(.url)) has no host", at: urlValue, diagnostics: &diagnostics)
    }

    private func reportInvalidJSON(_ problem: String, reporter: Reporter, at value: ConfigValue, account: String,
                                   diagnostics: inout DiagnosticList) {
        templates.report(.error, "the rendered \(reporter.key(.postData)) is not valid JSON: \(problem)", at: value,
               diagnostics: &diagnostics, account: account)
    }

    // MARK: Checking without rendering

    /// Checks `reporter`'s request for `account`, with the diagnostics `request(for:…)` gives.
    ///
    /// Rendering matters to a check only where values can make it fail or make the output
    /// ill-formed (``ValueSensitivity``). Where they cannot, whether the URL has a host and
    /// whether a JSON body is JSON are the same for every account: each template text is
    /// rendered for that once, and the answer reused (a body found not to be JSON is rendered
    /// for every account, as the message's byte offset moves with the values). For 100,000
    /// accounts this took most of the time to check them (rendering, and an HMAC in a header).
    private mutating func checkRequest(for account: Account, reporter: Reporter, diagnostics: inout DiagnosticList) {
        guard let prepared = prepare(account, reporter: reporter, diagnostics: &diagnostics) else { return }
        let values = templates.values(for: account)
        warnOfWithheldSecrets(prepared, values, reporter: reporter, diagnostics: &diagnostics)
        guard rendersAlikeForAllValues(prepared, values), !mayExceedSizeLimits(prepared, values),
              let hasHost = hostAnswer(prepared.url, values),
              bodyIsWellFormed(prepared, values) else {
            if defersRendering {
                deferredRendering = true
                return
            }
            // Checking needs the rendering, not the fingerprint (a SHA-256 of every request).
            _ = render(prepared, account: account, reporter: reporter, display: .asSent, fingerprinted: false,
                       diagnostics: &diagnostics)
            return
        }
        if !hasHost {
            reportNoHost(reporter: reporter, at: prepared.urlValue, diagnostics: &diagnostics)
        }
    }

    /// A request bound for plain http to a host that is not loopback carries its secrets as
    /// `********` (SPEC §12): said by `validate`, at the URL, rather than found out from the
    /// receiver's refusals. A request refused whole for it (``PreparedRequest/refusal``) is said
    /// elsewhere. Said once for the accounts that share the URL (`defaults`), not once for each.
    private func warnOfWithheldSecrets(_ prepared: PreparedRequest, _ values: AccountValues, reporter: Reporter,
                                       diagnostics: inout DiagnosticList) {
        guard prepared.refusal == nil, let host = prepared.withholdingHost else { return }
        var pieces = [prepared.url] + [prepared.body].compactMap { $0 } + prepared.headerTemplates.map(\.value.template)
        pieces += [prepared.authUsername, prepared.authPassword].compactMap { $0?.template }
        let secret = prepared.headerTemplates.contains { $0.value.origin.isSecret }
            || pieces.contains { piece in piece.references.contains { values.isSecret(at: $0.slot) } }
        guard secret else { return }
        templates.report(.warning, "\(reporter.key(.url)) is plain http to \(host), which is not "
                         + "loopback, so the request's secrets are sent as ******** there; use https", at: prepared.urlValue,
                         diagnostics: &diagnostics)
    }

    /// The most one rendered request may hold (SPEC §12): 1 MiB in all (URL, headers and body),
    /// 8 KiB a header line.
    static let maximumRequestSize = 1 << 20
    static let maximumHeaderLineSize = 8 << 10

    /// Why `request` is too large to send, naming the limit, or nil; with the header that is too
    /// long, or whether the body is the most of a request too large.
    static func sizeProblem(_ request: RenderedRequest) -> (message: String, header: String?, mostlyBody: Bool)? {
        let body = request.body?.utf8.count ?? 0
        var total = request.url.utf8.count + body
        for header in request.headers {
            let line = header.name.utf8.count + 2 + header.value.utf8.count
            if line > maximumHeaderLineSize {
                return ("the rendered header \(header.name) is \(line) bytes, more than the limit of 8 KiB for a header line", header.name, false)
            }
            total += line + 2
        }
        guard total > maximumRequestSize else { return nil }
        return ("the rendered \(request.reporter) request is \(total) bytes, more than the limit of 1 MiB for a request", nil, body * 2 > total)
    }

    /// Whether rendering `prepared` with `values` could reach a size limit: the templates' own
    /// text and the values they insert, each as large as its encoding could make it (six bytes
    /// for one, `\u0000`), stay under the smallest limit otherwise.
    private func mayExceedSizeLimits(_ prepared: PreparedRequest, _ values: AccountValues) -> Bool {
        var templates = [prepared.url] + prepared.headerTemplates.map(\.value.template)
        if let body = prepared.body { templates.append(body) }
        var bound = 0
        for template in templates {
            bound += template.source.utf8.count
            for reference in template.references { bound += 6 * values.value(at: reference.slot).utf8.count }
        }
        return bound > Self.maximumHeaderLineSize
    }

    /// Whether no value of `values` can make rendering `prepared` fail or change its form.
    private func rendersAlikeForAllValues(_ prepared: PreparedRequest, _ values: AccountValues) -> Bool {
        func alike(_ template: Template) -> Bool {
            switch template.valueSensitivity {
            case .none:
                return true
            case .lineBreaks(let slots):
                return !slots.contains { values.value(at: $0).utf8.contains(where: Template.isForbiddenInHeader) }
            case .unknown:
                return false
            }
        }
        guard alike(prepared.url), prepared.body.map(alike) ?? true,
              prepared.headerTemplates.allSatisfy({ alike($0.value.template) }) else { return false }
        return (prepared.authUsername.map { alike($0.template) } ?? true) && (prepared.authPassword.map { alike($0.template) } ?? true)
    }

    /// Answers about template texts whose answer is the same for all values, newest last.
    private var hostAnswers: [(source: String, hasHost: Bool)] = []
    /// The last URL template read by ``literalProblem(of:)``, with its answer: the accounts of a file
    /// nearly all share their URL template (`defaults`).
    private var lastLiteral: (text: String, problem: (offset: Int, problem: URLText.LiteralProblem)?)?

    /// ``URLText/literalProblem(in:placeholders:)`` of a compiled URL template, remembered for
    /// the last text.
    private mutating func literalProblem(of url: Template) -> (offset: Int, problem: URLText.LiteralProblem)? {
        if let last = lastLiteral, last.text == url.source { return last.problem }
        let problem = URLText.literalProblem(in: url.source, placeholders: url.placeholderSpans)
        lastLiteral = (url.source, problem)
        return problem
    }
    /// JSON body templates that render to JSON whatever the values.
    private var wellFormedJSONBodies: [String] = []
    private static let answerCount = 8

    /// Whether `url` rendered has a host (the same for all values of a template that
    /// ``rendersAlikeForAllValues(_:_:)``); nil if it could not be rendered.
    private mutating func hostAnswer(_ url: Template, _ values: AccountValues) -> Bool? {
        if let known = hostAnswers.last(where: { $0.source == url.source }) { return known.hasHost }
        guard let rendered = try? url.render(values, masking: .reveal) else { return nil }
        let hasHost = URLText.target(of: rendered) != nil
        if hostAnswers.count == Self.answerCount { hostAnswers.removeFirst() }
        hostAnswers.append((url.source, hasHost))
        return hasHost
    }

    /// Whether `prepared`'s body, rendered, is what its Content-Type says (only JSON is
    /// checked). False when it is not, or could not be rendered: then each account's request is
    /// rendered, as the problem's message gives a byte offset that moves with the values.
    private mutating func bodyIsWellFormed(_ prepared: PreparedRequest, _ values: AccountValues) -> Bool {
        guard prepared.bodyFormat == .json, let body = prepared.body else { return true }
        if wellFormedJSONBodies.contains(body.source) { return true }
        guard let rendered = try? body.render(values, masking: .reveal), JSONValidator.problem(in: rendered) == nil else {
            return false
        }
        if wellFormedJSONBodies.count == Self.answerCount { wellFormedJSONBodies.removeFirst() }
        wellFormedJSONBodies.append(body.source)
        return true
    }

    // MARK: Compiling

    /// A header line of a custom headers value: its name, and its value's text and byte offset.
    private struct HeaderLine {
        var name: String
        var valueOffset: Int
        var valueText: String
    }

    /// The last custom headers text whose lines read without a problem, with those lines:
    /// accounts of a file share their `defaults:` headers, and reading them for each was a
    /// tenth of the time to check a JSON request.
    private var lastHeaderLines: (text: String, lines: [HeaderLine])?

    private mutating func customHeaders(_ value: ConfigValue, account: Account,
                                        diagnostics: inout DiagnosticList) -> [HeaderTemplate]? {
        var failed = false
        let lines: [HeaderLine]
        if let last = lastHeaderLines, last.text == value.text {
            lines = last.lines
        } else {
            // Into a list of its own: `diagnostics` drops a repeat (another account's same
            // warning), which would look like a text read without a word said.
            var found = DiagnosticList()
            (lines, failed) = headerLines(value, diagnostics: &found)
            diagnostics.append(contentsOf: found.all)
            // Only a text read without a word said is read alike for another account.
            lastHeaderLines = !failed && found.all.isEmpty ? (value.text, lines) : nil
        }
        var result: [HeaderTemplate] = []
        result.reserveCapacity(lines.count)
        for line in lines {
            guard let template = templates.compile(value, kind: .headerValue, baseOffset: line.valueOffset,
                                                   text: line.valueText, diagnostics: &diagnostics) else {
                failed = true
                continue
            }
            result.append(HeaderTemplate(name: line.name, value: PlacedTemplate(template: template, origin: value)))
        }
        return failed ? nil : result
    }

    /// The `Name: value` lines of a custom headers value, and whether one could not be read
    /// (problems added to `diagnostics`).
    private func headerLines(_ value: ConfigValue, diagnostics: inout DiagnosticList) -> (lines: [HeaderLine], failed: Bool) {
        var lines: [HeaderLine] = []
        var failed = false
        var lineStart = 0
        let bytes = Array(value.text.utf8)
        // Split on LF bytes (a String split would keep "\r\n" together as one character).
        for lineBytes in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            defer { lineStart += lineBytes.count + 1 }
            let line = lineBytes.last == 0x0D ? lineBytes.dropLast() : lineBytes[...]
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
                let shown = value.isSecret ? "********" : String(decoding: line, as: UTF8.self)
                templates.report(.error, "a custom header line must read 'Name: value', not '\(shown)'", at: value, offset: lineStart, diagnostics: &diagnostics)
                failed = true
                continue
            }
            var nameBytes = line[..<colon]
            while let first = nameBytes.first, first == 0x20 || first == 0x09 { nameBytes = nameBytes.dropFirst() }
            while let last = nameBytes.last, last == 0x20 || last == 0x09 { nameBytes = nameBytes.dropLast() }
            let name = String(decoding: nameBytes, as: UTF8.self)
            if let percent = nameBytes.firstIndex(of: UInt8(ascii: "%")) {
                templates.report(.error, "a placeholder cannot stand in a header name", at: value, offset: percent, diagnostics: &diagnostics)
                failed = true
                continue
            }
            guard !name.isEmpty, nameBytes.allSatisfy(Self.isTokenByte) else {
                templates.report(.error, "'\(value.isSecret ? "********" : name)' is not a valid header name", at: value, offset: lineStart,
                       diagnostics: &diagnostics)
                failed = true
                continue
            }
            var valueStart = colon + 1
            while valueStart < line.endIndex, line[valueStart] == 0x20 || line[valueStart] == 0x09 { valueStart += 1 }
            let headerText = String(decoding: line[valueStart...], as: UTF8.self)
            switch name.lowercased() {
            case "user-agent":
                templates.report(.warning, "User-Agent is always \(Self.userAgent); this header is not sent",
                       at: value, offset: lineStart, diagnostics: &diagnostics)
                continue
            case "content-type":
                templates.report(.warning, "set the body's type with the ContentType key, so that values are encoded for it",
                       at: value, offset: lineStart, diagnostics: &diagnostics)
            default:
                break
            }
            if lines.contains(where: { $0.name.lowercased() == name.lowercased() }) {
                templates.report(.warning, "the header \(name) is given twice; both lines are sent", at: value, offset: lineStart, diagnostics: &diagnostics)
            }
            lines.append(HeaderLine(name: name, valueOffset: valueStart, valueText: headerText))
        }
        return (lines, failed)
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
        return Fingerprint.sha256(fields)
    }
}

extension RequestBuilder: EarlyAccountChecker {
    /// What `validate` checks accounts with while they load: a builder of the configuration
    /// loaded so far, with `hostname` and no installation id (`%installid%` as `<installid>`).
    public static func earlyChecker(hostname: String) -> @Sendable (Configuration) -> any EarlyAccountChecker {
        { configuration in RequestBuilder(configuration: configuration, sources: [:], installID: nil, hostname: hostname) }
    }
}
