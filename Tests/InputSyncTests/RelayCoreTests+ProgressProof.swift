import Foundation
import NetplayAuth
import NetplayService
import NetplayWire
import Testing
@testable import InputSync

// A returning peer's claim of confirmed frames counts, beyond its own slot, only as far as the
// relay's signed progress proof it presents, plus the progress allowance: the bound on a
// rebuild that has no replay of the dead relay's to go by (a session taken over by another
// replica, --no-replays).
extension RelayCoreTests {
    /// Frames of the default progress allowance at the rig's 60 frames per second.
    var allowance: Int { RelayConfiguration(relayId: "r", advertisedEndpoint: "").progressAllowanceMs * 60 / 1000 }

    /// Found in the last note's open gap: without a replay, a liar returning first with a claim of
    /// thousands of frames wrote an absent player's inputs (its future play) up to that claim.
    @Test func aClaimCountsForOthersNoFurtherThanTheProgressProofItPresents() throws {
        let rig = RelayRig()
        // The match had come to frame 300 (her proof says so); Mallory claims 5,000.
        let response = try rig.attach(b, slot: 2, resume: true, confirmed: 5_000, historyFrom: 0, proof: .of(300))
        #expect(response.recovering)
        let session = try #require(rig.core.sessions[rig.sessionId])
        let mallory = try #require(session.players[1])
        #expect(mallory.resumedHolding == 5_000 && mallory.resumedProven == 300 + allowance)
        #expect(session.recoveryFrameLimit == 300 + allowance + 2 * 60)
        // The host never comes back; once the wait is over her history for its slot counts up to
        // what her proof covers, not the 5,000 she said. Her own slot's frames are her own inputs.
        try resendHistory(rig, from: b, frames: 0 ..< 1_000, values: [0xAA, 2])
        try waitOutTheReturns(rig, keepingAlive: [(b, 2)])
        try resendHistory(rig, from: b, frames: 0 ..< 1_000, values: [0xAA, 2])
        #expect(session.timeline.stored(0) == 300 + allowance)
        #expect(session.timeline.stored(1) == session.recoveryFrameLimit)
    }

    /// Found reviewing the proofs: a liar saying it holds nothing before its claim chose the
    /// start, past what the others held, so they needed a state (which it served). The start is
    /// now no later than a second before what its proof certifies.
    @Test func aLiarReturningFirstCannotStartTheRebuildPastTheOthers() throws {
        let rig = RelayRig()
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 300 + allowance, historyFrom: 300 + allowance, proof: .of(300))
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(session.timeline.origin == 300 - 60)
        // The host had confirmed 310 and holds every frame from 0: inputs, no state.
        let host = try rig.attach(a, slot: 1, resume: true, confirmed: 310, historyFrom: 0, proof: .of(300))
        #expect(!host.stateFollows)

