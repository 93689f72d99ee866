import CSQLite

/// A minimal binding of one SQLite connection: statements with text and integer parameters.
///
/// Not thread-safe on its own; ``StateStore`` serialises every use behind its lock.
final class SQLiteConnection {
    private let handle: OpaquePointer
    let path: String

    /// Opens the database at `path`, creating it unless `readOnly`.
    init(path: String, readOnly: Bool) throws(StateError) {
        self.path = path
        var handle: OpaquePointer?
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        flags |= readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        if !readOnly { flags |= SQLITE_OPEN_CREATE }
        let status = sqlite3_open_v2(path, &handle, flags, nil)
        guard status == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(status))
            sqlite3_close_v2(handle)
            throw Self.isCorruption(status) ? .corrupt(path, message) : StateError(.open, "cannot open the state database \(path) (\(message))")
        }
        self.handle = handle
        sqlite3_busy_timeout(handle, 5_000)
    }

    deinit {
        sqlite3_close_v2(handle)
    }

    /// Copies the write-ahead log into the database and truncates it to nothing (best effort:
    /// a reader that holds the log, such as `status`, leaves it as it is).
    func checkpointTruncating() {
        _ = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_TRUNCATE, nil, nil)
    }

    /// Frees the page cache's unused pages (they are read back from the file when needed).
    func releaseMemory() {
        _ = sqlite3_db_release_memory(handle)
    }

    /// Runs `sql` (one or more statements without parameters).
    func execute(_ sql: String) throws(StateError) {
        // The message is the connection's, which `failure()` reads.
        guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else { throw failure() }
    }

    /// Compiles `sql` into a statement that can be run many times.
    func prepare(_ sql: String) throws(StateError) -> Statement {
        var statement: OpaquePointer?
        let status = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard status == SQLITE_OK, let statement else {
            throw failure()
        }
        return Statement(handle: statement, connection: self)
    }

    /// The error of the call that just failed on this connection.
    fileprivate func failure() -> StateError {
        let message = String(cString: sqlite3_errmsg(handle))
        if Self.isCorruption(sqlite3_extended_errcode(handle)) { return .corrupt(path, message) }
        return StateError(.query, "the state database \(path) failed (\(message))")
    }

    /// Whether a result code (extended or not) says the file is damaged or not a database.
    static func isCorruption(_ code: Int32) -> Bool {
        let primary = code & 0xFF
        return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB
    }

    /// One compiled statement; parameters are bound by position from 1.
    final class Statement {
        private let handle: OpaquePointer
        private unowned let connection: SQLiteConnection

        fileprivate init(handle: OpaquePointer, connection: SQLiteConnection) {
            self.handle = handle
            self.connection = connection
        }

        deinit {
            sqlite3_finalize(handle)
        }

        func bind(_ index: Int32, _ text: String?) {
            guard let text else {
                sqlite3_bind_null(handle, index)
                return
            }
            var utf8 = text
            utf8.withUTF8 { bytes in
                bytes.withMemoryRebound(to: CChar.self) { chars in
                    // A zero-length text still needs a valid pointer.
                    if let base = chars.baseAddress {
                        _ = pr_bind_text(handle, index, base, Int32(chars.count))
                    } else {
                        _ = pr_bind_text(handle, index, "", 0)
                    }
                }
            }
        }

        func bind(_ index: Int32, _ value: Int64?) {
            if let value {
                sqlite3_bind_int64(handle, index, value)
            } else {
                sqlite3_bind_null(handle, index)
            }
        }

        /// Runs a statement that returns no rows, then resets it for the next use.
        func run() throws(StateError) {
            defer { reset() }
            let status = sqlite3_step(handle)
            guard status == SQLITE_DONE || status == SQLITE_ROW else { throw connection.failure() }
        }

        /// Steps to the next row: true while there is one.
        func step() throws(StateError) -> Bool {
            let status = sqlite3_step(handle)
            switch status {
            case SQLITE_ROW: return true
            case SQLITE_DONE: return false
            default: throw connection.failure()
            }
        }

        func reset() {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
        }

        func text(_ column: Int32) -> String? {
            guard sqlite3_column_type(handle, column) != SQLITE_NULL, let bytes = sqlite3_column_text(handle, column) else {
                return nil
            }
            let count = Int(sqlite3_column_bytes(handle, column))
            return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
        }

        func int64(_ column: Int32) -> Int64? {
            sqlite3_column_type(handle, column) == SQLITE_NULL ? nil : sqlite3_column_int64(handle, column)
        }
    }
}
