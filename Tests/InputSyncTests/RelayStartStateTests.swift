import Foundation
import NetplayService
import NetplayWire
import Testing
@testable import InputSync
import NetplayTestSupport

/// A match that starts (or restarts) from the host's state: the relay sends the host's state to
/// everyone else before frame 0, and the host's state wins the checksum vote.
@Suite("Relay: starting from the host's state", .ownThread)
struct RelayStartStateTests {
    let host = RelayRig.address("host")
    let b = RelayRig.address("peer-b")
    let c = RelayRig.address("peer-c")

    /// Attaches `peer`; `fromHostState`: its attach asks for a start from its state.
    @discardableResult
    func attach(_ rig: RelayRig, _ peer: PeerAddress, slot: Int, role: Role = .player, participant: String? = nil,
                fromHostState: Bool = false) throws -> AttachResponse {
        let request = AttachRequest(ticket: rig.ticket(slot: slot, role: role, participant: participant), protocolVersion: SyncProtocol.current,
                                    startFromHostState: fromHostState)
        guard case .attachResponse(let response)? = try rig.send(.attachRequest(request), from: peer) else {
            fatalError("no attach response")
        }
        return response
    }

    func starts(_ bodies: [Envelope.Body]) -> [AttachResponse] {
        bodies.compactMap { $0.attachResponse }.filter(\.running)
    }

