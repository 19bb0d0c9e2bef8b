import Rollback
import Testing
import NetplayTestSupport

@Suite("Input delay", .ownThread)
struct InputDelayTests {
    @Test("changing the delay mid-match repeats the last input over the gap, drops overlaps, and peers agree")
    func changeDuringMatch() throws {
        let harness = try lanPair(seed: 3, conditions: LinkConditions(latencyMs: 30, jitterMs: 10, lossRate: 0.03))
        for node in harness.nodes { node.log.recordInputs = true }
        var raisedAt: Frame?
        var loweredAt: Frame?
        harness.afterTick = { node in
            guard node.player == 0 else { return }
            if raisedAt == nil && node.session.currentFrame >= 60 {
                raisedAt = node.session.currentFrame
                try? node.session.setInputDelay(3)
            } else if raisedAt != nil && loweredAt == nil && node.session.currentFrame >= 120 {
                loweredAt = node.session.currentFrame
                try? node.session.setInputDelay(1)
            }
        }
        try harness.run(limitMs: 20_000) { harness.minConfirmedFrame >= 200 }
        #expect(harness.minConfirmedFrame >= 200)
        #expect(harness.disagreements().isEmpty)
        #expect(harness.desyncEvents().isEmpty)
        let raised = try #require(raisedAt)
        #expect(loweredAt != nil)
        #expect(harness.node(0).session.inputDelay == 1)

        // What peer 2 simulated for player 0: the scripted input of each frame, except the
        // three frames opened up by raising the delay, which repeat the input before them.
        let other = harness.node(1).log
        for frame in 0 ... 200 {
            let expected = frame >= raised && frame < raised + 3
                ? harness.script.input(player: 0, frame: raised - 1)
                : harness.script.input(player: 0, frame: frame)
            #expect(other.inputs(at: frame)?[0] == expected, "frame \(frame)")
        }
    }

    @Test("an invalid delay is refused")
    func invalid() throws {
        let session = try P2PSession(game: HashGame(), configuration: meshConfiguration(players: 2, inputSize: 1),
                                     players: [.local, .remote(PeerID(2))])
        #expect(throws: RollbackError.self) { try session.setInputDelay(-1) }
        #expect(throws: RollbackError.self) { try session.setInputDelay(33) }
    }
}

@Suite("Prediction barrier", .ownThread)
struct PredictionBarrierTests {
    @Test("without remote inputs a peer runs exactly `window` frames ahead, then waits", arguments: [0, 3, 8])
    func barrier(window: Int) throws {
        let harness = try lanPair(seed: 4, configure: { $0.predictionWindow = window })
        for node in harness.nodes { node.log.recordInputs = true }
        try harness.run(limitMs: 10_000) { harness.node(0).session.currentFrame >= 40 }
        // Peer 2's inputs stop reaching peer 1 (peer 2 still hears peer 1).
        harness.network.setConditions(.down, from: PeerID(2), to: PeerID(1))
        try harness.run(limitMs: harness.nowMs + 500) { false }
        let session = harness.node(0).session
        let known = try #require(session.stats(for: PeerID(2))?.lastReceivedFrame)
        #expect(session.currentFrame == known + window + 1)
        #expect((harness.node(0).waits[.predictionBarrier] ?? 0) > 10)
        #expect(session.sessionStats.predictionBarrierStalls == harness.node(0).waits[.predictionBarrier])
        harness.network.setConditions(LinkConditions(latencyMs: 5), from: PeerID(2), to: PeerID(1))
        try harness.run(limitMs: harness.nowMs + 3000) { harness.minConfirmedFrame >= 150 }
        #expect(harness.minConfirmedFrame >= 150)
        #expect(harness.disagreements().isEmpty)
        if window == 0 {
            // Lockstep: never a predicted input, never a rollback.
            let log = harness.node(0).log
            for frame in 0 ..< 150 { #expect(log.statuses(at: frame)?.contains(.predicted) == false) }
            #expect(harness.node(0).rollbacks == 0)
        }
    }

    @Test("the confirmation barrier keeps saved states for frames not confirmed by everyone")
    func confirmationBarrier() throws {
        // Peer 2 hears nothing from peer 1 for a while, so it cannot confirm peer 1's frames;
        // peer 1 still gets peer 2's inputs but must not outrun the ring of saved states.
        let harness = try lanPair(seed: 5, configure: { $0.stateRingCapacity = 12; $0.predictionWindow = 4 })
        try harness.run(limitMs: 10_000) { harness.node(0).session.currentFrame >= 40 }
        harness.network.setConditions(.down, from: PeerID(1), to: PeerID(2))
        try harness.run(limitMs: harness.nowMs + 500) { false }
        let session = harness.node(0).session
        #expect(session.currentFrame - session.confirmedFrame <= 12)
        harness.network.setConditions(LinkConditions(latencyMs: 5), from: PeerID(1), to: PeerID(2))
        try harness.run(limitMs: harness.nowMs + 3000) { harness.minConfirmedFrame >= 150 }
        #expect(harness.disagreements().isEmpty)
        #expect(harness.desyncEvents().isEmpty)
    }
}
