extension Template {
    /// Compiles `source` for the position `kind`, resolving every variable through `scope`.
    ///
    /// Grammar (SPEC §3): `%name%`, `%name[key]%`, `%name(arg, …)%` with arguments that are
    /// templates themselves; `%%` is a literal `%`; a `%` that begins no well-formed placeholder is
    /// literal, so `%2F` stays. All problems are collected, each with the offset of its placeholder.
    public static func compile<S: TemplateScope>(_ source: String, kind: TemplateKind, scope: inout S) -> TemplateCompilation {
        var compiler = TemplateCompiler(source: source, kind: kind, scope: scope)
        let result = compiler.run()
        scope = compiler.scope
        return result
    }
}

/// The names of the functions a template may call, for docs and suggestions.
public let templateFunctionNames: [String] = TemplateFunction.allCases.map(\.rawValue)

struct TemplateCompiler<S: TemplateScope> {
    static var maxCallDepth: Int { 16 }

    let bytes: [UInt8]
    let source: String
    let kind: TemplateKind
    var scope: S
    var position = 0
    var issues: [TemplateIssue] = []
    var references: [TemplateReference] = []
    var placeholderSpans: [Range<Int>] = []
    var parts: [Template.Part] = []
    var pendingLiteral: [UInt8] = []
    var literalByteCount = 0
    var tracker: PositionTracker

    init(source: String, kind: TemplateKind, scope: S) {
        self.source = source
        self.bytes = Array(source.utf8)
        self.kind = kind
        self.scope = scope
        self.tracker = PositionTracker(kind: kind)
    }

    // MARK: Top level

