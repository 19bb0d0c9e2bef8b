import Rollback
import Testing
import NetplayTestSupport

@Suite("Statistics", .ownThread)
struct StatsTests {
    @Test("per-peer stats report ping, jitter, rollbacks, prediction misses and bytes")
    func peerStats() throws {
        let harness = try lanPair(seed: 51, conditions: LinkConditions(latencyMs: 40, jitterMs: 20))
        try harness.run(limitMs: 20_000) { harness.minConfirmedFrame >= 400 }
        let stats = try #require(harness.node(0).session.stats(for: PeerID(2)))
        #expect(stats.pingMs >= 80 && stats.pingMs <= 125, "RTT is 80 ... 120 ms, got \(stats.pingMs)")
        #expect(stats.jitterMs > 0)
        #expect(stats.rollbacks > 0)
        #expect(stats.rollbackHistogram.count == stats.rollbacks)
        #expect(stats.predictionMisses > 0)
        #expect(stats.bytesSent > 400 * 20 && stats.messagesSent > 400 && stats.messagesReceived > 400)
        #expect(abs(stats.localFramesBehind) <= 4 && abs(stats.remoteFramesBehind) <= 4)
        #expect(stats.lastReceivedFrame >= 400)
        let session = harness.node(0).session.sessionStats
        #expect(session.rollbackHistogram.count == harness.node(0).rollbacks)
        #expect(session.framesAdvanced == harness.node(0).session.currentFrame)
        #expect(session.framesResimulated > 0 && session.statesLoaded == harness.node(0).rollbacks)
        // Dense saving: frame 0's state, one per frame advanced, and one per re-simulated frame
        // but the loaded one.
        #expect(session.statesSaved == 1 + session.framesAdvanced + session.framesResimulated - session.statesLoaded)
        #expect(harness.node(0).session.framesAhead < 2)
    }

    @Test("sparse saving saves far fewer states and stays in sync")
    func sparseSaving() throws {
        var saved: [Bool: Int] = [:]
        for sparse in [false, true] {
            let configuration = meshConfiguration(players: 2, inputSize: 2, sparse: sparse)
            let harness = try MeshHarness<HashGame>(playerCount: 2, configuration: configuration,
                                                    conditions: NetworkProfile.lossy.conditions, seed: 52) { _ in
                HashGame()
            }
            try harness.run(limitMs: 20_000) { harness.minConfirmedFrame >= 300 }
            #expect(harness.disagreements().isEmpty)
            #expect(harness.desyncEvents().isEmpty)
            saved[sparse] = harness.node(0).session.sessionStats.statesSaved
        }
        #expect(saved[true]! * 2 < saved[false]!, "\(saved)")
    }
}

@Suite("Resync by state transfer", .ownThread)
struct ResyncTests {
    @Test("a desynced peer loads a confirmed state from another and agrees again")
    func resync() throws {
        let harness = try lanPair(seed: 61, makeGame: { player in HashGame(bias: player == 1 ? 43 : nil) })
        var loadedAt: Frame?
        var seen = [0, 0]
        harness.afterTick = { node in
            let fresh = node.events[seen[node.player]...]
            seen[node.player] = node.events.count
            for event in fresh {
                switch event {
                case .desync where node.player == 1 && loadedAt == nil:
                    node.session.requestState(from: PeerID(1))
                case .stateRequested(let peer, _):
                    guard let confirmed = node.session.latestConfirmedState() else { break }
                    node.session.sendState(StateTransfer(frame: confirmed.frame, checksum: confirmed.checksum ?? 0,
                                                         state: HashGame.encode(confirmed.state)), to: peer)
                case .stateReceived(_, let transfer):
                    guard let state = HashGame.decode(transfer.state) else { break }
                    try? node.session.loadState(state, frame: transfer.frame)
                    loadedAt = transfer.frame
                default:
                    break
                }
            }
        }
        try harness.run(limitMs: 20_000) { loadedAt != nil && harness.minConfirmedFrame >= 300 }
        let frame = try #require(loadedAt)
        #expect(frame > 43)
        for check in (frame + 1) ... 300 {
            #expect(harness.node(0).log.state(at: check) == harness.node(1).log.state(at: check), "frame \(check)")
        }
        // Desyncs stop: none after the frame the state was loaded at.
        #expect(harness.desyncEvents().allSatisfy { $0.frame <= frame })
    }

    @Test("a state for a frame outside the kept inputs is refused")
    func outOfRange() throws {
        let harness = try lanPair(seed: 62)
        try harness.run(limitMs: 10_000) { harness.minConfirmedFrame >= 20 }
        let session = harness.node(0).session
        #expect(throws: RollbackError.self) { try session.loadState(HashGame.State(), frame: session.currentFrame + 1) }
    }
}
