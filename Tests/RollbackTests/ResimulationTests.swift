import Rollback
import Testing
import NetplayTestSupport

/// Records every `advanceFrame` call's frame and re-simulation flag, as a frontend's audio and
/// video output would see them.
final class AdvanceRecorder {
    private(set) var calls: [(frame: Frame, resimulating: Bool)] = []
    func record(_ inputs: FrameInputs) { calls.append((inputs.frame, inputs.isResimulating)) }
    var shown: [Frame] { calls.filter { !$0.resimulating }.map(\.frame) }
    var resimulated: Int { calls.filter(\.resimulating).count }
}

/// ``HashGame`` that tells an ``AdvanceRecorder`` about each frame it simulates.
struct RecordingGame: Game {
    var base = HashGame()
    let recorder: AdvanceRecorder
    func saveState() -> HashGame.State { base.saveState() }
    mutating func loadState(_ state: HashGame.State) { base.loadState(state) }
    mutating func advanceFrame(_ inputs: FrameInputs) {
        recorder.record(inputs)
        base.advanceFrame(inputs)
    }
    func checksum() -> UInt64 { base.checksum() }
}

@Suite("The re-simulating flag and 64-byte inputs", .ownThread)
struct ResimulationTests {
    @Test("a sync test shows each frame once and flags every re-simulated frame", arguments: [1, 4, 8])
    func syncTest(distance: Int) throws {
        let recorder = AdvanceRecorder()
        let session = try SyncTestSession(game: RecordingGame(recorder: recorder),
                                          configuration: SessionConfiguration(playerCount: 2, inputSize: 2),
                                          checkDistance: distance)
        let script = InputScript(seed: 3, size: 2)
        for frame in 0 ..< 60 {
            for player in 0 ..< 2 { try session.addLocalInput(script.input(player: player, frame: frame), for: player) }
            try session.advanceFrame()
        }
        #expect(recorder.shown == Array(0 ..< 60))
        #expect(recorder.resimulated == session.sessionStats.framesResimulated)
        #expect(recorder.resimulated > 0)
    }

    @Test("over a lossy network every peer shows each frame once; rollbacks are flagged")
    func peers() throws {
        var recorders: [AdvanceRecorder] = []
        let harness = try MeshHarness<RecordingGame>(playerCount: 3, configuration: meshConfiguration(players: 3, inputSize: 2),
                                                     conditions: NetworkProfile.lossy.conditions, seed: 17) { _ in
            let recorder = AdvanceRecorder()
            recorders.append(recorder)
            return RecordingGame(recorder: recorder)
        }
        #expect(try harness.run(limitMs: 60_000) { harness.minConfirmedFrame >= 240 })
        #expect(harness.disagreements().isEmpty)
        for (node, recorder) in zip(harness.nodes, recorders) {
            #expect(recorder.shown == Array(0 ..< node.session.currentFrame), "peer \(node.player)")
            #expect(recorder.resimulated == node.session.sessionStats.framesResimulated)
        }
        #expect(recorders.contains { $0.resimulated > 0 }, "the network must cause rollbacks")
    }

    @Test("64-byte inputs reach every peer whole: states match a replay of what was pressed")
    func wideInputs() throws {
        let configuration = meshConfiguration(players: 2, inputSize: 64)
        let harness = try MeshHarness<HashGame>(playerCount: 2, configuration: configuration,
                                                conditions: NetworkProfile.broadband.conditions, seed: 23) { _ in HashGame() }
        #expect(try harness.run(limitMs: 60_000) { harness.minConfirmedFrame >= 180 })
        #expect(harness.disagreements().isEmpty)
        #expect(harness.script.input(player: 1, frame: 5)[byte: 63] != 0 || harness.script.input(player: 1, frame: 6)[byte: 63] != 0)
        var reference = HashGame()
        for frame in 0 ... harness.minConfirmedFrame {
            let inputs = (0 ..< 2).map { harness.script.input(player: $0, frame: frame) }
            reference.advanceFrame(FrameInputs(frame: frame, inputs: inputs, statuses: [.confirmed, .confirmed]))
        }
        #expect(harness.node(0).log.state(at: harness.minConfirmedFrame + 1) == reference.state)
        #expect(harness.node(1).log.state(at: harness.minConfirmedFrame + 1) == reference.state)
    }
}
