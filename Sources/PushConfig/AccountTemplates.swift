import Synchronization
import PushTemplates

/// How a rendered request shows secrets.
public enum SecretDisplay: Sendable {
    /// As sent: secrets filled over https or to a loopback host, `********` over plain http elsewhere.
    case asSent
    /// Every secret, and every value computed from one, as `********`.
    case stars
    /// Every secret as a marker ``AccountTemplates/secretMarker(_:)`` naming a shell variable
    /// (for `preview --format curl`); values computed from secrets as `********`.
    case shellVariables
}

/// Templates over a configuration's accounts, for every backend (SPEC §3): compiles each
/// template text once per value of this type, reports a template's problems at their file,
/// line and column (each once), checks `%account[KEY]%` references against the accounts, and
/// renders a template with an account's values.
///
/// A backend keeps one per load (or one per run of accounts it checks on another thread: each
/// copy compiles its own templates, as each numbers its variables itself).
public struct AccountTemplates: Sendable {
    public let configuration: Configuration
    private let sources: [String: SourceText]
    private var table: SymbolTable
    private let builtins: [BuiltinVariable: String]
    private var cache: [CacheKey: TemplateCompilation] = [:]
    /// The last templates compiled or found in `cache`. Accounts of one file share their
    /// `defaults:` templates, and comparing a text with the very same text is cheaper than
    /// hashing it (URLs and bodies run to hundreds of bytes).
    private var recentCompilations: [RecentCompilation] = []
    private static let recentCompilationCount = 8
    private var reportedOrigins: Set<OriginKey> = []
    /// What renderings share, for the table as it is now (nil once a compilation changed it).
    private var currentRenderContext: RenderContext?
    /// Every key some account has, to tell a misspelt `%account[KEY]%` from one only some lack.
    /// Shared by the copies that check runs of accounts, so it is built once.
    private let knownAccountKeys = SharedAccountKeys()
    /// The placeholders of every template compiled since ``beginRequest()``, with the value each
    /// was written in: their `%account[KEY]%` references are checked once all are compiled,
    /// even when one failed.
    private var requestReferences: [RequestReferences] = []
    /// Whether a template compiled since ``resetIssueFlag()`` had a problem (reported or not:
    /// each is reported once, for the first account that uses the template).
    public private(set) var sawTemplateIssues = false

    private struct CacheKey: Hashable {
        var text: String
        var kind: TemplateKind
    }

    // The lists below hold structs, not tuples: the optimizer copies a tuple of such fields
    // whole, through the runtime's generic tuple copy, each time a field of an element is read,
    // and these are read for every request checked.

    private struct RecentCompilation {
        var key: CacheKey
        var compilation: TemplateCompilation
    }

    /// The `%account[KEY]%` references of a template, with the value it was written in.
    private struct RequestReferences {
        var references: [TemplateReference]
        var origin: ConfigValue
        var baseOffset: Int
    }

    private struct OriginKey: Hashable {
        var file: SourcePath
        var position: SourcePosition
        var baseOffset: Int
        var template: CacheKey
    }

    /// - Parameters:
    ///   - installID: the `%installid%` value (read from the state directory), nil to show `<installid>`.
    public init(configuration: Configuration, sources: [String: SourceText], installID: String?, hostname: String) {
        self.configuration = configuration
        self.sources = sources
        self.table = SymbolTable(globals: Array(configuration.globals.keys) + configuration.unreadableGlobals)
        self.builtins = Self.builtins(installID: installID, hostname: hostname)
    }

    /// The values of the built-in variables (SPEC §3).
    private static func builtins(installID: String?, hostname: String) -> [BuiltinVariable: String] {
        [.installid: installID ?? "<installid>", .hostname: hostname, .platform: "linux", .version: PushReporterVersion.current]
    }

    /// `body` given every key some account has, built on first need (only when an account lacks
    /// a key a template names). Read under the lock rather than copied out: a copy would count
    /// references to one set from every thread checking accounts.
    private func withAccountKeys<R>(_ body: (Set<String>) -> R) -> R {
        knownAccountKeys.keys.withLock { keys in
            if let keys { return body(keys) }
            var found = Set(DeviceValues.names).union(configuration.accountsLeftOut.keys)
            for account in configuration.accounts {
                found.formUnion(account.values.keys)
                found.formUnion(account.unreadableKeys)
            }
            keys = found
            return body(found)
        }
    }

    /// Every key some account has, once built.
    private final class SharedAccountKeys: Sendable {
        let keys = Mutex<Set<String>?>(nil)
    }

    /// Whether a built-in variable's value holds a byte a header cannot hold (CR, LF, NUL).
    public var builtinsHoldHeaderForbiddenBytes: Bool {
        Self.holdHeaderForbiddenBytes(builtins)
    }

