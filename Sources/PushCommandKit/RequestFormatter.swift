import PushAgent
import PushBackend
import PushConfig

/// Renders requests as `preview` prints them.
public enum RequestFormatter {
    /// `{account, service, reporter, kind, cleanup, method, url, headers, body}` (SPEC §7, and
    /// what the http format's titles say: `kind` names what the request is in its service,
    /// `registration` or `group removal`, null for an account's own web services; `cleanup`
    /// tells a removal from a delivery).
    /// `indent` starts each line but the first (for an object inside an array).
    public static func json(_ request: RenderedRequest, indent: String = "") -> String {
        let headers = JSONText.object(request.headers.map { ($0.name, JSONText.string($0.value)) }, indent: indent + "  ")
        return JSONText.object([
            ("account", JSONText.string(request.account)),
            ("service", JSONText.string(request.service)),
            ("reporter", JSONText.string(request.reporter)),
            ("kind", request.kind.map { JSONText.string($0) } ?? "null"),
            ("cleanup", "\(request.isCleanup)"),
            ("method", JSONText.string(request.method)),
            ("url", JSONText.string(request.url)),
            ("headers", headers),
            ("body", request.body.map { JSONText.string($0) } ?? "null"),
        ], indent: indent)
    }

    /// The raw HTTP/1.1 request, after a `###` separator line naming the account (as REST-client files do).
    public static func http(_ request: RenderedRequest) -> String {
        var lines = ["### \(title(request))"]
        if let credentials = request.credentials {
            lines.append("# answered with HTTP Digest (or Basic over https) as '\(credentials.username.displayEscaped)'")
        }
        let (host, target) = split(request.url)
        lines.append("\(request.method) \(target) HTTP/1.1")
        lines.append("Host: \(host)")
        // libcurl's own, sent unless the request has one.
        if !request.headers.contains(where: { $0.name.lowercased() == "accept" }) { lines.append("Accept: */*") }
        for header in request.headers { lines.append("\(header.name): \(header.value)") }
        guard let body = request.body else {
            // The transport sends a POST without a body with a length of zero.
            if request.method == "POST" { lines.append("Content-Length: 0") }
            return lines.joined(separator: "\n")
        }
        lines.append("Content-Length: \(body.utf8.count)")
        // Header lines end in LF for reading; the body is printed byte for byte, as sent.
        return lines.joined(separator: "\n") + "\n\n" + body
    }

    /// One runnable `curl` command; secrets become `"$NAME"` shell variables. `defaultTimeout`:
    /// `agent.timeout`, for a request without a timeout of its own.
    public static func curl(_ request: RenderedRequest, defaultTimeout: Duration? = nil) -> String {
        let word = { (text: String) in shellWord(text, markers: request.hasSecretMarkers) }
        var words = ["curl", "--fail-with-body", "-sS"]
        if request.method != "GET" || request.body != nil {
            words += request.method == "HEAD" ? ["--head"] : ["-X", request.method]
        }
        for header in request.headers {
            words += ["-H", word(header.name + ": " + header.value)]
        }
        if let body = request.body {
            words += ["--data-binary", word(body)]
        } else if request.method == "POST" {
            // As the transport sends it: a length of zero, and no Content-Type curl would add.
            if !request.headers.contains(where: { $0.name.lowercased() == "content-type" }) { words += ["-H", word("Content-Type:")] }
            words += ["--data-binary", word("")]
        }
        if let credentials = request.credentials {
            words += ["--anyauth", "-u", word(credentials.username + ":" + credentials.password)]
        }
        if let timeout = request.timeout ?? defaultTimeout {
            words += ["--max-time", String(Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)]
        }
        words.append(word(request.url))
        return "# \(title(request))\n" + variablesNote(request) + words.joined(separator: " ")
    }

