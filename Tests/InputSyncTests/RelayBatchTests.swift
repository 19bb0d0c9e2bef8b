import Foundation
import NetplayAuth
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing
import ZeroMQ
@testable import InputSync

/// Within a read batch (the messages the relay reads off its socket without waiting), what is
/// forwarded to each participant waits for the batch's end, so inputs of the same player read
/// together reach the others in one message: a relay that fell behind sends fewer, larger
/// messages and catches up.
@Suite("Relay forwarding coalesced per read batch", .ownThread)
struct RelayBatchTests {
    let a = RelayRig.address("peer-a")
    let b = RelayRig.address("peer-b")
    let c = RelayRig.address("peer-c")

    /// A running match of `players` (a, b, c in slot order) with nothing sent yet.
    func running(players: Int = 2, spectatorDelay: Int = 0) throws -> RelayRig {
        let rig = RelayRig(players: players, lagTolerance: 600, spectatorDelay: spectatorDelay)
        for (index, peer) in [a, b, c].prefix(players).enumerated() {
            _ = try rig.attach(peer, slot: index + 1)
        }
        for peer in [a, b, c] { _ = rig.transport.take(peer) }
        return rig
    }

    /// Every frame of `slot` that `broadcasts` carry (players and forwarded runs), in order.
    func frames(of slot: Int, in broadcasts: [InputBroadcast]) -> [Int: UInt8] {
        var seen: [Int: UInt8] = [:]
        for broadcast in broadcasts {
            for run in broadcast.players + broadcast.forwarded where run.slot == UInt32(slot) {
                for (offset, value) in run.inputs.enumerated() { seen[Int(run.startFrame) + offset] = value }
            }
        }
        return seen
    }

    @Test func inputsOfOnePlayerReadInOneBatchReachThePartnerInOneMessage() throws {
        let rig = try running()
        rig.core.beginBatch()
        for frame in 0 ..< 3 { try rig.batch(b, slot: 2, start: frame, [UInt8(10 + frame)]) }
        #expect(rig.transport.take(a).isEmpty, "forwarded before the batch ended")
        rig.core.endBatch(now: rig.now)
        let sent = rig.transport.broadcasts(a)
        #expect(sent.count == 1)
        #expect(sent.first?.authoritative == false)
        #expect(frames(of: 2, in: sent) == [0: 10, 1: 11, 2: 12])
        // Without a batch, each input goes as it is handled.
        for frame in 3 ..< 5 { try rig.batch(b, slot: 2, start: frame, [UInt8(10 + frame)]) }
        #expect(rig.transport.broadcasts(a).count == 2)
    }

    @Test func framesConfirmedWhileQueuedGoAsConfirmedOnes() throws {
        let rig = try running()
        rig.core.beginBatch()
        try rig.batch(b, slot: 2, start: 0, [20, 21])
        try rig.batch(a, slot: 1, start: 0, [10, 11])
        rig.core.endBatch(now: rig.now)
        let toA = rig.transport.broadcasts(a)
        #expect(toA.count == 1)
        let message = try #require(toA.first)
        #expect(message.authoritative && message.confirmedFrames == 2 && message.forwarded.isEmpty)
        #expect(frames(of: 1, in: toA) == [0: 10, 1: 11] && frames(of: 2, in: toA) == [0: 20, 1: 21])
        // B's own input completed nothing; A's did: B hears of both slots once, too.
        let toB = rig.transport.broadcasts(b)
        #expect(toB.count == 1 && frames(of: 1, in: toB) == [0: 10, 1: 11])
    }

