import PushBackend
import PushConfig
import PushTemplates
import PushSystem

/// What `validate` proves of a request without rendering it for every value: sizes, hosts, bodies.
extension RequestBuilder {
    /// Checks `reporter`'s request for `account`, with the diagnostics `request(for:…)` gives.
    ///
    /// Rendering matters to a check only where values can make it fail or make the output
    /// ill-formed (``ValueSensitivity``). Where they cannot, whether the URL has a host and
    /// whether a JSON body is JSON are the same for every account: each template text is
    /// rendered for that once, and the answer reused (a body found not to be JSON is rendered
    /// for every account, as the message's byte offset moves with the values). For 100,000
    /// accounts this took most of the time to check them (rendering, and an HMAC in a header).
    mutating func checkRequest(for account: Account, reporter: Reporter, diagnostics: inout DiagnosticList) {
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
    func warnOfWithheldSecrets(_ prepared: PreparedRequest, _ values: AccountValues, reporter: Reporter,
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
    func mayExceedSizeLimits(_ prepared: PreparedRequest, _ values: AccountValues) -> Bool {
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
    func rendersAlikeForAllValues(_ prepared: PreparedRequest, _ values: AccountValues) -> Bool {
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


    /// ``URLText/literalProblem(in:placeholders:)`` of a compiled URL template, remembered for
    /// the last ``answerCount`` texts.
    mutating func literalProblem(of url: Template) -> (offset: Int, problem: URLText.LiteralProblem)? {
        if let known = literalAnswers.answer(to: url.source) { return known }
        let problem = URLText.literalProblem(in: url.source, placeholders: url.placeholderSpans)
        literalAnswers.remember(problem, for: url.source)
        return problem
    }

    /// Whether `url` rendered has a host (the same for all values of a template that
    /// ``rendersAlikeForAllValues(_:_:)``); nil if it could not be rendered.
    mutating func hostAnswer(_ url: Template, _ values: AccountValues) -> Bool? {
        if let known = hostAnswers.answer(to: url.source) { return known }
        guard let rendered = try? url.render(values, masking: .reveal) else { return nil }
        let hasHost = URLText.target(of: rendered) != nil
        hostAnswers.remember(hasHost, for: url.source)
        return hasHost
    }

    /// Whether `prepared`'s body, rendered, is what its Content-Type says (only JSON is
    /// checked). False when it is not, or could not be rendered: then each account's request is
    /// rendered, as the problem's message gives a byte offset that moves with the values.
    mutating func bodyIsWellFormed(_ prepared: PreparedRequest, _ values: AccountValues) -> Bool {
        guard prepared.bodyFormat == .json, let body = prepared.body else { return true }
        if wellFormedJSONBodies.answer(to: body.source) != nil { return true }
        guard let rendered = try? body.render(values, masking: .reveal), JSONValidator.problem(in: rendered) == nil else {
            return false
        }
        wellFormedJSONBodies.remember((), for: body.source)
        return true
    }
}
