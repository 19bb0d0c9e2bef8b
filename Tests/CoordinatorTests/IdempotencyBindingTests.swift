@testable import Coordinator
import NetplayTestSupport
import NetplayService
import NetplayWire
import Testing

/// An idempotency key replays the answer to the same request only: it is not a credential that
/// hands its session's host token, or a participant's, to whoever sends it.
@Suite("Idempotency keys bind to their request", .ownThread)
struct IdempotencyBindingTests {
    static let createKey = "create-key-0123456789abcdef"
    static let joinKey = "join-key-0123456789abcdef"

    /// The error `body` threw (nil when it did not throw one).
    func refusal(_ body: () throws -> Any) -> ServiceError? {
        do {
            _ = try body()
            return nil
        } catch {
            return error as? ServiceError
        }
    }

    /// Expects `body` refused as a reuse of `field`'s key.
    func expectReuseRefused(_ field: String, _ body: () throws -> Any, sourceLocation: SourceLocation = #_sourceLocation) {
        let error = refusal(body)
        #expect(error?.code == .alreadyExists && error?.field == field, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(error?.message == "This idempotency key was used for a different request.", sourceLocation: sourceLocation)
    }

    /// A session hosted from 10.0.0.1 with a play password, under ``createKey``, with bob joined
    /// under ``joinKey``.
    func hosted(_ h: Harness) throws -> (host: CreateSessionResponse, bob: JoinSessionResponse) {
        let host = try h.create(maxPlayers: 3, password: "pw", key: Self.createKey, source: "10.0.0.1")
        let bob = try h.join(host.session.sessionId, name: "bob", password: "pw", key: Self.joinKey, source: "10.0.0.2")
        return (host, bob)
    }

    /// The attacks of the hostile-client probe and the player's legitimate retries, on `h`.
    func expectBound(_ h: Harness, host: CreateSessionResponse, bob: JoinSessionResponse) throws {
        let id = host.session.sessionId
        let before = h.session(id)
        let create = "CreateSessionRequest.idempotency_key"
        // Another address, host name and settings under the host's key: no session, no token.
        expectReuseRefused(create) { try h.create(key: Self.createKey, source: "10.0.0.66", hostName: "mallory") }
        expectReuseRefused(create) { try h.create(maxPlayers: 3, password: "pw", key: Self.createKey, source: "10.0.0.1", hostName: "mallory") }
        expectReuseRefused(create) { try h.create(maxPlayers: 4, password: "pw", key: Self.createKey, source: "10.0.0.1") }
        expectReuseRefused(create) { try h.create(maxPlayers: 3, password: "guess", key: Self.createKey, source: "10.0.0.1") }
        // bob's key with his (public) name but another password, role or name: no token either.
        let join = "JoinSessionRequest.idempotency_key"
        expectReuseRefused(join) { try h.join(id, name: "bob", password: "guess", key: Self.joinKey, source: "10.0.0.66") }
        expectReuseRefused(join) { try h.join(id, name: "bob", role: .spectator, password: "pw", key: Self.joinKey) }
        expectReuseRefused(join) { try h.join(id, name: "mallory", password: "pw", key: Self.joinKey) }
        #expect(h.session(id) == before, "the refusals changed nothing")
        #expect(h.core.activeCount == 1)
        // The same requests, their relays measured again: the same session, seat and tokens.
        let retried = try h.create(maxPlayers: 3, password: "pw", key: Self.createKey, source: "10.0.0.1", rtts: ["sync-0": 30])
        #expect(retried.session.sessionId == id && retried.participantId == host.participantId)
        #expect(retried.participantToken == host.participantToken)
        let rejoined = try h.join(id, name: "bob", password: "pw", key: Self.joinKey, source: "10.0.0.2", rtts: ["sync-0": 25])
        #expect(rejoined.participantId == bob.participantId && rejoined.participantToken == bob.participantToken)
        #expect(h.session(id).participants.count == 2)
    }

    @Test func aKeyReplaysOnlyTheRequestItWasUsedFor() throws {
        let h = try Harness()
        let (host, bob) = try hosted(h)
        try expectBound(h, host: host, bob: bob)
    }

    @Test func theBindingSurvivesARestart() throws {
        let h = try Harness()
        let (host, bob) = try hosted(h)
        try h.restart()
        try expectBound(h, host: host, bob: bob)
    }

    @Test func aShortKeyIsRefused() throws {
        let h = try Harness()
        let short = refusal { try h.create(key: "k1") }
        #expect(short?.code == .badRequest && short?.field == "CreateSessionRequest.idempotency_key", "\(String(describing: short))")
        let id = try h.create().session.sessionId
        let join = refusal { try h.join(id, name: "bob", key: "guessable") }
        #expect(join?.code == .badRequest && join?.field == "JoinSessionRequest.idempotency_key", "\(String(describing: join))")
        #expect(h.session(id).participants.count == 1)
        _ = try h.join(id, name: "bob", key: String(repeating: "x", count: RequestFingerprints.minimumKeyBytes))
    }

    @Test func rowsStoredWithoutAFingerprintGrantNoReplay() throws {
        // A database of schema version 2 has no fingerprint columns: opening it adds them, NULL.
        let h = try Harness()
        let (host, _) = try hosted(h)
        try h.store.database.execute("""
            ALTER TABLE sessions DROP COLUMN request_fingerprint;
            ALTER TABLE participants DROP COLUMN request_fingerprint;
            """)
        try h.restart()
        var columns: [String] = []
        try h.store.database.query("SELECT name FROM pragma_table_info('participants')") { columns.append($0.text(0)) }
        #expect(columns.contains("request_fingerprint"))
        let id = host.session.sessionId
        #expect(h.session(id).requestFingerprint == nil)
        expectReuseRefused("CreateSessionRequest.idempotency_key") {
            try h.create(maxPlayers: 3, password: "pw", key: Self.createKey, source: "10.0.0.1")
        }
        expectReuseRefused("JoinSessionRequest.idempotency_key") {
            try h.join(id, name: "bob", password: "pw", key: Self.joinKey, source: "10.0.0.2")
        }
        #expect(h.session(id).participants.count == 2 && h.core.activeCount == 1)
    }
}