    /// Whether a built-in variable's value holds a byte a header cannot hold, with these values:
    /// then an account that passed its check while loading must be checked again.
    public static func builtinsHoldHeaderForbiddenBytes(installID: String?, hostname: String) -> Bool {
        holdHeaderForbiddenBytes(builtins(installID: installID, hostname: hostname))
    }

    private static func holdHeaderForbiddenBytes(_ builtins: [BuiltinVariable: String]) -> Bool {
        builtins.values.contains { $0.utf8.contains(where: Template.isForbiddenInHeader) }
    }

    /// The text standing for a secret in `.shellVariables` display: `\u{1}NAME\u{1}`. A request
    /// whose text holds U+0001 of its own is shown with stars instead, so that no text of its
    /// own is read as a marker.
    public static func secretMarker(_ name: String) -> String { "\u{1}" + name + "\u{1}" }

    // MARK: Compiling

    /// Starts the templates of one request: the references ``checkAccountReferences(account:diagnostics:)``
    /// checks are those compiled from here on.
    public mutating func beginRequest() {
        requestReferences.removeAll(keepingCapacity: true)
    }

    /// Clears ``sawTemplateIssues``.
    public mutating func resetIssueFlag() {
        sawTemplateIssues = false
    }

    /// Compiles `text` (default: the value's text) as a template of `kind`, reporting its
    /// problems (once per place they are written) at their file, line and column; nil when it
    /// has an error. `baseOffset` is where `text` starts in the value's text.
    public mutating func compile(_ value: ConfigValue, kind: TemplateKind, baseOffset: Int = 0, text: String? = nil,
                                 diagnostics: inout DiagnosticList) -> Template? {
        let source = text ?? value.text
        let key = CacheKey(text: source, kind: kind)
        let compilation: TemplateCompilation
        if let recent = recentCompilations.first(where: { $0.key.kind == kind && $0.key.text == source }) {
            compilation = recent.compilation
        } else {
            if let cached = cache[key] {
                compilation = cached
            } else {
                compilation = Template.compile(source, kind: kind, scope: &table)
                // The table may have new slots.
                currentRenderContext = nil
                cache[key] = compilation
            }
            if recentCompilations.count == Self.recentCompilationCount { recentCompilations.removeFirst() }
            recentCompilations.append(RecentCompilation(key: key, compilation: compilation))
        }
        if !compilation.issues.isEmpty { sawTemplateIssues = true }
        if !compilation.issues.isEmpty,
           reportedOrigins.insert(OriginKey(file: value.origin.path, position: value.origin.position, baseOffset: baseOffset,
                                            template: key)).inserted {
            for issue in compilation.issues {
                let position = position(of: issue.offset + baseOffset, length: issue.length, in: value)
                diagnostics.append(Diagnostic(file: value.origin.file, at: position,
                                              severity: issue.severity == .error ? .error : .warning,
                                              message: withAccountKeySuggestion(issue.message)))
            }
        }
        requestReferences.append(RequestReferences(references: compilation.references, origin: value, baseOffset: baseOffset))
        return compilation.template
    }

    /// `message` with a suggestion of `%account[KEY]%` when it says a variable is unknown with no
    /// name near it and an account key is near (`%usrname%`: did you mean `%account[username]%`?).
    private func withAccountKeySuggestion(_ message: String) -> String {
        let prefix = "unknown variable '"
        guard message.hasPrefix(prefix), !message.contains("did you mean") else { return message }
        let rest = message.dropFirst(prefix.count)
        guard let end = rest.firstIndex(of: "'") else { return message }
        let name = String(rest[..<end])
        guard let nearest = withAccountKeys({ keys in NameSuggester.nearest(to: name, among: keys) }) else { return message }
        return "unknown variable '\(name)'; did you mean '%account[\(nearest)]%'?" + rest[rest.index(after: end)...]
    }

    /// `%account[KEY]%` naming a key no account has is an error; one this account lacks, a
    /// warning. Checks the templates compiled since ``beginRequest()``.
    public mutating func checkAccountReferences(account: Account, diagnostics: inout DiagnosticList) {
        for placed in requestReferences {
            for reference in placed.references {
                guard let key = reference.key, !account.writes(key),
                      !DeviceValues.names.contains(key) else { continue }
                let origin = (value: placed.origin, baseOffset: placed.baseOffset)
                let position = position(of: reference.offset + origin.baseOffset, length: reference.length, in: origin.value)
                let (someAccountHasIt, nearest) = withAccountKeys { keys in
                    // Every account has an id, written or not (``Account/text(of:)``).
                    keys.contains(key) ? (true, nil) : (false, NameSuggester.nearest(to: key, among: keys.union(["id"])))
                }
                if someAccountHasIt {
                    diagnostics.append(Diagnostic(file: origin.value.origin.file, at: position, severity: .warning,
                                                  message: "the account has no key '\(key)', so %account[\(key)]% renders empty",
                                                  account: account.id))
                } else {
                    var message = "no account has a key '\(key)'"
                    if let nearest { message += "; did you mean '\(nearest)'?" }
                    diagnostics.append(Diagnostic(file: origin.value.origin.file, at: position, severity: .error, message: message))
                }
            }
        }
    }

