import Foundation
import NetplayWire
import Testing
@testable import InputSync

// Players who hold a rebuilt match on purpose, beyond the one liar of the forfeit tests
// (RelayCoreTests+ProgressProof.swift): two holding it together, and one moving just fast enough
// not to look held.
extension RelayCoreTests {
    /// A three-player match the relay's proofs say had come to frame 990: Bob and Carol back
    /// first, each saying it had 700 confirmed and holds its inputs from 700; then the host,
    /// holding all frames to 1,000, with a proof of `hostProof`.
    func twoBackFirstWithLowClaims(hostProof: Int) throws -> RelayRig {
        let rig = RelayRig(players: 3)
        for (peer, slot) in [(b, 2), (c, 3)] {
            _ = try rig.attach(peer, slot: slot, resume: true, confirmed: 700, historyFrom: 700, proof: .of(990))
        }
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 1_000, historyFrom: 0, proof: .of(hostProof))
        return rig
    }

    /// Found in the last note's review: in a three-player rebuild, two players back first with
    /// low claims at the same frame, neither sending it, each counted the other's slot as one
    /// the forfeit could not pass, so neither forfeited and the match waited on them for good.
    /// Holding it together, they forfeit together.
    @Test func twoPlayersHoldingTheMatchTogetherForfeitTogether() throws {
        let rig = try twoBackFirstWithLowClaims(hostProof: 990)
        let session = try #require(rig.core.sessions[rig.sessionId])
        for _ in 0 ..< 5 {
            try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2), (c, 3)], ms: 2_000)
            try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2, 3])
        }
        // Each forfeits to the proven frame, then past it once the match stands still there.
        #expect(rig.transport.published.filter { $0.topic == "sync.history_forfeited" }.count == 4)
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 1_000)
        #expect(session.timeline.inputs(slot: 1, from: 800, to: 801) == [2] && session.timeline.inputs(slot: 2, from: 800, to: 801) == [3])
        #expect(session.substitutedFrames == [0, 0, 0])
    }

    /// The same two, where nobody else's proof reaches their frames (nothing can stand in for
    /// them): past the history window each waits for the other, and neither was substituted.
    /// From the disconnect grace past the window on, they are, as players gone that long.
    @Test func twoPlayersHoldingTheMatchBeyondEveryonesReachAreSubstitutedInTheEnd() throws {
        // The host's proof covers 100 frames: its history stands in for nobody past 100 + 3 s.
        let rig = try twoBackFirstWithLowClaims(hostProof: 100)
        let session = try #require(rig.core.sessions[rig.sessionId])
        let defaults = RelayConfiguration(relayId: "r", advertisedEndpoint: "")
        let window = UInt64(defaults.recoveryHistoryMs)
        for _ in 0 ..< Int(window / 2_000) - 1 {
            try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2), (c, 3)], ms: 2_000)
            try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2, 3])
        }
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2), (c, 3)], ms: 2_500)
        #expect(!session.recovering && rig.core.confirmedFrames(of: rig.sessionId) == 700)
        #expect(!rig.transport.published.contains { $0.topic == "sync.history_forfeited" })
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2), (c, 3)], ms: UInt64(defaults.disconnectGraceMs))
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == session.recoveryFrameLimit)
        #expect(session.substitutedFrames[1] == session.recoveryFrameLimit - 700 && session.substitutedFrames[2] == session.recoveryFrameLimit - 700)
    }

    /// Found in the last note's review: sending a quarter second of her held frames each second
    /// kept the match from counting as held, so it crawled at a quarter speed through every frame
    /// she said she lacked: over four minutes for a 4,096-frame history. Below what a proof says
    /// the dead relay confirmed, every player had sent its frames and resends them at once, so
    /// her slot forfeits at any pace there; an old proof of her own does not lower that line.
    @Test func aPlayerMovingHerHeldFramesAtAQuarterSpeedForfeitsThemToo() throws {
        let rig = RelayRig()
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 700, historyFrom: 700, proof: .of(700))
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 1_000, historyFrom: 0, proof: .of(990))
        let session = try #require(rig.core.sessions[rig.sessionId])
        let quarterSecond = 15
        var forfeitedAt: Int?
        for step in 1 ... 80 {
            rig.advance(ms: 100)
            let hers = session.timeline.stored(1)
            if step % 10 == 0 {
                try rig.batch(b, slot: 2, start: hers, Array(repeating: 2, count: quarterSecond))
            } else {
                try rig.batch(b, slot: 2, start: 0, [])
            }
            if step % 3 == 0 { try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2]) } else { try rig.batch(a, slot: 1, start: 0, []) }
            if forfeitedAt == nil, rig.transport.published.contains(where: { $0.topic == "sync.history_forfeited" }) { forfeitedAt = step }
        }
        #expect(!session.rebuildHeld, "she moves it a quarter second a second")
        #expect(try #require(forfeitedAt) <= 60)
        #expect(try #require(rig.core.confirmedFrames(of: rig.sessionId)) >= 1_000)
    }

    /// Found in the last note's review: whether the match was held was judged once a second, so
    /// a match that had started to move again still counted as held for up to a second (its
    /// frames open to forfeits and substitution meant for a held one). A quarter second of
    /// frames clears it at once.
    @Test func aHeldMatchThatMovesAgainIsNoLongerHeld() throws {
        let rig = RelayRig()
        // The host's proof covers 100 frames: nothing of hers can be forfeited, she holds the match.
        try malloryBackFirstWithALowClaim(rig, hostProof: 100)
        let session = try #require(rig.core.sessions[rig.sessionId])
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: 2_000)
        try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2])
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: 1_500)
        #expect(session.rebuildHeld && rig.core.confirmedFrames(of: rig.sessionId) == 700)
        try rig.batch(b, slot: 2, start: 700, Array(repeating: 2, count: 15))
        rig.advance(ms: 10)
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 715)
        #expect(!session.rebuildHeld)
    }

    /// Found reviewing the group forfeit: two players holding the match one frame apart (the
    /// second sends the first's frame and no more) each counted the other's slot against its
    /// own forfeit, one at a time, and held the match until the window and the disconnect grace
    /// were over. The forfeited slots count as not back for the next one too.
    @Test func twoPlayersHoldingTheMatchOneFrameApartForfeitToo() throws {
        let rig = RelayRig(players: 3)
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 700, historyFrom: 700, proof: .of(990))
        _ = try rig.attach(c, slot: 3, resume: true, confirmed: 701, historyFrom: 700, proof: .of(990))
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 1_000, historyFrom: 0, proof: .of(990))
        try resendHistory(rig, from: c, frames: 700 ..< 701, values: [1, 2, 3])
        for _ in 0 ..< 5 {
            try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2), (c, 3)], ms: 2_000)
            try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2, 3])
        }
        // Each forfeits to the proven frame, then past it once the match stands still there.
        #expect(rig.transport.published.filter { $0.topic == "sync.history_forfeited" }.count == 4)
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 1_000)
    }

    /// Found reviewing the proven-frames rule: a player playing live below what a proof says was
    /// confirmed forfeits there (those frames were final before the restart), but the forfeit
    /// ran on to where the liar's history and proof reach, 3 s of his next moves. It stops at
    /// the proven frame.
    @Test func aForfeitBelowTheProvenFramesStopsThere() throws {
        let rig = RelayRig()
        // Her proof says the match came to 990; she claims 1,170 (the allowance counts it all).
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 1_170, historyFrom: 0, proof: .of(990))
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 700, historyFrom: 0, proof: .of(690))
        let session = try #require(rig.core.sessions[rig.sessionId])
        try bobPlaysLiveFrom700(rig, besideHerHistoryTo: 1_170)
        #expect(rig.transport.published.contains { $0.topic == "sync.history_forfeited" })
        #expect(session.timeline.inputs(slot: 0, from: 980, to: 981) == [1], "below her proof, from her history")
        #expect(session.timeline.inputs(slot: 0, from: 990, to: 1_000) == Array(repeating: 3, count: 10), "his own from there")
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 1_000)
    }

    /// Found reviewing the proven-frames rule: every participant gets the same proof of the
    /// players' confirmed frames, a spectator too, but a spectator's counted its delay short,
    /// leaving that many frames below the proof where a trickle was not held.
    @Test func aSpectatorsProofSaysHowFarThePlayersCame() throws {
        let rig = RelayRig(spectatorDelay: 120)
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 1_000, historyFrom: 0, proof: .of(900))
        _ = try rig.attach(c, slot: 0, role: .spectator, resume: true, confirmed: 870, historyFrom: 870, proof: .of(990))
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(session.framesProvenFinal == 990)
    }

    /// Found reviewing the catch-up rule: two players forfeited below the proven frames, then
    /// reporting a rising frame they never send, counted as playing on (not forfeited further),
    /// and past the history window each waited for the other until the disconnect grace was
    /// over too: 35 s. A slot that forfeited never waits for another: the window ends it.
    @Test func playersReportingPlayTheyDoNotSendHoldTheMatchOnlyForTheWindow() throws {
        let rig = RelayRig(players: 3)
        for (peer, slot) in [(b, 2), (c, 3)] {
            _ = try rig.attach(peer, slot: slot, resume: true, confirmed: 700, historyFrom: 700, proof: .of(990))
        }
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 1_050, historyFrom: 0, proof: .of(990))
        let session = try #require(rig.core.sessions[rig.sessionId])
        let window = RelayConfiguration(relayId: "r", advertisedEndpoint: "").recoveryHistoryMs
        for step in 1 ... window / 100 + 10 {
            rig.advance(ms: 100)
            for (peer, slot) in [(b, 2), (c, 3)] { try rig.batch(peer, slot: slot, start: 0, [], current: 2 * step) }
            if step % 20 == 0, session.recovering {
                try resendHistory(rig, from: a, frames: 0 ..< 1_050, values: [1, 2, 3])
            } else {
                try rig.batch(a, slot: 1, start: 0, [])
            }
            if step == window / 100 - 10 {
                #expect(rig.core.confirmedFrames(of: rig.sessionId) == 990, "to the proven frames, then held while they say they play")
            }
        }
        #expect(!session.recovering)
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 1_050, "substituted once the window is over")
    }

    /// Found reviewing NetplayKit's repeated own-input resend: the host's own inputs at frames
    /// below what it said was confirmed before the restart, arriving live (its history for its
    /// slot lost), counted as play at the frame Mallory holds the match, so she was not
    /// forfeited and her slot waited for a substitute instead. They are not play: she forfeits.
    @Test func liveInputsBelowTheSendersClaimDoNotSpareAForfeit() throws {
        let rig = RelayRig()
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 700, historyFrom: 700, proof: .of(990))
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 1_000, historyFrom: 0, proof: .of(990))
        try resendHistory(rig, from: a, frames: 0 ..< 700, values: [1, 2])
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)])
        for start in stride(from: 700, to: 1_000, by: 100) {
            try rig.batch(a, slot: 1, start: start, Array(repeating: 1, count: 100))
        }
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(session.timeline.stored(0) == 1_000 && session.timeline.stored(1) == 700)
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: RelaySession.historyGraceMs)
        #expect(rig.transport.published.contains { $0.topic == "sync.history_forfeited" })
        try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2])
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 990)
        #expect(session.substitutedFrames == [0, 0])
    }
}
