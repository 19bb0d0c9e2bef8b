import Foundation
import Games
import NetplayAuth
import NetplayWire
import Testing
@testable import NetplayKit

/// A state arriving after the relay went away mid-transfer and came back rebuilt (its
/// transfer ids start over).
@Suite("NetplayKit: assembling a transferred state", .ownThread)
struct StateAssemblyTests {
    /// A spectator waiting for its state on a relay at 127.0.0.1:9 (nothing listens).
    func waitingSpectator() throws -> (NetplayMatch<Arena>, SyncParams) {
        let params = SyncParams(inputSize: UInt32(Arena.inputSize), maxPlayers: 2, frameDelay: 2, frameRateMhz: 60_000,
                                predictionWindow: 8, lagToleranceFrames: 12, checksumIntervalFrames: 60, maxSpectators: 4)
        let ticket = try JoinTicketSigner(keyRing: TicketKeyRing.generate()).issue(
            sessionId: "s-assembly", participantId: "watcher", role: .spectator, slot: 0, relayId: "r",
            relayEndpoint: "tcp://127.0.0.1:9", params: params, name: "watcher", ttlMs: 60_000, nowUnixMs: UnixTime.nowMs())
        let match = try NetplayMatch(game: Arena(playerCount: 2), admission: Admission(ticket: ticket, relayEndpoint: "tcp://127.0.0.1:9"))
        match.params = params
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
        match.assembly = NetplayMatch<Arena>.Assembly(transferId: 1, frame: 40, reason: .lateJoin, checksum: 0, bytes: [9, 9, 9])
        let (bytes, checksum) = state()
        #expect(checksum != Arena(playerCount: 2).checksum())
        match.receiveChunk(StateChunk(transferId: 1, frame: 60, offset: 0, totalSize: UInt64(bytes.count), data: bytes,
                                      checksum: checksum, last: true, reason: .lateJoin), now: 0)
        #expect(match.events.contains(.stateLoaded(frame: 60, reason: .lateJoin)), "\(match.events)")
        #expect(match.game.checksum() == checksum)
    }

    @Test func anAttachForgetsAHalfReceivedState() throws {
        let (match, params) = try waitingSpectator()
        match.assembly = NetplayMatch<Arena>.Assembly(transferId: 7, frame: 40, reason: .lateJoin, checksum: 0, bytes: [9, 9, 9])
        match.attached(AttachResponse(role: .spectator, params: params, stateFollows: true, running: true), now: 0)
        #expect(match.assembly == nil)
    }
}
