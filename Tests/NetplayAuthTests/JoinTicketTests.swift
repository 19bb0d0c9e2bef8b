import NetplayAuth
import NetplayWire
import Testing
import NetplayTestSupport

@Suite("Join tickets", .ownThread)
struct JoinTicketTests {
    let ring = try! TicketKeyRing(secret: Array(repeating: 7, count: 32))
    let params = SyncParams(inputSize: 2, maxPlayers: 2)

    func issue(relay: String = "sync-0", now: UInt64 = 1_000_000, ttl: UInt64 = 60_000, role: Role = .player,
               slot: UInt32 = 2) throws -> JoinTicket {
        try JoinTicketSigner(keyRing: ring).issue(sessionId: "s-1", participantId: "p-1", role: role, slot: slot, relayId: relay,
                                                  relayEndpoint: "tcp://127.0.0.1:7300", params: params, name: "bob",
                                                  ttlMs: ttl, nowUnixMs: now)
    }

    @Test func aSignedTicketVerifies() throws {
        let ticket = try issue()
        #expect(ticket.signature.count == 32)
        #expect(ticket.nonce.count == 16)
        #expect(ticket.keyId == 1)
        let verified = try JoinTicketVerifier(keyRing: ring).verify(ticket, relayId: "sync-0", nowUnixMs: 1_000_500)
        #expect(verified == ticket)
    }

    @Test func theSignatureSurvivesTheWire() throws {
        let ticket = try issue()
        let decoded = try JoinTicket(decoding: ticket.encoded())
        try JoinTicketVerifier(keyRing: ring).verify(decoded, nowUnixMs: 1_000_001)
    }