    mutating func run() -> TemplateCompilation {
        while position < bytes.count {
            let b = bytes[position]
            if b == UInt8(ascii: "%") {
                if position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "%") {
                    appendLiteral(UInt8(ascii: "%"))
                    position += 2
                    continue
                }
                let start = position
                switch parsePlaceholder(depth: 0) {
                case .literal:
                    appendLiteral(b)
                    position = start + 1
                case .expression(let expression):
                    insert(expression, at: start)
                    placeholderSpans.append(start..<position)
                case .failed:
                    // The placeholder could not be read; what follows cannot be trusted.
                    position = bytes.count
                }
            } else {
                appendLiteral(b)
                position += 1
            }
        }
        flushLiteral()
        let hasError = issues.contains { $0.severity == .error }
        let template = hasError ? nil : Template(source: source, kind: kind, references: references,
                                                   placeholderSpans: placeholderSpans, parts: parts,
                                                   literalByteCount: literalByteCount)
        return TemplateCompilation(template: template, issues: issues.sorted { $0.offset < $1.offset }, references: references)
    }

    mutating func appendLiteral(_ b: UInt8) {
        pendingLiteral.append(b)
        tracker.consume(b)
    }

    mutating func flushLiteral() {
        guard !pendingLiteral.isEmpty else { return }
        literalByteCount += pendingLiteral.count
        parts.append(.literal(pendingLiteral))
        pendingLiteral = []
    }

    mutating func insert(_ expression: Template.Expression, at start: Int) {
        let length = position - start
        switch tracker.encoding {
        case .success(let encoding):
            flushLiteral()
            parts.append(.insert(expression, encoding))
        case .failure(let place):
            error("a placeholder cannot stand in a URL's \(place); only the path and the query can hold values",
                  at: start, length: length)
        }
    }

    // MARK: Placeholders

    enum Parsed {
        /// The `%` begins no placeholder and is literal text.
        case literal
        case expression(Template.Expression)
        /// An error was recorded and parsing cannot go on.
        case failed
    }

    /// Parses the placeholder at `position` (on its `%`); on success `position` is past its end.
    mutating func parsePlaceholder(depth: Int) -> Parsed {
        let start = position
        var cursor = start + 1
        guard cursor < bytes.count, Template.isNameStart(bytes[cursor]) else { return .literal }
        while cursor < bytes.count, Template.isNameContinue(bytes[cursor]) { cursor += 1 }
        let name = String(decoding: bytes[(start + 1)..<cursor], as: UTF8.self)
        guard cursor < bytes.count else {
            warnIfUnclosed(name, at: start, length: cursor - start)
            return .literal
        }
        switch bytes[cursor] {
        case UInt8(ascii: "%"):
            position = cursor + 1
            return variable(name, at: start)
        case UInt8(ascii: "["):
            return keyedVariable(name, at: start, keyStart: cursor + 1)
        case UInt8(ascii: "("):
            return call(name, at: start, argumentsStart: cursor + 1, depth: depth)
        default:
            warnIfUnclosed(name, at: start, length: cursor - start)
            return .literal
        }
    }

    mutating func variable(_ name: String, at start: Int) -> Parsed {
        let length = position - start
        if let slot = scope.slot(forVariable: name) {
            references.append(TemplateReference(name: name, key: nil, slot: slot, offset: start, length: length))
            return .expression(.variable(slot: slot))
        }
        if name.utf8.count == 2, name.utf8.allSatisfy({ TemplateCompiler.isHexDigit($0) }) {
            // `%C3%A9` in a URL is a percent-escape, not a variable named C3.
            position = start
            return .literal
        }
        if TemplateFunction(rawValue: name) != nil {
            error("'\(name)' is a function; call it as %\(name)(…)%", at: start, length: length)
        } else if scope.keyedVariableNames.contains(name) {
            error("'\(name)' needs a key, as in %\(name)[username]%", at: start, length: length)
        } else {
            var message = "unknown variable '\(name)'" + suggestion(for: name, among: scope.variableNames)
            let utf8 = Array(name.utf8)
            if utf8.count > 2, utf8[0...1].allSatisfy({ TemplateCompiler.isHexDigit($0) }) {
                let escape = String(decoding: utf8[0...1], as: UTF8.self)
                message += "; if %\(escape) is a percent-escape, write it as %%\(escape)"
            }
            error(message, at: start, length: length)
        }
        return .expression(.text(""))
    }

    mutating func keyedVariable(_ name: String, at start: Int, keyStart: Int) -> Parsed {
        var cursor = keyStart
        while cursor < bytes.count, bytes[cursor] != UInt8(ascii: "]"), bytes[cursor] != UInt8(ascii: "%"),
              bytes[cursor] != 0x0A {
            cursor += 1
        }
        guard cursor + 1 < bytes.count, bytes[cursor] == UInt8(ascii: "]"), bytes[cursor + 1] == UInt8(ascii: "%") else {
            error("unterminated placeholder %\(name)[…: expected ']%'", at: start, length: cursor - start)
            return .failed
        }
        let key = String(decoding: bytes[keyStart..<cursor], as: UTF8.self)
        position = cursor + 2
        let length = position - start
        guard !key.isEmpty else {
            error("%\(name)[]% names no key", at: start, length: length)
            return .expression(.text(""))
        }
        guard let slot = scope.slot(forVariable: name, key: key) else {
            if scope.variableNames.contains(name) {
                error("'\(name)' takes no key", at: start, length: length)
            } else {
                error("unknown variable '\(name)'" + suggestion(for: name, among: scope.keyedVariableNames), at: start, length: length)
            }
            return .expression(.text(""))
        }
        references.append(TemplateReference(name: name, key: key, slot: slot, offset: start, length: length))
        return .expression(.variable(slot: slot))
    }

    mutating func call(_ name: String, at start: Int, argumentsStart: Int, depth: Int) -> Parsed {
        guard depth < Self.maxCallDepth else {
            error("functions are nested more than \(Self.maxCallDepth) deep", at: start, length: argumentsStart - start)
            return .failed
        }
        position = argumentsStart
        var arguments = ArgumentBuilder()
        while true {
            guard position < bytes.count else {
                error("unterminated placeholder %\(name)(…: expected ')%'", at: start, length: position - start)
                return .failed
            }
            let b = bytes[position]
            if b == UInt8(ascii: ")"), position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "%") {
                arguments.finishArgument()
                position += 2
                break
            }
            if b == UInt8(ascii: ",") {
                arguments.finishArgument()
                position += 1
                continue
            }
            if b == UInt8(ascii: "%") {
                if position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "%") {
                    arguments.text.append(b)
                    position += 2
                    continue
                }
                let nestedStart = position
                switch parsePlaceholder(depth: depth + 1) {
                case .literal:
                    arguments.text.append(b)
                    position = nestedStart + 1
                case .expression(let expression):
                    arguments.append(expression)
                case .failed:
                    return .failed
                }
                continue
            }
            arguments.text.append(b)
            position += 1
        }
        let length = position - start
        guard let function = TemplateFunction(rawValue: name) else {
            if scope.variableNames.contains(name) || scope.keyedVariableNames.contains(name) {
                error("'\(name)' is a variable, not a function", at: start, length: length)
            } else {
                error("unknown function '\(name)'" + suggestion(for: name, among: templateFunctionNames), at: start, length: length)
            }
            return .expression(.text(""))
        }
        guard arguments.arguments.count == function.arity else {
            let expected = function.arity == 1 ? "1 argument" : "\(function.arity) arguments"
            error("\(name) takes \(expected), not \(arguments.arguments.count): \(function.signature)", at: start, length: length)
            return .expression(.text(""))
        }
        return .expression(.call(function, arguments.arguments))
    }

    // MARK: Issues

    mutating func warnIfUnclosed(_ name: String, at start: Int, length: Int) {
        let known = scope.variableNames.contains(name) || scope.keyedVariableNames.contains(name)
            || TemplateFunction(rawValue: name) != nil
        guard known else { return }
        issues.append(TemplateIssue(severity: .warning,
                                    message: "'%\(name)' has no closing '%', so it is sent as literal text",
                                    offset: start, length: length))
    }

    mutating func error(_ message: String, at offset: Int, length: Int) {
        issues.append(TemplateIssue(severity: .error, message: message, offset: offset, length: length))
    }

    func suggestion(for name: String, among candidates: [String]) -> String {
        guard let nearest = NameSuggester.nearest(to: name, among: candidates) else { return "" }
        return "; did you mean '\(nearest)'?"
    }

    // MARK: Characters

    @inline(__always) static func isHexDigit(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66)
    }
}

