import PushState

/// `pushreporter status`: the state directory's records as a table, JSON, or Prometheus text
/// exposition format (for node_exporter's textfile collector).
public struct StatusReport: Sendable {
    public var records: [AccountRecord]

    public init(records: [AccountRecord]) {
        self.records = records
    }

    /// A summary line, then one row per account.
    public var text: String {
        var lines = [AccountCounts(records).statusText]
        guard !records.isEmpty else { return lines[0] }
        let header = ["ACCOUNT", "STATE", "ATTEMPTS", "LAST ATTEMPT", "NEXT ATTEMPT", "LAST SUCCESS", "LAST OUTCOME"]
        let rows = records.map { record in
            [record.id, record.phase.rawValue, "\(record.attempts)", Self.time(record.lastAttemptAt),
             record.nextDueAt.map { Self.time($0) } ?? (record.phase == .pending ? "now" : "-"),
             Self.time(record.lastSuccessAt), record.lastOutcome ?? "-"]
        }
        var widths = header.map(\.count)
        for row in rows {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                index == cells.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count)
            }.joined(separator: "  ")
        }
        lines.append("")
        lines.append(line(header))
        lines.append(contentsOf: rows.map(line))
        return lines.joined(separator: "\n")
    }

    /// A JSON array with one object per account; times are ISO 8601 UTC, or null.
    public var json: String {
        JSONText.array(records.map { record in
            func time(_ value: Int64?) -> String { value.map { JSONText.string(Self.time($0)) } ?? "null" }
            return JSONText.object([
                ("account", JSONText.string(record.id)),
                ("state", JSONText.string(record.phase.rawValue)),
                ("attempts", "\(record.attempts)"),
                ("lastAttempt", time(record.lastAttemptAt)),
                ("lastOutcome", record.lastOutcome.map(JSONText.string) ?? "null"),
                ("nextAttempt", time(record.nextDueAt)),
                ("lastSuccess", time(record.lastSuccessAt)),
            ])
        })
    }

    /// The Prometheus text exposition format: counts by state, and per account its attempts,
    /// last success and next attempt as Unix times.
    public var prometheus: String {
        let counts = AccountCounts(records)
        var out = """
            # HELP pushreporter_accounts Accounts by where their report stands.
            # TYPE pushreporter_accounts gauge
            pushreporter_accounts{state="delivered"} \(counts.delivered)
            pushreporter_accounts{state="retrying"} \(counts.retrying)
            pushreporter_accounts{state="pending"} \(counts.pending)
            pushreporter_accounts{state="removing"} \(counts.removing)
            # HELP pushreporter_report_attempts Finished attempts of the account's current report or removal.
            # TYPE pushreporter_report_attempts gauge

            """
        for record in records {
            out += "pushreporter_report_attempts{account=\(Self.label(record.id))} \(record.attempts)\n"
        }
        out += """
            # HELP pushreporter_last_success_timestamp_seconds When a report of the account was last delivered.
            # TYPE pushreporter_last_success_timestamp_seconds gauge

            """
        for record in records {
            if let success = record.lastSuccessAt {
                out += "pushreporter_last_success_timestamp_seconds{account=\(Self.label(record.id))} \(Self.seconds(success))\n"
            }
        }
        out += """
            # HELP pushreporter_next_attempt_timestamp_seconds When the account's next attempt is due.
            # TYPE pushreporter_next_attempt_timestamp_seconds gauge

            """
        for record in records {
            if let due = record.nextDueAt {
                out += "pushreporter_next_attempt_timestamp_seconds{account=\(Self.label(record.id))} \(Self.seconds(due))\n"
            }
        }
        return out
    }

    /// `2026-11-21T18:20:01Z`, or `-`.
    static func time(_ milliseconds: Int64?) -> String {
        guard let milliseconds else { return "-" }
        let iso = WallClock.Time(seconds: milliseconds / 1000, milliseconds: Int(milliseconds % 1000)).iso8601
        return String(iso.prefix(19)) + "Z"
    }

    /// Seconds with millisecond precision, as Prometheus writes timestamps in samples.
    static func seconds(_ milliseconds: Int64) -> String {
        let fraction = milliseconds % 1000
        return fraction == 0 ? "\(milliseconds / 1000)" : "\(milliseconds / 1000).\(String(1000 + fraction).dropFirst())"
    }

    /// A label value in quotes, with `\`, `"` and newlines escaped as the format requires.
    static func label(_ value: String) -> String {
        var out = "\""
        for character in value {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out + "\""
    }
}