    /// The session's one replay file, read back.
    func replayFile(_ rig: RelayRig) throws -> ReplayFile {
        let names = try FileManager.default.contentsOfDirectory(atPath: rig.replayDirectory.path)
        #expect(names.count == 1, "replays: \(names)")
        return try ReplayFile(contentsOf: rig.replayDirectory.appendingPathComponent(try #require(names.first)))
    }

    /// The host's state goes out and is acknowledged: returns the transfer's id.
    func deliverStartState(_ rig: RelayRig, to targets: [PeerAddress]) throws -> UInt32 {
        rig.advance(ms: 8)
        let request = try #require(stateRequests(rig.transport.take(host)).first)
        #expect(request.reason == .matchStart && request.frame == 0)
        try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 0, totalSize: 3, data: [7, 7, 7], checksum: 77,
                                            last: true, reason: .matchStart)), from: host)
        for target in targets {
            let got = rig.transport.take(target)
            #expect(stateChunks(got).map(\.data) == [[7, 7, 7]], "the host's state reaches every other participant")
            #expect(starts(got).isEmpty, "nobody starts before everyone loaded the host's state")
        }
        for target in targets {
            try rig.send(.stateTransferAck(StateTransferAck(transferId: request.transferId, receivedBytes: 3, loaded: true)), from: target)
        }
        return request.transferId
    }

    @Test func theHostsStateWinsTheVoteWhenTheMatchStartedFromIt() {
        // Two freshly booted joiners agree; the host differs.
        #expect(RelaySession.winner(of: [1: [0], 2: [1, 2]], hostSlot: 0, hostStateWins: true) == 1)
        #expect(RelaySession.winner(of: [1: [0], 2: [1, 2]], hostSlot: 0) == 2, "a match from boot: the majority")
        // A tie goes to the host either way; without the host among the reports, the usual rule.
        #expect(RelaySession.winner(of: [1: [0], 2: [1]], hostSlot: 0, hostStateWins: true) == 1)
        #expect(RelaySession.winner(of: [1: [1], 2: [2, 3]], hostSlot: 0, hostStateWins: true) == 2)
        #expect(RelaySession.winner(of: [1: [1], 2: [2]], hostSlot: nil, hostStateWins: true) == nil)
    }

    @Test func joinersAndSpectatorsLoadTheHostsStateBeforeFrameZero() throws {
        let rig = RelayRig(players: 2)
        #expect(!(try attach(rig, host, slot: 1, participant: "h-host", fromHostState: true)).running)
        let spectator = RelayRig.address("spectator")
        _ = try attach(rig, spectator, slot: 0, role: .spectator)
        #expect(!(try attach(rig, b, slot: 2)).running, "every slot is in, but the host's state is not")
        rig.advance(ms: 8)
        #expect(starts(rig.transport.take(b)).isEmpty)
        _ = try deliverStartState(rig, to: [b, spectator])
        rig.advance(ms: 8)
        let hostStart = try #require(starts(rig.transport.take(host)).first)
        let joinerStart = try #require(starts(rig.transport.take(b)).first)
        let spectatorStart = try #require(starts(rig.transport.take(spectator)).first)
        #expect(hostStart.startFrame == 0 && !hostStart.stateFollows)
        #expect(joinerStart.startFrame == 0 && !joinerStart.stateFollows)
        #expect(spectatorStart.startFrame == 0 && !spectatorStart.stateFollows)
        // The replay starts from the host's state, not from a boot.
        #expect(try replayFile(rig).header.startState == [7, 7, 7])
    }

    @Test func aJoinerThatNeverLoadsTheStateStartsFromATransferNotItsBoot() throws {
        let rig = RelayRig(players: 2) { $0.startStateTimeoutMs = 3_000 }
        _ = try attach(rig, host, slot: 1, participant: "h-host", fromHostState: true)
        _ = try attach(rig, b, slot: 2)
        rig.advance(ms: 8)
        #expect(stateRequests(rig.transport.take(host)).first?.reason == .matchStart)
        // The host never answers: the match waits, then starts without it (both stay in touch).
        func wait(ms: Int) throws {
            for _ in 0 ..< ms / 500 {
                rig.advance(ms: 500)
                try rig.send(.peerStats(PeerStats()), from: host)
                try rig.send(.peerStats(PeerStats()), from: b)
            }
        }
        try wait(ms: 2_500)
        #expect(starts(rig.transport.take(b)).isEmpty)
        try wait(ms: 3_000)
        let start = try #require(starts(rig.transport.take(b)).first)
        #expect(start.stateFollows, "the joiner waits for the host's state instead of running its own boot")
        #expect(starts(rig.transport.take(host)).first?.stateFollows == false)
    }

    @Test func aFailedLoadGetsTheStateAgain() throws {
        let rig = RelayRig(players: 2)
        _ = try attach(rig, host, slot: 1, participant: "h-host", fromHostState: true)
        _ = try attach(rig, b, slot: 2)
        rig.advance(ms: 8)
        let first = try #require(stateRequests(rig.transport.take(host)).first)
        try rig.send(.stateChunk(StateChunk(transferId: first.transferId, frame: 0, totalSize: 1, data: [1], last: true)), from: host)
        try rig.send(.stateTransferAck(StateTransferAck(transferId: first.transferId, error: "checksum mismatch after loading")), from: b)
        rig.advance(ms: 8)
        #expect(starts(rig.transport.take(b)).isEmpty)
        let second = try #require(stateRequests(rig.transport.take(host)).first)
        #expect(second.transferId != first.transferId && second.reason == .matchStart)
    }

    /// A joiner failing every load of the start state had the host upload it again and again,
    /// back to back, until the start's timeout: it gets its retries, then starts as a late joiner.
    @Test func aJoinerFailingEveryLoadOfTheStartStateIsGivenUpOnAfterItsRetries() throws {
        let rig = RelayRig(players: 2)
        _ = try attach(rig, host, slot: 1, participant: "h-host", fromHostState: true)
        _ = try attach(rig, b, slot: 2)
        var uploads = 0
        for _ in 0 ..< 12 {
            rig.advance(ms: 8)
            guard let request = stateRequests(rig.transport.take(host)).first else { continue }
            uploads += 1
            try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 0, totalSize: 1, data: [1], last: true)), from: host)
            try rig.send(.stateTransferAck(StateTransferAck(transferId: request.transferId, error: "cannot load")), from: b)
        }
        // The start's first try and its retries, then the one transfer it starts from as a late
        // joiner (which it fails too: no more).
        #expect(uploads == RelaySession.loadRetries + 2)
    }

    /// A "loaded" acknowledgement settles only a transfer its sender was sent whole: a forged one
    /// (any id) reset the give-up counts, so a target failing on purpose was never given up on.
    @Test func aLoadedAcknowledgementOfATransferNeverSentResetsNothing() throws {
        let rig = RelayRig(players: 2)
        _ = try attach(rig, host, slot: 1, participant: "h-host")
        _ = try attach(rig, b, slot: 2)
        let target = try #require(rig.core.participant(at: b))
        target.failedLoads = RelaySession.loadRetries
        target.stalledTransfers = RelaySession.loadRetries
        try rig.send(.stateTransferAck(StateTransferAck(transferId: 999_999, receivedBytes: 1, loaded: true)), from: b)
        #expect(target.failedLoads == RelaySession.loadRetries && target.stalledTransfers == RelaySession.loadRetries)
    }

    @Test func onlyTheHostsAttachAsksForAStartFromItsState() throws {
        let rig = RelayRig(players: 2)
        _ = try attach(rig, host, slot: 1, participant: "h-host")
        #expect(try attach(rig, b, slot: 2, participant: "p-guest", fromHostState: true).running)
    }

    /// A host that moved to spectating (the coordinator's slot map names it the host and seats
    /// it in no slot) holds no state a match could start from: its attach asking for a start
    /// from its state, or its restart, made the start-state slot -1, and reading it trapped,
    /// ending every session of the relay. Both change nothing now; the restart is refused.
    @Test func aHostThatMovedToSpectatingCannotStartTheMatchFromItsState() throws {
        let rig = RelayRig(players: 2, maxSpectators: 4)
        try attach(rig, b, slot: 2, participant: "p-guest")
        let session = try #require(rig.core.sessions[rig.sessionId])
        try session.assign(AssignSlotsRequest(sessionId: rig.sessionId, assignments: [SlotAssignment(participantId: "p-guest", slot: 2)],
                                              hostParticipantId: "h-host"), routes: PeerRoutes(), now: rig.now)
        try attach(rig, host, slot: 0, role: .spectator, participant: "h-host", fromHostState: true)
        rig.advance(ms: 50)
        #expect(session.startStateSlot == nil)
        // Nor does a start from the host's state it asked for in its slot outlive its leaving it.
        session.startStateSlot = 0
        try attach(rig, host, slot: 0, role: .spectator, participant: "h-host")
        #expect(session.startStateSlot == nil)
        let refused = #expect(throws: ServiceError.self) {
            try rig.send(.startSessionRequest(StartSessionRequest(sessionId: rig.sessionId, restart: true)), from: host)
        }
        #expect(refused?.code == .invalidState)
        rig.advance(ms: 50)
        #expect(session.startStateSlot == nil && rig.core.sessions[rig.sessionId] != nil)
    }

    @Test func aLateJoinerOfAMatchFromTheHostsStateGetsAStateNotAReplay() throws {
        let rig = RelayRig(players: 2, maxSpectators: 4)
        _ = try attach(rig, host, slot: 1, participant: "h-host", fromHostState: true)
        _ = try attach(rig, b, slot: 2)
        _ = try deliverStartState(rig, to: [b])
        rig.advance(ms: 8)
        for frame in 0 ..< 10 {
            try rig.batch(host, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        // Ten frames in: a match from boot would replay them from the spectator's own boot.
        let late = try attach(rig, RelayRig.address("late"), slot: 0, role: .spectator)
        #expect(late.running && late.stateFollows)
    }

    /// Three players, the match from the host's state: the two joiners agree, the host differs;
    /// the host's state is loaded into theirs.
    @Test func aDesyncVoteOfTwoJoinersAgainstTheHostGoesToTheHost() throws {
        let rig = RelayRig(players: 3, checksumInterval: 10)
        _ = try attach(rig, host, slot: 1, participant: "h-host", fromHostState: true)
        _ = try attach(rig, b, slot: 2)
        _ = try attach(rig, c, slot: 3)
        _ = try deliverStartState(rig, to: [b, c])
        rig.advance(ms: 8)
        for frame in 0 ..< 12 {
            try rig.batch(host, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
            try rig.batch(c, slot: 3, start: frame, [3])
        }
        _ = rig.transport.take(host); _ = rig.transport.take(b); _ = rig.transport.take(c)
        try rig.send(.checksumReport(ChecksumReport(slot: 1, checksums: [FrameChecksum(frame: 10, checksum: 111)])), from: host)
        try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: [FrameChecksum(frame: 10, checksum: 222)])), from: b)
        try rig.send(.checksumReport(ChecksumReport(slot: 3, checksums: [FrameChecksum(frame: 10, checksum: 222)])), from: c)
        let notice = try #require(notices(rig).first)
        #expect(notice.referenceSlot == 1 && notice.divergedSlots == [2, 3] && notice.resyncStarted)
        #expect(stateRequests(rig.transport.take(host)).first?.reason == .desync)
        #expect(stateRequests(rig.transport.take(b)).isEmpty && stateRequests(rig.transport.take(c)).isEmpty)
    }

    /// The host (slot 1) and b (slot 2) attach and play frames 0 ..< 30; what they were sent is taken.
    func playThirtyFrames(_ rig: RelayRig) throws {
        _ = try attach(rig, host, slot: 1, participant: "h-host")
        #expect(try attach(rig, b, slot: 2).running)
        for frame in 0 ..< 30 {
            try rig.batch(host, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        _ = rig.transport.take(host); _ = rig.transport.take(b)
    }

    /// Restarts pipelined with their states came as fast as the host could send them, each
    /// ending a replay file (synced to disk on the relay's thread) and opening another with its
    /// state: a loop filled the disk and stalled every session. A session writes 16 replay files
    /// at most; every restart is still taken (the host has switched to its state already).
    @Test func aSessionWritesSixteenReplayFilesAtMost() throws {
        let rig = RelayRig(players: 2, checksumInterval: 10)
        try playThirtyFrames(rig)
        for _ in 0 ..< 20 {
            try rig.send(.startSessionRequest(StartSessionRequest(sessionId: rig.sessionId, restart: true, restartFrame: 20)), from: host)
            let request = try #require(stateRequests(rig.transport.take(host)).first)
            try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 20, totalSize: 3, data: [7, 7, 7], checksum: 77,
                                                last: true, reason: .restart)), from: host)
            try rig.send(.stateTransferAck(StateTransferAck(transferId: request.transferId, receivedBytes: 3, loaded: true)), from: b)
            rig.advance(ms: 8)
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: rig.replayDirectory.path)
        #expect(files.count == RelaySession.maxReplayFilesPerSession, "\(files.count) replay files")
        #expect(rig.transport.published.filter { $0.topic == "sync.replay_failed" }.count == 1)
    }

    @Test func theHostRestartsTheMatchFromItsState() throws {
        let rig = RelayRig(players: 2, checksumInterval: 10)
        try playThirtyFrames(rig)
        let restart = StartSessionRequest(sessionId: rig.sessionId, restart: true, restartFrame: 20)
        do {
            try rig.send(.startSessionRequest(restart), from: b)
            Issue.record("a guest restarted the match")
        } catch {
            #expect(error.code == .permissionDenied)
        }
        do {
            try rig.send(.startSessionRequest(StartSessionRequest(sessionId: rig.sessionId, restart: true, restartFrame: 500)), from: host)
            Issue.record("a restart at an unconfirmed frame was accepted")
        } catch {
            #expect(error.code == .badRequest)
        }
        try rig.send(.startSessionRequest(restart), from: host)
        let request = try #require(stateRequests(rig.transport.take(host)).first)
        #expect(request.reason == .restart && request.frame == 20)
        #expect(rig.transport.published.contains { $0.topic == "sync.restart" })
        // The replay file (one start state each) ends at the restart, saying so, with every
        // frame confirmed until then.
        let before = try replayFile(rig)
        #expect(before.footer?.reason.contains("next replay file starts from that state") == true)
        #expect(before.header.startState.isEmpty && before.startFrame == 0 && before.frameCount == 30)
        do {
            try rig.send(.startSessionRequest(restart), from: host)
            Issue.record("a second restart during the transfer was accepted")
        } catch {
            #expect(error.code == .invalidState)
        }
        // The guest's checksum from its old state is no evidence against the host meanwhile.
        try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: [FrameChecksum(frame: 20, checksum: 222)])), from: b)
        try rig.send(.checksumReport(ChecksumReport(slot: 1, checksums: [FrameChecksum(frame: 20, checksum: 111)])), from: host)
        #expect(notices(rig).isEmpty)
        try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 20, totalSize: 2, data: [4, 2], last: true,
                                            reason: .restart)), from: host)
        #expect(stateChunks(rig.transport.take(b)).map(\.frame) == [20])
        // The session's next replay file starts from the restart's state, at its frame.
        let names = try FileManager.default.contentsOfDirectory(atPath: rig.replayDirectory.path)
        #expect(names.count == 2, "replays: \(names)")
        let after = try #require(try names.map { try ReplayFile(contentsOf: rig.replayDirectory.appendingPathComponent($0)) }
            .first { $0.footer == nil })
        #expect(after.header.startFrame == 20 && after.startFrame == 20 && after.header.startState == [4, 2])
        // Loaded: its checksums count again, and the host's state wins from now on.
        try rig.send(.stateTransferAck(StateTransferAck(transferId: request.transferId, loaded: true)), from: b)
        for frame in 30 ..< 32 {
            try rig.batch(host, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        try rig.send(.checksumReport(ChecksumReport(slot: 1, checksums: [FrameChecksum(frame: 30, checksum: 5)])), from: host)
        try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: [FrameChecksum(frame: 30, checksum: 6)])), from: b)
        #expect(notices(rig).first?.referenceSlot == 1 && notices(rig).first?.divergedSlots == [2])
    }

    /// The host reported its restart frame from the old timeline just before restarting, and the
    /// joiner's report had not come: the frame waited, the transfer ended, the next replay file
    /// opened, and the frame was judged then (timed out, the host alone counting) into the new
    /// file, as the checksum of a state it does not belong to (the replay then failed there).
    @Test func aChecksumOfTheOldTimelineDoesNotReachTheRestartsReplay() throws {
        let rig = RelayRig(players: 2, checksumInterval: 10) { $0.checksumTimeoutMs = 200 }
        try playThirtyFrames(rig)
        try rig.send(.checksumReport(ChecksumReport(slot: 1, checksums: [FrameChecksum(frame: 20, checksum: 111)])), from: host)
        try rig.send(.startSessionRequest(StartSessionRequest(sessionId: rig.sessionId, restart: true, restartFrame: 20)), from: host)
        let request = try #require(stateRequests(rig.transport.take(host)).first)
        try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 20, totalSize: 2, data: [4, 2], last: true,
                                            reason: .restart)), from: host)
        try rig.send(.stateTransferAck(StateTransferAck(transferId: request.transferId, loaded: true)), from: b)
        rig.advance(ms: 300)
        for frame in 30 ..< 90 {
            try rig.batch(host, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        rig.advance(ms: 300)
        let names = try FileManager.default.contentsOfDirectory(atPath: rig.replayDirectory.path)
        let after = try #require(try names.map { try ReplayFile(contentsOf: rig.replayDirectory.appendingPathComponent($0)) }
            .first { $0.footer == nil })
        #expect(after.startFrame == 20 && after.frameCount > 0)
        #expect(after.checksums[20] == nil, "the old timeline's checksum of frame 20 is in the restart's replay")
    }

    /// A joiner's report sent before it loaded the restart's state, arriving after the state's
    /// last chunk went out: it counted from the last chunk on, so with the host's report late it
    /// was judged alone into the restart's replay file. It counts from the joiner's load.
    @Test func aJoinersReportFromBeforeItLoadedTheStateDoesNotCount() throws {
        let rig = RelayRig(players: 2, checksumInterval: 10) { $0.checksumTimeoutMs = 200 }
        try playThirtyFrames(rig)
        try rig.send(.startSessionRequest(StartSessionRequest(sessionId: rig.sessionId, restart: true, restartFrame: 20)), from: host)
        let request = try #require(stateRequests(rig.transport.take(host)).first)
        try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 20, totalSize: 2, data: [4, 2], last: true,
                                            reason: .restart)), from: host)
        try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: [FrameChecksum(frame: 30, checksum: 222)])), from: b)
        try rig.send(.stateTransferAck(StateTransferAck(transferId: request.transferId, loaded: true)), from: b)
        for frame in 30 ..< 90 {
            try rig.batch(host, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
            if frame == 40 { rig.advance(ms: 300) }
        }
        rig.advance(ms: 300)
        let names = try FileManager.default.contentsOfDirectory(atPath: rig.replayDirectory.path)
        let after = try #require(try names.map { try ReplayFile(contentsOf: rig.replayDirectory.appendingPathComponent($0)) }
            .first { $0.footer == nil })
        #expect(after.startFrame == 20 && after.frameCount > 0)
        #expect(after.checksums[30] != 222, "the joiner's old-timeline checksum of frame 30 is in the restart's replay")
        // Loaded, its reports count again: a disagreement with the host is a desync.
        try rig.send(.checksumReport(ChecksumReport(slot: 1, checksums: [FrameChecksum(frame: 80, checksum: 5)])), from: host)
        try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: [FrameChecksum(frame: 80, checksum: 6)])), from: b)
        #expect(notices(rig).contains { $0.frame == 80 && $0.divergedSlots == [2] })
    }
}

