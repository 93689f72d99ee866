/// A problem in the configuration, told the way editors and CI read it: `FILE:LINE:COLUMN: severity: message`.
///
/// Diagnostics are collected, never thrown one at a time, so one run shows every problem.
public struct Diagnostic: Sendable, Hashable, Codable {
    public enum Severity: String, Sendable, Hashable, Codable {
        case error, warning
    }

    /// The file as it was named (as given on the command line or found in a directory).
    public var file: String
    /// 1-based line, or 0 when the problem concerns the whole file.
    public var line: Int
    /// 1-based column in characters, or 0 when the problem concerns the whole file.
    public var column: Int
    public var severity: Severity
    /// One sentence, starting lower-case, saying what is wrong.
    public var message: String
    /// The account the problem belongs to, when it is about one account.
    public var account: String?
    /// A warning no edit of the configuration can remove (a vendor's deprecation dates): said,
    /// but not failed by `validate --strict` (SPEC §2).
    public var isStanding = false

    public init(file: String, line: Int = 0, column: Int = 0, severity: Severity, message: String, account: String? = nil) {
        self.file = file
        self.line = line
        self.column = column
        self.severity = severity
        self.message = message
        self.account = account
    }

    public init(file: String, at position: SourcePosition?, severity: Severity, message: String, account: String? = nil) {
        self.init(file: file, line: position?.line ?? 0, column: position?.column ?? 0,
                  severity: severity, message: message, account: account)
    }

    /// `FILE:LINE:COLUMN: severity: message`, or `FILE: severity: message` without a position;
    /// one line, whatever the file name, message and account hold (control characters escaped).
    public var formatted: String {
        let file = file.displayEscaped
        let place = line > 0 ? "\(file):\(line):\(column)" : file
        let owner = account.map { " [account \($0.displayEscaped)]" } ?? ""
        return "\(place): \(severity.rawValue): \(message.displayEscaped)\(owner)"
    }
}

/// One problem of one file, whichever account has it (``Swift/Array/collapsingRepeats(shown:)``).
private struct SharedProblem: Hashable {
    var file: String
    var severity: Diagnostic.Severity
    var message: String

    init(_ diagnostic: Diagnostic) {
        (file, severity, message) = (diagnostic.file, diagnostic.severity, diagnostic.message)
    }
}

extension Array where Element == Diagnostic {
    /// For a person to read: of the accounts of one file that have the same problem (one
    /// sentence, one severity), more than `shown + 1` of them, the first `shown` as they are and
    /// then one line for the rest, at the next one's place. A mistake in `defaults:` otherwise
    /// printed the same warning for each of 5,000 accounts. Machine-readable output (JSON) and
    /// the counts keep every one.
    public func collapsingRepeats(shown: Int = 3) -> [Diagnostic] {
        var counts: [SharedProblem: Int] = [:]
        for diagnostic in self where diagnostic.account != nil { counts[SharedProblem(diagnostic), default: 0] += 1 }
        guard counts.values.contains(where: { $0 > shown + 1 }) else { return self }
        var seen: [SharedProblem: Int] = [:]
        var kept: [Diagnostic] = []
        for diagnostic in self {
            guard diagnostic.account != nil else {
                kept.append(diagnostic)
                continue
            }
            let problem = SharedProblem(diagnostic)
            let total = counts[problem]!
            let index = seen[problem, default: 0]
            seen[problem] = index + 1
            if total <= shown + 1 || index < shown {
                kept.append(diagnostic)
            } else if index == shown {
                var rest = diagnostic
                let more = total - shown
                // "From this line on", this one included: "and 3 more" read as 3 after it.
                rest.message += " (the same for \(more) accounts of this file from this line on; validate --format json lists every one)"
                rest.account = nil
                kept.append(rest)
            }
        }
        return kept
    }
}

/// Collects diagnostics, dropping exact repeats (a template shared by many accounts is reported once).
public struct DiagnosticList: Sendable {
    public private(set) var all: [Diagnostic] = []
    private var seen: Set<Diagnostic> = []

    public init() {}

    public var hasErrors: Bool { all.contains { $0.severity == .error } }
    public var errorCount: Int { all.count { $0.severity == .error } }
    public var warningCount: Int { all.count { $0.severity == .warning } }
    /// The warnings an edit of the configuration can remove: what `validate --strict` fails on.
    public var strictWarningCount: Int { all.count { $0.severity == .warning && !$0.isStanding } }

    public mutating func append(_ diagnostic: Diagnostic) {
        if seen.insert(diagnostic).inserted { all.append(diagnostic) }
    }

    public mutating func append(contentsOf diagnostics: some Sequence<Diagnostic>) {
        for diagnostic in diagnostics { append(diagnostic) }
    }

    /// Drops the diagnostics after the first `count`, as if they had never been appended.
    mutating func removeAll(after count: Int) {
        for diagnostic in all[count...] { seen.remove(diagnostic) }
        all.removeSubrange(count...)
    }

    public mutating func error(_ message: String, file: String, at position: SourcePosition? = nil, account: String? = nil) {
        append(Diagnostic(file: file, at: position, severity: .error, message: message, account: account))
    }

    public mutating func warning(_ message: String, file: String, at position: SourcePosition? = nil, account: String? = nil) {
        append(Diagnostic(file: file, at: position, severity: .warning, message: message, account: account))
    }

    /// A warning no edit of the configuration can remove (``Diagnostic/isStanding``).
    public mutating func standingWarning(_ message: String, file: String, at position: SourcePosition? = nil) {
        var diagnostic = Diagnostic(file: file, at: position, severity: .warning, message: message)
        diagnostic.isStanding = true
        append(diagnostic)
    }

    /// The errors, ordered as ``sorted(fileOrder:)`` orders them: what a command that stops on
    /// errors prints (validate prints everything).
    public func errors(fileOrder: [String]) -> [Diagnostic] {
        sorted(fileOrder: fileOrder).filter { $0.severity == .error }
    }

    /// Diagnostics ordered by file (in load order), then position.
    public func sorted(fileOrder: [String]) -> [Diagnostic] {
        let rank = Dictionary(fileOrder.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        return all.enumerated().sorted { l, r in
            let a = l.element, b = r.element
            let ra = rank[a.file] ?? Int.max, rb = rank[b.file] ?? Int.max
            if ra != rb { return ra < rb }
            if a.file != b.file { return a.file < b.file }
            if (a.line, a.column) != (b.line, b.column) { return (a.line, a.column) < (b.line, b.column) }
            return l.offset < r.offset
        }.map(\.element)
    }
}
