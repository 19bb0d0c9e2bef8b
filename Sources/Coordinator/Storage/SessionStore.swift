import CSQLite
import Foundation
import NetplayAuth
import NetplayWire

/// The coordinator's durable state in SQLite: sessions, participants (slots), bans, issued
/// tickets and the relay registry, plus the schema version and announcer id in `meta`. The
/// database file is created with mode 0600; the participant-token key is not in it but in its
/// own 0600 file next to it (``participantTokenKey()``).
///
/// WAL journal; `synchronous=NORMAL` by default (a committed change survives a killed process;
/// FULL also survives power loss). A partial unique index on `(session_id, slot)` makes a double
/// slot assignment impossible even if the logic above were wrong. Every request's writes go
/// through ``apply(_:)`` in one transaction.
public final class SessionStore {
    /// How hard SQLite syncs to disk.
    public enum Durability: String, Sendable, CaseIterable {
        /// Survives a crash of the process (WAL + synchronous=NORMAL).
        case normal
        /// Also survives power loss (synchronous=FULL).
        case full
    }

    /// The connection (reactor thread only).
    public let database: SQLiteDatabase
    static let schemaVersion = 3
    /// The file holding the participant-token key (nil for an in-memory store).
    public let tokenKeyPath: String?
    private var memoryTokenKey: [UInt8]?

    /// Opens or creates the store at `path` (":memory:" for tests). A new database file is
    /// created with mode 0600, and an existing one (with its WAL files) is tightened to 0600.
    /// The participant-token key lives in `tokenKeyPath` (default: `participant-token.key` in
    /// the database's directory).
    public init(path: String, durability: Durability = .normal, tokenKeyPath: String? = nil) throws(StorageError) {
        if path != ":memory:" {
            try Self.makePrivate(path)
            self.tokenKeyPath = tokenKeyPath ?? ((path as NSString).deletingLastPathComponent.isEmpty ? "participant-token.key"
                : (path as NSString).deletingLastPathComponent + "/participant-token.key")
        } else {
            self.tokenKeyPath = tokenKeyPath
        }
        database = try SQLiteDatabase(path: path)
        try database.execute("""
            PRAGMA journal_mode=WAL;
            PRAGMA synchronous=\(durability == .full ? "FULL" : "NORMAL");
            PRAGMA foreign_keys=ON;
            PRAGMA busy_timeout=5000;
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
            CREATE TABLE IF NOT EXISTS sessions (
                session_id TEXT PRIMARY KEY, state INTEGER NOT NULL, settings BLOB NOT NULL,
                play_hash TEXT, spectate_hash TEXT, host_participant_id TEXT NOT NULL,
                relay_id TEXT NOT NULL, relay_endpoint TEXT NOT NULL, created_ms INTEGER NOT NULL,
                started_ms INTEGER NOT NULL, ended_ms INTEGER NOT NULL, version INTEGER NOT NULL,
                idempotency_key TEXT NOT NULL, request_fingerprint BLOB);
            CREATE TABLE IF NOT EXISTS participants (
                session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
                participant_id TEXT NOT NULL, name TEXT NOT NULL, role INTEGER NOT NULL, slot INTEGER NOT NULL,
                is_host INTEGER NOT NULL, may_play INTEGER NOT NULL, connected INTEGER NOT NULL,
                joined_ms INTEGER NOT NULL, idempotency_key TEXT NOT NULL, source TEXT NOT NULL DEFAULT '',
                request_fingerprint BLOB, PRIMARY KEY (session_id, participant_id));
            CREATE UNIQUE INDEX IF NOT EXISTS participants_slot ON participants(session_id, slot) WHERE slot > 0;
            CREATE TABLE IF NOT EXISTS bans (
                session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE, name TEXT NOT NULL,
                PRIMARY KEY (session_id, name));
            CREATE TABLE IF NOT EXISTS ban_marks (
                session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE, kind INTEGER NOT NULL,
                value TEXT NOT NULL, PRIMARY KEY (session_id, kind, value));
            CREATE TABLE IF NOT EXISTS tickets (
                nonce BLOB PRIMARY KEY, session_id TEXT NOT NULL, participant_id TEXT NOT NULL, role INTEGER NOT NULL,
                slot INTEGER NOT NULL, relay_id TEXT NOT NULL, issued_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL,
                key_id INTEGER NOT NULL);
            CREATE INDEX IF NOT EXISTS tickets_expiry ON tickets(expires_ms);
            CREATE INDEX IF NOT EXISTS tickets_session ON tickets(session_id);
            CREATE TABLE IF NOT EXISTS relays (relay_id TEXT PRIMARY KEY, info BLOB NOT NULL);
            """)
        try migrate()
    }

