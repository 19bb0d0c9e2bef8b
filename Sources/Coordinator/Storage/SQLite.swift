import CSQLite

/// A value bound to or read from SQLite.
public enum SQLValue: Sendable, Equatable {
    /// INTEGER.
    case int(Int64)
    /// TEXT.
    case text(String)
    /// BLOB.
    case blob([UInt8])
    /// NULL.
    case null
}

/// A SQLite failure with SQLite's own message.
public struct StorageError: Error, Sendable, CustomStringConvertible {
    /// SQLite's result code.
    public let code: Int32
    /// What failed.
    public let description: String
    /// Creates an error.
    public init(code: Int32, _ description: String) {
        self.code = code
        self.description = description
    }
}

/// A minimal SQLite connection for one thread: prepared statements cached by their SQL,
/// transactions that roll back on any error. Not thread-safe by design: the coordinator uses it
/// from its reactor thread only (requests are serialised there, so transactions never interleave).
public final class SQLiteDatabase {
    private var handle: OpaquePointer?
    private var statements: [String: SQLiteStatement] = [:]
    /// The database file.
    public let path: String

    /// Opens (creating if needed) the database at `path` (":memory:" for a private in-memory one).
    public init(path: String) throws(StorageError) {
        self.path = path
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &db, flags, nil)
        guard status == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw StorageError(code: status, "cannot open \(path): \(message)")
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
    }

    deinit { close() }

    /// Finalises every statement and closes the connection (idempotent).
    public func close() {
        for statement in statements.values { statement.finalize() }
        statements.removeAll()
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    /// Runs one or more statements without results (schema, pragmas).
    public func execute(_ sql: String) throws(StorageError) {
        var error: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &error)
        guard status == SQLITE_OK else {
            let message = error.map { String(cString: $0) } ?? "error \(status)"
            sqlite3_free(error)
            throw StorageError(code: status, message)
        }
    }

    /// The cached prepared statement for `sql`.
    public func statement(_ sql: String) throws(StorageError) -> SQLiteStatement {
        if let cached = statements[sql] { return cached }
        var raw: OpaquePointer?
        let status = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &raw, nil)
        guard status == SQLITE_OK, let raw else { throw error(status, "prepare") }
        let statement = SQLiteStatement(raw, database: self)
        statements[sql] = statement
        return statement
    }

    /// Runs `sql` with `values` bound (no rows expected).
    public func run(_ sql: String, _ values: [SQLValue] = []) throws(StorageError) {
        let statement = try self.statement(sql)
        try statement.run(values)
    }

    /// Runs `sql` with `values` and calls `row` for every result row.
    public func query(_ sql: String, _ values: [SQLValue] = [], row: (SQLiteRow) throws -> Void) throws {
        let statement = try self.statement(sql)
        try statement.query(values, row: row)
    }

    /// Runs `body` in an immediate transaction: committed when it returns, rolled back when it
    /// throws.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// The result of `PRAGMA integrity_check` ("ok" when healthy).
    public func integrityCheck() throws -> String {
        var lines: [String] = []
        try query("PRAGMA integrity_check") { lines.append($0.text(0)) }
        return lines.joined(separator: "; ")
    }

    func error(_ status: Int32, _ what: String) -> StorageError {
        let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "closed"
        return StorageError(code: status, "\(what): \(message)")
    }
}

/// A prepared statement, reset and rebound on every use.
public final class SQLiteStatement {
    private var raw: OpaquePointer?
    private unowned let database: SQLiteDatabase

    init(_ raw: OpaquePointer, database: SQLiteDatabase) {
        self.raw = raw
        self.database = database
    }

    func finalize() {
        sqlite3_finalize(raw)
        raw = nil
    }

    private func bind(_ values: [SQLValue]) throws(StorageError) {
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let status: Int32
            switch value {
            case .int(let number): status = sqlite3_bind_int64(raw, index, number)
            case .text(let text): status = sqlite3_bind_text(raw, index, text, -1, netplay_sqlite_transient())
            case .blob(let bytes):
                status = bytes.withUnsafeBytes { buffer in
                    sqlite3_bind_blob(raw, index, buffer.baseAddress, Int32(buffer.count), netplay_sqlite_transient())
                }
            case .null: status = sqlite3_bind_null(raw, index)
            }
            guard status == SQLITE_OK else { throw database.error(status, "bind") }
        }
    }

    /// Executes with `values`; throws on any error (constraint violations included).
    public func run(_ values: [SQLValue]) throws(StorageError) {
        try bind(values)
        let status = sqlite3_step(raw)
        sqlite3_reset(raw)
        guard status == SQLITE_DONE || status == SQLITE_ROW else { throw database.error(status, "step") }
    }

    /// Executes with `values`, calling `row` per result row.
    public func query(_ values: [SQLValue], row: (SQLiteRow) throws -> Void) throws {
        try bind(values)
        defer { sqlite3_reset(raw) }
        while true {
            let status = sqlite3_step(raw)
            if status == SQLITE_DONE { return }
            guard status == SQLITE_ROW else { throw database.error(status, "step") }
            try row(SQLiteRow(raw: raw))
        }
    }
}

/// The current row of a query (valid only inside the row callback).
public struct SQLiteRow {
    let raw: OpaquePointer?

    /// Column `index` as an integer (0 for NULL).
    public func int(_ index: Int32) -> Int64 { sqlite3_column_int64(raw, index) }

    /// Column `index` as text ("" for NULL).
    public func text(_ index: Int32) -> String {
        guard let pointer = sqlite3_column_text(raw, index) else { return "" }
        return String(cString: pointer)
    }

    /// Column `index` as optional text (nil for NULL).
    public func optionalText(_ index: Int32) -> String? {
        sqlite3_column_type(raw, index) == SQLITE_NULL ? nil : text(index)
    }

    /// Column `index` as optional bytes (nil for NULL).
    public func optionalBlob(_ index: Int32) -> [UInt8]? {
        sqlite3_column_type(raw, index) == SQLITE_NULL ? nil : blob(index)
    }

    /// Column `index` as a value of `T` (a count, a time, an enum's raw value); a stored value
    /// outside `T`'s range (a hand-edited or damaged row) throws, naming `column`, instead of
    /// trapping in the conversion.
    public func integer<T: FixedWidthInteger>(_ index: Int32, _ column: String, as _: T.Type = T.self) throws(StorageError) -> T {
        let value = int(index)
        guard let converted = T(exactly: value) else {
            throw StorageError(code: SQLITE_MISMATCH, "\(column) holds \(value), outside \(T.min) ... \(T.max)")
        }
        return converted
    }

    /// Column `index` as bytes (empty for NULL).
    public func blob(_ index: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(raw, index))
        guard count > 0, let pointer = sqlite3_column_blob(raw, index) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}
