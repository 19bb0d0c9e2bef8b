import Foundation
import NetplayAuth
import NetplayService
import NetplayWire
import Testing
@testable import InputSync

// The relay core after a restart: sessions rebuilt from what peers resend, and replay files
// (recorded, continued by the restarted relay, or closed with the reason when frames were lost).
extension RelayCoreTests {
    @Test func aRestartedRelayRebuildsTheSessionFromWhatPeersResend() throws {
        let rig = RelayRig()
        // A holds the frames from 460; the relay's last proof said 500. The rebuilt timeline
        // starts no later than a second before it (a peer may not have seen the last broadcasts
        // it speaks of), and A resends its history from there, as NetplayKit does.
        let response = try rig.attach(a, slot: 1, resume: true, confirmed: 500, historyFrom: 460)
        #expect(response.recovering && response.running && response.confirmedFrames == 440)
        // Its own frames 440 ..< 460 wait for B's history (B holds every frame from 0).
        try resendHistory(rig, from: a, frames: 460 ..< 500, values: [1, 2])
        let second = try rig.attach(b, slot: 2, resume: true, confirmed: 505, historyFrom: 0, proof: .of(500))
        #expect(second.recovering)
        // B resends from the start (A's frames only below 460: from there on they are A's to
        // resend, which A repeats, as NetplayKit does every 250 ms).
        try resendHistory(rig, from: b, frames: 440 ..< 500, values: [1, 2])
        try resendHistory(rig, from: a, frames: 460 ..< 500, values: [1, 2])
        // B held 5 more confirmed frames: it resends them as history; A's frames among them are
        // A's to resend (its own unacknowledged inputs), and both then continue.
        try rig.send(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, players: [
            PlayerInputs(slot: 1, startFrame: 500, inputs: [1, 1, 1, 1, 1]),
            PlayerInputs(slot: 2, startFrame: 500, inputs: [2, 2, 2, 2, 2]),
        ])), from: b)
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 500)
        try rig.batch(a, slot: 1, start: 500, [1, 1, 1, 1, 1])
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 505)
        rig.advance(ms: 100)
        let toA = rig.transport.broadcasts(a, authoritative: true)
        #expect(toA.last?.players.first?.startFrame == 500 && toA.last?.confirmedFrames == 505, "\(toA)")
        try rig.batch(a, slot: 1, start: 505, [1])
        try rig.batch(b, slot: 2, start: 505, [2])
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 506)
    }

    /// The relay died while the peers' confirmed frames differed (one had seen less of the
    /// last broadcasts): the first to return resends history from before its confirmed frame,
    /// so the one that confirmed less catches up from inputs, with no state transfer.
    @Test func aRebuiltSessionStartsEarlyEnoughForPeersThatConfirmedLess() throws {
        let rig = RelayRig()
        let first = try rig.attach(a, slot: 1, resume: true, confirmed: 500, historyFrom: 380)
        #expect(first.recovering && first.running && first.confirmedFrames == 380 && first.startFrame == 500)
        // A resends what it holds from 380, every slot, in runs of at most 128 frames (as
        // NetplayKit does every 250 ms until the relay confirmed it all).
        try resendHistory(rig, from: a, frames: 380 ..< 500, values: [1, 2])
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(session.timeline.stored(0) == 500 && session.timeline.stored(1) == 380, "B's frames wait for B")
        // B had confirmed only 490 when the relay died, and holds it all from 0: it resends its
        // history from the relay's confirmed frame and its own inputs from 490; A repeats.
        let second = try rig.attach(b, slot: 2, resume: true, confirmed: 490, historyFrom: 0)
        #expect(second.recovering && !second.stateFollows && second.startFrame == 490)
        try resendHistory(rig, from: b, frames: 380 ..< 490, values: [1, 2])
        try rig.batch(b, slot: 2, start: 490, Array(repeating: 2, count: 10))
        try resendHistory(rig, from: a, frames: 380 ..< 500, values: [1, 2])
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 500)
        rig.advance(ms: 100)
        // It is served frames 490 ..< 500 as inputs.
        let toB = rig.transport.broadcasts(b, authoritative: true)
        #expect(toB.first?.players.first?.startFrame == 490, "\(toB)")
        #expect(toB.last?.confirmedFrames == 500)
        #expect(!rig.transport.take(a).contains { if case .stateRequest = $0 { true } else { false } })
        try rig.batch(a, slot: 1, start: 500, [1])
        try rig.batch(b, slot: 2, start: 500, [2])
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 501)
    }

    /// A player back first at a rebuilt relay (no replay) sends its own inputs from its claim,
    /// a whole backlog past the rebuilt timeline's confirmed frames while the others' slots wait
    /// for them: they are taken (a slot is capped past the confirmed frames, or past the own
    /// inputs a returning player's history carries), not dropped until the others are back.
    @Test func aReturningPlayersOwnInputsFromItsClaimAreTakenWhileTheOthersAreAway() throws {
        let rig = RelayRig()
        let first = try rig.attach(a, slot: 1, resume: true, confirmed: 5_000, historyFrom: 0)
        #expect(first.recovering && first.confirmedFrames == 4_400)
        try resendHistory(rig, from: a, frames: 4_400 ..< 5_000, values: [1, 2])
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(session.timeline.stored(0) == 5_000 && rig.core.confirmedFrames(of: rig.sessionId) == 4_400)
        try rig.batch(a, slot: 1, start: 5_000, Array(repeating: 1, count: 10))
        #expect(session.timeline.stored(0) == 5_010)
    }

    @Test func aResumeClaimOrInputsBeyondTheFrameLimitAreRefusedNotACrash() throws {
        // A stranger with a genuine ticket to a session of its own claims to resume at the wire's
        // last frame, then sends an input there: the relay once trapped turning the frame after it
        // into a uint32, and every session on it was lost.
        let rig = RelayRig(players: 1)
        let refused = #expect(throws: ServiceError.self) { try rig.attach(a, slot: 1, resume: true, confirmed: Int(UInt32.max)) }
        #expect(refused?.code == .badRequest)
        #expect(rig.core.presence(of: rig.sessionId) == nil, "no session was rebuilt")
        let backwards = #expect(throws: ServiceError.self) { try rig.attach(a, slot: 1, resume: true, confirmed: 10, historyFrom: 20) }
        #expect(backwards?.code == .badRequest)
        // At the limit itself a match runs to its last frame, and no further.
        let limit = RelaySession.frameLimit
        let resumed = try rig.attach(a, slot: 1, resume: true, confirmed: limit - 1)
        #expect(resumed.confirmedFrames == UInt32(limit - 1))
        try rig.batch(a, slot: 1, start: limit - 1, [7])
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == limit)
        let beyond = #expect(throws: ServiceError.self) { try rig.batch(a, slot: 1, start: limit, [7]) }
        #expect(beyond?.code == .badRequest)
        let history = #expect(throws: ServiceError.self) {
            try rig.send(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, players: [
                PlayerInputs(slot: 1, startFrame: UInt32(limit), inputs: [7]),
            ])), from: a)
        }
        #expect(history?.code == .badRequest)
        let again = try rig.attach(a, slot: 1, resume: true, confirmed: limit)
        #expect(again.confirmedFrames == UInt32(limit), "the reply names the last frame")
    }

    /// Found by a hostile-client probe: in a rebuilt session any player could "resend" runs of
    /// another slot's inputs beyond every frame confirmed before the restart, for as long as the
    /// session lived, and so play for the host (its own inputs then arrived as duplicates).
    @Test func aReturningPlayerCannotWriteTheInputsOthersAreAboutToSend() throws {
        let rig = RelayRig()
        let session = try #require({ () throws -> RelaySession? in
            // The host returns first, 30 frames into the match (no proof needed yet).
            _ = try rig.attach(a, slot: 1, resume: true, confirmed: 30, proof: .none)
            return rig.core.sessions[rig.sessionId]
        }())
        func forge(_ slot: UInt32, from start: Int) throws {
            try rig.send(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, players: [
                PlayerInputs(slot: slot, startFrame: UInt32(start), inputs: Array(repeating: 0xAA, count: 128)),
            ])), from: b)
        }
        // Mallory says she held 30 confirmed frames, as the host did: nothing from 30 on is history.
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 30, proof: .none)
        try forge(1, from: 30)
        #expect(session.timeline.stored(0) == 30, "the host's frames from 30 are the host's to send")
        try rig.batch(a, slot: 1, start: 30, [1])
        #expect(session.timeline.stored(0) == 31)
        // Lying about what she held gains her nothing: the host is back, and its frames are its own.
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 1_000_000, proof: .none)
        for start in stride(from: 31, to: 400, by: 128) { try forge(1, from: start) }
        #expect(session.timeline.stored(0) == 31)
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)])
        for start in stride(from: 31, to: 400, by: 128) { try forge(1, from: start) }
        #expect(session.timeline.stored(0) == 31, "not after the wait for returning players either")
        // Once the history window is over, no history at all; later attaches are told so.
        rig.advance(ms: UInt64(RelayConfiguration(relayId: "r", advertisedEndpoint: "").recoveryHistoryMs))
        #expect(try !rig.attach(b, slot: 2, resume: true, confirmed: 30).recovering)
        let late = #expect(throws: ServiceError.self) { try forge(2, from: 0) }
        #expect(late?.code == .permissionDenied)
    }

    /// Found reviewing the rebuild: the first player back set the history bound with its own
    /// claim, so a liar returning first could write the frames the others were about to play
    /// (its claim plus 2 s) for every slot, before their owners were back to send them.
    @Test func aLiarReturningFirstCannotPlayForThePlayersStillOnTheirWay() throws {
        let rig = RelayRig()
        let session = try #require({ () throws -> RelaySession? in
            // The truth: both confirmed 500 (the relay's last proof says so). Mallory (slot 2)
            // claims 600 and forges slot 1.
            _ = try rig.attach(b, slot: 2, resume: true, confirmed: 600, historyFrom: 0, proof: .of(500))
            return rig.core.sessions[rig.sessionId]
        }())
        func forge() throws { try resendHistory(rig, from: b, frames: 0 ..< 600, values: [0xAA, 2]) }
        try forge()
        #expect(session.timeline.stored(0) == 0, "slot 1's owner may still come back")
        #expect(session.timeline.stored(1) == 600, "her own frames are hers")
        // The host returns with the truth and resends it; her repeats change nothing.
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 500, historyFrom: 0)
        try forge()
        #expect(session.timeline.stored(0) == 0)
        try resendHistory(rig, from: a, frames: 0 ..< 500, values: [1, 2])
        try forge()
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)])
        try forge()
        #expect(session.timeline.stored(0) == 500)
        #expect(session.timeline.inputs(slot: 0, from: 0, to: 500).allSatisfy { $0 == 1 })
        // Frames 500 on are the host's to play, as it does.
        try rig.batch(a, slot: 1, start: 500, [7])
        #expect(session.timeline.inputs(slot: 0, from: 500, to: 501) == [7])
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 501)
    }

    /// A player who does not come back after the restart: once the wait for the others is over,
    /// its confirmed frames come from the others' history, each up to its own claim (one that saw
    /// more of the last broadcasts holds more of them), and no substitute takes their place while
    /// that history may still be on its way, though later frames already arrived.
    @Test func anAbsentPlayersFramesComeFromTheOthersHistoryNotSubstitutes() throws {
        let rig = RelayRig(players: 3)
        let session = try #require({ () throws -> RelaySession? in
            _ = try rig.attach(a, slot: 1, resume: true, confirmed: 500, historyFrom: 0)
            return rig.core.sessions[rig.sessionId]
        }())
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 520, historyFrom: 0)
        func resend(from peer: PeerAddress, to end: Int) throws {
            try resendHistory(rig, from: peer, frames: 0 ..< end, values: [1, 2, 3])
        }
        // B's history arrives during the wait (slot 3's part of it waits for slot 3's owner);
        // A's was lost on the way: its own inputs from the rebuilt origin arrive first.
        try resend(from: b, to: 520)
        try rig.batch(a, slot: 1, start: 0, Array(repeating: 1, count: 100))
        #expect(session.timeline.stored(1) == 520 && session.timeline.stored(2) == 0, "slot 3's owner may still come back")
        // The wait ends with A's history still in flight: frames 0 ..< 100 arrived live, yet
        // nothing below 520 (what B confirmed) is substituted meanwhile.
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)])
        #expect(session.timeline.stored(2) == 0)
        try resend(from: a, to: 500)
        #expect(session.timeline.stored(2) == 500)
        // Both play on; B's repeat, with frames 500 ..< 520 of slot 3, is on its way, and waited for.
        try rig.batch(a, slot: 1, start: 500, Array(repeating: 1, count: 30))
        try rig.batch(b, slot: 2, start: 520, Array(repeating: 2, count: 10))
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: 300)
        #expect(session.timeline.stored(2) == 500)
        try resend(from: b, to: 520)
        #expect(session.timeline.stored(2) == 520 && session.timeline.status(slot: 2, frame: 510) == .received)
        // Beyond it, the absent player is substituted as usual.
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: 1_000)
        #expect(session.timeline.stored(2) == 530)
        #expect(session.timeline.status(slot: 2, frame: 525) != .received)
    }

    /// Found reviewing the rebuild: a connected player claiming frames it never sends held every
    /// substitute below its claim until the rebuild's 20 s were over. Now only for a short grace
    /// past the wait for returning players.
    @Test func aClaimWhoseFramesNeverComeHoldsTheMatchOnlyBriefly() throws {
        let rig = RelayRig(players: 3)
        let session = try #require({ () throws -> RelaySession? in
            _ = try rig.attach(a, slot: 1, resume: true, confirmed: 100, historyFrom: 0)
            return rig.core.sessions[rig.sessionId]
        }())
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 10_000, historyFrom: 0)  // and never resends
        try resendHistory(rig, from: a, frames: 0 ..< 100, values: [1, 2, 3])
        try rig.batch(a, slot: 1, start: 100, Array(repeating: 1, count: 30))
        try rig.batch(b, slot: 2, start: 0, Array(repeating: 2, count: 128))
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)])
        try resendHistory(rig, from: a, frames: 0 ..< 100, values: [1, 2, 3])
        #expect(session.timeline.stored(2) == 100, "slot 3's frames past 100 wait for B's history a while")
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: RelaySession.historyGraceMs + 500)
        #expect(session.timeline.stored(2) == 130, "then they are substituted")
    }

    /// A player back from the restart whose connection drops before it resent its frames no
    /// longer holds them back: after the wait they come from the others' history.
    @Test func aReturnedPlayerWhoDropsAgainLeavesItsFramesToTheOthersHistory() throws {
        let rig = RelayRig()
        let session = try #require({ () throws -> RelaySession? in
            _ = try rig.attach(b, slot: 2, resume: true, confirmed: 500, historyFrom: 0)
            return rig.core.sessions[rig.sessionId]
        }())
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 500, historyFrom: 0)
        try resendHistory(rig, from: b, frames: 0 ..< 500, values: [1, 2])
        #expect(session.timeline.stored(0) == 0, "A's to resend")
        // A goes silent (its link died) and the relay counts it disconnected.
        try waitOutTheReturns(rig, keepingAlive: [(b, 2)])
        #expect(session.players[0]?.isConnected == false)
        try resendHistory(rig, from: b, frames: 0 ..< 500, values: [1, 2])
        #expect(session.timeline.stored(0) == 500)
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 500)
    }

    /// Rebuilt with no replay, a slot nobody comes back to becomes vacant after the disconnect
    /// grace, as a player who never came back would have.
    @Test func aSlotNobodyReturnsToBecomesVacantAfterTheGrace() throws {
        let grace: UInt64 = 3_000
        let rig = RelayRig(players: 3) { $0.disconnectGraceMs = Int(grace) }
        let session = try #require({ () throws -> RelaySession? in
            _ = try rig.attach(a, slot: 1, resume: true, confirmed: 100, historyFrom: 0)
            return rig.core.sessions[rig.sessionId]
        }())
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 100, historyFrom: 0)
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: grace - 500)
        #expect(session.slotModes[2] == .active)
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: 1_000)
        #expect(session.slotModes[2] == .vacant(.disconnected))
        // A player attaching to it later makes it active again.
        _ = try rig.attach(c, slot: 3, resume: true, confirmed: 100, historyFrom: 0)
        #expect(session.slotModes[2] == .active)
    }

    /// Sends `peer`'s history of `frames` as NetplayKit resends it to a rebuilt session:
    /// authoritative broadcasts of at most 100 frames, slot `i + 1`'s run all `values[i]`.
    func resendHistory(_ rig: RelayRig, from peer: PeerAddress, frames: Range<Int>, values: [UInt8]) throws {
        for start in stride(from: frames.lowerBound, to: frames.upperBound, by: 100) {
            let count = min(100, frames.upperBound - start)
            let runs = values.enumerated().map { index, value in
                PlayerInputs(slot: UInt32(index + 1), startFrame: UInt32(start), inputs: Array(repeating: value, count: count))
            }
            try rig.send(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, players: runs)), from: peer)
        }
    }

    /// A relay that ran a pair's match for `frames` frames (player 1's input the frame's low
    /// byte, player 2's 2), for a restarted one to find what it left.
    func deadRelay(playing frames: Int) throws -> RelayRig {
        let dead = RelayRig()
        try runningPair(dead)
        for frame in 0 ..< frames {
            try dead.batch(a, slot: 1, start: frame, [UInt8(frame & 0xFF)])
            try dead.batch(b, slot: 2, start: frame, [2])
        }
        return dead
    }

    /// Lets the rebuilt session's wait for returning players (and `ms` more) pass, the players
    /// `keepingAlive` (peer, slot) acknowledging as they would meanwhile.
    func waitOutTheReturns(_ rig: RelayRig, keepingAlive players: [(PeerAddress, Int)], ms: UInt64? = nil) throws {
        let total = ms ?? UInt64(RelayConfiguration(relayId: "r", advertisedEndpoint: "").recoveryWaitMs) + 500
        for _ in 0 ..< total / 100 {
            rig.advance(ms: 100)
            for (peer, slot) in players { try rig.batch(peer, slot: slot, start: 0, []) }
        }
    }

    @Test func aRebuiltSessionGoesNoFurtherBackThanItsBacklog() {
        let request = AttachRequest(resume: true, confirmedFrames: 5_000, historyFromFrame: 100)
        #expect(RecoveryStart.origin(request, backlog: 600) == 4_400)
        #expect(RecoveryStart.origin(AttachRequest(resume: true, confirmedFrames: 300, historyFromFrame: 0), backlog: 600) == 0)
        #expect(RecoveryStart.origin(AttachRequest(resume: true, confirmedFrames: 300, historyFromFrame: 900), backlog: 600) == 300)
    }

    @Test func replaysRecordConfirmedInputsAndAgreedChecksums() throws {
        let rig = RelayRig(checksumInterval: 60)
        try runningPair(rig)
        for frame in 0 ..< 200 {
            try rig.batch(a, slot: 1, start: frame, [UInt8(frame & 0xFF)])
            try rig.batch(b, slot: 2, start: frame, [UInt8((frame * 7) & 0xFF)])
            if frame % 60 == 0 && frame > 0 {
                try rig.send(.checksumReport(ChecksumReport(slot: 1, checksums: [FrameChecksum(frame: UInt32(frame), checksum: UInt64(frame) * 3)])), from: a)
                try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: [FrameChecksum(frame: UInt32(frame), checksum: UInt64(frame) * 3)])), from: b)
            }
        }
        let url = try #require(rig.core.replayURL(of: rig.sessionId))
        try rig.send(.detach(Detach(reason: .leaving)), from: a)
        try rig.send(.detach(Detach(reason: .leaving)), from: b)
        let replay = try ReplayFile(contentsOf: url)
        #expect(replay.footer != nil)
        #expect(replay.frameCount >= 200)
        for frame in 0 ..< 200 {
            #expect(replay.input(frame: frame, slot: 0) == [UInt8(frame & 0xFF)])
            #expect(replay.input(frame: frame, slot: 1) == [UInt8((frame * 7) & 0xFF)])
        }
        #expect(replay.checksums[60] == 180 && replay.checksums[180] == 540)
        #expect(replay.header.params.maxPlayers == 2)
    }

    /// A relay killed mid-match leaves its replay without a footer (and maybe half a frame);
    /// the restarted relay continues that file from the first frame it lacks, so the replay of
    /// the whole match is one file again.
    @Test func aRestartedRelayContinuesTheReplayTheDeadOneLeft() throws {
        let dead = try deadRelay(playing: 150)
        let url = try #require(dead.core.replayURL(of: dead.sessionId))
        // Killed while writing a frame: a partial length prefix after the last record.
        let handle = try FileHandle(forWritingTo: url)
        try handle.seekToEnd()
        try handle.write(contentsOf: [0, 0, 1])
        try handle.close()
        #expect(try ReplayFile(contentsOf: url).frameCount == 128)

        let rig = RelayRig(restarting: dead)
        let first = try rig.attach(a, slot: 1, resume: true, confirmed: 150, historyFrom: 0)
        // The file's 128 frames seed the rebuilt timeline: confirmed before, and in the relay's own words.
        #expect(first.recovering && first.confirmedFrames == 128)
        #expect(rig.core.sessions[rig.sessionId]?.rebuiltFromReplayTo == 128)
        // B is back too, holding nothing before 150: A's history gives its frames before that.
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 150)
        try rig.send(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, players: [
            PlayerInputs(slot: 1, startFrame: 0, inputs: (0 ..< 128).map { UInt8($0 & 0xFF) }),
            PlayerInputs(slot: 2, startFrame: 0, inputs: Array(repeating: 2, count: 128)),
        ])), from: a)
        try rig.send(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, players: [
            PlayerInputs(slot: 1, startFrame: 128, inputs: (128 ..< 150).map { UInt8($0 & 0xFF) }),
            PlayerInputs(slot: 2, startFrame: 128, inputs: Array(repeating: 2, count: 22)),
        ])), from: a)
        for frame in 150 ..< 300 {
            try rig.batch(a, slot: 1, start: frame, [UInt8(frame & 0xFF)])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        #expect(rig.core.replayURL(of: rig.sessionId) == url)
        try rig.send(.detach(Detach(reason: .leaving)), from: a)
        try rig.send(.detach(Detach(reason: .leaving)), from: b)
        let replay = try ReplayFile(contentsOf: url)
        #expect(replay.footer != nil && replay.startFrame == 0 && replay.frameCount >= 299)
        for frame in 0 ..< 299 {
            #expect(replay.input(frame: frame, slot: 0) == [UInt8(frame & 0xFF)], "frame \(frame)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: rig.replayDirectory.path).count == 1)
    }

    @Test func aRestartedRelayThatLostFramesClosesTheOldReplayAndSaysWhy() throws {
        let dead = try deadRelay(playing: 150)
        let url = try #require(dead.core.replayURL(of: dead.sessionId))
        // Nothing was written to it for a minute: its writer may have failed, or the match gone on
        // without it, so it vouches for nothing.
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -60)], ofItemAtPath: url.path)
        let rig = RelayRig(restarting: dead)
        // The returning peer holds nothing before frame 1,000 (the file ends at 128).
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 1_200, historyFrom: 1_000)
        #expect(rig.transport.published.contains { $0.topic == "sync.replay_failed" && $0.severity == .error })
        #expect(try ReplayFile(contentsOf: url).footer?.reason.contains("lost") == true)
        #expect(rig.core.sessions[rig.sessionId]?.rebuiltFromReplayTo == nil)
    }

    /// Found reviewing the rebuild: the first peer back chose where the rebuilt timeline starts
    /// (its claim less the backlog), so by claiming thousands of frames more than it held it left
    /// the others no inputs to run on: they needed a state, which in a two-player match it served.
    /// A fresh replay of the dead relay's is its own record of the match: it seeds the timeline,
    /// and no claim counts beyond what that relay can have confirmed.
    @Test func aRestartedRelayTakesItsReplayOverAnyClaim() throws {
        let dead = try deadRelay(playing: 300)
        #expect(try ReplayFile(contentsOf: try #require(dead.core.replayURL(of: dead.sessionId))).frameCount == 256)

        let rig = RelayRig(restarting: dead)
        // Mallory (slot 2) returns first, claiming 5,000 frames, and resends a forged history.
        let first = try rig.attach(b, slot: 2, resume: true, confirmed: 5_000, historyFrom: 0)
        #expect(first.confirmedFrames == 256, "the replay's frames, not her claim")
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(session.timeline.origin == 0 && session.rebuiltFromReplayTo == 256)
        try resendHistory(rig, from: b, frames: 0 ..< 1_000, values: [0xAA, 0xBB])
        #expect(session.timeline.inputs(slot: 0, from: 0, to: 256) == (0 ..< 256).map { UInt8($0 & 0xFF) })
        #expect(session.timeline.inputs(slot: 1, from: 0, to: 256).allSatisfy { $0 == 2 })
        #expect(session.timeline.stored(0) == 256, "A's frames wait for A")
        #expect(session.timeline.stored(1) == 256 + ReplayWriter.framesPerRecord,
                "her own history counts no further than the dead relay can have confirmed")
        // A returns with the truth (300): it runs on from inputs, no state transfer.
        let second = try rig.attach(a, slot: 1, resume: true, confirmed: 300, historyFrom: 0)
        #expect(!second.stateFollows && second.confirmedFrames == 256)
        try resendHistory(rig, from: a, frames: 256 ..< 300, values: [1, 2])
        #expect(session.timeline.stored(0) == 300)
        #expect(InputSyncTests.stateRequests(rig.transport.take(b)).isEmpty)
    }
}
