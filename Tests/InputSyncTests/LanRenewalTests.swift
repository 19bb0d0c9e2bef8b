import NetplayAuth
import NetplayService
import NetplayWire
import Synchronization
import Testing
@testable import InputSync
import NetplayTestSupport

/// A two-player LAN room's settings, with `maxSpectators` spectator places.
private func lanSettings(maxSpectators: UInt32) -> SessionSettings {
    var settings = SessionSettings(roomName: "lan", content: ContentInfo(gameName: "Arena"))
    settings.maxPlayers = 2
    settings.inputSize = 1
    settings.spectatorsAllowed = true
    settings.maxSpectators = maxSpectators
    return settings
}

/// `name` joins room "lan-1" of `admission` in `role`, under idempotency key `key`.
private func join(_ admission: LanAdmission, _ name: String, role: Role = .player, key: String = "") throws -> JoinSessionResponse {
    var request = JoinSessionRequest(sessionId: "lan-1", role: role, name: name, content: ContentInfo(gameName: "Arena"))
    request.idempotencyKey = key
    guard case .joinSessionResponse(let response)? = try admission.handle(.joinSessionRequest(request)) else {
        throw ServiceError(.internal, "no join response")
    }
    return response
}

/// Asks `admission` to renew; the ticket, or the refusal's code.
private func renew(_ admission: LanAdmission, _ participantId: String, token: [UInt8],
                   session: String = "lan-1") -> (ticket: JoinTicket?, code: ErrorCode?) {
    do {
        let body = try admission.handle(.renewTicketRequest(RenewTicketRequest(sessionId: session, participantId: participantId,
                                                                               participantToken: token)))
        guard case .sessionResponse(let response)? = body, let ticket = response.ticket else { return (nil, .internal) }
        return (ticket, nil)
    } catch {
        return (nil, error.code)
    }
}

/// A LAN host's relay renews the tickets of the participants holding its places, as the
/// coordinator does for lobby rooms: a participant token comes with each place, and only a
/// seated participant that shows it gets a ticket, for the place it holds now.
@Suite("LAN admission renews seated participants' tickets", .ownThread)
struct LanRenewalTests {
    let keyRing = TicketKeyRing.generate()

    func admission() -> LanAdmission {
        LanAdmission(sessionId: "lan-1", settings: lanSettings(maxSpectators: 2), relayEndpoint: "tcp://127.0.0.1:1", keyRing: keyRing)
    }

    @Test func aSeatedParticipantRenewsWithItsTokenForThePlaceItHoldsNow() throws {
        let lan = admission()
        let host = try lan.hostTicket(name: "alice")
        let bob = try join(lan, "bob")
        let watcher = try join(lan, "watcher", role: .spectator)
        #expect(host.participantToken.count == 32 && bob.participantToken.count == 32 && watcher.participantToken.count == 32)
        #expect(Set([host.participantToken, bob.participantToken, watcher.participantToken]).count == 3)
        lan.sessionChanged(running: true, present: [host.ticket.participantId, bob.participantId, watcher.participantId])
        let verifier = JoinTicketVerifier(keyRing: keyRing)
        for (id, token, role, slot) in [(host.ticket.participantId, host.participantToken, Role.player, UInt32(1)),
                                        (bob.participantId, bob.participantToken, .player, 2),
                                        (watcher.participantId, watcher.participantToken, .spectator, 0)] {
            let renewed = try #require(renew(lan, id, token: token).ticket)
            #expect(renewed.participantId == id && renewed.role == role && renewed.slot == slot)
            #expect(renewed.expiresAtUnixMs - renewed.issuedAtUnixMs == lan.ticketTtlMs, "a renewed ticket lives the room's ticket lifetime")
            #expect(throws: Never.self) { try verifier.verify(renewed, relayId: "", nowUnixMs: UnixTime.nowMs()) }
        }
        // The renewal follows the host's moves: a room whose host swaps the players before the match.
        let moved = admission()
        let hostSeat = try moved.hostTicket(name: "alice")
        let carol = try join(moved, "carol")
        try moved.swap(1, 2)
        moved.sessionChanged(running: false, present: [hostSeat.ticket.participantId, carol.participantId])
        #expect(renew(moved, carol.participantId, token: carol.participantToken).ticket?.slot == 1)
        #expect(renew(moved, hostSeat.ticket.participantId, token: hostSeat.participantToken).ticket?.slot == 2)
    }

    @Test func renewalsWithoutTheSeatOrTheTokenAreRefusedWithTheirCodes() throws {
        let lan = admission()
        let host = try lan.hostTicket(name: "alice")
        let bob = try join(lan, "bob")
        let watcher = try join(lan, "watcher", role: .spectator)
        // Not attached yet: its ticket was for attaching within the pending-join timeout.
        #expect(renew(lan, bob.participantId, token: bob.participantToken).code == .invalidState)
        lan.sessionChanged(running: true, present: [host.ticket.participantId, bob.participantId, watcher.participantId])
        var wrong = bob.participantToken
        wrong[0] ^= 1
        #expect(renew(lan, bob.participantId, token: wrong).code == .unauthenticated)
        #expect(renew(lan, bob.participantId, token: []).code == .unauthenticated)
        #expect(renew(lan, bob.participantId, token: host.participantToken).code == .unauthenticated, "another's token")
        #expect(renew(lan, "lan-99", token: bob.participantToken).code == .unauthenticated)
        #expect(renew(lan, bob.participantId, token: bob.participantToken, session: "lan-2").code == .notFound)
        // Removed by the host: refused at once, before the relay's next look frees the place.
        try lan.kick(participantId: bob.participantId, ban: false, reason: "")
        #expect(renew(lan, bob.participantId, token: bob.participantToken).code == .permissionDenied)
        try lan.kick(participantId: watcher.participantId, ban: true, reason: "")
        #expect(renew(lan, watcher.participantId, token: watcher.participantToken).code == .banned)
        // Gone from the relay's session: the place and the token are forgotten.
        lan.sessionChanged(running: true, present: [host.ticket.participantId])
        #expect(renew(lan, bob.participantId, token: bob.participantToken).code == .unauthenticated)
        #expect(lan.rememberedParticipants == 1, "removed participants are kept: \(lan.rememberedParticipants)")
        lan.end(reason: "done")
        #expect(renew(lan, host.ticket.participantId, token: host.participantToken).code == .sessionEnded)
    }