    /// A comment line naming the shell variables the command reads, when it reads any. The
    /// shell puts a variable in as it holds it, where the agent encodes the value for its place:
    /// the line says how each must be held (URL-encoded in a URL or a form body, JSON-escaped in
    /// a JSON body).
    private static func variablesNote(_ request: RenderedRequest) -> String {
        guard request.hasSecretMarkers else { return "" }
        func names(_ text: String) -> [String] {
            let pieces = text.unicodeScalars.split(separator: "\u{1}", omittingEmptySubsequences: false)
            return pieces.indices.filter { $0 % 2 == 1 }.map { String(pieces[$0]) }
        }
        let contentType = request.headers.first { $0.name.lowercased() == "content-type" }?.value.lowercased() ?? ""
        let bodyEncoding = contentType.contains("json") ? "JSON-escaped"
            : contentType.contains("x-www-form-urlencoded") ? "URL-encoded" : nil
        // By variable, in order: each encoding it needs, with the places that need it.
        var order: [String] = []
        var needs: [String: [(encoding: String, places: [String])]] = [:]
        func add(_ text: String, _ encoding: String?, in place: String) {
            for name in names(text) {
                if needs[name] == nil { order.append(name); needs[name] = [] }
                guard let encoding else { continue }
                if let index = needs[name]!.firstIndex(where: { $0.encoding == encoding }) {
                    if !needs[name]![index].places.contains(place) { needs[name]![index].places.append(place) }
                } else {
                    needs[name]!.append((encoding, [place]))
                }
            }
        }
        add(request.url, "URL-encoded", in: "the URL")
        for header in request.headers { add(header.value, nil, in: "a header") }
        add(request.body ?? "", bodyEncoding, in: "the body")
        if let credentials = request.credentials { add(credentials.username + ":" + credentials.password, nil, in: "-u") }
        guard !order.isEmpty else { return "" }
        let named = order.map { name in
            let how = needs[name]!.map { "\($0.encoding) in \($0.places.joined(separator: " and "))" }
            return "$" + name + (how.isEmpty ? "" : " (\(how.joined(separator: "; ")))")
        }
        return "# set first: \(named.joined(separator: ", "))\n"
    }

    /// What a request's comment line names: the account, the reporter (and what the request is
    /// in its service), and the service when the reporter does not say it. One line whatever they hold, so no part of it runs in `curl`
    /// output (control characters escaped).
    public static func title(_ request: RenderedRequest) -> String {
        let accountOwn = CommandEnvironment.backends.accountServiceNames.contains(request.service)
        let service = request.service == request.reporter || accountOwn ? "" : " (service \(request.service))"
        let kind = request.kind.map { " " + $0 } ?? ""
        return "\(request.account) \(request.reporter)\(kind)\(service)".displayEscaped
    }

    /// Host and request target of an absolute URL.
    public static func split(_ url: String) -> (host: String, target: String) {
        guard let schemeEnd = url.firstRange(of: "://") else { return ("", url) }
        let rest = url[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        var host = rest[..<authorityEnd]
        if let at = host.lastIndex(of: "@") { host = host[host.index(after: at)...] }
        var target = String(rest[authorityEnd...])
        if let hash = target.firstIndex(of: "#") { target = String(target[..<hash]) }
        if target.isEmpty || target.hasPrefix("?") { target = "/" + target }
        return (String(host), target)
    }

    /// Single-quotes text for a POSIX shell; with `markers`, secret markers become `"$NAME"`.
    /// Works on Unicode scalars, not characters: a quote followed by a combining mark is one
    /// character, and its quote must still be escaped.
    public static func shellWord(_ text: String, markers: Bool) -> String {
        let pieces = markers ? text.unicodeScalars.split(separator: "\u{1}", omittingEmptySubsequences: false)
                             : [text.unicodeScalars[...]]
        var out = ""
        for (index, piece) in pieces.enumerated() {
            if index % 2 == 1 {
                // A marker's secret name, a shell name (ShellVariable).
                out += "\"$" + String(piece) + "\""
            } else if !piece.isEmpty || pieces.count == 1 {
                out += "'"
                for scalar in piece {
                    if scalar == "'" { out += "'\\''" } else { out.unicodeScalars.append(scalar) }
                }
                out += "'"
            }
        }
        return out
    }
}