        // A spectator (which resends nothing) never starts a rebuild without a replay: watching
        // far behind, it would start the timeline before what the players hold (it used to
        // start one, from its own frame, which stalled once its delay passed the players'
        // history).
        let watched = RelayRig(spectatorDelay: 300)
        do {
            _ = try watched.attach(c, slot: 0, role: .spectator, resume: true, confirmed: 5_000, historyFrom: 5_000, proof: .of(600))
            Issue.record("a spectator started the rebuild")
        } catch {
            #expect(error.code == .unavailable && error.retryAfterMs > 0, "\(error)")
        }
        #expect(watched.core.sessions[watched.sessionId] == nil)
        let player = try watched.attach(a, slot: 1, resume: true, confirmed: 600, historyFrom: 0, proof: .of(600))
        #expect(player.recovering)
        // Then it resumes, its claim counting, for others, to its proof less its delay.
        _ = try watched.attach(c, slot: 0, role: .spectator, resume: true, confirmed: 5_000, historyFrom: 5_000, proof: .of(600))
        let rebuilt = try #require(watched.core.sessions[watched.sessionId])
        #expect(rebuilt.participants.first { $0.role == .spectator }?.resumedProven == 600 - 300 + allowance)
    }

    /// Found reviewing the proofs: a claim cut to what counts without a proof started the
    /// rebuilt timeline where nobody held the frames (a NetplayKit peer keeps about 1,300), and
    /// the match stalled. A rebuild with no replay and no proof now waits for a peer that has
    /// one; the proofless peer then resumes, its own slot counting to its claim.
    @Test func aRebuildWaitsForAReturningPeerWithAProof() throws {
        let rig = RelayRig()
        do {
            _ = try rig.attach(b, slot: 2, resume: true, confirmed: 1_000, historyFrom: 900, proof: .none)
            Issue.record("a proofless claim of 1,000 frames rebuilt the session")
        } catch {
            #expect(error.code == .unavailable && error.retryAfterMs > 0, "\(error)")
        }
        #expect(rig.core.sessions[rig.sessionId] == nil)
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 1_000, historyFrom: 0, proof: .of(990))
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(session.timeline.origin == 400)
        let second = try rig.attach(b, slot: 2, resume: true, confirmed: 1_000, historyFrom: 900, proof: .none)
        #expect(!second.stateFollows)
        #expect(session.players[1]?.resumedHolding == 1_000 && session.players[1]?.resumedProven == allowance)
        try resendHistory(rig, from: a, frames: 400 ..< 1_000, values: [1, 2])
        try resendHistory(rig, from: b, frames: 900 ..< 1_000, values: [1, 2])
        #expect(session.timeline.stored(0) == 1_000 && session.timeline.stored(1) == 1_000)
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 1_000)

        // A match younger than the allowance needs no proof.
        let young = RelayRig()
        #expect(try young.attach(a, slot: 1, resume: true, confirmed: allowance, historyFrom: 0, proof: .none).recovering)
    }

    /// Found reviewing the proofs: the start a second before the first player's proof can lie
    /// below every frame anyone back can send (it loaded a state at 1,000, just before its proof
    /// of 1,020, and the other player is not back). Nobody substitutes those frames, and the
    /// match stayed there; once the wait is over it moves on without them.
    @Test func framesNobodyBackCanSendAreSkippedNotWaitedForForever() throws {
        let rig = RelayRig()
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 1_050, historyFrom: 1_000, proof: .of(1_020))
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(session.timeline.origin == 960)
        try resendHistory(rig, from: a, frames: 1_000 ..< 1_050, values: [1, 2])
        try waitOutTheReturns(rig, keepingAlive: [(a, 1)])
        try resendHistory(rig, from: a, frames: 1_000 ..< 1_050, values: [1, 2])
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 960, "held while the others may still come back")
        try waitOutTheReturns(rig, keepingAlive: [(a, 1)], ms: RelaySession.historyGraceMs + 1_500)
        #expect(rig.transport.published.contains { $0.topic == "sync.frames_skipped" })
        try resendHistory(rig, from: a, frames: 1_000 ..< 1_050, values: [1, 2])
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 1_050)
        #expect(session.timeline.status(slot: 0, frame: 980) == .empty && session.timeline.status(slot: 0, frame: 1_000) == .received)
        try rig.batch(a, slot: 1, start: 1_050, [1])
        #expect(session.timeline.stored(0) == 1_051)
    }

    /// Mallory (slot 2), whose proof says the match had come to frame 990, is back first saying
    /// she had 700 confirmed and holds her inputs from 700; then the host, holding all frames
    /// from `hostHistoryFrom` to 1,000, with a proof of `hostProof`.
    func malloryBackFirstWithALowClaim(_ rig: RelayRig, hostHistoryFrom: Int = 0, hostProof: Int = 990) throws {
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 700, historyFrom: 700, proof: .of(990))
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 1_000, historyFrom: hostHistoryFrom, proof: .of(hostProof))
    }

    /// Left open by the last note: a player back first with a low claim, saying it holds its own
    /// inputs from there, that then sends none, held the rebuilt match for good (nobody else may
    /// write a slot its player resends itself, and frames final before the restart get no
    /// substitution deadline). Once the wait for returns and its grace are over, its slot's
    /// frames the other slots hold come from the others' history, as if it were not back.
    @Test func aPlayerBackWithALowClaimWhoSendsNothingHoldsTheRebuiltMatchOnlyBriefly() throws {
        let rig = RelayRig()
        // Mallory (slot 2) had seen 990 frames confirmed; she says 700, holding hers from 700.
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 700, historyFrom: 700, proof: .of(990))
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(session.timeline.origin == 700)
        // The host holds everything to 1,000 and resends it, Mallory's slot too.
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 1_000, historyFrom: 0, proof: .of(990))
        try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2])
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)])
        try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2])
        #expect(session.timeline.stored(0) == 1_000 && session.timeline.stored(1) == 700, "hers are hers while she may send them")
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: RelaySession.historyGraceMs)
        #expect(rig.transport.published.contains { $0.topic == "sync.history_forfeited" })
        try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2])
        // To the frame the proofs say was confirmed at first (past it may come her next moves);
        // the rest once the match has stood still there.
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 990)
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: 2_000)
        try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2])
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 1_000)
        #expect(session.timeline.status(slot: 1, frame: 800) == .received && session.timeline.inputs(slot: 1, from: 800, to: 801) == [2])
        #expect(!rig.transport.published.contains { $0.topic == "sync.frames_skipped" })
        // From there on she is a player like any: her inputs, or substitutes when late.
        try rig.batch(b, slot: 2, start: 1_000, [2])
        #expect(session.timeline.stored(1) == 1_001)

        // Where the host holds nothing from before 750 either, both slots move on to 750 (the
        // host's own and hers) rather than wait on her, and hers fill from the host's history.
        let later = RelayRig()
        try malloryBackFirstWithALowClaim(later, hostHistoryFrom: 750)
        for _ in 0 ..< 4 {
            try waitOutTheReturns(later, keepingAlive: [(a, 1), (b, 2)], ms: 2_000)
            try resendHistory(later, from: a, frames: 750 ..< 1_000, values: [1, 2])
        }
        let rebuilt = try #require(later.core.sessions[later.sessionId])
        #expect(rebuilt.timeline.status(slot: 1, frame: 720) == .empty && rebuilt.timeline.status(slot: 1, frame: 800) == .received)
        #expect(later.core.confirmedFrames(of: later.sessionId) == 1_000)
    }

    /// Found reviewing the forfeit: she could keep the match held by sending one held frame a
    /// little less than a second apart (the first version forfeited after a second without
    /// progress); now her frames are the others' as soon as the wait and its grace are over.
    @Test func aPlayerTricklingHerHeldFramesForfeitsThemToo() throws {
        let rig = RelayRig()
        try malloryBackFirstWithALowClaim(rig)
        let session = try #require(rig.core.sessions[rig.sessionId])
        for step in 1 ... 90 {
            rig.advance(ms: 100)
            if step % 9 == 0 { try rig.batch(b, slot: 2, start: session.timeline.stored(1), [2]) } else { try rig.batch(b, slot: 2, start: 0, []) }
            if step % 3 == 0 { try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2]) } else { try rig.batch(a, slot: 1, start: 0, []) }
        }
        #expect(rig.transport.published.contains { $0.topic == "sync.history_forfeited" })
        #expect(try #require(rig.core.confirmedFrames(of: rig.sessionId)) >= 1_000)
    }

    /// Found reviewing the forfeit: once forfeited, a player's frames beyond what the others can
    /// send for it were moved past as frames nobody sends, though it could send them itself.
    /// The others stand in for it only as far as their proofs reach.
    @Test func aForfeitLeavesAPlayerTheFramesOnlyItCanSend() throws {
        let rig = RelayRig()
        // The host's proof covers 700 frames: it can stand in for Mallory to 700 + 3 s only.
        try malloryBackFirstWithALowClaim(rig, hostProof: 700)
        let session = try #require(rig.core.sessions[rig.sessionId])
        for _ in 0 ..< 5 {
            try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: 2_000)
            try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2])
        }
        #expect(rig.transport.published.contains { $0.topic == "sync.history_forfeited" })
        #expect(session.timeline.stored(1) == 700 + allowance && session.timeline.status(slot: 1, frame: 800) == .received)
        #expect(!rig.transport.published.contains { $0.topic == "sync.frames_skipped" })
        try rig.batch(b, slot: 2, start: 700 + allowance, Array(repeating: 2, count: 1_000 - 700 - allowance))
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 1_000)
    }

    /// Found reviewing the forfeit: a player returning late, its history one round trip away,
    /// forfeited it on the first tick (the wait had long been over). Each player now has the
    /// grace from its own resumed attach.
    @Test func aPlayerReturningLateHasTheGraceToResendItsOwnFrames() throws {
        let rig = RelayRig()
        // The host's proof covers 700 frames: its history counts for Bob's slot to 700 + 3 s.
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 1_000, historyFrom: 0, proof: .of(700))
        let session = try #require(rig.core.sessions[rig.sessionId])
        try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2])
        try waitOutTheReturns(rig, keepingAlive: [(a, 1)], ms: 9_000)
        try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2])
        let heldAt = session.timeline.stored(1)
        #expect(heldAt == 700 + allowance && heldAt == rig.core.confirmedFrames(of: rig.sessionId))
        // Bob comes back, within the disconnect grace, holding his frames from 0.
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 1_000, historyFrom: 0, proof: .of(850))
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: 500)
        try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2])
        #expect(!rig.transport.published.contains { $0.topic == "sync.history_forfeited" })
        #expect(session.timeline.stored(1) == heldAt, "his own frames are his to send")
        try resendHistory(rig, from: b, frames: 0 ..< 1_000, values: [1, 3])
        #expect(session.timeline.inputs(slot: 1, from: heldAt, to: heldAt + 1) == [3])
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 1_000)
    }

    /// Found reviewing the forfeit: attaching again every second and a half started her grace
    /// over, so she never forfeited. The grace runs from a player's first resumed attach.
    @Test func attachingAgainAndAgainDoesNotStartTheGraceOver() throws {
        let rig = RelayRig()
        try malloryBackFirstWithALowClaim(rig)
        for _ in 0 ..< 5 {
            try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: 1_500)
            _ = try rig.attach(b, slot: 2, resume: true, confirmed: 700, historyFrom: 700, proof: .of(990))
            try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2])
        }
        #expect(rig.transport.published.contains { $0.topic == "sync.history_forfeited" })
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 1_000)
    }

    /// Found reviewing the forfeit: an honest player at the live edge always has a next frame
    /// nobody sent yet, and a liar that filled her own slot ahead with history (and whose proof
    /// reaches there) got his frames forfeited to her: she could write his next moves. A
    /// match that is played, even slowly, past what the proofs say was confirmed before the
    /// restart forfeits nothing.
    @Test func aPlayerPlayingLiveForfeitsNothing() throws {
        let rig = RelayRig()
        // Her own slot counts to her claim; her proof of 710 lets her history reach his to 710 + 3 s.
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 1_000, historyFrom: 0, proof: .of(710))
        let bob = try rig.attach(a, slot: 1, resume: true, confirmed: 700, historyFrom: 0, proof: .of(690))
        #expect(!bob.stateFollows)
        let session = try #require(rig.core.sessions[rig.sessionId])
        try bobPlaysLiveFrom700(rig, besideHerHistoryTo: 1_000)
        #expect(!rig.transport.published.contains { $0.topic == "sync.history_forfeited" })
        #expect(session.timeline.inputs(slot: 0, from: 800, to: 801) == [3])
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 1_000)
    }

    /// Bob (slot 1), back with his history to 700, plays 300 frames live over 10 s (input 3)
    /// while Mallory (slot 2) resends her history (1 for his slot, 2 for hers) to `end` now and then.
    func bobPlaysLiveFrom700(_ rig: RelayRig, besideHerHistoryTo end: Int) throws {
        try resendHistory(rig, from: a, frames: 0 ..< 700, values: [3, 2])
        for step in 1 ... 100 {
            rig.advance(ms: 100)
            try rig.batch(a, slot: 1, start: 697 + 3 * step, [3, 3, 3])
            if step % 3 == 0 { try resendHistory(rig, from: b, frames: 0 ..< end, values: [1, 2]) } else { try rig.batch(b, slot: 2, start: 0, []) }
        }
    }

    /// Once the history window is over nothing fills frames final before the restart but their
    /// own player, and no live input times a substitution there; where nobody else's proof
    /// reaches them (so they cannot be forfeited), a player that sends none of them held the
    /// match for good. Past the window, while the match is held there, such frames are
    /// substituted as a lagging player's, as far as the other slots are.
    @Test func framesFinalBeforeTheRestartAreSubstitutedOnceTheHistoryWindowIsOver() throws {
        let rig = RelayRig()
        // The host's proof covers 100 frames: its history stands in for nobody past 100 + 3 s.
        try malloryBackFirstWithALowClaim(rig, hostProof: 100)
        let session = try #require(rig.core.sessions[rig.sessionId])
        let window = UInt64(RelayConfiguration(relayId: "r", advertisedEndpoint: "").recoveryHistoryMs)
        for _ in 0 ..< Int(window / 2_000) - 1 {
            try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: 2_000)
            try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2])
        }
        #expect(session.recovering && rig.core.confirmedFrames(of: rig.sessionId) == 700)
        #expect(!rig.transport.published.contains { $0.topic == "sync.history_forfeited" })
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2)], ms: 2_500)
        #expect(!session.recovering)
        // Her frames to where the host's own slot goes (the rebuild's history limit).
        #expect(session.timeline.stored(0) == session.recoveryFrameLimit)
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == session.recoveryFrameLimit)
        #expect(session.substitutedFrames[1] == session.recoveryFrameLimit - 700)
    }

    /// Found reviewing the forfeit: past the window, a held match substituted every slot at a
    /// frame no live input arrived for, an honest player's too, who had played up to where it
    /// waits for the one holding the match. Only a slot every other slot is past is.
    @Test func pastTheWindowOnlyTheSlotTheOthersWaitForIsSubstituted() throws {
        let rig = RelayRig(players: 3)
        _ = try rig.attach(c, slot: 3, resume: true, confirmed: 700, historyFrom: 700, proof: .of(990))
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 1_000, historyFrom: 0, proof: .of(100))
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 700, historyFrom: 0, proof: .of(100))
        let session = try #require(rig.core.sessions[rig.sessionId])
        try resendHistory(rig, from: a, frames: 0 ..< 1_000, values: [1, 2, 3])
        try resendHistory(rig, from: b, frames: 0 ..< 700, values: [1, 2, 3])
        // Bob plays ten frames live, then waits for Mallory (as his prediction window makes him).
        try rig.batch(b, slot: 2, start: 700, Array(repeating: 2, count: 10))
        let window = UInt64(RelayConfiguration(relayId: "r", advertisedEndpoint: "").recoveryHistoryMs)
        try waitOutTheReturns(rig, keepingAlive: [(a, 1), (b, 2), (c, 3)], ms: window + 1_000)
        #expect(!session.recovering)
        #expect(session.timeline.stored(2) == 710, "hers where his live inputs time it, then the others are not past")
        #expect(session.timeline.stored(1) == 710 && session.substitutedFrames[1] == 0, "he is not lagging: he waits for her")
        try rig.batch(b, slot: 2, start: 710, Array(repeating: 2, count: 10))
        rig.advance(ms: 500)
        try rig.batch(b, slot: 2, start: 0, [])
        #expect(session.timeline.stored(2) == 720)
    }

    @Test func aForgedProofCountsForNothing() throws {
        let rig = RelayRig()
        var altered = rig.proof(300)
        altered.confirmedFrames = 5_000
        let otherSession = ProgressProofs(keyRing: rig.keyRing).proof(sessionId: "another", confirmedFrames: 5_000)
        let otherCluster = ProgressProofs(keyRing: TicketKeyRing.generate()).proof(sessionId: rig.sessionId, confirmedFrames: 5_000)
        var truncated = rig.proof(5_000)
        truncated.macs[0].mac.removeLast()
        var rotated = rig.proof(5_000)
        rotated.macs[0].keyId = rig.keyRing.signingKeyId + 1
        for forged in [altered, otherSession, otherCluster, truncated, rotated] {
            do {
                _ = try rig.attach(b, slot: 2, resume: true, confirmed: 5_000, historyFrom: 0, proof: .given(forged))
                Issue.record("a forged proof rebuilt the session")
            } catch {
                #expect(error.code == .unavailable && error.message.contains("progress proof"), "\(error)")
            }
            #expect(rig.core.sessions[rig.sessionId] == nil)
        }
        // Once the session is rebuilt, a forged proof is no proof.
        _ = try rig.attach(a, slot: 1, resume: true, confirmed: 300, historyFrom: 0, proof: .of(300))
        _ = try rig.attach(b, slot: 2, resume: true, confirmed: 5_000, historyFrom: 0, proof: .given(altered))
        #expect(rig.core.sessions[rig.sessionId]?.players[1]?.resumedProven == allowance)
    }

    /// Every peer's statistics carry a proof of the confirmed frames that any relay with the
    /// cluster secret accepts; telemetry's copy has none.
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