    // MARK: Rendering

    /// `account`'s values as templates compiled here see them.
    public mutating func values(for account: Account) -> AccountValues {
        AccountValues(account: account, context: renderContext())
    }

    private mutating func renderContext() -> RenderContext {
        if let currentRenderContext { return currentRenderContext }
        let context = RenderContext(table: table, globals: configuration.globals, builtins: builtins)
        currentRenderContext = context
        return context
    }

    /// How `display` shows the secrets of `values` in a request that may carry secrets when
    /// `maySendSecrets` (https, or loopback): as sent, as stars, or as shell-variable markers.
    public func masking(_ display: SecretDisplay, values: AccountValues, maySendSecrets: Bool) -> SecretMasking {
        switch display {
        case .asSent: maySendSecrets ? .reveal : .stars
        case .stars: .stars
        case .shellVariables where !maySendSecrets: .stars
        case .shellVariables: .replace { slot in slot.map { Self.secretMarker(values.secretName(at: $0)) } ?? "********" }
        }
    }

    /// Renders `template`; a value that cannot stand where it is placed throws, naming `origin`.
    public func render(_ template: Template, _ values: AccountValues, _ masking: SecretMasking,
                       origin: ConfigValue) throws(RenderFailure) -> String {
        do {
            return try template.render(values, masking: masking)
        } catch {
            throw RenderFailure(message: error.message, key: "the value at this position", origin: origin)
        }
    }

    /// Reports a render failure at the value it came from.
    public func reportRenderFailure(_ failure: RenderFailure, account: String, diagnostics: inout DiagnosticList) {
        report(.error, "\(failure.message) (in \(failure.key))", at: failure.origin, diagnostics: &diagnostics, account: account)
    }

    // MARK: Positions

    /// Adds a diagnostic at `value` (at UTF-8 `offset` of its text, when given).
    public func report(_ severity: Diagnostic.Severity, _ message: String, at value: ConfigValue, offset: Int? = nil,
                       diagnostics: inout DiagnosticList, account: String? = nil) {
        let position = offset.map { self.position(of: $0, length: 1, in: value) } ?? value.origin.position
        diagnostics.append(Diagnostic(file: value.origin.file, at: position, severity: severity, message: message, account: account))
    }

    /// The file position of UTF-8 `offset` in a value's text, found in the scalar as written.
    public func position(of offset: Int, length: Int, in value: ConfigValue) -> SourcePosition {
        let origin = value.origin
        let valueBytes = Array(value.text.utf8)
        guard origin.isVerbatim, offset < valueBytes.count,
              let source = sources[origin.file],
              let start = source.byteOffset(of: origin.position) else { return origin.position }
        let end = source.byteOffset(of: origin.end) ?? source.bytes.count
        var needle = Array(valueBytes[offset..<min(valueBytes.count, offset + max(1, length))])
        if let newline = needle.firstIndex(of: 0x0A) { needle = Array(needle[..<newline]) }
        if needle.isEmpty { return origin.position }
        var occurrence = 0
        var i = 0
        while i < offset {
            if valueBytes[i...].starts(with: needle) { occurrence += 1 }
            i += 1
        }
        let bytes = source.bytes
        var found = 0
        var j = start
        while j + needle.count <= end {
            if bytes[j] == needle[0], bytes[j..<(j + needle.count)].elementsEqual(needle) {
                if found == occurrence { return source.position(ofByteOffset: j) }
                found += 1
            }
            j += 1
        }
        return origin.position
    }
}

/// A template that could not be rendered with an account's values: what went wrong, and the
/// value (file, line, column) the template was written in.
public struct RenderFailure: Error, Sendable {
    public var message: String
    public var key: String
    public var origin: ConfigValue

    public init(message: String, key: String, origin: ConfigValue) {
        self.message = message
        self.key = key
        self.origin = origin
    }
}

/// A compiled template with the value it was written in (where a render failure is reported).
public struct PlacedTemplate: Sendable {
    public var template: Template
    public var origin: ConfigValue

    public init(template: Template, origin: ConfigValue) {
        self.template = template
        self.origin = origin
    }
}
