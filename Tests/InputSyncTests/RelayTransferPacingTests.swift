import Foundation
import NetplayAuth
import NetplayService
import NetplayWire
import Testing
@testable import InputSync
import NetplayTestSupport

/// A state transfer's targets are sent chunks as fast as each acknowledges them, so that a
/// target that stops reading costs the relay a window, not a copy of the state.
@Suite("Relay: state transfers paced by their targets", .ownThread)
struct RelayTransferPacingTests {
    let a = RelayRig.address("peer-a")
    let b = RelayRig.address("peer-b")
    /// Chunks of 100 bytes, a window of 300.
    static let chunk = 100
    static let window = 300
    /// Short, so that the fake players stay within their liveness while transfers time out.
    static let timeoutMs = 200

    /// A running pair that played 100 frames, on a relay with a 300-byte window and a history
    /// short enough that late joiners need a state.
    func runningMatch() throws -> RelayRig {
        let rig = RelayRig(maxSpectators: 40) {
            $0.lateJoinReplayLimit = 20
            $0.transferWindowBytes = Self.window
            $0.transferTimeoutMs = Self.timeoutMs
        }
        _ = try rig.attach(a, slot: 1)
        _ = try rig.attach(b, slot: 2)
        for frame in 0 ..< 100 {
            try rig.batch(a, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        _ = rig.transport.take(a)
        _ = rig.transport.take(b)
        return rig
    }

    /// The state request the reference got (after a timer tick).
    func request(_ rig: RelayRig) throws -> StateRequest {
        rig.advance(ms: 8)
        return try #require(rig.transport.take(a).compactMap { body -> StateRequest? in
            if case .stateRequest(let request) = body { return request }
            return nil
        }.first)
    }

