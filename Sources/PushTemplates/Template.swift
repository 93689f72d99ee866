/// A template compiled once into literal bytes and encoded insertions; rendering never re-parses.
///
/// Compile with ``Template/compile(_:kind:scope:)``; render with ``render(_:masking:)``.
public struct Template: Sendable {
    /// The template text as written.
    public let source: String
    /// Where the output goes; fixed the encoding of every insertion.
    public let kind: TemplateKind
    /// Every variable the template names, in source order, with where it stands.
    public let references: [TemplateReference]

    /// Where each placeholder of the text stands (UTF-8 offsets of `%…%` in ``source``, a call
    /// with its arguments as one): the rest of the text is the template's own.
    public let placeholderSpans: [Range<Int>]

    let parts: [Part]
    let literalByteCount: Int

    /// What the values can change about rendering, found when compiling: a check of many
    /// accounts renders only the templates where values can matter.
    public let valueSensitivity: ValueSensitivity

    init(source: String, kind: TemplateKind, references: [TemplateReference], placeholderSpans: [Range<Int>], parts: [Part],
         literalByteCount: Int) {
        self.source = source
        self.kind = kind
        self.references = references
        self.placeholderSpans = placeholderSpans
        self.parts = parts
        self.literalByteCount = literalByteCount
        self.valueSensitivity = ValueSensitivity(parts: parts, kind: kind)
    }

    enum Part: Sendable {
        case literal([UInt8])
        case insert(Expression, Encoding)
    }

    indirect enum Expression: Sendable {
        case variable(slot: Int)
        case text(String)
        case concat([Expression])
        case call(TemplateFunction, [Expression])
    }

    /// Whether the template inserts any value (a template with none renders to its source).
    public var isConstant: Bool { !parts.contains { if case .insert = $0 { true } else { false } } }

