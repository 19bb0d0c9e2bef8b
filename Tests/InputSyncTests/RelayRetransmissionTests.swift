import NetplayService
import NetplayWire
import Testing
@testable import InputSync
import NetplayTestSupport

/// The relay resends confirmed frames a player has not acknowledged, after a wait that learns
/// how long that player's acknowledgements usually take (a busy relay or link delays them, and a
/// needless resend only adds work), and that doubles while resends go unanswered.
@Suite("Relay retransmission", .ownThread)
struct RelayRetransmissionTests {
    let a = RelayRig.address("peer-a")
    let b = RelayRig.address("peer-b")

    /// Plays 16 ms frames: both players send one input each frame; B acknowledges everything at
    /// once, A acknowledges what it was sent only when `acknowledges(step)` says so. Returns the
    /// relay times at which the relay resent to A.
    func play(_ rig: RelayRig, steps: Range<Int>, state: inout (frame: Int, ackA: Int, sentToA: Int),
              acknowledges: (Int) -> Bool) throws -> [UInt64] {
        var resends: [UInt64] = []
        let player = try #require(rig.core.participant(at: a))
        for step in steps {
            for _ in 0 ..< 4 {
                let count = player.resends
                rig.advance(ms: 4)
                if player.resends > count { resends.append(rig.now) }
            }
            for broadcast in rig.transport.broadcasts(a, authoritative: true) {
                state.sentToA = max(state.sentToA, Int(broadcast.confirmedFrames))
            }
            _ = rig.transport.take(b)
            if acknowledges(step) { state.ackA = state.sentToA }
            try rig.batch(a, slot: 1, start: state.frame, [1], awaited: state.ackA)
            try rig.batch(b, slot: 2, start: state.frame, [2], awaited: state.frame)
            state.frame += 1
        }
        return resends
    }

    /// A running two-player match (no substitution to get in the way) with nothing sent yet.
    func runningPair() throws -> RelayRig {
        let rig = RelayRig(lagTolerance: 600)
        _ = try rig.attach(a, slot: 1)
        _ = try rig.attach(b, slot: 2)
        _ = rig.transport.take(a)
        _ = rig.transport.take(b)
        return rig
    }

    @Test func aPlayerWhoseAcknowledgementsComeInSlowBurstsIsNotResentToAndASilentOneIsWithBackoff() throws {
        let rig = try runningPair()
        var state = (frame: 0, ackA: 0, sentToA: 0)
        // A acknowledges every third frame: 32 ms after the first send it lacks, within the
        // first wait (47 ms); the relay learns that delay.
        let learning = try play(rig, steps: 0 ..< 60, state: &state) { $0 % 3 == 2 }
        #expect(learning.isEmpty, "resends while learning: \(learning)")
        let learnt = try play(rig, steps: 60 ..< 201, state: &state) { $0 % 3 == 2 }
        #expect(learnt.isEmpty, "resent although A's acknowledgements keep coming: \(learnt)")
        // Then every fourth frame: 48 ms after the first send it lacks, past the fixed wait of
        // 47 ms (which resent in every such gap) but within what A's acknowledgements take.
        let gaps = try play(rig, steps: 201 ..< 241, state: &state) { $0 % 4 == 0 }
        #expect(gaps.isEmpty, "resent in 64 ms gaps: \(gaps)")
        // A stops acknowledging: resends come, each after a longer wait than the one before.
        let silent = try play(rig, steps: 241 ..< 341, state: &state) { _ in false }
        #expect(silent.count >= 3, "resends to a silent player: \(silent)")
        let waits = zip(silent.dropFirst(), silent).map { $0 - $1 }
        #expect(waits.count >= 2 && zip(waits.dropFirst(), waits).allSatisfy { $0 > $1 }, "waits \(waits)")
    }

    @Test func aPlayerWhoseMessagesAreLostIsResentToAfterTheUsualWait() throws {
        let rig = try runningPair()
        var state = (frame: 0, ackA: 0, sentToA: 0)
        // A acknowledges every frame for a while: the wait stays near its floor (47 ms).
        #expect(try play(rig, steps: 0 ..< 100, state: &state) { _ in true }.isEmpty)
        // Then A's acknowledgements stop: the first resend comes within about 3 frames.
        let started = rig.now
        let resends = try play(rig, steps: 100 ..< 110, state: &state) { _ in false }
        let first = try #require(resends.first)
        #expect(first - started <= 64, "first resend after \(first - started) ms")
    }
}
