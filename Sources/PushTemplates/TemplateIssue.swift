/// A problem found in a template when it is compiled, located by UTF-8 offset in its source.
public struct TemplateIssue: Sendable, Hashable {
    /// Errors stop a template from being used; warnings do not.
    public enum Severity: String, Sendable, Hashable {
        case error, warning
    }

    public var severity: Severity
    /// One sentence, starting lower-case.
    public var message: String
    /// UTF-8 offset of the placeholder's opening `%` in the template source.
    public var offset: Int
    /// UTF-8 length of the placeholder text (at least 1).
    public var length: Int

    public init(severity: Severity, message: String, offset: Int, length: Int) {
        self.severity = severity
        self.message = message
        self.offset = offset
        self.length = max(1, length)
    }
}

/// A failure to render a compiled template with particular values.
public struct RenderError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: String, Sendable, Hashable {
        case headerControlCharacter = "header_control_character"
        case xmlForbiddenCharacter = "xml_forbidden_character"
    }

    private let code: Code
    /// One sentence, starting lower-case, naming what went wrong.
    public let message: String

    /// A stable short name for the kind of failure (usable as a metric label).
    public var description: String { code.rawValue }

    static func headerControlCharacter() -> RenderError {
        RenderError(code: .headerControlCharacter,
                    message: "a header value may not contain a carriage return, line feed or NUL character")
    }

    static func xmlForbiddenCharacter(_ scalar: Unicode.Scalar) -> RenderError {
        RenderError(code: .xmlForbiddenCharacter,
                    message: "a value holds the character \(scalar.codePointDescription), which XML 1.0 cannot carry")
    }
}

extension Unicode.Scalar {
    /// `U+0001` style name.
    var codePointDescription: String {
        let hex = String(value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