    /// Brings an older database up to date: participants gain their source address (version 2);
    /// sessions and participants gain the fingerprint of the keyed request that made them
    /// (version 3), NULL in rows stored before, which grants their keys no replay.
    private func migrate() throws(StorageError) {
        // A database a newer coordinator wrote may hold what this one cannot read: refused, not
        // re-stamped with this version.
        var stored: Int?
        do {
            try database.query("SELECT value FROM meta WHERE key = 'schema_version'") { row in stored = Int(row.text(0)) }
        } catch let error as StorageError {
            throw error
        } catch {
            throw StorageError(code: 1, "schema version check failed: \(error)")
        }
        if let stored, stored > Self.schemaVersion {
            throw StorageError(code: SQLITE_MISMATCH, "the database is of schema version \(stored), newer than this coordinator's "
                               + "\(Self.schemaVersion): run the newer netplay-coordinator that wrote it, or start from another --data-dir")
        }
        try addColumn("participants", "source", "TEXT NOT NULL DEFAULT ''")
        try addColumn("sessions", "request_fingerprint", "BLOB")
        try addColumn("participants", "request_fingerprint", "BLOB")
        try database.execute("""
            INSERT INTO meta(key, value) VALUES ('schema_version', '\(Self.schemaVersion)')
            ON CONFLICT(key) DO UPDATE SET value = excluded.value;
            """)
    }

    /// Adds `column` to `table` unless it has it.
    private func addColumn(_ table: String, _ column: String, _ definition: String) throws(StorageError) {
        var has = false
        do {
            try database.query("PRAGMA table_info(\(table))") { row in if row.text(1) == column { has = true } }
        } catch let error as StorageError {
            throw error
        } catch {
            throw StorageError(code: 1, "schema check failed: \(error)")
        }
        if !has { try database.execute("ALTER TABLE \(table) ADD COLUMN \(column) \(definition)") }
    }

