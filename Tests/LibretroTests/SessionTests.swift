import Libretro
import Rollback
import Testing

/// Records the checksum of every frame a session simulates (the last simulation wins, so after
/// a rollback a frame holds its corrected value).
final class ChecksumLog {
    var byFrame: [Frame: UInt64] = [:]
}

/// A ``LibretroGame`` that logs checksums, and optionally a broken one that ignores loads.
struct RecordingGame: Game {
    var base: LibretroGame
    let log: ChecksumLog
    var ignoresLoads = false

    func saveState() -> LibretroState { base.saveState() }

    mutating func loadState(_ state: LibretroState) {
        if !ignoresLoads { base.loadState(state) }
    }

    mutating func advanceFrame(_ inputs: FrameInputs) {
        base.advanceFrame(inputs)
        log.byFrame[inputs.frame + 1] = base.checksum()
    }

    func checksum() -> UInt64 { base.checksum() }
}

extension LibretroHostTests {
    @Test("a sync-test session runs nestopia 1,000 frames, rolling back 8 frames every frame, without a mismatch")
    func syncTest() throws {
        let core = try TestEnvironment.nestopia()
        // The script presses all 16 buttons; the mask keeps nestopia's turbo buttons out.
        let game = try LibretroGame(core: core, playerCount: 2, buttonMask: .nes)
        let configuration = SessionConfiguration(playerCount: 2, inputSize: LibretroGame.inputSize)
        let session = try SyncTestSession(game: game, configuration: configuration, checkDistance: 8)
        let script = InputScript(seed: 1234)
        for frame in 0 ..< 1000 {
            for player in 0 ..< 2 {
                try session.addLocalInput(script.buttons(player: player, frame: frame).gameInput, for: player)
            }
            let mismatches = try session.advanceFrame()
            #expect(mismatches.isEmpty, "frame \(frame): \(mismatches)")
            if !mismatches.isEmpty { break }
        }
        #expect(session.mismatches.isEmpty)
        #expect(session.currentFrame == 1000)
        let stats = session.sessionStats
        #expect(stats.statesLoaded >= 992, "a rollback every frame")
        #expect(stats.framesResimulated >= 992 * 8)
        #expect(core.framesRun == 1000 + stats.framesResimulated)
        // The program really saw the inputs: its hash moved on every frame.
        let ram = try #require(core.memory(.systemRAM))
        #expect(TestProgram.Model(ram: ram).frames >= 994)
    }

    @Test("the sync test catches a broken rollback (a load that restores nothing)")
    func syncTestCatchesBrokenRollback() throws {
        let core = try TestEnvironment.nestopia()
        let game = RecordingGame(base: try LibretroGame(core: core, playerCount: 2), log: ChecksumLog(),
                                 ignoresLoads: true)
        let configuration = SessionConfiguration(playerCount: 2, inputSize: LibretroGame.inputSize)
        let session = try SyncTestSession(game: game, configuration: configuration, checkDistance: 2)
        let script = InputScript(seed: 99)
        for frame in 0 ..< 30 {
            for player in 0 ..< 2 {
                try session.addLocalInput(script.buttons(player: player, frame: frame).gameInput, for: player)
            }
            try session.advanceFrame()
        }
        #expect(!session.mismatches.isEmpty)
    }

    @Test("the sync test shows that nestopia's turbo buttons (X, Y) do not survive a rollback")
    func syncTestCatchesTurbo() throws {
        let core = try TestEnvironment.nestopia()
        let game = try LibretroGame(core: core, playerCount: 2, buttonMask: .all)
        let configuration = SessionConfiguration(playerCount: 2, inputSize: LibretroGame.inputSize)
        let session = try SyncTestSession(game: game, configuration: configuration, checkDistance: 8)
        let script = InputScript(seed: 1234, mask: [.y])
        for frame in 0 ..< 60 {
            for player in 0 ..< 2 {
                try session.addLocalInput(script.buttons(player: player, frame: frame).gameInput, for: player)
            }
            try session.advanceFrame()
        }
        #expect(!session.mismatches.isEmpty, "turbo B's phase is not in nestopia's saved state")
    }