    /// A join asked again under its key (its answer was lost) gets its place again with the same
    /// token: the first answer's token, if it did arrive, still renews.
    @Test func aJoinAskedAgainGetsTheSameToken() throws {
        let lan = admission()
        _ = try lan.hostTicket(name: "alice")
        let first = try join(lan, "bob", key: "k-1")
        let again = try join(lan, "bob", key: "k-1")
        #expect(again.participantId == first.participantId)
        #expect(again.participantToken == first.participantToken)
    }
}

/// A monotonic clock a test moves by hand.
final class HandClock: Sendable {
    private let ms = Mutex<UInt64>(1_000)
    var now: UInt64 { ms.withLock { $0 } }
    func advance(_ by: UInt64) { ms.withLock { $0 += by } }
}

/// What the relay's session no longer shows: a spectator whose link fell quiet (the relay drops
/// it at once, where a player stays, away), and the session itself once the relay ended it.
@Suite("LAN admission when the relay's session lets go", .ownThread)
struct LanSessionGoneTests {
    func admission(clock: HandClock) -> LanAdmission {
        LanAdmission(sessionId: "lan-1", settings: lanSettings(maxSpectators: 1), relayEndpoint: "tcp://127.0.0.1:1",
                     keyRing: TicketKeyRing.generate(), limits: AdmissionPolicy.Limits(pendingJoinTimeoutMs: 60_000), clock: { clock.now })
    }

    func renewal(_ admission: LanAdmission, _ participantId: String, _ token: [UInt8]) -> ErrorCode? {
        renew(admission, participantId, token: token).code
    }

    /// The spectator's place and token outlived its link only as long as the relay showed it: a
    /// second, so a spectator back after its ticket ran out could not renew, and lost its place.
    @Test func aSpectatorGoneFromTheRelayKeepsItsPlaceAndTokenForAWhile() throws {
        let clock = HandClock()
        let lan = admission(clock: clock)
        let host = try lan.hostTicket(name: "alice")
        let watcher = try join(lan, "watcher", role: .spectator)
        lan.sessionChanged(running: true, present: [host.ticket.participantId, watcher.participantId])
        // Its link falls quiet: the relay shows only the host.
        lan.sessionChanged(running: true, present: [host.ticket.participantId])
        clock.advance(30_000)
        lan.sessionChanged(running: true, present: [host.ticket.participantId])
        #expect(lan.occupancy == (1, 1), "the place is held")
        #expect(renewal(lan, watcher.participantId, watcher.participantToken) == nil, "it renews while away")
        #expect(throws: ServiceError.self) { try join(lan, "another watcher", role: .spectator) }
        // Back: away no more; gone again later, it gets its full while again.
        lan.sessionChanged(running: true, present: [host.ticket.participantId, watcher.participantId])
        clock.advance(40_000)
        lan.sessionChanged(running: true, present: [host.ticket.participantId])
        clock.advance(40_000)
        lan.sessionChanged(running: true, present: [host.ticket.participantId])
        #expect(lan.occupancy == (1, 1))
        // Away past the pending-join timeout: place and token are gone.
        clock.advance(20_001)
        lan.sessionChanged(running: true, present: [host.ticket.participantId])
        #expect(lan.occupancy == (1, 0))
        #expect(renewal(lan, watcher.participantId, watcher.participantToken) == .unauthenticated)
        #expect(lan.rememberedParticipants == 1)
        // A kicked spectator is not kept.
        let other = try join(lan, "other", role: .spectator)
        lan.sessionChanged(running: true, present: [host.ticket.participantId, other.participantId])
        try lan.kick(participantId: other.participantId, ban: false, reason: "")
        lan.sessionChanged(running: true, present: [host.ticket.participantId])
        #expect(renewal(lan, other.participantId, other.participantToken) == .unauthenticated)
    }

    /// The relay ended the room's match by itself (everyone left, or nobody attached for its idle
    /// time): joins were still admitted into the session it had closed, and renewals issued
    /// tickets for it.
    @Test func aRoomWhoseSessionTheRelayEndedIsOver() throws {
        let clock = HandClock()
        let lan = admission(clock: clock)
        let host = try lan.hostTicket(name: "alice")
        // Before the relay serves the session (the host not attached yet), nothing is over.
        lan.sessionGone()
        let bob = try join(lan, "bob")
        lan.sessionChanged(running: true, present: [host.ticket.participantId, bob.participantId])
        lan.sessionGone()
        #expect(renewal(lan, bob.participantId, bob.participantToken) == .sessionEnded)
        #expect(renewal(lan, host.ticket.participantId, host.participantToken) == .sessionEnded)
        do {
            _ = try join(lan, "carol", role: .spectator)
            Issue.record("a join into an ended room was admitted")
        } catch let error as ServiceError {
            #expect(error.code == .sessionEnded && error.message.contains("over"), "\(error)")
        }
    }
}
