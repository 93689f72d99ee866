/// Where a template's output goes; this decides how each inserted value is encoded.
///
/// Encoding follows the position so that no value can change the structure around it (SPEC §3):
/// a value placed in a URL query is percent-encoded, in a JSON string it is JSON-escaped, and so on.
public enum TemplateKind: Sendable, Hashable {
    /// A whole URL. Path and query positions are percent-encoded; a placeholder in the scheme,
    /// host (authority) or fragment is a compile error.
    case url
    /// A request body whose encoding comes from the request's Content-Type.
    case body(BodyFormat)
    /// An HTTP header value: inserted raw, but a rendered CR, LF or NUL is a render error.
    case headerValue
    /// Text inserted exactly as the values are (credentials, content types, methods).
    case plain
}

/// How a body's Content-Type asks values to be encoded.
public enum BodyFormat: Sendable, Hashable {
    /// `application/x-www-form-urlencoded`: space becomes `+`, only alphanumerics and `*-._` stay.
    case form
    /// `application/json` or `*/*+json`: JSON string escaping inside a string; outside a string
    /// the value is inserted as a JSON string.
    case json
    /// `application/xml`, `text/xml` or `*/*+xml`: XML escaping.
    case xml
    /// Any other type: values are inserted as they are.
    case raw

    /// The body format a Content-Type value asks for (parameters such as `charset` are ignored).
    public init(contentType: String) {
        // The common types as usually written, without lowercasing (this runs for every request).
        switch contentType {
        case "application/x-www-form-urlencoded": self = .form; return
        case "application/json": self = .json; return
        default: break
        }
        var essence = Substring(contentType)
        if let semicolon = essence.firstIndex(of: ";") { essence = essence[..<semicolon] }
        let type = essence.trimmingASCIIWhitespace().lowercased()
        if type == "application/x-www-form-urlencoded" {
            self = .form
        } else if type == "application/json" || type.hasSuffix("+json") {
            self = .json
        } else if type == "application/xml" || type == "text/xml" || type.hasSuffix("+xml") {
            self = .xml
        } else {
            self = .raw
        }
    }
}

extension Substring {
    func trimmingASCIIWhitespace() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
