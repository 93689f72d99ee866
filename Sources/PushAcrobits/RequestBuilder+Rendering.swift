import PushBackend
import PushConfig
import PushTemplates
import PushSystem

/// A request rendered for an account and a reporter: prepared once per account (its templates
/// compiled), then rendered with the account's values.
extension RequestBuilder {
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
    struct PreparedRequest {
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
    mutating func prepare(_ account: Account, reporter: Reporter, diagnostics: inout DiagnosticList) -> PreparedRequest? {
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
    mutating func render(_ prepared: PreparedRequest, account: Account, reporter: Reporter, display: SecretDisplay,
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
    mutating func checkJSON(_ body: Template, origin: ConfigValue, account: Account, reporter: Reporter,
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

    func reportNoHost(reporter: Reporter, at urlValue: ConfigValue, diagnostics: inout DiagnosticList) {
        templates.report(.error, "the rendered \(reporter.key(.url)) has no host", at: urlValue, diagnostics: &diagnostics)
    }

    func reportInvalidJSON(_ problem: String, reporter: Reporter, at value: ConfigValue, account: String,
                                   diagnostics: inout DiagnosticList) {
        templates.report(.error, "the rendered \(reporter.key(.postData)) is not valid JSON: \(problem)", at: value,
               diagnostics: &diagnostics, account: account)
    }
}
