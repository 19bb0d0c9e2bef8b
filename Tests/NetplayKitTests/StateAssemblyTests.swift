import Foundation
import Games
import NetplayAuth
import NetplayWire
import NetplayTestSupport
import Rollback
import Testing
@testable import NetplayKit

/// A state arriving after the relay went away mid-transfer and came back rebuilt (its
/// transfer ids start over).
@Suite("NetplayKit: assembling a transferred state", .ownThread)
struct StateAssemblyTests {
    /// An arena match of `role` in a session of `params` on a relay at 127.0.0.1:9 (nothing listens).
    func match(_ role: Role, slot: UInt32, params: SyncParams) throws -> NetplayMatch<Arena> {
        let name = role == .player ? "p\(slot)" : "watcher"
        let ticket = try JoinTicketSigner(keyRing: TicketKeyRing.generate()).issue(
            sessionId: "s-assembly", participantId: name, role: role, slot: slot, relayId: "r",
            relayEndpoint: "tcp://127.0.0.1:9", params: params, name: name, ttlMs: 60_000, nowUnixMs: UnixTime.nowMs())
        let match = try NetplayMatch(game: Arena(playerCount: 2), admission: Admission(ticket: ticket, relayEndpoint: "tcp://127.0.0.1:9"))
        match.params = params
        return match
    }

    /// A spectator waiting for its state.
    func waitingSpectator() throws -> (NetplayMatch<Arena>, SyncParams) {
        let params = SyncParams(inputSize: UInt32(Arena.inputSize), maxPlayers: 2, frameDelay: 2, frameRateMhz: 60_000,
                                predictionWindow: 8, lagToleranceFrames: 12, checksumIntervalFrames: 60, maxSpectators: 4)
        let match = try match(.spectator, slot: 0, params: params)
        match.phase = .awaitingState
        return (match, params)
    }

    /// A state unlike the spectator's own game (another seed).
    func state() -> (bytes: [UInt8], checksum: UInt64) {
        let game = Arena(playerCount: 2, seed: 5)
        return (Arena.encode(game.saveState()), game.checksum())
    }

    @Test func aFirstChunkStartsAStateOverAStaleOneOfTheSameTransferId() throws {
        let (match, _) = try waitingSpectator()
        // Half a state from the relay before, under the id the rebuilt relay uses again.
        match.assembly = NetplayMatch<Arena>.Assembly(transferId: 1, frame: 40, reason: .lateJoin, checksum: 0, totalSize: 6, bytes: [9, 9, 9])
        let (bytes, checksum) = state()
        #expect(checksum != Arena(playerCount: 2).checksum())
        match.receiveChunk(StateChunk(transferId: 1, frame: 60, offset: 0, totalSize: UInt64(bytes.count), data: bytes,
                                      checksum: checksum, last: true, reason: .lateJoin), now: 0)
        #expect(match.events.contains(.stateLoaded(frame: 60, reason: .lateJoin)), "\(match.events)")
        #expect(match.game.checksum() == checksum)
    }

    /// A relay sending chunks past the size the first announced (without end, say) gets the
    /// transfer refused at once: the state grew until the app was killed, copying itself whole
    /// at every chunk.
    @Test func chunksPastTheAnnouncedSizeAreRefusedNotKept() throws {
        let (match, _) = try waitingSpectator()
        match.receiveChunk(StateChunk(transferId: 3, frame: 60, offset: 0, totalSize: 8, data: [1, 2, 3, 4, 5, 6], last: false,
                                      reason: .lateJoin), now: 0)
        #expect(match.assembly?.bytes.count == 6)
        match.receiveChunk(StateChunk(transferId: 3, frame: 60, offset: 6, totalSize: 8, data: [7, 8, 9], last: false,
                                      reason: .lateJoin), now: 0)
        #expect(match.assembly == nil)
        #expect(match.events.contains { if case .error(.malformed, _) = $0 { true } else { false } }, "\(match.events)")
        // A last chunk short of the announced size is no state either.
        match.receiveChunk(StateChunk(transferId: 4, frame: 60, offset: 0, totalSize: 8, data: [1, 2], last: true, reason: .lateJoin), now: 0)
        #expect(match.assembly == nil && !match.events.contains { if case .stateLoaded = $0 { true } else { false } })
    }

    /// Frames past the wire's limit in a state or an attach answer end the match with a reason
    /// instead of overflowing the frame numbers it sends back (a trap).
    @Test func framesPastTheLimitAreRefused() throws {
        let (match, params) = try waitingSpectator()
        let (bytes, checksum) = state()
        match.receiveChunk(StateChunk(transferId: 5, frame: .max, offset: 0, totalSize: UInt64(bytes.count), data: bytes,
                                      checksum: checksum, last: true, reason: .lateJoin), now: 0)
        #expect(match.assembly == nil && !match.events.contains { if case .stateLoaded = $0 { true } else { false } })
        let (fresh, _) = try waitingSpectator()
        fresh.phase = .attaching(attempt: 0, nextAttemptMs: 0, sentAtMs: 0)
        fresh.attached(AttachResponse(role: .spectator, params: params, startFrame: .max, running: true), now: 0)
        guard case .disconnected(.failed(let why)) = fresh.state else { Issue.record("\(fresh.state)"); return }
        #expect(why.contains("frame limit"), "\(why)")
    }