    /// Renders the template with `values`; secrets are treated as `masking` says.
    ///
    /// Fails only for values that cannot stand in the position at all: a CR, LF or NUL in a header
    /// value, or a character XML cannot carry.
    public func render<V: TemplateValues>(_ values: V, masking: SecretMasking = .reveal) throws(RenderError) -> String {
        var out = [UInt8]()
        out.reserveCapacity(literalByteCount + 64 * (parts.count / 2 + 1))
        for part in parts {
            switch part {
            case .literal(let bytes):
                out.append(contentsOf: bytes)
            case .insert(.variable(let slot), let encoding):
                if case .replace(let replacement) = masking, values.isSecret(at: slot) {
                    Escaper.appendReplacement(replacement(slot), as: encoding, to: &out)
                } else {
                    try Escaper.append(values.value(at: slot), as: encoding, to: &out)
                }
            case .insert(let expression, let encoding):
                let result = try Self.evaluate(expression, values)
                if case .replace(let replacement) = masking, result.isSecret {
                    Escaper.appendReplacement(replacement(nil), as: result.isEncoded ? .raw : encoding, to: &out)
                } else {
                    try Escaper.append(result.text, as: result.isEncoded ? .raw : encoding, to: &out)
                }
            }
        }
        if kind == .headerValue, out.contains(where: Self.isForbiddenInHeader) {
            throw RenderError.headerControlCharacter()
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `byte` fails a header value's rendering: CR, LF or NUL.
    public static func isForbiddenInHeader(_ byte: UInt8) -> Bool {
        byte == 0x0D || byte == 0x0A || byte == 0
    }

    private struct Evaluated {
        var text: String
        var isSecret: Bool
        var isEncoded: Bool
    }

    private static func evaluate<V: TemplateValues>(_ expression: Expression, _ values: V) throws(RenderError) -> Evaluated {
        switch expression {
        case .variable(let slot):
            return Evaluated(text: values.value(at: slot), isSecret: values.isSecret(at: slot), isEncoded: false)
        case .text(let text):
            return Evaluated(text: text, isSecret: false, isEncoded: false)
        case .concat(let pieces):
            var text = ""
            var secret = false
            for piece in pieces {
                let value = try evaluate(piece, values)
                text += value.text
                secret = secret || value.isSecret
            }
            return Evaluated(text: text, isSecret: secret, isEncoded: false)
        case .call(let function, let arguments):
            var texts = [String]()
            texts.reserveCapacity(arguments.count)
            var secret = false
            for argument in arguments {
                let value = try evaluate(argument, values)
                texts.append(value.text)
                secret = secret || value.isSecret
            }
            return Evaluated(text: try function.apply(texts), isSecret: secret, isEncoded: function.isEncodingOverride)
        }
    }
}

/// A variable named in a template, as `%name%` or `%name[key]%`, and where it stands.
public struct TemplateReference: Sendable, Hashable {
    public var name: String
    /// The key in `%name[key]%`, or nil.
    public var key: String?
    /// The slot the scope gave it.
    public var slot: Int
    /// UTF-8 offset of the placeholder's `%` in the template source.
    public var offset: Int
    /// UTF-8 length of the placeholder.
    public var length: Int
}

/// What compiling a template produced: the template, unless an error was found, and every issue.
public struct TemplateCompilation: Sendable {
    /// The compiled template; nil when ``issues`` holds an error.
    public var template: Template?
    /// Errors and warnings in source order.
    public var issues: [TemplateIssue]
    /// Every placeholder that could be read, also when ``template`` is nil, so that a caller can
    /// check them all in one run.
    public var references: [TemplateReference] = []
}

/// What the values can change about rendering a template: whether it fails, and whether its
/// output is well-formed for its kind (a URL with a host, a JSON body that is JSON).
///
/// A URL's scheme and host are literal text (a placeholder there does not compile), so no value
/// changes them; what else is decided here follows the encodings.
public enum ValueSensitivity: Sendable, Equatable {
    /// No value can make rendering fail or the output ill-formed: every value is escaped for
    /// where it lands, or lands where the output has no form to keep (a URL's path and query,
    /// a form or plain text).
    case none
    /// As `none`, except that rendering can fail when the value of one of these slots holds a
    /// CR, LF or NUL (values inserted into a header value as they are; `trim()` may still remove
    /// the line break): when none of them does, it cannot.
    case lineBreaks(inSlots: [Int])
    /// Only rendering tells: XML escaping (it refuses some characters), `raw()` in a JSON body,
    /// `urlencode()` or `json()` outside a JSON string, a value in a JSON string right after a
    /// backslash, or a header value whose own text holds a line break.
    case unknown

    init(parts: [Template.Part], kind: TemplateKind) {
        var slots: [Int] = []
        var before: [UInt8] = []
        for part in parts {
            switch part {
            case .literal(let bytes):
                if kind == .headerValue, bytes.contains(where: Template.isForbiddenInHeader) {
                    self = .unknown
                    return
                }
                before = bytes
            case .insert(let expression, let encoding):
                defer { before = [] }
                guard encoding != .xml, !expression.calls(.xml) else {
                    self = .unknown
                    return
                }
                // A value right after a backslash (`"\%v%"`, `"\u00%v%"`) finishes an escape
                // sequence the template began: whether that is JSON depends on the value.
                if encoding == .jsonString, before.suffix(5).contains(UInt8(ascii: "\\")) {
                    self = .unknown
                    return
                }
                if case .call(let function, _) = expression, function.isEncodingOverride {
                    // Inserted as the function wrote it, not escaped for the position.
                    switch (function, encoding) {
                    case (.urlencode, .jsonString), (.json, .jsonString):
                        break // Percent-encoded or JSON-escaped text stays inside the string.
                    case (_, .jsonString), (_, .jsonValue):
                        self = .unknown
                        return
                    default:
                        break // URL path or query, form, header or plain: no form to break.
                    }
                }
                if encoding == .header {
                    guard let found = expression.lineBreakSlots else {
                        self = .unknown
                        return
                    }
                    for slot in found where !slots.contains(slot) { slots.append(slot) }
                }
            }
        }
        self = slots.isEmpty ? .none : .lineBreaks(inSlots: slots)
    }
}

extension Template.Expression {
    /// Whether `function` is called anywhere in the expression.
    func calls(_ function: TemplateFunction) -> Bool {
        switch self {
        case .variable, .text: false
        case .concat(let pieces): pieces.contains { $0.calls(function) }
        case .call(let called, let arguments): called == function || arguments.contains { $0.calls(function) }
        }
    }

    /// The slots whose values reach the result unchanged enough to carry a CR, LF or NUL into
    /// it, or nil when the expression's own text holds one. Hashes, Base64, `urlencode` and
    /// `json` write none of them.
    var lineBreakSlots: [Int]? {
        switch self {
        case .variable(let slot):
            return [slot]
        case .text(let text):
            return text.utf8.contains(where: Template.isForbiddenInHeader) ? nil : []
        case .concat(let pieces):
            var slots: [Int] = []
            for piece in pieces {
                guard let found = piece.lineBreakSlots else { return nil }
                slots += found
            }
            return slots
        case .call(let function, let arguments):
            switch function {
            case .sha1, .sha256, .md5, .hmac_sha256, .base64, .urlencode, .json:
                return []
            case .upper, .lower, .trim, .default, .raw, .xml:
                var slots: [Int] = []
                for argument in arguments {
                    guard let found = argument.lineBreakSlots else { return nil }
                    slots += found
                }
                return slots
            }
        }
    }
}