    /// Creates `path` with mode 0600 when missing; tightens it and its WAL files to 0600 otherwise.
    private static func makePrivate(_ path: String) throws(StorageError) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StorageError(code: 14, "cannot open \(path): \(String(cString: strerror(errno)))") }
        Glibc.close(fd)
        for file in [path, path + "-wal", path + "-shm"] {
            var info = stat()
            if stat(file, &info) == 0, info.st_mode & 0o077 != 0, chmod(file, 0o600) != 0 {
                throw StorageError(code: 3, "cannot make \(file) private (mode 0600): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// The key participant tokens are minted with: read from its 0600 key file, created there
    /// on first use. A key an older coordinator kept in the database (`meta`) is moved to the
    /// file and deleted from the database. An in-memory store keeps a random key in memory.
    public func participantTokenKey() throws -> [UInt8] {
        let legacy = "participant_token_key"
        guard let tokenKeyPath else {
            if let memoryTokenKey { return memoryTokenKey }
            let key = Sodium.randomBytes(32)
            memoryTokenKey = key
            return key
        }
        let key = try SecretKeyFile.loadOrCreate(path: tokenKeyPath) { () throws -> [UInt8]? in
            if let stored = try meta(legacy), stored.count >= 16 { return stored }
            // A new key would void every token the stored sessions' participants hold (a database
            // restored or moved without its key file): refused, so nothing is lost.
            let active = try activeSessionCount()
            guard active == 0 else {
                throw StorageError(code: SQLITE_CANTOPEN, "\(tokenKeyPath) is missing, but the database holds \(active) active "
                                   + "sessions whose participants' tokens were made with it: restore the key file beside the database")
            }
            return nil
        }
        // Written to the file first, deleted here second: a crash in between leaves both, and the
        // next start deletes this copy.
        if try meta(legacy) != nil {
            try database.execute("PRAGMA secure_delete=ON")
            try database.run("DELETE FROM meta WHERE key = ?", [.text(legacy)])
            try database.execute("PRAGMA secure_delete=OFF; PRAGMA wal_checkpoint(TRUNCATE);")
        }
        return key
    }

    /// Sessions stored in the lobby or running.
    func activeSessionCount() throws -> Int {
        var count = 0
        try database.query("SELECT COUNT(*) FROM sessions WHERE state IN (?, ?)",
                           [.int(Int64(SessionState.lobby.rawValue)), .int(Int64(SessionState.running.rawValue))]) { count = Int($0.int(0)) }
        return count
    }

    /// Closes the database.
    public func close() { database.close() }

    // MARK: Meta

    /// The bytes stored under `key`, if any.
    public func meta(_ key: String) throws -> [UInt8]? {
        var value: [UInt8]?
        try database.query("SELECT value FROM meta WHERE key = ?", [.text(key)]) { value = $0.blob(0) }
        return value
    }

    /// Stores bytes under `key`.
    public func setMeta(_ key: String, _ value: [UInt8]) throws {
        try database.run("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                         [.text(key), .blob(value)])
    }

    // MARK: Loading

    /// Every stored session with its participants and bans.
    public func loadSessions() throws -> [SessionRecord] {
        var sessions: [String: SessionRecord] = [:]
        var order: [String] = []
        try database.query("""
            SELECT session_id, state, settings, play_hash, spectate_hash, host_participant_id, relay_id, relay_endpoint,
                   created_ms, started_ms, ended_ms, version, idempotency_key, request_fingerprint FROM sessions ORDER BY session_id
            """) { row in
            let sessionId = row.text(0)
            do {
                let settings: SessionSettings
                do { settings = try SessionSettings(decoding: row.blob(2)) } catch {
                    throw StorageError(code: SQLITE_MISMATCH, "settings do not decode: \(error)")
                }
                guard let state = SessionState(rawValue: try row.integer(1, "state")), state != .unspecified else {
                    throw StorageError(code: SQLITE_MISMATCH, "state holds \(row.int(1)), no session state")
                }
                var record = SessionRecord(sessionId: sessionId, state: state,
                                           settings: settings, playPasswordHash: row.optionalText(3),
                                           spectatePasswordHash: row.optionalText(4), hostParticipantId: row.text(5),
                                           relayId: row.text(6), relayEndpoint: row.text(7),
                                           createdAtUnixMs: try row.integer(8, "created_ms"),
                                           idempotencyKey: row.text(12), participants: [])
                record.startedAtUnixMs = try row.integer(9, "started_ms")
                record.endedAtUnixMs = try row.integer(10, "ended_ms")
                record.version = try row.integer(11, "version")
                record.requestFingerprint = row.optionalBlob(13)
                sessions[record.sessionId] = record
                order.append(record.sessionId)
            } catch {
                throw Self.damaged("session \(sessionId)", error)
            }
        }
        try database.query("""
            SELECT session_id, participant_id, name, role, slot, is_host, may_play, connected, joined_ms, idempotency_key, source,
                   request_fingerprint
            FROM participants ORDER BY session_id, joined_ms, rowid
            """) { row in
            do {
                guard let role = Role(rawValue: try row.integer(3, "role")), role != .unspecified else {
                    throw StorageError(code: SQLITE_MISMATCH, "role holds \(row.int(3)), no role")
                }
                let participant = ParticipantRecord(participantId: row.text(1), name: row.text(2), role: role,
                                                    slot: try row.integer(4, "slot"),
                                                    isHost: row.int(5) != 0, mayPlay: row.int(6) != 0, connected: row.int(7) != 0,
                                                    joinedAtUnixMs: try row.integer(8, "joined_ms"), idempotencyKey: row.text(9),
                                                    requestFingerprint: row.optionalBlob(11), source: row.text(10))
                sessions[row.text(0)]?.participants.append(participant)
            } catch {
                throw Self.damaged("participant \(row.text(1)) of session \(row.text(0))", error)
            }
        }
        try database.query("SELECT session_id, name FROM bans") { row in
            sessions[row.text(0)]?.bans.names.insert(row.text(1))
        }
        try database.query("SELECT session_id, kind, value FROM ban_marks") { row in
            switch row.int(1) {
            case BanMark.source: sessions[row.text(0)]?.bans.sources.insert(row.text(2))
            case BanMark.participant: sessions[row.text(0)]?.bans.participantIds.insert(row.text(2))
            default: break
            }
        }
        return order.compactMap { sessions[$0] }
    }

    /// Every stored relay.
    public func loadRelays() throws -> [RelayInfo] {
        var relays: [RelayInfo] = []
        try database.query("SELECT relay_id, info FROM relays ORDER BY relay_id") { row in
            do { relays.append(try RelayInfo(decoding: row.blob(1))) } catch { throw Self.damaged("relay \(row.text(0))", error) }
        }
        return relays
    }

    /// Why loading stopped at a row it cannot read (a hand-edited or damaged database): the
    /// coordinator refuses to start with the row named, rather than trapping or dropping it.
    private static func damaged(_ row: String, _ error: Error) -> StorageError {
        let reason = (error as? StorageError)?.description ?? "\(error)"
        return StorageError(code: SQLITE_CORRUPT, "the database's \(row) cannot be loaded (\(reason)); restore a backup, or delete the row")
    }

    /// Tickets recorded (each participant's newest) and not yet expired at `nowUnixMs`.
    public func liveTicketCount(nowUnixMs: UInt64) throws -> Int {
        var count = 0
        try database.query("SELECT COUNT(*) FROM tickets WHERE expires_ms > ?", [.int(Int64(nowUnixMs))]) { count = Int($0.int(0)) }
        return count
    }

    // MARK: Writing

    /// Applies `changes` in one transaction (all or nothing).
    public func apply(_ changes: [StoreChange]) throws {
        guard !changes.isEmpty else { return }
        try database.transaction {
            for change in changes { try write(change) }
        }
    }

    private func write(_ change: StoreChange) throws {
        switch change {
        case .saveSession(let session):
            var settings = session.settings
            settings.playPassword = ""
            settings.spectatePassword = ""
            try database.run("""
                INSERT INTO sessions(session_id, state, settings, play_hash, spectate_hash, host_participant_id, relay_id,
                                     relay_endpoint, created_ms, started_ms, ended_ms, version, idempotency_key,
                                     request_fingerprint)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(session_id) DO UPDATE SET state = excluded.state, settings = excluded.settings,
                    play_hash = excluded.play_hash, spectate_hash = excluded.spectate_hash,
                    host_participant_id = excluded.host_participant_id, relay_id = excluded.relay_id,
                    relay_endpoint = excluded.relay_endpoint, started_ms = excluded.started_ms,
                    ended_ms = excluded.ended_ms, version = excluded.version
                """, [.text(session.sessionId), .int(Int64(session.state.rawValue)), .blob(try settings.encoded()),
                      session.playPasswordHash.map(SQLValue.text) ?? .null,
                      session.spectatePasswordHash.map(SQLValue.text) ?? .null, .text(session.hostParticipantId),
                      .text(session.relayId), .text(session.relayEndpoint), .int(Int64(session.createdAtUnixMs)),
                      .int(Int64(session.startedAtUnixMs)), .int(Int64(session.endedAtUnixMs)), .int(Int64(session.version)),
                      .text(session.idempotencyKey), session.requestFingerprint.map(SQLValue.blob) ?? .null])
        case .updateSession(let session):
            try database.run("""
                UPDATE sessions SET state = ?, relay_id = ?, relay_endpoint = ?, started_ms = ?, ended_ms = ?, version = ?
                WHERE session_id = ?
                """, [.int(Int64(session.state.rawValue)), .text(session.relayId), .text(session.relayEndpoint),
                      .int(Int64(session.startedAtUnixMs)), .int(Int64(session.endedAtUnixMs)), .int(Int64(session.version)),
                      .text(session.sessionId)])
        case .saveParticipant(let sessionId, let participant):
            try database.run("""
                INSERT INTO participants(session_id, participant_id, name, role, slot, is_host, may_play, connected, joined_ms,
                                         idempotency_key, source, request_fingerprint)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(session_id, participant_id) DO UPDATE SET name = excluded.name, role = excluded.role,
                    slot = excluded.slot, is_host = excluded.is_host, may_play = excluded.may_play,
                    connected = excluded.connected
                """, [.text(sessionId), .text(participant.participantId), .text(participant.name),
                      .int(Int64(participant.role.rawValue)), .int(Int64(participant.slot)), .int(participant.isHost ? 1 : 0),
                      .int(participant.mayPlay ? 1 : 0), .int(participant.connected ? 1 : 0),
                      .int(Int64(participant.joinedAtUnixMs)), .text(participant.idempotencyKey),
                      .text(participant.source), participant.requestFingerprint.map(SQLValue.blob) ?? .null])
        case .deleteParticipant(let sessionId, let participantId):
            try database.run("DELETE FROM participants WHERE session_id = ? AND participant_id = ?",
                             [.text(sessionId), .text(participantId)])
        case .addBan(let sessionId, let name, let source, let participantId):
            try database.run("INSERT OR IGNORE INTO bans(session_id, name) VALUES (?, ?)", [.text(sessionId), .text(name)])
            if !source.isEmpty {
                try database.run("INSERT OR IGNORE INTO ban_marks(session_id, kind, value) VALUES (?, ?, ?)",
                                 [.text(sessionId), .int(BanMark.source), .text(source)])
            }
            try database.run("INSERT OR IGNORE INTO ban_marks(session_id, kind, value) VALUES (?, ?, ?)",
                             [.text(sessionId), .int(BanMark.participant), .text(participantId)])
        case .deleteParticipantTickets(let sessionId, let participantId):
            try database.run("DELETE FROM tickets WHERE session_id = ? AND participant_id = ?", [.text(sessionId), .text(participantId)])
        case .deleteSession(let sessionId):
            try database.run("DELETE FROM tickets WHERE session_id = ?", [.text(sessionId)])
            try database.run("DELETE FROM sessions WHERE session_id = ?", [.text(sessionId)])
        case .saveTicket(let ticket):
            // A participant's newest ticket replaces its earlier ones: every renewal signs a
            // fresh nonce, and kept each as a row until it expired, a participant renewing in
            // a loop grew the file without bound (the rows are a record; tickets verify by
            // their MAC, and a kick revokes by participant).
            try database.run("DELETE FROM tickets WHERE session_id = ? AND participant_id = ?",
                             [.text(ticket.sessionId), .text(ticket.participantId)])
            try database.run("""
                INSERT OR REPLACE INTO tickets(nonce, session_id, participant_id, role, slot, relay_id, issued_ms, expires_ms, key_id)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, [.blob(ticket.nonce), .text(ticket.sessionId), .text(ticket.participantId),
                      .int(Int64(ticket.role.rawValue)), .int(Int64(ticket.slot)), .text(ticket.relayId),
                      .int(Int64(ticket.issuedAtUnixMs)), .int(Int64(ticket.expiresAtUnixMs)), .int(Int64(ticket.keyId))])
        case .deleteTickets(let before):
            try database.run("DELETE FROM tickets WHERE expires_ms < ?", [.int(Int64(before))])
        case .saveRelay(let relay):
            try database.run("INSERT INTO relays(relay_id, info) VALUES (?, ?) ON CONFLICT(relay_id) DO UPDATE SET info = excluded.info",
                             [.text(relay.relayId), .blob(try relay.encoded())])
        case .deleteRelay(let relayId):
            try database.run("DELETE FROM relays WHERE relay_id = ?", [.text(relayId)])
        }
    }
}

/// Kinds of rows in `ban_marks`.
enum BanMark {
    static let source: Int64 = 1
    static let participant: Int64 = 2
}
