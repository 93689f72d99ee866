import PushSystem
import PushBackend
import PushConfig
import PushState

/// `pushreporter status`: the state's subscriptions as a table, JSON, or Prometheus text
/// exposition format (for node_exporter's textfile collector).
public struct StatusReport: Sendable {
    public var records: [SubscriptionRecord]
    /// Whose tables the text adds after its own (FCM's groups), from the delivered subscriptions.
    public var backends: Backends
    /// With state several agents share (SPEC §11): which agent holds each subscription whose
    /// lease has not expired; nil with a state directory.
    public var holders: [SubscriptionKey: String]?

    public init(records: [SubscriptionRecord], backends: Backends, holders: [SubscriptionKey: String]? = nil) {
        self.records = records
        self.backends = backends
        self.holders = holders
    }

    /// A summary line, then one row per subscription, then the backends' own tables.
    public var text: String {
        var lines = [SubscriptionCounts(records).statusText]
        guard !records.isEmpty else { return lines[0] }
        var header = ["ACCOUNT", "SERVICE", "STATE", "ATTEMPTS", "LAST ATTEMPT", "NEXT ATTEMPT", "LAST SUCCESS", "DETAIL"]
        var rows = records.map(Self.row)
        if let holders {
            // The agent before the detail, which runs on to the end of the line.
            header.insert("AGENT", at: 7)
            for (index, record) in records.enumerated() { rows[index].insert((holders[record.key] ?? "-").displayEscaped, at: 7) }
            lines.insert(Self.agentsLine(holders), at: 1)
        }
        lines.append("")
        lines += Self.aligned(header, rows)
        for table in backends.statusTables(records.filter { $0.state == .delivered }.compactMap(KeptData.init)) {
            lines.append("")
            lines.append(table.title.displayEscaped)
            lines += Self.aligned(table.header, table.rows.map { $0.map(\.displayEscaped) })
        }
        return lines.joined(separator: "\n")
    }

    /// `header` and `rows` as lines of columns two spaces apart (the last column unpadded).
    private static func aligned(_ header: [String], _ rows: [[String]]) -> [String] {
        var widths = header.map(\.count)
        for row in rows {
            for (index, cell) in row.enumerated() where index < widths.count { widths[index] = max(widths[index], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                index == cells.count - 1 ? cell : cell + String(repeating: " ", count: max(0, widths[index] - cell.count))
            }.joined(separator: "  ")
        }
        return [line(header)] + rows.map(line)
    }

    /// `3 agents: host-a:412 holds 700, …` (or that none holds any now).
    private static func agentsLine(_ holders: [SubscriptionKey: String]) -> String {
        var held: [String: Int] = [:]
        for holder in holders.values { held[holder, default: 0] += 1 }
        guard !held.isEmpty else { return "no agent holds a subscription now" }
        let parts = held.keys.sorted().map { "\($0.displayEscaped) holds \(held[$0]!)" }
        return "\(held.count) \(held.count == 1 ? "agent" : "agents"): " + parts.joined(separator: ", ")
    }

    private static func row(_ record: SubscriptionRecord) -> [String] {
        let next = record.nextDueAt.map { time($0) } ?? (record.state == .pending && record.lastOutcome == nil ? "now" : "-")
        // Attempts count those of the delivery or cleanup under way: a delivered row has none
        // (0 read as "never tried").
        let attempts = record.state == .delivered && record.attempts == 0 ? "-" : "\(record.attempts)"
        return [record.key.account.displayEscaped, record.key.service.displayEscaped, record.state.rawValue, attempts,
                time(record.lastAttemptAt), next, time(record.lastSuccessAt), (record.lastOutcome ?? "-").displayEscaped]
    }

    /// A JSON array with one object per subscription (SPEC §9.0); times are ISO 8601 UTC, or null.
    public var json: String {
        JSONText.array(records.map { record in
            func time(_ value: Int64?) -> String { value.map { JSONText.string(Self.time($0)) } ?? "null" }
            return JSONText.object([
                ("account", JSONText.string(record.key.account)),
                ("service", JSONText.string(record.key.service)),
                ("state", JSONText.string(record.state.rawValue)),
                ("attempts", "\(record.attempts)"),
                ("lastAttempt", time(record.lastAttemptAt)),
                ("lastSuccess", time(record.lastSuccessAt)),
                ("nextAttempt", time(record.nextDueAt)),
                ("detail", record.lastOutcome.map { JSONText.string($0) } ?? "null"),
            ] + (holders.map { [("agent", $0[record.key].map { JSONText.string($0) } ?? "null")] } ?? []))
        })
    }

    /// The Prometheus text exposition format: counts by service and state, and per subscription
    /// its attempts, last success and next attempt as Unix times.
    public var prometheus: String {
        var byServiceAndState: [String: [SubscriptionState: Int]] = [:]
        for record in records { byServiceAndState[record.key.service, default: [:]][record.state, default: 0] += 1 }
        var out = """
            # HELP pushreporter_subscriptions Subscriptions by service and by where their delivery stands.
            # TYPE pushreporter_subscriptions gauge

            """
        for service in byServiceAndState.keys.sorted() {
            for state in SubscriptionState.allCases {
                out += "pushreporter_subscriptions{service=\(Self.label(service)),state=\"\(state.rawValue)\"} \(byServiceAndState[service]?[state] ?? 0)\n"
            }
        }
        return out + perSubscriptionPrometheus
    }

    /// Per subscription, its attempts, last success and next attempt as Unix times: three lines
    /// a subscription (`/metrics` writes them only with `agent.metrics.perAccount: true`).
    public var perSubscriptionPrometheus: String {
        var out = """
            # HELP pushreporter_report_attempts Finished attempts of the subscription's current delivery or cleanup.
            # TYPE pushreporter_report_attempts gauge

            """
        for record in records {
            out += "pushreporter_report_attempts{\(Self.labels(record.key))} \(record.attempts)\n"
        }
        out += """
            # HELP pushreporter_last_success_timestamp_seconds When the subscription was last delivered.
            # TYPE pushreporter_last_success_timestamp_seconds gauge

            """
        for record in records {
            if let success = record.lastSuccessAt {
                out += "pushreporter_last_success_timestamp_seconds{\(Self.labels(record.key))} \(Self.seconds(success))\n"
            }
        }
        out += """
            # HELP pushreporter_next_attempt_timestamp_seconds When the subscription's next attempt is due.
            # TYPE pushreporter_next_attempt_timestamp_seconds gauge

            """
        for record in records {
            if let due = record.nextDueAt {
                out += "pushreporter_next_attempt_timestamp_seconds{\(Self.labels(record.key))} \(Self.seconds(due))\n"
            }
        }
        return out
    }

    /// `account="…",service="…"`.
    private static func labels(_ key: SubscriptionKey) -> String {
        "account=\(label(key.account)),service=\(label(key.service))"
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