    /// The reference sends a state of `chunks` chunks at once, as NetplayKit does.
    func serve(_ rig: RelayRig, _ request: StateRequest, chunks: Int) throws {
        let total = chunks * Self.chunk
        for index in 0 ..< chunks {
            try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 90, offset: UInt64(index * Self.chunk),
                                                totalSize: UInt64(total), data: Array(repeating: UInt8(index), count: Self.chunk),
                                                checksum: 5, last: index == chunks - 1)), from: a)
        }
    }

    func chunks(_ rig: RelayRig, to peer: PeerAddress) -> [StateChunk] {
        rig.transport.take(peer).compactMap { body -> StateChunk? in
            if case .stateChunk(let chunk) = body { return chunk }
            return nil
        }
    }

    func acknowledge(_ rig: RelayRig, _ request: StateRequest, bytes: Int, from peer: PeerAddress) throws {
        try rig.send(.stateTransferAck(StateTransferAck(transferId: request.transferId, receivedBytes: UInt64(bytes))), from: peer)
    }

    @Test func aTargetGetsAWindowAtATimeAndTheRestAsItAcknowledges() throws {
        let rig = try runningMatch()
        let joiner = RelayRig.address("late")
        let welcome = try rig.attach(joiner, slot: 0, role: .spectator)
        #expect(welcome.stateFollows)
        #expect(welcome.protocolVersion == SyncProtocol.current)
        _ = rig.transport.take(joiner)
        let request = try request(rig)
        try serve(rig, request, chunks: 10)
        // A window's worth, nothing more, however long it waits.
        #expect(chunks(rig, to: joiner).map(\.offset) == [0, 100, 200])
        // netplayctl introspect shows the transfer, each target's progress and the relay's budget.
        let dump = rig.core.introspect().rendered()
        #expect(dump.contains(#""received_bytes":1000,"reference":"p1","state_bytes":1000"#), "\(dump)")
        #expect(dump.contains(#"{"acknowledged_bytes":0,"finished":false,"paced":true,"#), "\(dump)")
        #expect(dump.contains(#""sent_bytes":300}"#), "\(dump)")
        #expect(dump.contains(#""transfer_bytes_held":1000"#), "\(dump)")
        rig.advance(ms: UInt64(Self.timeoutMs) / 2)
        #expect(chunks(rig, to: joiner).isEmpty)
        // Each acknowledgement moves the window on; a stale or inflated one moves it no further
        // than what was sent.
        try acknowledge(rig, request, bytes: 100, from: joiner)
        #expect(chunks(rig, to: joiner).map(\.offset) == [300])
        try acknowledge(rig, request, bytes: 50, from: joiner)
        #expect(chunks(rig, to: joiner).isEmpty)
        try acknowledge(rig, request, bytes: 1_000_000, from: joiner)
        #expect(chunks(rig, to: joiner).map(\.offset) == [400, 500, 600])
        try acknowledge(rig, request, bytes: 700, from: joiner)
        // With the last chunk it runs from the state's frame: the inputs from 90 follow it.
        let rest = rig.transport.take(joiner)
        let offsets = rest.compactMap { body -> UInt64? in if case .stateChunk(let chunk) = body { chunk.offset } else { nil } }
        #expect(offsets == [700, 800, 900])
        let inputs = rest.compactMap { body -> InputBroadcast? in if case .inputBroadcast(let b) = body { b } else { nil } }
        #expect(inputs.first?.players.first?.startFrame == 90)
        let lastChunkAt = try #require(rest.lastIndex { if case .stateChunk(let chunk) = $0 { chunk.last } else { false } })
        let firstInputsAt = try #require(rest.firstIndex { if case .inputBroadcast = $0 { true } else { false } })
        #expect(lastChunkAt < firstInputsAt)
    }

    /// The attack: a stranger's own session, its host serving a large state to many spectators
    /// that never read. Each is sent a window and then dropped after the transfer timeout (and
    /// retried a few times), while a spectator that reads gets the whole state.
    @Test func targetsThatNeverAcknowledgeCostAWindowEachAndDoNotHoldUpTheOthers() throws {
        let rig = try runningMatch()
        let silent = (0 ..< 32).map { RelayRig.address("silent-\($0)") }
        for peer in silent { _ = try rig.attach(peer, slot: 0, role: .spectator) }
        let reader = RelayRig.address("reader")
        _ = try rig.attach(reader, slot: 0, role: .spectator)
        var sentToSilent = 0
        var transfers = 0
        var readerDone = false
        // Transfers follow one another until the silent ones are given up on.
        while transfers < 20 {
            rig.advance(ms: 8)
            guard let request = rig.transport.take(a).compactMap({ body -> StateRequest? in
                if case .stateRequest(let request) = body { return request }
                return nil
            }).first else { break }
            transfers += 1
            try serve(rig, request, chunks: 10)
            var received = 0
            while !readerDone {
                let got = chunks(rig, to: reader)
                guard !got.isEmpty else { break }
                received += got.count * Self.chunk
                readerDone = got.last?.last == true
                if !readerDone { try acknowledge(rig, request, bytes: received, from: reader) }
            }
            sentToSilent += silent.reduce(0) { $0 + chunks(rig, to: $1).reduce(0) { $0 + $1.data.count } }
            rig.advance(ms: UInt64(Self.timeoutMs) + 10)
        }
        #expect(readerDone)
        // Every silent spectator: a window per try, 1 + loadRetries tries; never a whole state.
        let tries = 1 + InputSync.RelaySession.loadRetries
        #expect(transfers == tries, "\(transfers) transfers")
        #expect(sentToSilent == silent.count * Self.window * tries, "\(sentToSilent) bytes to the silent spectators")
        let stalls = rig.transport.published.filter { $0.topic == "sync.transfer_failed" }
        #expect(stalls.count == silent.count * tries)
        rig.advance(ms: 100)
        #expect(rig.transport.take(a).allSatisfy { if case .stateRequest = $0 { false } else { true } })
    }

    /// A peer of sync protocol 1 never acknowledges progress: it gets the state whole, as
    /// before, but one transfer serves only one of them (each would hold a copy at the relay).
    @Test func peersOfProtocolOneGetTheStateWholeOneTransferAtATime() throws {
        let rig = try runningMatch()
        let old = (0 ..< 3).map { RelayRig.address("old-\($0)") }
        for peer in old {
            let welcome = try rig.attach(peer, slot: 0, role: .spectator, protocolVersion: 1)
            #expect(welcome.stateFollows)
        }
        let current = RelayRig.address("current")
        _ = try rig.attach(current, slot: 0, role: .spectator)
        var served: [[Int]] = []
        for _ in 0 ..< old.count {
            let request = try request(rig)
            try serve(rig, request, chunks: 10)
            served.append(old.indices.filter { chunks(rig, to: old[$0]).count == 10 })
            // The transfer ends once every target got the state (the paced one acknowledges).
            var received = 0
            while true {
                let got = chunks(rig, to: current)
                guard !got.isEmpty else { break }
                received += got.count * Self.chunk
                try acknowledge(rig, request, bytes: received, from: current)
            }
        }
        #expect(served == [[0], [1], [2]])
    }

    /// The relay holds the whole state once the reference sent it: the reference leaving then
    /// stops nothing, and the target gets the rest as it acknowledges.
    @Test func aWholeStateReachesItsTargetAfterTheReferenceLeft() throws {
        let rig = try runningMatch()
        let joiner = RelayRig.address("late")
        _ = try rig.attach(joiner, slot: 0, role: .spectator)
        let request = try request(rig)
        try serve(rig, request, chunks: 10)
        #expect(chunks(rig, to: joiner).count == 3)
        try rig.send(.detach(Detach(reason: .leaving)), from: a)
        var received = 300
        var offsets: [UInt64] = []
        while true {
            try acknowledge(rig, request, bytes: received, from: joiner)
            let got = chunks(rig, to: joiner)
            guard !got.isEmpty else { break }
            offsets += got.map(\.offset)
            received += got.count * Self.chunk
        }
        #expect(offsets == (3 ..< 10).map { UInt64($0 * Self.chunk) })
        #expect(!rig.transport.published.contains { $0.topic == "sync.transfer_failed" })
    }

    /// A target attaching again (a new connection) mid-transfer leaves it: the chunks it had
    /// went to the old connection. It gets a fresh transfer once this one ends.
    @Test func aTargetThatAttachesAgainMidTransferGetsAFreshOne() throws {
        let rig = try runningMatch()
        let joiner = RelayRig.address("late")
        _ = try rig.attach(joiner, slot: 0, role: .spectator, participant: "watcher")
        let first = try request(rig)
        try serve(rig, first, chunks: 10)
        #expect(chunks(rig, to: joiner).count == 3)
        let again = RelayRig.address("late-again")
        #expect(try rig.attach(again, slot: 0, role: .spectator, participant: "watcher").stateFollows)
        // The old transfer has nobody left: it ends, and the next one serves the new connection.
        let second = try request(rig)
        #expect(second.transferId != first.transferId)
        try serve(rig, second, chunks: 2)
        #expect(chunks(rig, to: again).map(\.offset) == [0, 100])
        #expect(chunks(rig, to: joiner).isEmpty)
    }

    /// States in transfer share one budget across the relay's sessions: a transfer whose state
    /// does not fit is refused (OVERLOADED) and its session asks again a second later; a
    /// transfer that ends, or a session that ends with one, gives its bytes back.
    @Test func statesInTransferShareTheRelaysBudget() throws {
        let rig = RelayRig(maxSpectators: 4) {
            $0.lateJoinReplayLimit = 20
            $0.transferWindowBytes = Self.window
            $0.transferTimeoutMs = Self.timeoutMs
            $0.maxStateBytes = 1_000
            $0.maxTransferBytes = 1_500
        }
        _ = try rig.attach(a, slot: 1)
        _ = try rig.attach(b, slot: 2)
        for frame in 0 ..< 100 {
            try rig.batch(a, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        // A second session on the same relay, its own pair playing, a late spectator in each.
        let other = "s-other-\(UInt32.random(in: 1 ... .max))"
        func ticket(_ slot: Int, role: Role = .player, participant: String) throws -> JoinTicket {
            try JoinTicketSigner(keyRing: rig.keyRing).issue(
                sessionId: other, participantId: participant, role: role, slot: UInt32(slot), relayId: "sync-test",
                relayEndpoint: "tcp://127.0.0.1:1", params: rig.params, name: participant, ttlMs: 60_000, nowUnixMs: UnixTime.nowMs())
        }
        let (c, d, watcher) = (RelayRig.address("peer-c"), RelayRig.address("peer-d"), RelayRig.address("watcher-2"))
        for (peer, slot) in [(c, 1), (d, 2)] {
            try rig.send(.attachRequest(AttachRequest(ticket: try ticket(slot, participant: "q\(slot)"), protocolVersion: SyncProtocol.current)), from: peer)
        }
        for frame in 0 ..< 100 {
            try rig.batch(c, slot: 1, start: frame, [1])
            try rig.batch(d, slot: 2, start: frame, [2])
        }
        _ = rig.transport.take(a)
        _ = rig.transport.take(c)
        let late = RelayRig.address("late")
        _ = try rig.attach(late, slot: 0, role: .spectator)
        try rig.send(.attachRequest(AttachRequest(ticket: try ticket(0, role: .spectator, participant: "w"),
                                                  protocolVersion: SyncProtocol.current)), from: watcher)
        rig.advance(ms: 8)
        func requests(_ peer: PeerAddress) -> [StateRequest] {
            rig.transport.take(peer).compactMap { if case .stateRequest(let request) = $0 { request } else { nil } }
        }
        let first = try #require(requests(a).first)
        let second = try #require(requests(c).first)
        func firstChunk(_ request: StateRequest, size: Int) -> StateChunk {
            StateChunk(transferId: request.transferId, frame: 90, offset: 0, totalSize: UInt64(size),
                       data: Array(repeating: 1, count: Self.chunk), last: size == Self.chunk)
        }
        // The first session's 1000-byte state is held (the spectator acknowledges nothing yet).
        try rig.send(.stateChunk(firstChunk(first, size: 1_000)), from: a)
        #expect(rig.core.transferBudget.held == 1_000)
        // The second's does not fit beside it: refused, and asked again only after a second.
        do {
            try rig.send(.stateChunk(firstChunk(second, size: 1_000)), from: c)
            Issue.record("a state beyond the budget was taken")
        } catch {
            #expect(error.code == .overloaded)
        }
        #expect(rig.core.transferBudget.held == 1_000)
        rig.advance(ms: 900)
        #expect(requests(c).isEmpty)
        // The first session ends: its bytes go back, and the second's next try fits.
        _ = try rig.core.control(.closeRelaySessionRequest(CloseRelaySessionRequest(sessionId: rig.sessionId)), now: rig.now)
        #expect(rig.core.transferBudget.held == 0)
        rig.advance(ms: 200)
        let again = try #require(requests(c).first)
        try rig.send(.stateChunk(firstChunk(again, size: Self.chunk)), from: c)
        // A transfer that ends gives its bytes back too.
        #expect(rig.core.transferBudget.held == 0)
        #expect(rig.transport.take(watcher).contains { if case .stateChunk = $0 { true } else { false } })
    }

    /// Found by review: an offset near 2^64 overflowed (a crash of every session on the relay),
    /// and a state sent as tiny or empty chunks, or chunks after the last, grew the relay's copy
    /// without bound. Each is refused and abandons the transfer.
    @Test func hostileChunksAreRefusedNotACrashOrAHoard() throws {
        for hostile in [StateChunk(frame: 90, offset: .max, totalSize: 1_000, data: [1]),
                        StateChunk(frame: 90, offset: 0, totalSize: 1_000, data: [1]),
                        StateChunk(frame: 90, offset: 0, totalSize: 1_000, data: [])] {
            let rig = try runningMatch()
            _ = try rig.attach(RelayRig.address("late"), slot: 0, role: .spectator)
            var chunk = hostile
            chunk.transferId = try request(rig).transferId
            #expect(throws: ServiceError.self) { try rig.send(.stateChunk(chunk), from: a) }
            #expect(rig.core.transferBudget.held == 0, "abandoned: \(hostile.offset) \(hostile.data.count)")
        }
        // A chunk after the last.
        let rig = try runningMatch()
        _ = try rig.attach(RelayRig.address("late"), slot: 0, role: .spectator)
        let asked = try request(rig)
        try serve(rig, asked, chunks: 10)
        let extra = StateChunk(transferId: asked.transferId, frame: 90, offset: 1_000, totalSize: 1_000, data: [], last: true)
        #expect(throws: ServiceError.self) { try rig.send(.stateChunk(extra), from: a) }
    }
}