    /// A relay that answers a re-attach with a session of another shape ends the match with a
    /// reason: the recorded history's rows (of the old shape) were indexed past their length.
    @Test func aReattachToASessionOfAnotherShapeEndsTheMatch() throws {
        let (match, params) = try waitingSpectator()
        match.attached(AttachResponse(role: .spectator, params: params, stateFollows: true, running: true), now: 0)
        var wider = params
        wider.inputSize = params.inputSize + 4
        match.attached(AttachResponse(role: .spectator, params: wider, stateFollows: true, running: true), now: 0)
        guard case .disconnected(.failed(let why)) = match.state else { Issue.record("\(match.state)"); return }
        #expect(why.contains("changes the session"), "\(why)")
        // The first attach too, against the signed ticket's shape: answered with 64-byte inputs
        // where the ticket says otherwise, every tick of the frontend's inputs was refused and
        // the match spun for good.
        let (first, _) = try waitingSpectator()
        first.attached(AttachResponse(role: .spectator, params: wider, stateFollows: true, running: true), now: 0)
        guard case .disconnected(.failed(let firstWhy)) = first.state else { Issue.record("\(first.state)"); return }
        #expect(firstWhy.contains("changes the session"), "\(firstWhy)")
    }

    /// Figures past Int in the relay's statistics are shown clamped: reading the HUD trapped.
    @Test func hugeStatisticsAreClampedInTheHUD() throws {
        let (match, _) = try waitingSpectator()
        match.lastSessionStats = NetplayWire.SessionStats(peers: [PeerStats(slot: 1, substitutedFrames: .max)])
        #expect(match.hud.players.first?.substitutedFrames == Int.max)
    }

    @Test func anAttachForgetsAHalfReceivedState() throws {
        let (match, params) = try waitingSpectator()
        match.assembly = NetplayMatch<Arena>.Assembly(transferId: 7, frame: 40, reason: .lateJoin, checksum: 0, totalSize: 6, bytes: [9, 9, 9])
        match.attached(AttachResponse(role: .spectator, params: params, stateFollows: true, running: true), now: 0)
        #expect(match.assembly == nil)
    }

    /// A player loading a resync state in place waits until its inputs before the state's frame
    /// are confirmed: an input still to come for an earlier frame rolled back into the desynced
    /// run and re-simulated over the state. Past the deadline it starts over from the state.
    @Test func aStateIsLoadedInPlaceOnlyOverConfirmedFrames() throws {
        let params = SyncParams(inputSize: UInt32(Arena.inputSize), maxPlayers: 2, frameDelay: 0, frameRateMhz: 60_000,
                                predictionWindow: 16, lagToleranceFrames: 12, checksumIntervalFrames: 0, maxSpectators: 4)
        let match = try match(.player, slot: 1, params: params)
        try match.makeEngine(at: 0, game: Arena(playerCount: 2))
        guard case .player(let session) = match.engine else { Issue.record("no player engine"); return }
        let relay = match.relayPeer
        let now = completeHandshake(session, with: relay)
        func authoritative(_ player: Int, _ start: Int, count: Int) {
            session.handle(.input(InputMessage(player: player, origin: .authoritative, startFrame: start,
                                               inputs: Array(repeating: GameInput(low: 1), count: count), ackFrame: start,
                                               confirmedFrame: start + count - 1, senderFrame: start)), from: relay, now: now)
        }
        authoritative(1, 0, count: 12)
        for _ in 0 ..< 12 {
            try session.addLocalInput(GameInput(low: 1), for: 0)
            _ = try session.advanceFrame()
        }
        authoritative(0, 0, count: 3)
        session.poll(now: now)
        #expect(session.currentFrame == 12 && session.confirmedFrame == 2)

        let state = Arena(playerCount: 2, seed: 9)
        match.pendingLoad = .init(transferId: 7, frame: 8, state: state.saveState(), reason: .desync, deadlineMs: now + 1_000)
        match.retryPendingLoad(now: now)
        #expect(match.pendingLoad != nil, "loaded over frames 3 ... 7, whose inputs may still change")
        // The inputs arrive: loaded in place.
        authoritative(0, 3, count: 6)
        session.poll(now: now)
        match.retryPendingLoad(now: now)
        #expect(match.pendingLoad == nil && match.events.contains(.stateLoaded(frame: 8, reason: .desync)), "\(match.events)")

        // They never arrive: past the deadline the engine starts over from the state.
        match.pendingLoad = .init(transferId: 8, frame: 11, state: state.saveState(), reason: .desync, deadlineMs: now + 1_000)
        match.retryPendingLoad(now: now + 999)
        #expect(match.pendingLoad != nil)
        match.retryPendingLoad(now: now + 1_000)
        #expect(match.pendingLoad == nil && match.offset == 11, "offset \(match.offset)")
    }
}