/// State transfers of a start or a restart that a target stops acknowledging, watched whatever
/// the session waits for.
@Suite("Relay: start and restart transfers with a silent target", .ownThread)
struct RelayStartTransferStallTests {
    let host = RelayRig.address("host")
    let b = RelayRig.address("peer-b")
    let c = RelayRig.address("peer-c")

    /// A 300-byte window and a 200 ms transfer timeout.
    func rig(players: Int) -> RelayRig {
        RelayRig(players: players, checksumInterval: 10, maxSpectators: 4) {
            $0.transferWindowBytes = 300
            $0.transferTimeoutMs = 200
            $0.startStateTimeoutMs = 60_000
            $0.startSyncTimeoutMs = 60_000
        }
    }

    /// `from` sends a 400-byte state of `frame` in four chunks for `request`.
    func serve(_ rig: RelayRig, _ request: StateRequest, frame: UInt32, from peer: PeerAddress) throws {
        for index in 0 ..< 4 {
            try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: frame, offset: UInt64(index * 100), totalSize: 400,
                                                data: Array(repeating: 3, count: 100), last: index == 3, reason: request.reason)),
                         from: peer)
        }
    }

    /// The host (asking for a start from its state), b and c (of sync protocol `cProtocol`)
    /// attach to a three-player session: the relay's request for the host's state.
    func startFromHost(_ rig: RelayRig, cProtocol: UInt32 = SyncProtocol.current) throws -> StateRequest {
        let request = AttachRequest(ticket: rig.ticket(slot: 1, participant: "h-host"), protocolVersion: SyncProtocol.current,
                                    startFromHostState: true)
        _ = try rig.send(.attachRequest(request), from: host)
        _ = try rig.attach(b, slot: 2)
        _ = try rig.attach(c, slot: 3, protocolVersion: cProtocol)
        rig.advance(ms: 8)
        let stateRequest = try #require(stateRequests(rig.transport.take(host)).first)
        #expect(stateRequest.reason == .matchStart)
        return stateRequest
    }

    var held: (RelayRig) -> Bool = { $0.core.introspect().rendered().contains(#""transfer_bytes_held":400"#) }

    /// Before the start, a player leaves: the start waits for its slot again, and the host's
    /// state on its way to a target that stopped reading must not stay held meanwhile.
    @Test func aStartTransferIsWatchedWhileTheStartWaitsForAPlayer() throws {
        let rig = rig(players: 3)
        let stateRequest = try startFromHost(rig)
        try serve(rig, stateRequest, frame: 0, from: host)
        #expect(stateChunks(rig.transport.take(c)).count == 3)
        #expect(held(rig))
        try rig.send(.detach(Detach(reason: .leaving)), from: b)
        rig.advance(ms: 300)
        // The silent target was dropped at the timeout; the transfer ended and gave its state back.
        #expect(rig.transport.published.filter { $0.topic == "sync.transfer_failed" }.count == 1)
        #expect(!held(rig))
    }

    /// A participant of sync protocol 1, refused the host's start state (larger than the
    /// window), holds nobody's start up: the match starts once the others loaded it.
    @Test func aParticipantRefusedTheStartStateDoesNotHoldTheStartUp() throws {
        let rig = rig(players: 3)
        let stateRequest = try startFromHost(rig, cProtocol: 1)
        try serve(rig, stateRequest, frame: 0, from: host)
        #expect(stateChunks(rig.transport.take(c)).isEmpty)
        var got = 0
        while got < 400 {
            let chunks = stateChunks(rig.transport.take(b))
            guard !chunks.isEmpty else { break }
            got += chunks.reduce(0) { $0 + $1.data.count }
            try rig.send(.stateTransferAck(StateTransferAck(transferId: stateRequest.transferId, receivedBytes: UInt64(got),
                                                            loaded: got == 400)), from: b)
        }
        #expect(got == 400)
        rig.advance(ms: 100)
        #expect(rig.transport.take(host).contains { $0.attachResponse?.running == true }, "the match started")
    }

    /// A spectator that got the whole state of the host's restart gets the inputs from the
    /// state's frame at once, though the transfer still waits on another spectator.
    @Test func aRestartTargetRunsFromTheStateAtItsLastChunk() throws {
        let rig = rig(players: 2)
        let watcher = RelayRig.address("watcher")
        let silent = RelayRig.address("silent")
        _ = try rig.attach(host, slot: 1, participant: "h-host")
        _ = try rig.attach(b, slot: 2)
        _ = try rig.attach(watcher, slot: 0, role: .spectator)
        _ = try rig.attach(silent, slot: 0, role: .spectator)
        for frame in 0 ..< 30 {
            try rig.batch(host, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        rig.advance(ms: 8)
        _ = rig.transport.take(watcher)
        try rig.send(.startSessionRequest(StartSessionRequest(sessionId: rig.sessionId, restart: true, restartFrame: 20)), from: host)
        let request = try #require(stateRequests(rig.transport.take(host)).first)
        try serve(rig, request, frame: 20, from: host)
        #expect(stateChunks(rig.transport.take(watcher)).count == 3)
        try rig.send(.stateTransferAck(StateTransferAck(transferId: request.transferId, receivedBytes: 300)), from: watcher)
        let after = rig.transport.take(watcher)
        #expect(stateChunks(after).map(\.last) == [true])
        let inputs = after.compactMap { body -> InputBroadcast? in if case .inputBroadcast(let b) = body { b } else { nil } }
        #expect(inputs.first?.players.first?.startFrame == 20, "\(inputs.map { $0.players.map(\.startFrame) })")
        #expect(held(rig), "the transfer still waits on the silent spectator")
    }

    /// A spectator whose cursor is above the frame the host restarts from (it attached claiming
    /// frames the match has not confirmed, or late-joined by a state past that frame) runs from
    /// the restart's state like the others: it is sent the inputs from that frame. The relay
    /// composed its next broadcast from above the frames it owed, a range with its bounds
    /// reversed, and trapped: one spectator took every session on the relay down.
    @Test(arguments: [Int(Int32.max) - 1, 25])
    func aRestartBelowASpectatorsCursorSendsItTheInputsFromTheRestart(claim: Int) throws {
        let rig = rig(players: 2)
        let watcher = RelayRig.address("watcher")
        _ = try rig.attach(host, slot: 1, participant: "h-host")
        _ = try rig.attach(b, slot: 2)
        for frame in 0 ..< 30 {
            try rig.batch(host, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        rig.advance(ms: 8)
        _ = try rig.attach(watcher, slot: 0, role: .spectator, resume: true, confirmed: claim)
        _ = rig.transport.take(watcher)
        try rig.send(.startSessionRequest(StartSessionRequest(sessionId: rig.sessionId, restart: true, restartFrame: 20)), from: host)
        let request = try #require(stateRequests(rig.transport.take(host)).first)
        try serve(rig, request, frame: 20, from: host)
        try rig.send(.stateTransferAck(StateTransferAck(transferId: request.transferId, receivedBytes: 300)), from: watcher)
        for frame in 30 ..< 40 {
            try rig.batch(host, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        rig.advance(ms: 8)
        let inputs = rig.transport.take(watcher).compactMap { body -> InputBroadcast? in if case .inputBroadcast(let b) = body { b } else { nil } }
        #expect(inputs.first?.players.first?.startFrame == 20, "\(inputs.map { $0.players.map(\.startFrame) })")
    }
}