/// Collects a function call's arguments: each is literal text and placeholders, concatenated.
struct ArgumentBuilder {
    var arguments: [Template.Expression] = []
    var pieces: [Template.Expression] = []
    var text: [UInt8] = []

    mutating func append(_ expression: Template.Expression) {
        flushText()
        pieces.append(expression)
    }

    mutating func flushText() {
        if !text.isEmpty { pieces.append(.text(String(decoding: text, as: UTF8.self))); text = [] }
    }

    mutating func finishArgument() {
        flushText()
        arguments.append(pieces.count == 1 ? pieces[0] : .concat(pieces))
        pieces = []
    }
}

/// Follows the literal text of a template to know what kind of position the next value lands in.
struct PositionTracker {
    enum URLPart { case scheme, authority, path, query, fragment }

    private let kind: TemplateKind
    private var urlPart = URLPart.scheme
    private var schemeSlashes = -1   // -1: no ':' seen yet; then counts the '/' after it
    private var inJSONString = false
    private var jsonEscape = false

    init(kind: TemplateKind) {
        self.kind = kind
    }

    mutating func consume(_ b: UInt8) {
        switch kind {
        case .url: consumeURL(b)
        case .body(.json): consumeJSON(b)
        default: break
        }
    }

    private mutating func consumeURL(_ b: UInt8) {
        switch urlPart {
        case .scheme:
            if schemeSlashes < 0 {
                if b == UInt8(ascii: ":") { schemeSlashes = 0 }
            } else if b == UInt8(ascii: "/") {
                schemeSlashes += 1
                if schemeSlashes == 2 { urlPart = .authority }
            } else {
                schemeSlashes = b == UInt8(ascii: ":") ? 0 : -1
            }
        case .authority:
            if b == UInt8(ascii: "/") { urlPart = .path }
            else if b == UInt8(ascii: "?") { urlPart = .query }
            else if b == UInt8(ascii: "#") { urlPart = .fragment }
        case .path:
            if b == UInt8(ascii: "?") { urlPart = .query }
            else if b == UInt8(ascii: "#") { urlPart = .fragment }
        case .query:
            if b == UInt8(ascii: "#") { urlPart = .fragment }
        case .fragment:
            break
        }
    }

    private mutating func consumeJSON(_ b: UInt8) {
        if inJSONString {
            if jsonEscape { jsonEscape = false }
            else if b == UInt8(ascii: "\\") { jsonEscape = true }
            else if b == UInt8(ascii: "\"") { inJSONString = false }
        } else if b == UInt8(ascii: "\"") {
            inJSONString = true
        }
    }

    /// The encoding for a value inserted here, or the URL part that cannot hold one.
    var encoding: Result<Encoding, PlaceError> {
        switch kind {
        case .plain: return .success(.raw)
        case .headerValue: return .success(.header)
        case .body(.form): return .success(.form)
        case .body(.json): return .success(inJSONString ? .jsonString : .jsonValue)
        case .body(.xml): return .success(.xml)
        case .body(.raw): return .success(.raw)
        case .url:
            switch urlPart {
            case .scheme, .authority: return .failure(PlaceError(description: "scheme or host"))
            case .fragment: return .failure(PlaceError(description: "fragment"))
            case .path: return .success(.urlPath)
            case .query: return .success(.urlQuery)
            }
        }
    }

    struct PlaceError: Error, CustomStringConvertible {
        var description: String
    }
}

extension Template {
    /// Whether `name` can be written as `%name%`: ASCII letters, digits and `_`, not starting
    /// with a digit (what the compiler reads as a name).
    public static func isVariableName(_ name: String) -> Bool {
        guard let first = name.utf8.first, isNameStart(first) else { return false }
        return name.utf8.allSatisfy(isNameContinue)
    }

    @inline(__always) static func isNameStart(_ b: UInt8) -> Bool {
        (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F
    }

    @inline(__always) static func isNameContinue(_ b: UInt8) -> Bool {
        isNameStart(b) || (b >= 0x30 && b <= 0x39)
    }
}
