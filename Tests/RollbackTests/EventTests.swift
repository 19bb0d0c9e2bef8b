import Rollback
import Testing
import NetplayTestSupport

/// Two LAN peers running HashGame, with whatever configuration tweak a test needs.
func lanPair(seed: UInt64 = 1, conditions: LinkConditions = LinkConditions(latencyMs: 5, jitterMs: 2),
             configure: (inout SessionConfiguration) -> Void = { _ in },
             makeGame: (Int) -> HashGame = { _ in HashGame() }) throws -> MeshHarness<HashGame> {
    var configuration = meshConfiguration(players: 2, inputSize: 2)
    configure(&configuration)
    return try MeshHarness<HashGame>(playerCount: 2, configuration: configuration, conditions: conditions,
                                     seed: seed, startOffsetsMs: [0, 40], makeGame: makeGame)
}

@Suite("Session events", .ownThread)
struct EventTests {
    @Test("synchronizing reports progress, then synchronized, then running")
    func handshake() throws {
        let harness = try lanPair()
        try harness.run(limitMs: 5000) { harness.nodes.allSatisfy { $0.session.currentFrame > 5 } }
        let events = harness.node(0).events
        let progress = events.compactMap { event -> Int? in
            if case .synchronizing(let peer, let count, let total) = event, peer == PeerID(2), total == 5 { return count }
            return nil
        }
        #expect(progress == [1, 2, 3, 4, 5])
        let synchronized = try #require(events.firstIndex(of: .synchronized(peer: PeerID(2))))
        let running = try #require(events.firstIndex(of: .running))
        #expect(synchronized < running)
        #expect(events.filter { $0 == .running }.count == 1)
    }

    @Test("a silent peer is reported interrupted, then resumed")
    func interruptedAndResumed() throws {
        let harness = try lanPair()
        try harness.run(limitMs: 10_000) { harness.node(0).session.currentFrame >= 60 }
        harness.network.setConditions(.down, between: PeerID(1), and: PeerID(2))
        try harness.run(limitMs: harness.nowMs + 1200) { false }
        harness.network.setConditions(LinkConditions(latencyMs: 5), between: PeerID(1), and: PeerID(2))
        try harness.run(limitMs: harness.nowMs + 5000) { harness.node(0).session.currentFrame >= 200 }
        let events = harness.node(0).events
        let interrupted = events.firstIndex { event in
            if case .interrupted(let peer, let remaining) = event { return peer == PeerID(2) && remaining <= 2250 }
            return false
        }
        let resumed = events.firstIndex(of: .resumed(peer: PeerID(2)))
        #expect(interrupted != nil && resumed != nil && interrupted! < resumed!)
        #expect(!events.contains(.peerDisconnected(peer: PeerID(2))))
        #expect(harness.node(0).session.currentFrame >= 200, "the match goes on after the link comes back")
        #expect(harness.disagreements().isEmpty)
    }

    @Test("a peer silent past the timeout is disconnected and its player too")
    func disconnected() throws {
        let harness = try lanPair()
        try harness.run(limitMs: 10_000) { harness.node(0).session.currentFrame >= 60 }
        harness.kill(1)
        try harness.run(limitMs: harness.nowMs + 4000) { false }
        let events = harness.node(0).events
        #expect(events.contains(.peerDisconnected(peer: PeerID(2))))
        let frame = try #require(events.compactMap { event -> Frame? in
            if case .playerDisconnected(1, let frame) = event { return frame }
            return nil
        }.first)
        #expect(harness.node(0).session.disconnectFrame(of: 1) == frame)
        let before = harness.node(0).session.currentFrame
        try harness.run(limitMs: harness.nowMs + 1000) { false }
        #expect(harness.node(0).session.currentFrame > before + 30, "the survivor plays on alone")
    }

    @Test("the peer that runs ahead is told to wait")
    func waitRecommendation() throws {
        let harness = try lanPair()
        harness.node(0).honourWaits = false
        try harness.run(limitMs: 10_000) { harness.node(0).session.currentFrame >= 60 }
        // A hitch on peer 2: it stops simulating for 100 ms while peer 1 runs on.
        harness.node(1).stallUntilMs = harness.nowMs + 100
        try harness.run(limitMs: harness.nowMs + 3000) { false }
        let waits = harness.node(0).events.compactMap { event -> Int? in
            if case .waitRecommendation(let frames) = event { return frames }
            return nil
        }
        #expect(!waits.isEmpty)
        #expect(waits.allSatisfy { $0 >= 2 && $0 <= 10 })
        #expect(!harness.node(1).events.contains { if case .waitRecommendation = $0 { return true } else { return false } })
    }

    @Test("a desync names the frame and both checksums")
    func desync() throws {
        // Peer 2's game goes wrong at frame 43; checksums are exchanged every 10 frames.
        let harness = try lanPair(makeGame: { player in HashGame(bias: player == 1 ? 43 : nil) })
        try harness.run(limitMs: 10_000) { harness.minConfirmedFrame >= 120 }
        let reports = harness.node(0).events.compactMap { event -> DesyncReport? in
            if case .desync(let report) = event { return report }
            return nil
        }
        let first = try #require(reports.first)
        #expect(first.frame == 50)
        #expect(first.peer == PeerID(2))
        let mine = try #require(harness.node(0).log.state(at: 50))
        let theirs = try #require(harness.node(1).log.state(at: 50))
        #expect(first.localChecksum == HashGame(state: mine).checksum())
        #expect(first.remoteChecksum == HashGame(state: theirs).checksum())
        #expect(harness.node(1).events.contains { event in
            if case .desync(let report) = event { return report.frame == 50 && report.peer == PeerID(1) }
            return false
        })
    }
}
