@testable import Coordinator
import Foundation
import NetplayTestSupport
import NetplayWire
import Testing

/// A database an operator edited by hand, a disk damaged, a newer coordinator wrote, or one moved
/// without its key file: the coordinator refuses to start with the reason (the row, the version,
/// the file), and the data stays as it was. It used to trap on a value out of range, re-stamp a
/// newer schema as its own, and mint a new token key that voided every participant's token.
@Suite("The coordinator refuses a database it cannot trust", .ownThread)
struct DamagedDatabaseTests {
    /// A harness holding one session with two participants, its store edited by `sql` and the
    /// coordinator reopened: the error it refused with.
    private func reopenFailure(after sql: (String) -> String) throws -> String? {
        let h = try Harness()
        let host = try h.create()
        _ = try h.join(host.session.sessionId, name: "bob")
        try h.store.database.execute(sql(host.session.sessionId))
        do {
            try h.restart()
            return nil
        } catch {
            // Nothing was changed: the edited row is still there for the operator to mend.
            let raw = try SQLiteDatabase(path: h.directory + "/c.sqlite")
            defer { raw.close() }
            var sessions = 0
            try raw.query("SELECT COUNT(*) FROM sessions") { sessions = Int($0.int(0)) }
            #expect(sessions == 1)
            return "\(error)"
        }
    }

    @Test(arguments: [
        ("UPDATE sessions SET created_ms = -1", "created_ms holds -1"),
        ("UPDATE sessions SET version = -5", "version holds -5"),
        ("UPDATE sessions SET state = 0", "state holds 0"),
        ("UPDATE sessions SET state = 99", "state holds 99"),
        ("UPDATE sessions SET settings = x'ff'", "settings do not decode"),
        ("UPDATE participants SET slot = -1 WHERE name = 'bob'", "slot holds -1"),
        ("UPDATE participants SET role = 7 WHERE name = 'bob'", "role holds 7"),
        ("UPDATE participants SET joined_ms = -2 WHERE name = 'bob'", "joined_ms holds -2"),
    ])
    func aDamagedRowIsNamedAndNothingIsLost(sql: String, reason: String) throws {
        let failure = try #require(try reopenFailure { _ in sql })
        #expect(failure.contains(reason) && failure.contains("cannot be loaded"), "\(failure)")
    }

    @Test func aDamagedRelayRowIsNamed() throws {
        let failure = try #require(try reopenFailure { _ in "UPDATE relays SET info = x'ff'" })
        #expect(failure.contains("relay sync-0 cannot be loaded"), "\(failure)")
    }

    @Test func aDatabaseOfANewerSchemaIsRefusedNotRestamped() throws {
        let failure = try #require(try reopenFailure { _ in "UPDATE meta SET value = '99' WHERE key = 'schema_version'" })
        #expect(failure.contains("schema version 99, newer than this coordinator's"), "\(failure)")
        let h = try Harness()
        try h.store.database.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        h.store.close()
        #expect(throws: StorageError.self) { _ = try SessionStore(path: h.directory + "/c.sqlite") }
        // Still 99: a later, newer coordinator finds its database as it left it.
        let raw = try SQLiteDatabase(path: h.directory + "/c.sqlite")
        defer { raw.close() }
        var version = ""
        try raw.query("SELECT value FROM meta WHERE key = 'schema_version'") { version = $0.text(0) }
        #expect(version == "99")
    }

    @Test func aMissingTokenKeyIsRefusedWhileSessionsNeedIt() throws {
        let h = try Harness()
        let host = try h.create()
        try FileManager.default.removeItem(atPath: h.directory + "/participant-token.key")
        #expect(throws: (any Error).self) { try h.restart() }
        #expect(!FileManager.default.fileExists(atPath: h.directory + "/participant-token.key"), "no new key was made")
        // With no active session, a missing key is simply made anew.
        let empty = try Harness()
        let ended = try empty.create()
        _ = try empty.core.end(EndSessionRequest(sessionId: ended.session.sessionId, participantId: ended.participantId,
                                                 participantToken: ended.participantToken), at: empty.time)
        try FileManager.default.removeItem(atPath: empty.directory + "/participant-token.key")
        try empty.restart()
        #expect(FileManager.default.fileExists(atPath: empty.directory + "/participant-token.key"))
        _ = host
    }
}