    @Test("two peers, each with its own nestopia, over a lossy network with latency end with identical checksums")
    func peerToPeer() throws {
        let seed: UInt64 = 0xC0FFEE
        var network = NetworkSimulator<RollbackMessage>(
            seed: seed, conditions: LinkConditions(latencyMs: 45, jitterMs: 15, lossRate: 0.05, duplicateRate: 0.01,
                                                   reorderRate: 0.02))
        var configuration = SessionConfiguration(playerCount: 2, inputSize: LibretroGame.inputSize)
        configuration.inputDelay = 1
        struct Peer {
            let id: PeerID
            let player: PlayerHandle
            let core: LibretroCore
            let log: ChecksumLog
            let session: P2PSession<RecordingGame>
            let startMs: UInt64
            var ticks: UInt64 = 0
            var skip = 0
            var rollbacks = 0
            var desyncs: [DesyncReport] = []
            var nextTickMs: UInt64 { startMs + ticks * 1000 / 60 }
            var settledFrame: Frame { min(session.confirmedFrame, session.currentFrame - 1) }
        }
        // Peer 1 starts from peer 0's initial state, as a state transfer would deliver it: two
        // fresh nestopia instances differ in a byte of uninitialised APU state.
        let cores = try (0 ..< 2).map { _ in try TestEnvironment.nestopia() }
        let initial = try cores[0].saveState()
        try cores[1].loadState(cores[1].state(from: initial.bytes, expectedChecksum: initial.checksum))
        var peers: [Peer] = []
        for player in 0 ..< 2 {
            let core = cores[player]
            let log = ChecksumLog()
            var config = configuration
            config.seed = seed &+ UInt64(player)
            let session = try P2PSession(
                game: RecordingGame(base: try LibretroGame(core: core, playerCount: 2, buttonMask: .nes), log: log),
                configuration: config,
                players: (0 ..< 2).map { $0 == player ? .local : .remote(PeerID(UInt64($0 + 1))) })
            peers.append(Peer(id: PeerID(UInt64(player + 1)), player: player, core: core, log: log, session: session,
                              startMs: UInt64(player) * 7))
        }
        #expect(peers[0].core.isPrivateCopy != peers[1].core.isPrivateCopy, "two independent nestopia instances")

        let script = InputScript(seed: seed)
        let target = 600
        var inboxes: [[SimulatedDelivery<RollbackMessage>]] = [[], []]
        var now: UInt64 = 0
        while peers.contains(where: { $0.settledFrame < target }) && now < 60_000 {
            let index = peers[0].nextTickMs <= peers[1].nextTickMs ? 0 : 1
            now = peers[index].nextTickMs
            for delivery in network.deliver(now: now) {
                inboxes[Int(delivery.to.rawValue) - 1].append(delivery)
            }
            var peer = peers[index]
            peer.ticks += 1
            for delivery in inboxes[index] { peer.session.handle(delivery.message, from: delivery.from, now: now) }
            inboxes[index].removeAll()
            peer.session.poll(now: now)
            for event in peer.session.drainEvents() {
                switch event {
                case .waitRecommendation(let frames): peer.skip += frames
                case .desync(let report): peer.desyncs.append(report)
                default: break
                }
            }
            if peer.session.state == .running {
                if peer.skip > 0 {
                    peer.skip -= 1
                } else {
                    let frame = peer.session.currentFrame + peer.session.inputDelay
                    try peer.session.addLocalInput(script.buttons(player: peer.player, frame: frame).gameInput,
                                                   for: peer.player)
                    if case .advanced(let rolledBack) = try peer.session.advanceFrame(), rolledBack > 0 {
                        peer.rollbacks += 1
                    }
                }
            }
            for event in peer.session.drainEvents() {
                if case .desync(let report) = event { peer.desyncs.append(report) }
            }
            for out in peer.session.drainOutgoing() {
                network.send(out.message, from: peer.id, to: out.peer, now: now)
            }
            peers[index] = peer
        }

        let common = min(peers[0].settledFrame, peers[1].settledFrame)
        #expect(common >= target, "both peers confirmed \(target) frames (reached \(common))")
        #expect(network.droppedCount > 0, "the network lost messages")
        for peer in peers {
            #expect(peer.rollbacks > 0, "peer \(peer.player) rolled back")
            #expect(peer.desyncs.isEmpty, "peer \(peer.player): \(peer.desyncs)")
        }
        var compared = 0
        for frame in 1 ... common {
            let checksums = peers.map { $0.log.byFrame[frame] }
            #expect(checksums[0] != nil && checksums[0] == checksums[1], "frame \(frame): \(checksums)")
            if checksums[0] != checksums[1] { break }
            compared += 1
        }
        #expect(compared == common)
        // The last common frame's state also matches byte for byte through a state transfer.
        let confirmed = try #require(peers[0].session.latestConfirmedState())
        let other = try #require(peers[1].session.latestConfirmedState())
        if confirmed.frame == other.frame { #expect(confirmed.state == other.state) }
    }
}