    @Test func runsOfDifferentPlayersInOneBatchAllArrive() throws {
        let rig = try running(players: 3)
        rig.core.beginBatch()
        try rig.batch(b, slot: 2, start: 0, [20])
        try rig.batch(c, slot: 3, start: 0, [30])
        try rig.batch(b, slot: 2, start: 1, [21])
        try rig.batch(c, slot: 3, start: 1, [31])
        rig.core.endBatch(now: rig.now)
        let toA = rig.transport.broadcasts(a)
        #expect(frames(of: 2, in: toA) == [0: 20, 1: 21])
        #expect(frames(of: 3, in: toA) == [0: 30, 1: 31])
        // One message, one run per player (read alternately, as a socket hands them out).
        #expect(toA.count == 1 && toA.first?.players.count == 2, "\(toA)")
        // B and C each got the other's inputs.
        let toB = rig.transport.broadcasts(b), toC = rig.transport.broadcasts(c)
        #expect(frames(of: 3, in: toB) == [0: 30, 1: 31] && frames(of: 2, in: toC) == [0: 20, 1: 21])
    }

    @Test func aRunLongerThanOneMessageCarriesIsSplit() throws {
        let rig = try running()
        rig.core.beginBatch()
        // 3 batches of 60 inputs: 180 frames, more than one message's 128.
        for part in 0 ..< 3 {
            try rig.batch(b, slot: 2, start: part * 60, (0 ..< 60).map { UInt8(truncatingIfNeeded: part * 60 + $0) })
        }
        rig.core.endBatch(now: rig.now)
        let toA = rig.transport.broadcasts(a)
        #expect(toA.count == 2)
        #expect(toA.allSatisfy { ($0.players.first?.inputs.count ?? 0) <= 128 })
        let seen = frames(of: 2, in: toA)
        #expect(seen.count == 180 && (0 ..< 180).allSatisfy { seen[$0] == UInt8(truncatingIfNeeded: $0) })
    }

    @Test func theHotPathQueuesLikeTheGenericOne() throws {
        let rig = try running()
        rig.core.beginBatch()
        for frame in 0 ..< 3 {
            let bytes = try Envelope(body: .inputBatch(InputBatch(slot: 2, startFrame: UInt32(frame), inputSize: 1,
                                                                  inputs: [UInt8(20 + frame)], awaitedFrame: 0,
                                                                  currentFrame: UInt32(frame)))).encoded()
            let outcome = bytes.withUnsafeBytes { rig.core.handleFast($0, from: b, now: rig.now) }
            guard case .handled = outcome else {
                Issue.record("the hot path did not take the batch: \(outcome)")
                return
            }
        }
        #expect(rig.transport.take(a).isEmpty)
        rig.core.endBatch(now: rig.now)
        let toA = rig.transport.broadcasts(a)
        #expect(toA.count == 1 && frames(of: 2, in: toA) == [0: 20, 1: 21, 2: 22])
    }

    @Test func aPlayerThatReconnectsWithinTheBatchGetsTheQueuedFramesAtItsNewAddress() throws {
        let rig = try running()
        let moved = RelayRig.address("peer-a-again")
        rig.core.beginBatch()
        try rig.batch(b, slot: 2, start: 0, [20])
        _ = try rig.attach(moved, slot: 1, resume: true)
        try rig.batch(b, slot: 2, start: 1, [21])
        rig.core.endBatch(now: rig.now)
        #expect(rig.transport.broadcasts(a).isEmpty, "sent to the address it left")
        let toMoved = rig.transport.broadcasts(moved)
        #expect(frames(of: 2, in: toMoved) == [0: 20, 1: 21], "\(toMoved)")
    }

    @Test func aParticipantThatLeavesWithinTheBatchGetsNothingMore() throws {
        let rig = try running()
        rig.core.beginBatch()
        try rig.batch(b, slot: 2, start: 0, [20])
        try rig.send(.detach(Detach(reason: .leaving)), from: a)
        rig.core.endBatch(now: rig.now)
        #expect(rig.transport.broadcasts(a).isEmpty)
    }

