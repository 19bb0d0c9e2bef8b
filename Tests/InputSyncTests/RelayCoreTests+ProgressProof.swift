import Foundation
import NetplayAuth
import NetplayService
import NetplayWire
import Testing
@testable import InputSync

// A returning peer's claim of confirmed frames counts only as far as the relay's signed
// progress proof it presents, plus the progress allowance: the bound on a rebuild that has no
// replay of the dead relay's to go by (a session taken over by another replica, --no-replays).
extension RelayCoreTests {
    /// Frames of the default progress allowance at the rig's 60 frames per second.
    var allowance: Int { RelayConfiguration(relayId: "r", advertisedEndpoint: "").progressAllowanceMs * 60 / 1000 }

    /// Found in the last note's open gap: without a replay, a liar returning first with a claim of
    /// thousands of frames wrote an absent player's inputs (its future play) up to that claim.
    @Test func aClaimCountsNoFurtherThanTheProgressProofItPresents() throws {
        let rig = RelayRig()
        // The match had come to frame 300 (her proof says so); Mallory claims 5,000.
        let response = try rig.attach(b, slot: 2, resume: true, confirmed: 5_000, historyFrom: 0, proof: .of(300))
        #expect(response.recovering)
        let session = try #require(rig.core.sessions[rig.sessionId])
        let mallory = try #require(session.players[1])
        #expect(mallory.resumedHolding == 300 + allowance)
        #expect(session.recoveryFrameLimit <= 300 + allowance + 2 * 60)
        // The host never comes back; once the wait is over her history for its slot counts up to
        // her counted claim, not the 5,000 she said.
        try resendHistory(rig, from: b, frames: 0 ..< 1_000, values: [0xAA, 2])
        try waitOutTheReturns(rig, keepingAlive: [(b, 2)])
        try resendHistory(rig, from: b, frames: 0 ..< 1_000, values: [0xAA, 2])
        #expect(session.timeline.stored(0) == 300 + allowance)
    }

    @Test func aResumeWithoutAProofCountsFromFrameZero() throws {
        let rig = RelayRig()
        let response = try rig.attach(b, slot: 2, resume: true, confirmed: 1_000, historyFrom: 0, proof: .none)
        #expect(response.recovering && response.confirmedFrames == 0)
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(session.players[1]?.resumedHolding == allowance)
        // An honest claim within its proof's allowance counts in full.
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 150, historyFrom: 0, proof: .of(100))
        #expect(session.players[0]?.resumedHolding == 150)
    }

    @Test func aForgedProofIsRefusedAndNothingIsRebuilt() throws {
        let rig = RelayRig()
        var altered = rig.proof(300)
        altered.confirmedFrames = 5_000
        let otherSession = ProgressProofs(keyRing: rig.keyRing).proof(sessionId: "another", confirmedFrames: 5_000)
        let otherCluster = ProgressProofs(keyRing: TicketKeyRing.generate()).proof(sessionId: rig.sessionId, confirmedFrames: 5_000)
        var truncated = rig.proof(300)
        truncated.mac.removeLast()
        for forged in [altered, otherSession, otherCluster, truncated] {
            #expect(throws: ServiceError.self) {
                try rig.attach(b, slot: 2, resume: true, confirmed: 5_000, historyFrom: 0, proof: .given(forged))
            }
            #expect(rig.core.sessions[rig.sessionId] == nil, "no session rebuilt on a forged proof")
        }
        do {
            _ = try rig.attach(b, slot: 2, resume: true, confirmed: 5_000, historyFrom: 0, proof: .given(altered))
        } catch {
            #expect(error.code == .badRequest && error.field == "AttachRequest.progress", "\(error)")
        }
        // A key this relay no longer holds (rotated out) counts as no proof.
        var rotated = rig.proof(300)
        rotated.keyId = rig.keyRing.signingKeyId + 1
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 5_000, historyFrom: 0, proof: .given(rotated))
        #expect(rig.core.sessions[rig.sessionId]?.players[1]?.resumedHolding == allowance)
    }

    /// Every peer's statistics carry a proof of the confirmed frames that any relay with the
    /// cluster secret accepts; telemetry's copy carries none.
    @Test func statisticsCarryAProofOfTheConfirmedFrames() throws {
        let rig = RelayRig()
        try runningPair(rig)
        try playBoth(rig, frames: 0 ..< 90)
        rig.advance(ms: 1_100)
        let confirmed = try #require(rig.core.confirmedFrames(of: rig.sessionId))
        #expect(confirmed == 90)
        for peer in [a, b] {
            let stats = rig.transport.take(peer).compactMap { body -> SessionStats? in
                if case .sessionStats(let stats) = body { return stats }
                return nil
            }
            let proof = try #require(stats.last?.progress, "no proof to \(peer)")
            #expect(proof.confirmedFrames == UInt32(confirmed))
            #expect(ProgressProofs(keyRing: rig.keyRing).check(proof, sessionId: rig.sessionId) == .success(confirmed))
        }
        #expect(!rig.transport.stats.isEmpty && rig.transport.stats.allSatisfy { $0.progress == nil })
    }
}
