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

    let parts: [Part]
    let literalByteCount: Int

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
        if kind == .headerValue, out.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) {
            throw RenderError.headerControlCharacter()
        }
        return String(decoding: out, as: UTF8.self)
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
