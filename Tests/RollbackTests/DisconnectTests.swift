import Rollback
import Testing
import NetplayTestSupport

@Suite("Disconnects", .ownThread)
struct DisconnectTests {
    func disconnectFrames(_ node: MeshHarness<HashGame>.Node, player: PlayerHandle) -> [Frame] {
        node.events.compactMap { event -> Frame? in
            if case .playerDisconnected(player, let frame) = event { return frame }
            return nil
        }
    }

    @Test("when a player's machine dies, the others agree on the frame it left and play on", arguments: [
        NetworkProfile.lan, .broadband, .lossy,
    ])
    func crash(profile: NetworkProfile) throws {
        var configuration = meshConfiguration(players: 3, inputSize: 2)
        configuration.disconnectTimeoutMs = 1500
        let harness = try MeshHarness<HashGame>(playerCount: 3, configuration: configuration,
                                                conditions: profile.conditions, seed: 21) { _ in HashGame() }
        for node in harness.nodes { node.log.recordInputs = true }
        try harness.run(limitMs: 10_000) { harness.minConfirmedFrame >= 100 }
        harness.kill(2)
        try harness.run(limitMs: harness.nowMs + 20_000) {
            harness.nodes[0 ..< 2].allSatisfy { $0.settledFrame >= 400 }
        }
        let first = disconnectFrames(harness.node(0), player: 2)
        let second = disconnectFrames(harness.node(1), player: 2)
        #expect(first.count == 1 && first == second, "\(first) vs \(second)")
        let frame = try #require(first.first)
        #expect(frame > 100)
        #expect(harness.node(0).events.contains(.peerDisconnected(peer: PeerID(3))))
        #expect(harness.disagreements().isEmpty)
        #expect(harness.desyncEvents().isEmpty)
        // The game saw player 3's input as "disconnected" from that frame on, and not before.
        let log = harness.node(0).log
        #expect(log.statuses(at: frame - 1)?[2] != .disconnected)
        #expect(log.statuses(at: frame)?[2] == .disconnected)
        #expect(log.inputs(at: frame + 50)?[2] == .zero)
        #expect(harness.node(0).log.state(at: 400)?.disconnectedMask == 0b100)
    }

    @Test("a link cut between two peers only: the third follows the first notice it gets, the pair agrees")
    func partialPartition() throws {
        var configuration = meshConfiguration(players: 3, inputSize: 2)
        configuration.disconnectTimeoutMs = 1000
        let harness = try MeshHarness<HashGame>(playerCount: 3, configuration: configuration,
                                                conditions: LinkConditions(latencyMs: 20, jitterMs: 5),
                                                seed: 22) { _ in HashGame() }
        try harness.run(limitMs: 10_000) { harness.minConfirmedFrame >= 60 }
        harness.network.setConditions(.down, between: PeerID(1), and: PeerID(3))
        try harness.run(limitMs: harness.nowMs + 5000) { false }
        // Peers 1 and 3 each time the other out and tell peer 2, which keeps whichever of them
        // it heard from first and drops the other; that pair agrees on the frame.
        let middle = harness.node(1)
        let keptFirst = middle.events.contains(.peerDisconnected(peer: PeerID(3)))
        let keptThird = middle.events.contains(.peerDisconnected(peer: PeerID(1)))
        #expect(keptFirst != keptThird, "peer 2 drops exactly one of them")
        let (survivor, dropped) = keptFirst ? (0, 2) : (2, 0)
        let survivorFrames = disconnectFrames(harness.node(survivor), player: dropped)
        let middleFrames = disconnectFrames(middle, player: dropped)
        #expect(survivorFrames.count == 1 && survivorFrames == middleFrames, "\(survivorFrames) vs \(middleFrames)")
        harness.kill(dropped)
        try harness.run(limitMs: harness.nowMs + 5000) { middle.settledFrame >= 300 }
        #expect(middle.settledFrame >= 300)
        let last = min(middle.settledFrame, harness.node(survivor).settledFrame)
        for frame in 1 ... last where middle.log.state(at: frame) != harness.node(survivor).log.state(at: frame) {
            Issue.record("the surviving pair disagrees at frame \(frame)")
            break
        }
    }

    @Test("the caller can disconnect a peer")
    func kick() throws {
        let harness = try lanPair(seed: 23)
        try harness.run(limitMs: 10_000) { harness.minConfirmedFrame >= 30 }
        harness.node(0).session.disconnect(peer: PeerID(2))
        #expect(harness.node(0).session.drainEvents().contains(.peerDisconnected(peer: PeerID(2))))
        let before = harness.node(0).session.currentFrame
        try harness.run(limitMs: harness.nowMs + 1000) { false }
        #expect(harness.node(0).session.currentFrame > before + 30)
        #expect(harness.node(0).session.disconnectFrame(of: 1) != nil)
    }
}

@Suite("Spectators", .ownThread)
struct SpectatorTests {
    @Test("a late spectator catches up at its catch-up speed and sees exactly what the players saw")
    func catchUp() throws {
        let configuration = meshConfiguration(players: 2, inputSize: 2)
        let harness = try MeshHarness<HashGame>(playerCount: 2, configuration: configuration,
                                                conditions: LinkConditions(latencyMs: 15, jitterMs: 5, lossRate: 0.02),
                                                seed: 31, spectators: 1, spectatorStartMs: 2000,
                                                catchUpThreshold: 6, catchUpSpeed: 3) { _ in HashGame() }
        let watcher = harness.watchers[0]
        var behindWhenStarted = 0
        try harness.run(limitMs: 15_000) {
            if behindWhenStarted == 0 { behindWhenStarted = watcher.session.framesBehind }
            return watcher.session.currentFrame >= 400
        }
        #expect(watcher.session.currentFrame >= 400)
        #expect(watcher.maxStep == 3, "it ran at its catch-up speed")
        #expect(watcher.session.framesBehind <= 6 + 3, "and caught up")
        for frame in 1 ... 400 {
            #expect(watcher.log.state(at: frame) == harness.node(0).log.state(at: frame), "frame \(frame)")
            if watcher.log.state(at: frame) != harness.node(0).log.state(at: frame) { break }
        }
        #expect(!watcher.events.contains { if case .desync = $0 { return true } else { return false } })
        #expect(watcher.events.contains(.running))
        #expect(watcher.session.stats.messagesReceived > 0)
    }

    @Test("a spectator learns when a player left")
    func playerLeaves() throws {
        var configuration = meshConfiguration(players: 2, inputSize: 2)
        configuration.disconnectTimeoutMs = 1000
        let harness = try MeshHarness<HashGame>(playerCount: 2, configuration: configuration,
                                                conditions: LinkConditions(latencyMs: 5), seed: 32,
                                                spectators: 1) { _ in HashGame() }
        try harness.run(limitMs: 10_000) { harness.watchers[0].session.currentFrame >= 60 }
        harness.kill(1)
        try harness.run(limitMs: harness.nowMs + 5000) { harness.watchers[0].session.currentFrame >= 250 }
        let watcher = harness.watchers[0]
        let frame = try #require(harness.node(0).session.disconnectFrame(of: 1))
        #expect(watcher.events.contains(.playerDisconnected(player: 1, frame: frame)))
        #expect(watcher.log.state(at: 250) == harness.node(0).log.state(at: 250))
    }
}
