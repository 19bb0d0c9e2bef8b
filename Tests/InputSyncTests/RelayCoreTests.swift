import Foundation
import NetplayAuth
import NetplayService
import NetplayWire
import Testing
@testable import InputSync
import NetplayTestSupport

@Suite("Relay core: admission, forwarding, confirmation", .ownThread)
struct RelayCoreTests {
    let a = RelayRig.address("peer-a")
    let b = RelayRig.address("peer-b")
    let c = RelayRig.address("peer-c")

    /// Attaches players 1, 2 and 3 of a three-player `rig` (peers a, b and c).
    func attachTrio(_ rig: RelayRig) throws {
        for (peer, slot) in [(a, 1), (b, 2), (c, 3)] { _ = try rig.attach(peer, slot: slot) }
    }

    /// a, b and c send their inputs (1, 2 and 3) for `frames`.
    func playTrio(_ rig: RelayRig, frames: Range<Int>) throws {
        for frame in frames {
            try rig.batch(a, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
            try rig.batch(c, slot: 3, start: frame, [3])
        }
    }

    /// a, b and c report their checksums of `frame`, in that order.
    func reportTrio(_ rig: RelayRig, frame: UInt32, _ fromA: UInt64, _ fromB: UInt64, _ fromC: UInt64) throws {
        for (peer, slot, checksum) in [(a, 1, fromA), (b, 2, fromB), (c, 3, fromC)] as [(PeerAddress, UInt32, UInt64)] {
            try rig.send(.checksumReport(ChecksumReport(slot: slot, checksums: [FrameChecksum(frame: frame, checksum: checksum)])), from: peer)
        }
    }

    func runningPair(_ rig: RelayRig, first participant: String? = nil) throws {
        let first = try rig.attach(a, slot: 1, participant: participant)
        #expect(!first.running)
        let second = try rig.attach(b, slot: 2)
        #expect(second.running)
        _ = rig.transport.take(a)
        _ = rig.transport.take(b)
    }

    /// Both players of `runningPair` send `frames`, player 1 the inputs `input(frame)`, player 2 [2].
    func playBoth(_ rig: RelayRig, frames: Range<Int>, input: (Int) -> [UInt8] = { _ in [1] }) throws {
        for frame in frames {
            try rig.batch(a, slot: 1, start: frame, input(frame))
            try rig.batch(b, slot: 2, start: frame, [2])
        }
    }

    /// The state requests sent to `peer` since the last take.
    func stateRequests(_ rig: RelayRig, to peer: PeerAddress) -> [StateRequest] {
        rig.transport.take(peer).compactMap { body -> StateRequest? in
            if case .stateRequest(let request) = body { return request }
            return nil
        }
    }

    @Test func matchStartsWhenEverySlotIsAttachedAndEveryoneIsTold() throws {
        let rig = RelayRig()
        let response = try rig.attach(a, slot: 1)
        #expect(response.sessionId == rig.sessionId && response.slot == 1 && !response.running)
        let pushed = rig.transport.take(a)
        #expect(!pushed.contains { $0.attachResponse?.running == true })
        _ = try rig.attach(b, slot: 2)
        #expect(rig.transport.take(a).contains { $0.attachResponse?.running == true })
    }

    @Test func forgedExpiredAndMisdirectedTicketsAreRefused() throws {
        let rig = RelayRig()
        var forged = rig.ticket(slot: 1)
        forged.slot = 2
        #expect(throws: ServiceError.self) { try rig.send(.attachRequest(AttachRequest(ticket: forged, protocolVersion: SyncProtocol.current)), from: a) }
        do {
            try rig.send(.attachRequest(AttachRequest(ticket: forged, protocolVersion: SyncProtocol.current)), from: a)
        } catch {
            #expect(error.code == .ticketInvalid)
        }
        let expired = rig.ticket(slot: 1, ttlMs: 1, issuedAt: UnixTime.nowMs() - 10_000)
        do {
            try rig.send(.attachRequest(AttachRequest(ticket: expired, protocolVersion: SyncProtocol.current)), from: a)
            Issue.record("expired ticket admitted")
        } catch {
            #expect(error.code == .ticketExpired)
        }
        let elsewhere = rig.ticket(slot: 1, relay: "sync-9")
        do {
            try rig.send(.attachRequest(AttachRequest(ticket: elsewhere, protocolVersion: SyncProtocol.current)), from: a)
            Issue.record("ticket for another relay admitted")
        } catch {
            #expect(error.code == .ticketInvalid)
        }
        let otherKey = try JoinTicketSigner(keyRing: TicketKeyRing.generate()).sign(rig.ticket(slot: 1))
        do {
            try rig.send(.attachRequest(AttachRequest(ticket: otherKey, protocolVersion: SyncProtocol.current)), from: a)
            Issue.record("ticket signed with another secret admitted")
        } catch {
            #expect(error.code == .ticketInvalid)
        }
        #expect(rig.core.sessionCount == 0)
    }

    @Test func inputsAreForwardedAtOnceAndConfirmedWhenEveryoneIsIn() throws {
        let rig = RelayRig()
        try runningPair(rig)
        try rig.batch(a, slot: 1, start: 0, [1, 2, 3])
        let forwarded = rig.transport.broadcasts(b)
        #expect(forwarded.count == 1 && !forwarded[0].authoritative)
        #expect(forwarded[0].players.first?.inputs == [1, 2, 3] && forwarded[0].players.first?.slot == 1)
        #expect(rig.transport.take(a).isEmpty)
        try rig.batch(b, slot: 2, start: 0, [7, 8])
        let toA = rig.transport.broadcasts(a, authoritative: true)
        #expect(toA.count == 1)
        #expect(toA[0].confirmedFrames == 2)
        #expect(toA[0].players.map(\.inputs) == [[1, 2], [7, 8]])
        #expect(toA[0].awaitedInputFrame == 3)
        // B completed the frames: its confirmation waits (one frame) for the next message to B.
        #expect(rig.transport.broadcasts(b, authoritative: true).isEmpty)
        try rig.batch(a, slot: 1, start: 3, [4])
        let toB = rig.transport.broadcasts(b, authoritative: true)
        #expect(toB.count == 1 && toB[0].awaitedInputFrame == 2)
        #expect(toB.first?.players.map(\.inputs) == [[1, 2], [7, 8]])
        #expect(toB.first?.forwarded.map(\.inputs) == [[4]])
        // Without a next message, the confirmation goes out on its own after the deferral.
        try rig.batch(b, slot: 2, start: 2, [9, 9, 9])
        _ = rig.transport.take(a)
        rig.advance(ms: 40)
        #expect(rig.transport.broadcasts(b, authoritative: true).last?.confirmedFrames == 4)
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 4)
    }

