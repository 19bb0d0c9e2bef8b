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
    func runningMatch(minRate: Int? = nil, timeoutMs: Int = Self.timeoutMs) throws -> RelayRig {
        let rig = RelayRig(maxSpectators: 40) {
            $0.lateJoinReplayLimit = 20
            $0.transferWindowBytes = Self.window
            $0.transferTimeoutMs = timeoutMs
            $0.silenceTimeoutMs = 10_000
            if let minRate { $0.transferMinRateBytes = minRate }
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

    /// `peer` reads the chunks sent to it, acknowledging each batch but the last, until no more
    /// come: the bytes it got.
    func readAll(_ rig: RelayRig, _ request: StateRequest, by peer: PeerAddress) throws -> Int {
        var received = 0
        while true {
            let got = chunks(rig, to: peer)
            guard !got.isEmpty else { return received }
            received += got.reduce(0) { $0 + $1.data.count }
            if got.last?.last == true { return received }
            try acknowledge(rig, request, bytes: received, from: peer)
        }
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
            if !readerDone { readerDone = try readAll(rig, request, by: reader) == 10 * Self.chunk }
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

    /// A peer of sync protocol 1 never acknowledges progress, so it would be sent a state whole,
    /// queued at the relay if it does not read: states of at most a window (what a paced target
    /// that stops reading leaves queued) still reach every one of them in one transfer; a larger
    /// one is refused them (UNSUPPORTED_VERSION, "update"), and not offered again on that
    /// connection, while a paced target gets it. A new connection starts with a clean record.
    @Test func peersOfProtocolOneGetStatesUpToAWindowAndAreToldToUpdateForLarger() throws {
        let rig = try runningMatch()
        let old = (0 ..< 3).map { RelayRig.address("old-\($0)") }
        for peer in old {
            let welcome = try rig.attach(peer, slot: 0, role: .spectator, participant: "old-\(peer.routingId.last!)", protocolVersion: 1)
            #expect(welcome.stateFollows)
        }
        let current = RelayRig.address("current")
        _ = try rig.attach(current, slot: 0, role: .spectator)
        // A large state: the paced spectator gets it as it acknowledges; the old ones are told why not.
        let large = try request(rig)
        try serve(rig, large, chunks: 10)
        for peer in old {
            let got = rig.transport.take(peer)
            #expect(stateChunks(got).isEmpty)
            let refusal = got.compactMap { body -> ErrorReply? in if case .error(let error) = body { error } else { nil } }
            #expect(refusal.map(\.code) == [.unsupportedVersion])
            #expect(refusal.first?.message.contains("Update the client") == true)
        }
        #expect(try readAll(rig, large, by: current) == 1000)
        // Not offered again on those connections: no transfer follows for them.
        rig.advance(ms: 100)
        #expect(stateRequests(rig.transport.take(a)).isEmpty)
        // Attached again from new connections but still of protocol 1: still nothing (a
        // refused peer costs the reference no upload per reattach).
        let renewed = old.map { RelayRig.address("renewed-\($0.routingId.last!)") }
        for (peer, again) in zip(old, renewed) {
            _ = try rig.attach(again, slot: 0, role: .spectator, participant: "old-\(peer.routingId.last!)", protocolVersion: 1)
        }
        rig.advance(ms: 100)
        #expect(stateRequests(rig.transport.take(a)).isEmpty)
        // Updated (protocol 2), they are served again.
        let updated = old.map { RelayRig.address("updated-\($0.routingId.last!)") }
        for (peer, again) in zip(old, updated) {
            _ = try rig.attach(again, slot: 0, role: .spectator, participant: "old-\(peer.routingId.last!)")
        }
        let again = try request(rig)
        try serve(rig, again, chunks: 10)
        for peer in updated { #expect(try readAll(rig, again, by: peer) == 1000) }
    }

    /// A transfer nobody is left to take (its one target, of protocol 1, refused the state)
    /// ends at once: its reservation is given back, and the rest of the reference's chunks are
    /// let go without an error each.
    @Test func aTransferNobodyTakesEndsAtOnce() throws {
        let rig = try runningMatch()
        let old = RelayRig.address("old")
        _ = try rig.attach(old, slot: 0, role: .spectator, protocolVersion: 1)
        let request = try request(rig)
        try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 90, totalSize: 1000,
                                            data: Array(repeating: 0, count: Self.chunk))), from: a)
        #expect(rig.core.introspect().rendered().contains(#""transfer_bytes_held":0"#))
        for index in 1 ..< 10 {
            let reply = try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 90, offset: UInt64(index * Self.chunk),
                                                            totalSize: 1000, data: Array(repeating: 0, count: Self.chunk),
                                                            last: index == 9)), from: a)
            #expect(reply == nil)
        }
        #expect(!rig.transport.take(a).contains { if case .error = $0 { true } else { false } })
        rig.advance(ms: 100)
        #expect(stateRequests(rig.transport.take(a)).isEmpty)
    }

    /// States of at most a window reach every peer of protocol 1 in one transfer, whole at once.
    @Test func peersOfProtocolOneGetAStateOfAWindowWhole() throws {
        let rig = try runningMatch()
        let old = (0 ..< 3).map { RelayRig.address("old-\($0)") }
        for peer in old { _ = try rig.attach(peer, slot: 0, role: .spectator, protocolVersion: 1) }
        let small = try request(rig)
        try serve(rig, small, chunks: 3)
        for peer in old { #expect(chunks(rig, to: peer).map(\.offset) == [0, 100, 200]) }
        rig.advance(ms: 8)
        #expect(stateRequests(rig.transport.take(a)).isEmpty, "the transfer ended with every target served")
    }

    /// A player of protocol 1 diverging with a state too large for it is refused once: it waits
    /// (its checksums no longer vote), and the next checksum frame starts no new upload.
    @Test func aDivergedPlayerOfProtocolOneRefusedAStateCostsOneUpload() throws {
        let rig = RelayRig(players: 3, checksumInterval: 10) {
            $0.transferWindowBytes = Self.window
            $0.silenceTimeoutMs = 10_000
        }
        let c = RelayRig.address("peer-c")
        _ = try rig.attach(a, slot: 1)
        _ = try rig.attach(b, slot: 2)
        _ = try rig.attach(c, slot: 3, protocolVersion: 1)
        let peers = [a, b, c]
        func play(_ frames: Range<Int>) throws {
            for frame in frames { for (index, peer) in peers.enumerated() { try rig.batch(peer, slot: index + 1, start: frame, [1]) } }
        }
        func report(_ frame: Int, _ checksums: [UInt64]) throws {
            for (index, peer) in peers.enumerated() {
                try rig.send(.checksumReport(ChecksumReport(slot: UInt32(index + 1),
                                                            checksums: [FrameChecksum(frame: UInt32(frame), checksum: checksums[index])])),
                             from: peer)
            }
        }
        try play(0 ..< 30)
        try report(10, [1, 1, 3])
        let request = try #require(stateRequests(rig.transport.take(a)).first)
        for index in 0 ..< 4 {
            try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 20, offset: UInt64(index * 100), totalSize: 400,
                                                data: Array(repeating: 9, count: 100), last: index == 3)), from: a)
        }
        #expect(stateChunks(rig.transport.take(c)).isEmpty)
        try play(30 ..< 40)
        try report(30, [2, 2, 4])
        rig.advance(ms: 100)
        #expect(stateRequests(rig.transport.take(a)).isEmpty, "no second upload")
        #expect(!notices(rig).isEmpty && notices(rig).allSatisfy { $0.frame == 10 }, "no desync noticed at frame 30")
    }

    /// A reference slow to send the state (done just before its deadline) costs its targets
    /// nothing: they have as long again from when the state became whole.
    @Test func aSlowReferenceLeavesItsTargetsTheirOwnTime() throws {
        // 1000 bytes at 1024 bytes/s: 976 ms, plus a 1 s timeout: the state is due by 1976 ms.
        let rig = try runningMatch(minRate: 1024, timeoutMs: 1_000)
        let joiner = RelayRig.address("late")
        _ = try rig.attach(joiner, slot: 0, role: .spectator)
        let request = try request(rig)
        var done = false
        var acknowledged = 0
        // A chunk every 190 ms (the last at 1710 ms); the joiner acknowledges 10 bytes more each
        // time: progress, never silent for the timeout, but far behind when the state is whole.
        for index in 0 ..< 10 {
            try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 90, offset: UInt64(index * Self.chunk),
                                                totalSize: 1000, data: Array(repeating: 1, count: Self.chunk), last: index == 9)), from: a)
            done = done || chunks(rig, to: joiner).last?.last == true
            acknowledged += 10
            try acknowledge(rig, request, bytes: acknowledged, from: joiner)
            rig.advance(ms: 190)
        }
        #expect(!done, "far behind when the state became whole")
        // Then a chunk's worth more every 150 ms, past the state's own deadline (1976 ms).
        while !done, rig.now < 6_000 {
            acknowledged += Self.chunk
            try acknowledge(rig, request, bytes: acknowledged, from: joiner)
            done = chunks(rig, to: joiner).last?.last == true
            rig.advance(ms: 150)
        }
        #expect(done, "the joiner got the whole state")
        #expect(!rig.transport.published.contains { $0.topic == "sync.transfer_failed" })
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
    /// went to the old connection. It gets a fresh transfer once this one ends, and leaving
    /// counts as no stall.
    @Test func aTargetThatAttachesAgainMidTransferGetsAFreshOne() throws {
        let rig = try runningMatch()
        let joiner = RelayRig.address("late")
        _ = try rig.attach(joiner, slot: 0, role: .spectator, participant: "watcher")
        let first = try request(rig)
        try serve(rig, first, chunks: 10)
        #expect(chunks(rig, to: joiner).count == 3)
        // Just before its acknowledgement is due, it comes back on another connection: it left
        // the transfer, which is not a stall (its new connection's record stays clean).
        rig.advance(ms: UInt64(Self.timeoutMs) - 4)
        let again = RelayRig.address("late-again")
        #expect(try rig.attach(again, slot: 0, role: .spectator, participant: "watcher").stateFollows)
        rig.advance(ms: 8)
        #expect(!rig.transport.published.contains { $0.topic == "sync.transfer_failed" })
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
