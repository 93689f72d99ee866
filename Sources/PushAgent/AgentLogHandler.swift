#if canImport(Glibc)
import PushSystem
import Glibc
#endif
import Logging
import PushConfig

/// A swift-log handler that writes to a `LogOutput` in its format (text, journald, JSON).
/// Callers never put secrets in messages or metadata; this handler prints what it is given, one
/// line per event: in text, control characters are escaped (`\n`, `\x1b`), in JSON encoded.
public struct AgentLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    private let output: LogOutput

    public init(output: LogOutput, level: Logger.Level = .info) {
        self.output = output
        logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        output.line(Self.format(level: event.level, message: "\(event.message)", metadata: merged,
                                output: output, now: WallClock.now()))
    }

    static func format(level: Logger.Level, message: String, metadata: Logger.Metadata, output: LogOutput,
                       now: WallClock.Time) -> String {
        switch output.format {
        case .json:
            var fields = [("time", JSONText.string(now.iso8601)), ("level", JSONText.string(level.rawValue)),
                          ("message", JSONText.string(message))]
            for key in metadata.keys.sorted() {
                // A number stays one (a diagnostic's line and column, as validate's JSON has them).
                if case .stringConvertible(let value) = metadata[key]!, value is Int {
                    fields.append((key, "\(value)"))
                } else {
                    fields.append((key, JSONText.string("\(metadata[key]!)")))
                }
            }
            return "{" + fields.map { JSONText.string($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
        case .text:
            var text = message.displayEscaped
            // The subscription's fields are in the sentence already; JSON has them as fields.
            let extra = metadata.keys.filter { !Self.namedInTheMessage.contains($0) }.sorted()
            if !extra.isEmpty {
                text += " " + extra.map { "\($0)=\(metadata[$0]!)".displayEscaped }.joined(separator: " ")
            }
            if output.journal { return "<\(syslogPriority(level))>" + text }
            return "\(now.iso8601) \(level.rawValue): " + text
        }
    }

    /// Metadata a text line leaves out, as its sentence names them (``Logger/fields(_:host:)``,
    /// ``Diagnostic/logFields``).
    static let namedInTheMessage: Set<String> = ["account", "service", "host", "file", "line", "column"]

    /// syslog(3) priorities, as journald reads them from a `<N>` prefix.
    static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}

extension LogOutput {
    /// Writes a configuration diagnostic in this output's format: as `validate` prints it
    /// (`FILE:LINE:COLUMN: warning: …`, the form editors parse) on a terminal or in a file, with
    /// its `<N>` priority under journald, and as a JSON object with its place as fields with
    /// `--log-format json`, so that a log read by machine has no line of another form.
    public func diagnostic(_ diagnostic: Diagnostic) {
        let level: Logger.Level = diagnostic.severity == .error ? .error : .warning
        switch format {
        case .json:
            line(AgentLogHandler.format(level: level, message: diagnostic.formatted, metadata: diagnostic.logFields, output: self,
                                        now: WallClock.now()))
        case .text:
            line(journal ? "<\(AgentLogHandler.syslogPriority(level))>" + diagnostic.formatted : diagnostic.formatted)
        }
    }
}

extension Diagnostic {
    /// Its place as fields of a JSON log line: `file`, `line` and `column` (numbers, as in
    /// `validate --format json`; none for a whole file), and `account`.
    var logFields: Logger.Metadata {
        var fields: Logger.Metadata = ["file": "\(file)"]
        if line > 0 {
            fields["line"] = .stringConvertible(line)
            fields["column"] = .stringConvertible(column)
        }
        if let account { fields["account"] = "\(account)" }
        return fields
    }
}

