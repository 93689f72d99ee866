import CPostgres
#if canImport(Glibc)
import Glibc
#endif

/// A minimal binding of one libpq connection: statements with text parameters and text results.
///
/// Not thread-safe on its own (hence unchecked): its store serialises every use behind a lock.
final class PostgresConnection: @unchecked Sendable {
    private var handle: OpaquePointer?
    /// The URI without a password, for messages.
    let location: String
    private let uri: String
    private let password: String?

    /// Connects to `uri` (a libpq connection URI); `password`, when given, goes beside it and
    /// never into a message. Without one, libpq reads `PGPASSWORD` and `~/.pgpass`.
    init(uri: String, password: String?) throws(StateError) {
        self.uri = uri
        self.password = password
        location = Self.withoutPassword(uri)
        try connect()
    }

    deinit {
        PQfinish(handle)
    }

    /// (Re)connects; throws with libpq's message when the server cannot be reached.
    func connect() throws(StateError) {
        PQfinish(handle)
        // libpq reads the keywords in order, the last value winning: these defaults come before
        // the URI (dbname), which may override them. A server that stops answering is given up
        // within about half a minute (keepalives, tcp_user_timeout) rather than holding the
        // agent for the kernel's 15 minutes; a statement never runs past a minute.
        var keys = ["connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
                    "tcp_user_timeout", "options", "application_name", "dbname"]
        var values = ["10", "1", "10", "5", "3", "30000", "-c statement_timeout=60000", "pushreporter", uri]
        if let password {
            keys.append("password")
            values.append(password)
        }
        handle = withCStrings(keys) { keyPointers in
            withCStrings(values) { valuePointers in
                // expand_dbname: dbname is read as a URI.
                PQconnectdbParams(keyPointers, valuePointers, 1)
            }
        }
        guard let handle, PQstatus(handle) == CONNECTION_OK else {
            let message = handle.map { Self.message(PQerrorMessage($0)) } ?? "out of memory"
            throw StateError(.open, "cannot connect to the state database \(location) (\(message))")
        }
        // The server's notices (a table that exists already, say) are not the agent's log.
        _ = PQsetNoticeProcessor(handle, { _, _ in }, nil)
    }

    /// Whether the connection is usable (false after the server went away).
    var isAlive: Bool { handle.map { PQstatus($0) == CONNECTION_OK } ?? false }

    /// Runs `sql` with `parameters` (`$1`, `$2`, …; nil is NULL) and returns its rows, each a list
    /// of column texts (nil for NULL).
    @discardableResult
    func query(_ sql: String, _ parameters: [String?] = []) throws(StateError) -> [[String?]] {
        guard let handle else { throw StateError(.query, "the state database \(location) is not connected") }
        let result = withOptionalCStrings(parameters) { pointers in
            PQexecParams(handle, sql, Int32(parameters.count), nil, pointers, nil, nil, 0)
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let message = result.map { Self.message(PQresultErrorMessage($0)) } ?? Self.message(PQerrorMessage(handle))
            // 40001 serialization failure, 40P01 deadlock detected: the other transaction won.
            let state = result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "C"))) }.map { String(cString: $0) }
            let code: StateError.Code = state == "40001" || state == "40P01" ? .conflict
                : PQstatus(handle) == CONNECTION_OK ? .query : .open
            throw StateError(code, "the state database \(location) failed (\(message))")
        }
        let rows = Int(PQntuples(result))
        let columns = Int(PQnfields(result))
        var out: [[String?]] = []
        out.reserveCapacity(rows)
        for row in 0..<rows {
            var values: [String?] = []
            values.reserveCapacity(columns)
            for column in 0..<columns {
                if PQgetisnull(result, Int32(row), Int32(column)) != 0 {
                    values.append(nil)
                } else {
                    values.append(String(cString: PQgetvalue(result, Int32(row), Int32(column))))
                }
            }
            out.append(values)
        }
        return out
    }

    /// Runs `sql`, one or more statements without parameters.
    func execute(_ sql: String) throws(StateError) {
        guard let handle else { throw StateError(.query, "the state database \(location) is not connected") }
        let result = PQexec(handle, sql)
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let message = result.map { Self.message(PQresultErrorMessage($0)) } ?? Self.message(PQerrorMessage(handle))
            throw StateError(PQstatus(handle) == CONNECTION_OK ? .query : .open,
                             "the state database \(location) failed (\(message))")
        }
    }

    private static func message(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "unknown error" }
        return String(cString: text).split(separator: "\n").first.map(String.init) ?? ""
    }

    /// `postgres://user:secret@host/db?password=x&sslmode=require` →
    /// `postgres://user@host/db?password=********&sslmode=require`: how a URI is shown. The
    /// loader refuses both forms in `agent.state` (`uriHasPassword`), but `--state-dir` and
    /// `migrate` take a URI from the command line.
    static func withoutPassword(_ uri: String) -> String {
        var shown = uri
        if let scheme = shown.firstRange(of: "://"), let at = shown[scheme.upperBound...].firstIndex(of: "@"),
           let colon = shown[scheme.upperBound..<at].firstIndex(of: ":") {
            shown = String(shown[..<colon]) + String(shown[at...])
        }
        guard let query = shown.firstIndex(of: "?") else { return shown }
        let parameters = shown[shown.index(after: query)...].split(separator: "&", omittingEmptySubsequences: false).map { parameter in
            parameter.lowercased().hasPrefix("password=") ? "password=********" : String(parameter)
        }
        return String(shown[...query]) + parameters.joined(separator: "&")
    }
}

/// `body` with `strings` as C strings (a NULL-terminated array).
private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
    withOptionalCStrings(strings + [nil]) { body($0) }
}

/// `body` with `strings` as C strings, nil as NULL pointers (no array at all when empty).
private func withOptionalCStrings<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
    let copies: [UnsafeMutablePointer<CChar>?] = strings.map { $0.map { strdup($0) } ?? nil }
    defer { for copy in copies { free(copy) } }
    let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress) }
}