    @Test func rulesBrokenByPeersGetErrorsAndChangeNothing() throws {
        let rig = RelayRig()
        try runningPair(rig)
        let spectator = RelayRig.address("watcher")
        _ = try rig.attach(spectator, slot: 0, role: .spectator)
        func code(_ body: () throws -> Void) -> ErrorCode? {
            do { try body(); return nil } catch { return (error as? ServiceError)?.code }
        }
        #expect(code { try rig.batch(a, slot: 2, start: 0, [9]) } == .permissionDenied)
        #expect(code { try rig.batch(spectator, slot: 1, start: 0, [9]) } == .permissionDenied)
        #expect(code { try rig.batch(spectator, slot: 0, start: 0, [9]) } == .permissionDenied)
        #expect(code { try rig.batch(a, slot: 1, start: 2_000_000_000, [9]) } == .badRequest)
        #expect(code {
            try rig.send(.inputBatch(InputBatch(slot: 1, startFrame: 0, inputSize: 2, inputs: [1, 2], currentFrame: 1)), from: a)
        } == .badRequest)
        #expect(code {
            try rig.send(.inputBatch(InputBatch(slot: 1, startFrame: 0, inputSize: 1, inputs: Array(repeating: 1, count: 200))), from: a)
        } == .badRequest)
        #expect(code { try rig.batch(RelayRig.address("stranger"), slot: 1, start: 0, [1]) } == .unauthenticated)
        #expect(code {
            try rig.send(.stateChunk(StateChunk(transferId: 77, frame: 0, totalSize: 4, data: [1, 2, 3, 4], last: true)), from: a)
        } == .invalidState)
        #expect(code { try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: [FrameChecksum(frame: 0, checksum: 1)])), from: a) }
                == .permissionDenied)
        #expect(code { try rig.send(.checksumReport(ChecksumReport(slot: 1, checksums: [FrameChecksum(frame: 7, checksum: 1)])), from: a) }
                == .badRequest)
        #expect(code { try rig.send(.healthResponse(HealthResponse()), from: a) } == .unknownRequest)
        // Nothing of the above reached the timeline; the good batch still works.
        try rig.batch(a, slot: 1, start: 0, [5])
        try rig.batch(b, slot: 2, start: 0, [6])
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 1)
        let confirmed = rig.transport.broadcasts(a, authoritative: true)
        #expect(confirmed.last?.players.map(\.inputs) == [[5], [6]])
    }

    @Test func aLaggingPlayerIsSubstitutedAndTheOthersGetFinalInputs() throws {
        let rig = RelayRig(lagTolerance: 6)
        try runningPair(rig)
        try rig.batch(b, slot: 2, start: 0, [4], current: 0)
        // Player A keeps playing at 60 Hz; B goes silent after frame 0.
        for frame in 0 ..< 40 {
            rig.advance(ms: 16)
            try rig.batch(a, slot: 1, start: frame, [UInt8(frame % 3)], current: frame)
        }
        let confirmed = rig.core.confirmedFrames(of: rig.sessionId) ?? 0
        #expect(confirmed >= 25, "confirmed \(confirmed)")
        let finals = rig.transport.broadcasts(a, authoritative: true)
        let slotB = finals.flatMap { $0.players.filter { $0.slot == 2 } }
        #expect(slotB.contains { $0.status.contains(.substituted) })
        // Repeat-last: every substituted input of B is its last real input, 4.
        for run in slotB {
            for (index, status) in run.status.enumerated() where status == .substituted { #expect(run.inputs[index] == 4) }
        }
        #expect(rig.transport.published.contains { $0.topic == "sync.substituted" && $0.severity == .notice })
        // B comes back: its late inputs for substituted frames are ignored, newer ones count.
        let stored = confirmed
        try rig.batch(b, slot: 2, start: 1, Array(repeating: 9, count: 60), current: 60)
        #expect(rig.transport.published.filter { $0.topic == "sync.substituted" }.count >= 2)  // caught up
        #expect(rig.transport.published.contains { $0.topic == "sync.substituted" && $0.severity == .info })
        _ = stored
    }

    @Test func spectatorsGetOnlyConfirmedInputsWithTheDelay() throws {
        let rig = RelayRig(spectatorDelay: 5)
        try runningPair(rig)
        let spectator = RelayRig.address("watcher")
        let response = try rig.attach(spectator, slot: 0, role: .spectator)
        #expect(response.running && !response.stateFollows && response.role == .spectator)
        _ = rig.transport.take(spectator)
        for frame in 0 ..< 12 {
            try rig.batch(a, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        rig.advance(ms: 8)
        let got = rig.transport.broadcasts(spectator)
        #expect(got.allSatisfy { $0.authoritative })
        let frames = got.flatMap { broadcast in broadcast.players.filter { $0.slot == 1 }.map { Int($0.startFrame) + $0.inputs.count } }
        #expect(frames.max() == 12 - 5)
    }

    /// Checksums are of confirmed frames' states: reports far past the confirmed frames are not
    /// kept. A liar reporting hundreds of future frames took every pending place (256), and the
    /// honest reports that followed were dropped: no desync was ever detected again.
    @Test func futureChecksumsTakeNoPlaceFromTheHonestReports() throws {
        let rig = RelayRig(players: 3, checksumInterval: 2)
        try attachTrio(rig)
        let lies = stride(from: 40, to: 40 + 2 * 270, by: 2).map { FrameChecksum(frame: UInt32($0), checksum: 9) }
        try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: lies)), from: b)
        try playTrio(rig, frames: 0 ..< 12)
        try reportTrio(rig, frame: 10, 111, 222, 111)
        #expect(rig.transport.published.contains { $0.topic == "sync.desync" }, "the honest reports of frame 10 were judged")
    }

    /// Three players play 32 frames; b's checksum of frame 10 disagrees, so a's state of frame
    /// 20 heals it (sent whole, its progress acknowledged, not yet loaded). Returns the transfer.
    func healB(_ rig: RelayRig, staleReportDuringTheTransfer: Bool) throws -> UInt32 {
        try attachTrio(rig)
        try playTrio(rig, frames: 0 ..< 32)
        try reportTrio(rig, frame: 10, 111, 222, 111)
        let request = try #require(InputSyncTests.stateRequests(rig.transport.take(a)).first)
        #expect(request.reason == StateTransferReason.desync)
        if staleReportDuringTheTransfer {
            try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: [FrameChecksum(frame: 30, checksum: 999)])), from: b)
        }
        try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 20, totalSize: 2, data: [4, 2], last: true,
                                            reason: .desync)), from: a)
        try rig.send(.stateTransferAck(StateTransferAck(transferId: request.transferId, receivedBytes: 2)), from: b)
        return request.transferId
    }

    /// b's report of frame 30 from its diverged run (sent before it loaded the healing state,
    /// arriving after the state went out) counted from the last chunk on: judged with the
    /// others', it was a second, spurious desync and another transfer. It counts from b's load.
    @Test(arguments: [false, true])
    func aHealedPlayersReportFromBeforeItLoadedTheStateDoesNotCount(staleReportDuringTheTransfer: Bool) throws {
        let rig = RelayRig(players: 3, checksumInterval: 10)
        let transfer = try healB(rig, staleReportDuringTheTransfer: staleReportDuringTheTransfer)
        if !staleReportDuringTheTransfer {
            try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: [FrameChecksum(frame: 30, checksum: 999)])), from: b)
        }
        try rig.send(.stateTransferAck(StateTransferAck(transferId: transfer, loaded: true)), from: b)
        try rig.send(.checksumReport(ChecksumReport(slot: 1, checksums: [FrameChecksum(frame: 30, checksum: 333)])), from: a)
        try rig.send(.checksumReport(ChecksumReport(slot: 3, checksums: [FrameChecksum(frame: 30, checksum: 333)])), from: c)
        #expect(!notices(rig).contains { $0.frame == 30 }, "b's checksum from before its load was judged: \(notices(rig).map(\.frame))")
        // Loaded, its reports count again: a disagreement is a desync.
        try playTrio(rig, frames: 32 ..< 42)
        try reportTrio(rig, frame: 40, 5, 6, 5)
        #expect(notices(rig).contains { $0.frame == 40 && $0.divergedSlots == [2] })
    }

    /// A healed player whose connection dropped before its load acknowledgement went out came
    /// back to a slot whose checksums never counted again (every later desync unseen). A returning
    /// player with a load unacknowledged gets a fresh state, and counts again once it loads it.
    @Test func aHealedPlayerBackBeforeAcknowledgingItsLoadGetsAnotherState() throws {
        let rig = RelayRig(players: 3, checksumInterval: 10)
        _ = try healB(rig, staleReportDuringTheTransfer: false)
        _ = rig.transport.take(a)
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 31)
        rig.advance(ms: 50)
        let again = try #require(InputSyncTests.stateRequests(rig.transport.take(a)).first, "no new transfer for the returning player")
        try rig.send(.stateChunk(StateChunk(transferId: again.transferId, frame: 20, totalSize: 2, data: [4, 2], last: true,
                                            reason: again.reason)), from: a)
        try rig.send(.stateTransferAck(StateTransferAck(transferId: again.transferId, receivedBytes: 2)), from: b)
        try rig.send(.stateTransferAck(StateTransferAck(transferId: again.transferId, loaded: true)), from: b)
        try playTrio(rig, frames: 32 ..< 42)
        try reportTrio(rig, frame: 40, 5, 6, 5)
        #expect(notices(rig).contains { $0.frame == 40 && $0.divergedSlots == [2] })
    }

    /// A healed player that cannot load the state says so, and gets another while its retries
    /// last; past them it plays on as it was, and its reports count again rather than never.
    @Test func aHealedPlayerThatCannotLoadTheStateIsJudgedAgain() throws {
        let rig = RelayRig(players: 3, checksumInterval: 10)
        var served = try healB(rig, staleReportDuringTheTransfer: false)
        var transfers = 1
        for _ in 0 ..< 5 {
            try rig.send(.stateTransferAck(StateTransferAck(transferId: served, error: "corrupt")), from: b)
            rig.advance(ms: 20)
            guard let retry = InputSyncTests.stateRequests(rig.transport.take(a)).first else { continue }
            transfers += 1
            served = retry.transferId
            try rig.send(.stateChunk(StateChunk(transferId: served, frame: 20, totalSize: 2, data: [4, 2], last: true,
                                                reason: .desync)), from: a)
            try rig.send(.stateTransferAck(StateTransferAck(transferId: served, receivedBytes: 2)), from: b)
        }
        #expect(transfers == 4, "the first and three retries")
        try reportTrio(rig, frame: 30, 333, 999, 333)
        #expect(notices(rig).contains { $0.frame == 30 && $0.divergedSlots == [2] })
    }

    @Test func aDesyncIsDetectedAndTheDivergedPlayerGetsTheMajorityState() throws {
        let rig = RelayRig(players: 3, checksumInterval: 10)
        try attachTrio(rig)
        try playTrio(rig, frames: 0 ..< 12)
        _ = rig.transport.take(a); _ = rig.transport.take(b); _ = rig.transport.take(c)
        try reportTrio(rig, frame: 10, 111, 222, 111)
        let notices = rig.transport.sent.compactMap { entry -> DesyncNotice? in
            if case .desyncNotice(let notice) = entry.body { return notice }
            return nil
        }
        #expect(notices.count == 3)
        #expect(notices.first?.divergedSlots == [2] && notices.first?.referenceSlot == 1 && notices.first?.resyncStarted == true)
        #expect(rig.transport.published.contains { $0.topic == "sync.desync" && $0.severity == .warning })
        let requests = rig.transport.take(a).compactMap { body -> StateRequest? in
            if case .stateRequest(let request) = body { return request }
            return nil
        }
        #expect(requests.count == 1 && requests[0].reason == .desync)
        _ = rig.transport.take(b)
        // The reference answers in two chunks; an oversized or out-of-order chunk is refused.
        let id = requests[0].transferId
        do {
            try rig.send(.stateChunk(StateChunk(transferId: id, frame: 11, offset: 4, totalSize: 8, data: [5, 6, 7, 8], last: true)), from: c)
            Issue.record("a chunk from a non-reference was relayed")
        } catch {
            #expect(error.code == .invalidState)
        }
        try rig.send(.stateChunk(StateChunk(transferId: id, frame: 11, offset: 0, totalSize: 8, data: [1, 2, 3, 4], checksum: 9)), from: a)
        try rig.send(.stateChunk(StateChunk(transferId: id, frame: 11, offset: 4, totalSize: 8, data: [5, 6, 7, 8], checksum: 9, last: true)), from: a)
        let chunks = rig.transport.take(b).compactMap { body -> StateChunk? in
            if case .stateChunk(let chunk) = body { return chunk }
            return nil
        }
        #expect(chunks.map(\.data) == [[1, 2, 3, 4], [5, 6, 7, 8]])
        #expect(rig.transport.take(c).allSatisfy { if case .stateChunk = $0 { false } else { true } })
        try rig.send(.stateTransferAck(StateTransferAck(transferId: id, receivedBytes: 8, loaded: true)), from: b)
        #expect(rig.core.stats(of: rig.sessionId)?.resyncs == 1)
        #expect(rig.core.stats(of: rig.sessionId)?.desyncs == 1)
    }

    @Test func oversizedAndOutOfOrderChunksAbortTheTransfer() throws {
        let rig = RelayRig(checksumInterval: 10) { $0.maxChunkBytes = 16 }
        try runningPair(rig, first: "h-host")  // the tie goes to the host
        try playBoth(rig, frames: 0 ..< 11)
        try rig.send(.checksumReport(ChecksumReport(slot: 1, checksums: [FrameChecksum(frame: 10, checksum: 1)])), from: a)
        try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: [FrameChecksum(frame: 10, checksum: 2)])), from: b)
        let request = stateRequests(rig, to: a).first
        let id = try #require(request).transferId
        do {
            try rig.send(.stateChunk(StateChunk(transferId: id, frame: 10, totalSize: 64, data: Array(repeating: 0, count: 32))), from: a)
            Issue.record("oversized chunk accepted")
        } catch {
            #expect(error.code == .payloadTooLarge)
        }
        do {
            try rig.send(.stateChunk(StateChunk(transferId: id, frame: 10, totalSize: 8, data: [1], last: false)), from: a)
            Issue.record("chunk of an abandoned transfer accepted")
        } catch {
            #expect(error.code == .invalidState)
        }
    }

    @Test func aLateSpectatorGetsAStateThenTheInputsSince() throws {
        let rig = RelayRig() { $0.lateJoinReplayLimit = 20 }
        try runningPair(rig)
        try playBoth(rig, frames: 0 ..< 100) { [UInt8($0 & 0x7F)] }
        let spectator = RelayRig.address("late")
        let response = try rig.attach(spectator, slot: 0, role: .spectator)
        #expect(response.stateFollows && response.running)
        rig.advance(ms: 8)
        let request = stateRequests(rig, to: a).first
        let id = try #require(request).transferId
        #expect(request?.reason == .lateJoin)
        #expect(rig.transport.broadcasts(spectator).isEmpty)
        try rig.send(.stateChunk(StateChunk(transferId: id, frame: 90, totalSize: 3, data: [9, 9, 9], last: true)), from: a)
        let got = rig.transport.take(spectator)
        #expect(got.contains { if case .stateChunk = $0 { true } else { false } })
        let inputs = got.compactMap { body -> InputBroadcast? in
            if case .inputBroadcast(let broadcast) = body { return broadcast }
            return nil
        }
        #expect(inputs.first?.players.first?.startFrame == 90)
        #expect(inputs.first?.players.first?.inputs == (90 ..< 100).map { UInt8($0 & 0x7F) })
    }

    /// A state older than about half of what the relay holds may leave its history before the
    /// target runs from it (and the target would need another transfer): the request asks for
    /// the newer half, and the reference's aligned state is chosen only if it is that recent.
    @Test func aLateJoinerAsksForAStateFromTheNewerHalfOfTheHistory() throws {
        let rig = RelayRig() { $0.historyFrames = 256; $0.maxFramesAhead = 64 }
        try runningPair(rig)
        try playBoth(rig, frames: 0 ..< 600)
        let spectator = RelayRig.address("late")
        #expect(try rig.attach(spectator, slot: 0, role: .spectator).stateFollows)
        rig.advance(ms: 8)
        let request = try #require(stateRequests(rig, to: a).first)
        // The relay holds frames 344 ..< 600 (256), all confirmed: the newer half starts at 472.
        #expect(request.frame == 472, "asked for frame \(request.frame)")
        // A state from the older half is still accepted (a peer may hold nothing newer).
        try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 400, totalSize: 1, data: [4], last: true)), from: a)
        #expect(rig.transport.take(spectator).contains { if case .stateChunk = $0 { true } else { false } })
    }

    /// A player's inputs are taken no further than `maxFramesAhead` past the confirmed frames,
    /// however many batches it sends (each may start that far past its own newest): the history
    /// then always holds every frame not confirmed. A player that ran its slot past the history
    /// had the ring overwrite frames the others still needed, and the match froze for good.
    @Test func aPlayerRunningAheadStopsAtTheFramesAheadLimitAndTheMatchGoesOn() throws {
        let rig = RelayRig() { $0.historyFrames = 256; $0.maxFramesAhead = 64 }
        try runningPair(rig)
        let session = try #require(rig.core.sessions[rig.sessionId])
        try playBoth(rig, frames: 0 ..< 10)
        for start in stride(from: 10, to: 2_000, by: 60) {
            try? rig.batch(a, slot: 1, start: start, Array(repeating: 1, count: 60))  // past its slot's reach: refused
        }
        #expect(session.timeline.stored(0) == 10 + 64, "a holds \(session.timeline.stored(0)) frames")
        #expect(session.timeline.oldest <= session.timeline.confirmed)
        _ = rig.transport.take(b)
        // b plays on; every frame reaches it as inputs, none as a state.
        for frame in 10 ..< 60 { try rig.batch(b, slot: 2, start: frame, [2]) }
        rig.advance(ms: 40)  // the confirmation of b's own last frames waits a deferral
        let got = rig.transport.take(b)
        #expect(!got.contains { if case .stateRequest = $0 { true } else { false } })
        #expect(!got.contains { if case .stateChunk = $0 { true } else { false } })
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 60)
        #expect(got.contains { if case .inputBroadcast(let broadcast) = $0 { broadcast.confirmedFrames == 60 } else { false } })
        #expect(session.timeline.inputs(slot: 0, from: 59, to: 60) == [1])
        // As the match moves, a's slot may move ahead again.
        for start in stride(from: 74, to: 400, by: 60) { try? rig.batch(a, slot: 1, start: start, Array(repeating: 1, count: 60)) }
        #expect(session.timeline.stored(0) == 60 + 64)
    }

    @Test func aTargetThatCannotLoadTheStateGetsAnotherUpToTheRetryLimit() throws {
        let rig = RelayRig() { $0.lateJoinReplayLimit = 20 }
        try runningPair(rig)
        try playBoth(rig, frames: 0 ..< 100)
        let spectator = RelayRig.address("late")
        #expect(try rig.attach(spectator, slot: 0, role: .spectator).stateFollows)
        func requests() -> [StateRequest] { stateRequests(rig, to: a) }
        var ids: Set<UInt32> = []
        for _ in 0 ... InputSync.RelaySession.loadRetries {
            rig.advance(ms: 8)
            let request = try #require(requests().first)
            ids.insert(request.transferId)
            try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 90, totalSize: 1, data: [9], last: true)), from: a)
            try rig.send(.stateTransferAck(StateTransferAck(transferId: request.transferId, receivedBytes: 1,
                                                            error: "cannot load at frame 90")), from: spectator)
        }
        #expect(ids.count == InputSync.RelaySession.loadRetries + 1)
        // The retries are used up: no further transfer, and the failures were published.
        rig.advance(ms: 50)
        #expect(requests().isEmpty)
        let failures = rig.transport.published.filter { $0.topic == "sync.transfer_failed" }
        #expect(failures.count == InputSync.RelaySession.loadRetries + 1)
        #expect(failures.allSatisfy { $0.severity == .error })
    }

    @Test func aPlayerReconnectsFromAnotherConnectionAndResumes() throws {
        let rig = RelayRig()
        try runningPair(rig)
        for frame in 0 ..< 30 {
            try rig.batch(a, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        let b2 = RelayRig.address("peer-b-again")
        let response = try rig.attach(b2, slot: 2, resume: true, confirmed: 25)
        #expect(response.running && !response.stateFollows && response.awaitedInputFrame == 30)
        #expect(rig.transport.take(b).contains { if case .detach(let d) = $0 { d.reason == .replaced } else { false } })
        let resent = rig.transport.broadcasts(b2, authoritative: true)
        #expect(resent.first?.players.first?.startFrame == 25)
        #expect(rig.transport.published.contains { entry in
            if case .peerEvent(let event) = entry.body { return event.kind == .reconnected }
            return false
        })
        // The old connection is no longer attached.
        do {
            try rig.batch(b, slot: 2, start: 30, [2])
            Issue.record("replaced connection still accepted")
        } catch {
            #expect(error.code == .unauthenticated)
        }
    }

    @Test func chatIsRelayedWithTheSenderFilledInAndRateLimited() throws {
        let rig = RelayRig()
        try runningPair(rig)
        try rig.send(.chatMessage(ChatMessage(text: "gg", fromName: "spoofed", fromSlot: 7)), from: b)
        let line = rig.transport.take(a).compactMap { body -> ChatMessage? in
            if case .chatMessage(let message) = body { return message }
            return nil
        }.first
        #expect(line?.text == "gg" && line?.fromSlot == 2 && line?.fromName == "player 2")
        var limited = false
        for _ in 0 ..< 10 {
            do { try rig.send(.chatMessage(ChatMessage(text: "spam")), from: b) } catch { limited = error.code == .rateLimited }
        }
        #expect(limited)
    }

    @Test func thePresenceReportNamesWhoIsAttachedInEachSession() throws {
        let rig = RelayRig()
        let a = RelayRig.address("a"), b = RelayRig.address("b")
        _ = try rig.attach(a, slot: 1)
        _ = try rig.attach(b, slot: 2)
        #expect(rig.core.presenceReport().map { Set($0.connectedParticipantIds) } == [["p1", "p2"]])
        #expect(rig.core.presenceReport().first?.sessionId == rig.sessionId)
        try rig.send(.detach(Detach(reason: .leaving)), from: b)
        #expect(rig.core.presenceReport().map(\.connectedParticipantIds) == [["p1"]])
        try rig.send(.detach(Detach(reason: .leaving)), from: a)
        #expect(rig.core.presenceReport().isEmpty, "a session nobody attends is left out")
    }
}
