import Foundation
import Games
import NetplayAuth
import NetplayService
import NetplayTestSupport
import NetplayWire
@testable import Rollback
import Testing
@testable import NetplayKit

/// A relay (or whatever answers at its endpoint) that says the same thing again and again, or
/// claims what cannot be: a match answers what it must once, no repetition costs it more than
/// the first, and no claim takes what it holds.
@Suite("NetplayKit: a relay that repeats itself or lies", .ownThread)
struct LyingRelayTests {
    /// A player's match on a relay at `relay` (by default 127.0.0.1:9, where nothing listens:
    /// what it sends goes nowhere).
    func playerMatch(relay: String = "tcp://127.0.0.1:9") throws -> NetplayMatch<Arena> {
        let ticket = try JoinTicketSigner(keyRing: TicketKeyRing.generate()).issue(
            sessionId: "s-repeat", participantId: "p0", role: .player, slot: 1, relayId: "r",
            relayEndpoint: relay, params: SyncParams(inputSize: 1, maxPlayers: 2), name: "p0",
            ttlMs: 60_000, nowUnixMs: UnixTime.nowMs())
        return try NetplayMatch(game: Arena(playerCount: 2), admission: Admission(ticket: ticket, relayEndpoint: relay))
    }

    /// Each state request encoded the whole state and queued every chunk at once (a thousand
    /// of them stalled the game loop for seconds and queued gigabytes). At most four are served
    /// a second; the relay's own transfers ask far less.
    @Test func aFloodOfStateRequestsIsServedFourASecond() throws {
        let relay = try StandInRouter()
        let match = try playerMatch(relay: relay.endpoint)
        match.start()
        // Connected (its attach arrived): what it serves is queued.
        #expect(eventually(within: 5) {
            match.tick(input: GameInput(low: 0))
            return (try? relay.socket.receiveMultipart(flags: .dontWait)) != nil
        })
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

    /// A game whose state is 4 MiB of bytes.
    struct BulkyGame: SerializableGame {
        var bytes = [UInt8](repeating: 7, count: 4 << 20)
        func saveState() -> [UInt8] { bytes }
        mutating func loadState(_ state: [UInt8]) { bytes = state }
        mutating func advanceFrame(_ inputs: FrameInputs) { bytes[0] &+= 1 }
        func checksum() -> UInt64 { UInt64(bytes[0]) }
        static func encode(_ state: [UInt8]) -> [UInt8] { state }
        static func decode(_ bytes: [UInt8]) -> [UInt8]? { bytes }
    }

    /// A relay asking for a large state in the smallest chunks had it cut into 65,536 chunks in
    /// one tick; one asking four times a second and reading nothing had the app queue every
    /// copy. A state is cut into 256 chunks at most, and a relay whose kernel has not
    /// acknowledged over 1 MiB of what the peer sent it is not sent another.
    @Test func aStateIsServedInAFewChunksAndARelayThatDoesNotReadGetsNoPileOfThem() throws {
        let relay = try StandInRouter(receiveQueue: 1)
        let ticket = try JoinTicketSigner(keyRing: TicketKeyRing.generate()).issue(
            sessionId: "s-bulky", participantId: "p0", role: .player, slot: 1, relayId: "r",
            relayEndpoint: relay.endpoint, params: SyncParams(inputSize: 1, maxPlayers: 2), name: "p0",
            ttlMs: 60_000, nowUnixMs: UnixTime.nowMs())
        let match = try NetplayMatch(game: BulkyGame(), admission: Admission(ticket: ticket, relayEndpoint: relay.endpoint))
        match.start()
        var attach: [[UInt8]]?
        _ = eventually(within: 5) {
            match.tick(input: GameInput(low: 0))
            attach = try? relay.socket.receiveMultipart(flags: .dontWait)
            return attach != nil
        }
        let frames = try #require(attach, "the match never attached")
        let relayPeer = frames[0]
        // Answered (the match waits for its start), so it keeps its connection.
        let attachId = try Envelope(decoding: frames[1]).requestId
        try relay.socket.sendMultipart([relayPeer, try Envelope(requestId: attachId, body: .attachResponse(AttachResponse(
            slot: 1, params: SyncParams(inputSize: 1, maxPlayers: 2), running: false, protocolVersion: SyncProtocol.current))).encoded()])
        func ask(_ id: UInt32, chunkBytes: UInt32) throws {
            let request = try Envelope(body: .stateRequest(StateRequest(transferId: id, reason: .matchStart, maxChunkBytes: chunkBytes))).encoded()
            try relay.socket.sendMultipart([relayPeer, request])
        }
        /// Ticks the match for `seconds`, taking what reaches the stand-in when `reading`.
        func run(seconds: Double, reading: Bool, asking: ((Int) throws -> Void)? = nil) rethrows -> (chunks: Int, bytes: Int) {
            var chunks = 0, bytes = 0
            let deadline = Date().addingTimeInterval(seconds)
            var ticks = 0
            while Date() < deadline {
                try asking?(ticks)
                match.tick(input: GameInput(low: 0))
                ticks += 1
                while reading, let frames = try? relay.socket.receiveMultipart(flags: .dontWait) {
                    if case .stateChunk(let chunk)? = (try? Envelope(decoding: frames[1]))?.body {
                        chunks += 1
                        bytes += chunk.data.count
                    }
                }
                usleep(16_000)
            }
            return (chunks, bytes)
        }
        try ask(1, chunkBytes: 64)
        let served = run(seconds: 2, reading: true)
        #expect(served.chunks == 256 && served.bytes == 4 << 20, "\(served.chunks) chunks, \(served.bytes) bytes")
        // A request every 250 ms for 3 s, none of the chunks read meanwhile.
        _ = try run(seconds: 3, reading: false) { tick in if tick % 15 == 0 { try ask(UInt32(2 + tick), chunkBytes: 262_144) } }
        let queued = run(seconds: 3, reading: true)
        // A copy or two and what the kernels hold: far below the 48 MiB of twelve copies.
        #expect(queued.bytes < 16 << 20, "\(queued.bytes >> 20) MiB queued for a relay that did not read")
        #expect(queued.bytes >= 4 << 20, "the relay was served at all")
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

    /// A player's match that plays (no relay behind it).
    func playingMatch() throws -> NetplayMatch<Arena> {
        let match = try playerMatch()
        match.params = SyncParams(inputSize: 1, maxPlayers: 2)
        match.phase = .playing
        return match
    }

    /// An authoritative broadcast of slot 2's inputs `frame ..< frame + count`, all confirmed.
    func broadcast(from frame: Int, count: Int) -> Envelope {
        Envelope(body: .inputBroadcast(InputBroadcast(
            authoritative: true, inputSize: 1,
            players: [PlayerInputs(slot: 2, startFrame: UInt32(frame), inputs: Array(repeating: 3, count: count))],
            confirmedFrames: UInt32(frame + count))))
    }

    /// Every state a relay sent was loaded at once, each load re-simulating the frames since the
    /// state's (hundreds): a relay sending hundreds of small states in one read froze the game
    /// loop for seconds. At most one state is loaded every half second: the newest.
    @Test func aFloodOfStatesIsLoadedTwiceASecondAtMost() throws {
        let match = try playingMatch()
        try match.makeEngine(at: 0, game: Arena(playerCount: 2))
        let state = Arena.encode(Arena(playerCount: 2).saveState())
        func loaded() -> [Int] { match.events.compactMap { if case .stateLoaded(let frame, _) = $0 { frame } else { nil } } }
        for id in 1 ... 50 {
            match.receive(Envelope(body: .stateChunk(StateChunk(transferId: UInt32(id), frame: 0, offset: 0, totalSize: UInt64(state.count),
                                                                data: state, last: true, reason: .desync))), now: 10_000)
        }
        #expect(loaded().count == 1)
        match.retryPendingLoad(now: 10_499)
        #expect(loaded().count == 1)
        match.retryPendingLoad(now: 10_500)
        #expect(loaded().count == 2, "the newest, half a second later")
        match.retryPendingLoad(now: 12_000)
        #expect(loaded().count == 2, "and no other")
    }

    /// The state kept for serving (the last one at a checksum frame) outlived the engine it came
    /// from: after a jump to a state far ahead, or a heal, the old run's state was served,
    /// labelled with the new run's frames, and its receiver desynced.
    @Test func aJumpOrALoadForgetsTheStateKeptForServing() throws {
        let match = try playingMatch()
        try match.makeEngine(at: 0, game: Arena(playerCount: 2))
        let old = Arena(playerCount: 2).saveState()
        match.alignedState = ConfirmedState(frame: 0, state: old, checksum: nil)
        try match.makeEngine(at: 5_000, game: Arena(playerCount: 2))
        #expect(match.alignedState == nil && match.lastCheckedConfirmed == 0)
        match.alignedState = ConfirmedState(frame: 0, state: old, checksum: nil)
        let state = Arena.encode(Arena(playerCount: 2).saveState())
        match.receive(Envelope(body: .stateChunk(StateChunk(transferId: 1, frame: 5_000, offset: 0, totalSize: UInt64(state.count),
                                                            data: state, last: true, reason: .desync))), now: 10_000)
        #expect(match.events.contains { if case .stateLoaded = $0 { true } else { false } })
        #expect(match.alignedState == nil, "the loaded state replaced the run the kept one came from")
    }

    /// One authoritative run claiming frames two billion ahead made every real row of the resend
    /// history older than its floor, and the next pruning threw them all away: nothing was left
    /// to resend after a relay restart.
    @Test func aRunFarAheadLeavesTheResendHistoryAlone() throws {
        let match = try playingMatch()
        match.receive(broadcast(from: 0, count: 100), now: 1_000)
        #expect(match.history[50] != nil)
        match.receive(broadcast(from: 2_000_000_000, count: 8_192), now: 1_001)
        for start in stride(from: 100, to: 1_500, by: 100) { match.receive(broadcast(from: start, count: 100), now: 1_002) }
        #expect(match.history[600] != nil && match.history[1_499] != nil, "the real rows of the last 1,024 frames are kept")
        #expect(match.historyNewest == 1_499)
    }

    /// Runs each just within the horizon moved it on (it was measured from the newest row), so
    /// ten of them did what one run far ahead no longer could: every real row fell below the
    /// floor, and the confirmed frames counted far ahead kept the match catching up.
    @Test func runsJustWithinTheHorizonDoNotMoveItOn() throws {
        let match = try playingMatch()
        match.receive(broadcast(from: 0, count: 100), now: 1_000)
        for _ in 0 ..< 10 { match.receive(broadcast(from: match.historyNewest + 900, count: 128), now: 1_001) }
        #expect(match.history[50] != nil, "the real rows are kept")
        #expect(match.historyNewest <= match.currentFrame + match.options.historyFrames)
        #expect(match.relayConfirmedFrames <= match.currentFrame + match.options.historyFrames + 1)
    }

    /// A broadcast claiming two billion confirmed frames, with no inputs: the match counted
    /// itself that far behind for good (catching up every tick, every time-sync hint thrown
    /// away). A frame is confirmed only as far as its inputs came.
    @Test func aClaimOfConfirmedFramesWithoutTheirInputsIsNotBelieved() throws {
        let match = try playingMatch()
        match.receive(Envelope(body: .inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, confirmedFrames: 2_000_000_000))),
                      now: 1_000)
        #expect(match.relayConfirmedFrames == 0)
        match.receive(Envelope(body: .inputBroadcast(InputBroadcast(
            authoritative: true, inputSize: 1, players: [PlayerInputs(slot: 2, startFrame: 0, inputs: Array(repeating: 1, count: 40))],
            confirmedFrames: 2_000_000_000))), now: 1_001)
        #expect(match.relayConfirmedFrames == 40)
    }
}