    @Test func spectatorsGetConfirmedFramesOnceAtTheBatchEnd() throws {
        let rig = try running()
        let watcher = RelayRig.address("watcher")
        _ = try rig.attach(watcher, slot: 0, role: .spectator)
        _ = rig.transport.take(watcher)
        rig.core.beginBatch()
        for frame in 0 ..< 3 {
            try rig.batch(a, slot: 1, start: frame, [UInt8(10 + frame)])
            try rig.batch(b, slot: 2, start: frame, [UInt8(20 + frame)])
        }
        #expect(rig.transport.take(watcher).isEmpty)
        rig.core.endBatch(now: rig.now)
        let watched = rig.transport.broadcasts(watcher)
        #expect(watched.count == 1 && watched.allSatisfy(\.authoritative))
        #expect(frames(of: 1, in: watched) == [0: 10, 1: 11, 2: 12] && frames(of: 2, in: watched) == [0: 20, 1: 21, 2: 22])
    }

    /// The relay service under the real runtime: inputs that wait on the socket while the
    /// reactor is busy are read in one batch and reach the partner in one message. (No time
    /// limit: Swift Testing counts it from when the test is scheduled, and in the full suite it can
    /// wait minutes for a thread while long end-to-end tests hold both; its reads have deadlines.)
    @Test
    func theRuntimeReadsQueuedInputsInOneBatchAndTheRelaySendsOneMessage() throws {
        // The players only listen: a long silence timeout keeps a loaded machine from dropping them.
        let (service, keyRing) = try startRelayService(id: "sync-batch") { $0.silenceTimeoutMs = 60_000 }
        defer { service.stop() }
        let params = SyncParams(inputSize: 1, maxPlayers: 2, frameDelay: 2, frameRateMhz: 60_000, predictionWindow: 8,
                                lagToleranceFrames: 600, checksumIntervalFrames: 60)
        let signer = JoinTicketSigner(keyRing: keyRing)
        var players: [Socket] = []
        for slot in 1 ... 2 {
            let socket = try Context.shared.socket(.dealer)
            try socket.set(.receiveTimeout(milliseconds: 3_000))
            try socket.connect(service.endpoint)
            let ticket = try signer.issue(sessionId: "s-batch", participantId: "p\(slot)", role: .player, slot: UInt32(slot),
                                          relayId: "sync-batch", relayEndpoint: service.endpoint, params: params,
                                          name: "player \(slot)", ttlMs: 60_000)
            _ = try socket.send(try Envelope(requestId: UInt64(slot), body: .attachRequest(
                AttachRequest(ticket: ticket, protocolVersion: SyncProtocol.current))).encoded())
            players.append(socket)
        }
        defer { for socket in players { socket.close() } }
        let (a, b) = (players[0], players[1])
        /// Reads `socket` until `done` says so; fails after 15 s (or a 3 s silence) saying what came.
        func read(_ socket: Socket, until done: (Envelope.Body) -> Bool) throws {
            let deadline = Date().addingTimeInterval(15)
            var seen: [String] = []
            while Date() < deadline {
                let body = try Envelope(decoding: try socket.receive()).body
                if done(body) { return }
                seen.append(body.name)
            }
            throw HarnessError("not done after 15 s; received \(seen.suffix(40))")
        }
        for socket in players {
            try read(socket) { body in
                if case .attachResponse(let response) = body { return response.running }
                return false
            }
        }
        // The reactor is busy for 300 ms while B's three inputs arrive.
        service.handle.enqueue { _ in usleep(300_000) }
        for frame in 0 ..< 3 {
            _ = try b.send(try Envelope(body: .inputBatch(InputBatch(slot: 2, startFrame: UInt32(frame), inputSize: 1,
                                                                     inputs: [UInt8(20 + frame)], awaitedFrame: 0,
                                                                     currentFrame: UInt32(frame)))).encoded())
        }
        // (Broadcasts without B's inputs, such as the relay's acknowledgement of A's frames, do
        // not count.)
        var broadcasts: [InputBroadcast] = []
        try read(a) { body in
            if case .inputBroadcast(let broadcast) = body, !frames(of: 2, in: [broadcast]).isEmpty { broadcasts.append(broadcast) }
            return frames(of: 2, in: broadcasts).count >= 3
        }
        #expect(broadcasts.count == 1, "\(broadcasts)")
        #expect(frames(of: 2, in: broadcasts) == [0: 20, 1: 21, 2: 22])
    }
}
