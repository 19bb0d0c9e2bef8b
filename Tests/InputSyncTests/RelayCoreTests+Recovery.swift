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
        let response = try rig.attach(a, slot: 1, resume: true, confirmed: 500)
        #expect(response.recovering && response.running && response.confirmedFrames == 500)
        let second = try rig.attach(b, slot: 2, resume: true, confirmed: 505)
        #expect(second.recovering)
        // B held 5 more confirmed frames: it resends them as history; both then continue.
        try rig.send(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, players: [
            PlayerInputs(slot: 1, startFrame: 500, inputs: [1, 1, 1, 1, 1]),
            PlayerInputs(slot: 2, startFrame: 500, inputs: [2, 2, 2, 2, 2]),
        ])), from: b)
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 505)
        let toA = rig.transport.broadcasts(a, authoritative: true)
        #expect(toA.last?.players.first?.startFrame == 500 && toA.last?.confirmedFrames == 505)
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
        // A resends what it holds from 380, every slot, in runs of at most 128 frames.
        for start in stride(from: 380, to: 500, by: 100) {
            let count = min(100, 500 - start)
            try rig.send(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, players: [
                PlayerInputs(slot: 1, startFrame: UInt32(start), inputs: Array(repeating: 1, count: count)),
                PlayerInputs(slot: 2, startFrame: UInt32(start), inputs: Array(repeating: 2, count: count)),
            ])), from: a)
        }
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 500)
        // B had confirmed only 490 when the relay died: it is served frames 490 ..< 500 as inputs.
        let second = try rig.attach(b, slot: 2, resume: true, confirmed: 490, historyFrom: 0)
        #expect(second.recovering && !second.stateFollows && second.startFrame == 490)
        let toB = rig.transport.broadcasts(b, authoritative: true)
        #expect(toB.first?.players.first?.startFrame == 490, "\(toB)")
        #expect(toB.last?.confirmedFrames == 500)
        #expect(!rig.transport.take(a).contains { if case .stateRequest = $0 { true } else { false } })
        try rig.batch(a, slot: 1, start: 500, [1])
        try rig.batch(b, slot: 2, start: 500, [2])
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 501)
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
            _ = try rig.attach(a, slot: 1, resume: true, confirmed: 30)  // the host returns first
            return rig.core.sessions[rig.sessionId]
        }())
        func forge(_ slot: UInt32, from start: Int) throws {
            try rig.send(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, players: [
                PlayerInputs(slot: slot, startFrame: UInt32(start), inputs: Array(repeating: 0xAA, count: 128)),
            ])), from: b)
        }
        // Mallory says she held 30 confirmed frames, as the host did: nothing from 30 on is history.
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 30)
        try forge(1, from: 30)
        #expect(session.timeline.stored(0) == 30, "the host's frames from 30 are the host's to send")
        try rig.batch(a, slot: 1, start: 30, [1])
        #expect(session.timeline.stored(0) == 31)
        // Lying about what she held reaches no further than 2 s of frames past the first return.
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 1_000_000)
        for start in stride(from: 31, to: 400, by: 128) { try forge(1, from: start) }
        #expect(session.timeline.stored(0) == 150, "30 confirmed + 2 s at 60 fps")
        // Once the history window is over, no history at all; later attaches are told so.
        rig.advance(ms: UInt64(RelayConfiguration(relayId: "r", advertisedEndpoint: "").recoveryHistoryMs))
        #expect(try !rig.attach(b, slot: 2, resume: true, confirmed: 30).recovering)
        let late = #expect(throws: ServiceError.self) { try forge(2, from: 0) }
        #expect(late?.code == .permissionDenied)
    }

    @Test func aSpectatorReturningFirstDoesNotCutThePlayersHistoryShort() throws {
        // A spectator watches 300 frames (5 s) behind the players: returning first, its confirmed
        // frame is theirs minus its delay, and the players' history beyond it is still history.
        let rig = RelayRig(spectatorDelay: 300)
        let session = try #require({ () throws -> RelaySession? in
            _ = try rig.attach(c, slot: 0, role: .spectator, resume: true, confirmed: 100)
            return rig.core.sessions[rig.sessionId]
        }())
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 400)
        for start in stride(from: 100, to: 400, by: 100) {
            try rig.send(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, players: [
                PlayerInputs(slot: 1, startFrame: UInt32(start), inputs: Array(repeating: 1, count: 100)),
                PlayerInputs(slot: 2, startFrame: UInt32(start), inputs: Array(repeating: 2, count: 100)),
            ])), from: a)
        }
        #expect(session.timeline.stored(0) == 400 && session.timeline.stored(1) == 400)
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 400)
    }

    @Test func aRebuiltSessionGoesNoFurtherBackThanItsBacklog() {
        let request = AttachRequest(resume: true, confirmedFrames: 5_000, historyFromFrame: 100)
        #expect(RelayCore.recoveryOrigin(request, backlog: 600) == 4_400)
        #expect(RelayCore.recoveryOrigin(AttachRequest(resume: true, confirmedFrames: 300, historyFromFrame: 0), backlog: 600) == 0)
        #expect(RelayCore.recoveryOrigin(AttachRequest(resume: true, confirmedFrames: 300, historyFromFrame: 900), backlog: 600) == 300)
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
        let dead = RelayRig()
        try runningPair(dead)
        for frame in 0 ..< 150 {
            try dead.batch(a, slot: 1, start: frame, [UInt8(frame & 0xFF)])
            try dead.batch(b, slot: 2, start: frame, [2])
        }
        let url = try #require(dead.core.replayURL(of: dead.sessionId))
        // Killed while writing a frame: a partial length prefix after the last record.
        let handle = try FileHandle(forWritingTo: url)
        try handle.seekToEnd()
        try handle.write(contentsOf: [0, 0, 1])
        try handle.close()
        #expect(try ReplayFile(contentsOf: url).frameCount == 128)

        let rig = RelayRig(restarting: dead)
        let first = try rig.attach(a, slot: 1, resume: true, confirmed: 150, historyFrom: 0)
        #expect(first.recovering && first.confirmedFrames == 0)
        try rig.send(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, players: [
            PlayerInputs(slot: 1, startFrame: 0, inputs: (0 ..< 128).map { UInt8($0 & 0xFF) }),
            PlayerInputs(slot: 2, startFrame: 0, inputs: Array(repeating: 2, count: 128)),
        ])), from: a)
        try rig.send(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, players: [
            PlayerInputs(slot: 1, startFrame: 128, inputs: (128 ..< 150).map { UInt8($0 & 0xFF) }),
            PlayerInputs(slot: 2, startFrame: 128, inputs: Array(repeating: 2, count: 22)),
        ])), from: a)
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 150)
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
        let dead = RelayRig()
        try runningPair(dead)
        for frame in 0 ..< 150 {
            try dead.batch(a, slot: 1, start: frame, [1])
            try dead.batch(b, slot: 2, start: frame, [2])
        }
        let url = try #require(dead.core.replayURL(of: dead.sessionId))
        let rig = RelayRig(restarting: dead)
        // The returning peer holds nothing before frame 1,000 (the file ends at 128).
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 1_200, historyFrom: 1_000)
        #expect(rig.transport.published.contains { $0.topic == "sync.replay_failed" && $0.severity == .error })
        #expect(try ReplayFile(contentsOf: url).footer?.reason.contains("lost") == true)
    }
}