    @Test func anyAlteredFieldIsRefused() throws {
        let ticket = try issue()
        var alterations: [JoinTicket] = []
        var t = ticket; t.slot = 1; alterations.append(t)
        t = ticket; t.role = .spectator; t.slot = 0; alterations.append(t)
        t = ticket; t.sessionId = "s-2"; alterations.append(t)
        t = ticket; t.expiresAtUnixMs += 1; alterations.append(t)
        t = ticket; t.relayEndpoint = "tcp://evil:1"; alterations.append(t)
        t = ticket; t.params.maxPlayers = 8; alterations.append(t)
        t = ticket; t.signature[0] ^= 1; alterations.append(t)
        t = ticket; t.signature = []; alterations.append(t)
        for forged in alterations {
            #expect(throws: TicketError.badSignature) {
                try JoinTicketVerifier(keyRing: ring).verify(forged, nowUnixMs: 1_000_001)
            }
        }
    }

    @Test func aTicketFromAnotherSecretIsRefused() throws {
        let other = try TicketKeyRing(secret: Array(repeating: 9, count: 32))
        let forged = try JoinTicketSigner(keyRing: other).sign(try issue())
        #expect(throws: TicketError.badSignature) { try JoinTicketVerifier(keyRing: ring).verify(forged, nowUnixMs: 1_000_001) }
        var unknown = forged
        unknown.keyId = 5
        #expect(throws: TicketError.unknownKey(5)) { try JoinTicketVerifier(keyRing: ring).verify(unknown, nowUnixMs: 1_000_001) }
    }

    @Test func expiryAndClockSkew() throws {
        let ticket = try issue(now: 1_000_000, ttl: 1_000)
        let verifier = JoinTicketVerifier(keyRing: ring, clockSkewMs: 100)
        try verifier.verify(ticket, nowUnixMs: 1_000_999)
        #expect(throws: TicketError.expired(expiredAtUnixMs: 1_001_000)) { try verifier.verify(ticket, nowUnixMs: 1_001_000) }
        #expect(throws: TicketError.notYetValid(issuedAtUnixMs: 1_000_000)) { try verifier.verify(ticket, nowUnixMs: 999_000) }
        #expect(TicketError.expired(expiredAtUnixMs: 1).errorCode == .ticketExpired)
        #expect(TicketError.badSignature.errorCode == .ticketInvalid)
        #expect(TicketError.badSignature.reply.code == .ticketInvalid)
    }

    /// A relay remembers a kick for the longest a ticket lives: a longer-lived ticket (a
    /// coordinator run with a long --ticket-ttl) would admit the kicked player once it forgot.
    @Test func aTicketLivingLongerThanTheVerifierTakesIsRefused() throws {
        let verifier = JoinTicketVerifier(keyRing: ring, maxLifetimeMs: 600_000)
        try verifier.verify(try issue(ttl: 600_000), nowUnixMs: 1_000_001)
        #expect(throws: TicketError.livesTooLong(lifetimeMs: 3_600_000, maxMs: 600_000)) {
            try verifier.verify(try issue(ttl: 3_600_000), nowUnixMs: 1_000_001)
        }
        #expect(TicketError.livesTooLong(lifetimeMs: 2, maxMs: 1).errorCode == .ticketInvalid)
        try JoinTicketVerifier(keyRing: ring).verify(try issue(ttl: 3_600_000), nowUnixMs: 1_000_001)
    }

    @Test func aGenuineTicketForAnotherRelayIsRefused() throws {
        let ticket = try issue(relay: "sync-1")
        #expect(throws: TicketError.wrongRelay(expected: "sync-0", actual: "sync-1")) {
            try JoinTicketVerifier(keyRing: ring).verify(ticket, relayId: "sync-0", nowUnixMs: 1_000_001)
        }
    }

    @Test func inconsistentRoleAndSlotAreRefused() throws {
        let spectatorWithSlot = try issue(role: .spectator, slot: 1)
        #expect(throws: TicketError.self) { try JoinTicketVerifier(keyRing: ring).verify(spectatorWithSlot, nowUnixMs: 1_000_001) }
        let playerWithoutSlot = try issue(role: .player, slot: 0)
        #expect(throws: TicketError.self) { try JoinTicketVerifier(keyRing: ring).verify(playerWithoutSlot, nowUnixMs: 1_000_001) }
    }

    @Test func keyRotationSignsWithTheNewestAndAcceptsBoth() throws {
        let old = try TicketKeyRing(parsing: "1:" + String(repeating: "ab", count: 32))
        let rotated = try TicketKeyRing(parsing: "1:\(String(repeating: "ab", count: 32)), 2:\(String(repeating: "cd", count: 32))")
        #expect(rotated.signingKeyId == 2)
        let oldTicket = try JoinTicketSigner(keyRing: old).sign(try issue())
        let newTicket = try JoinTicketSigner(keyRing: rotated).sign(try issue())
        #expect(newTicket.keyId == 2)
        try JoinTicketVerifier(keyRing: rotated).verify(oldTicket, nowUnixMs: 1_000_001)
        try JoinTicketVerifier(keyRing: rotated).verify(newTicket, nowUnixMs: 1_000_001)
        #expect(throws: TicketError.unknownKey(2)) { try JoinTicketVerifier(keyRing: old).verify(newTicket, nowUnixMs: 1_000_001) }
    }

    @Test func keyRingTextIsValidated() throws {
        #expect(throws: KeyRingError.self) { try TicketKeyRing(parsing: "") }
        #expect(throws: KeyRingError.self) { try TicketKeyRing(parsing: "zz") }
        #expect(throws: KeyRingError.self) { try TicketKeyRing(parsing: "abcd") }  // too short
        #expect(throws: KeyRingError.self) { try TicketKeyRing(parsing: "x:\(String(repeating: "ab", count: 32))") }
        let ring = try TicketKeyRing(parsing: "  \(String(repeating: "0f", count: 32))\n")
        #expect(ring.signingKeyId == 1 && ring.keys[1]?.count == 32)
        #expect(try TicketKeyRing(parsing: ring.text) == ring)
        let generated = TicketKeyRing.generate()
        #expect(generated.keys[1]?.count == 32 && generated != TicketKeyRing.generate())
    }
}
