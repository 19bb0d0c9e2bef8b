import Games
import NetplayAuth
import NetplayTestSupport
import NetplayWire
import Testing
@testable import NetplayKit

/// A relay (or whatever answers at its endpoint) that says the same thing again and again: a
/// match answers what it must once, and no repetition costs it more than the first.
@Suite("NetplayKit: a relay that repeats itself", .ownThread)
struct RepeatingRelayTests {
    /// A player's match on a relay at 127.0.0.1:9 (nothing listens): what it sends goes nowhere.
    func playerMatch() throws -> NetplayMatch<Arena> {
        let ticket = try JoinTicketSigner(keyRing: TicketKeyRing.generate()).issue(
            sessionId: "s-repeat", participantId: "p0", role: .player, slot: 1, relayId: "r",
            relayEndpoint: "tcp://127.0.0.1:9", params: SyncParams(inputSize: 1, maxPlayers: 2), name: "p0",
            ttlMs: 60_000, nowUnixMs: UnixTime.nowMs())
        return try NetplayMatch(game: Arena(playerCount: 2), admission: Admission(ticket: ticket, relayEndpoint: "tcp://127.0.0.1:9"))
    }

    /// Each state request encoded the whole state and queued every chunk at once (a thousand
    /// of them stalled the game loop for seconds and queued gigabytes). At most four are served
    /// a second; the relay's own transfers ask far less.
    @Test func aFloodOfStateRequestsIsServedFourASecond() throws {
        let match = try playerMatch()
        func served() -> Int { match.events.filter { if case .stateServed = $0 { true } else { false } }.count }
        for id in 1 ... 1_000 {
            match.receive(Envelope(body: .stateRequest(StateRequest(transferId: UInt32(id), reason: .matchStart, maxChunkBytes: 262_144))),
                          now: 10_000)
        }
        #expect(served() == 4)
        match.receive(Envelope(body: .stateRequest(StateRequest(transferId: 2_000, reason: .matchStart))), now: 10_999)
        #expect(served() == 4)
        // A second later, the relay is answered again.
        match.receive(Envelope(body: .stateRequest(StateRequest(transferId: 2_001, reason: .matchStart))), now: 11_000)
        #expect(served() == 5)
    }

    /// The relay's answer to an attach, once more while the match runs (a copy, or replayed):
    /// it took the running match back to waiting for its start, and frames stopped.
    @Test func aRepeatedAttachAnswerLeavesARunningMatchRunning() throws {
        let match = try playerMatch()
        match.attachRequestId = 5
        match.phase = .playing
        match.receive(Envelope(requestId: 5, body: .attachResponse(AttachResponse(slot: 1, params: match.params, running: false))),
                      now: 1_000)
        #expect(match.phase == .playing)
    }
}
