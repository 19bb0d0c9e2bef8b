import Games
import Rollback
import Testing

/// Network conditions the property tests sweep: 0 ... 250 ms round trip, jitter, loss up to
/// 10 %, reordering and duplicates.
enum NetworkProfile: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case lan, broadband, lossy, intercontinental, hostile

    var conditions: LinkConditions {
        switch self {
        case .lan: return LinkConditions(latencyMs: 0, jitterMs: 1)
        case .broadband: return LinkConditions(latencyMs: 30, jitterMs: 10, lossRate: 0.02, duplicateRate: 0.01,
                                               reorderRate: 0.02)
        case .lossy: return LinkConditions(latencyMs: 50, jitterMs: 20, lossRate: 0.10, duplicateRate: 0.05,
                                           reorderRate: 0.05)
        case .intercontinental: return LinkConditions(latencyMs: 110, jitterMs: 15, lossRate: 0.03,
                                                      duplicateRate: 0.02, reorderRate: 0.03)
        case .hostile: return LinkConditions(latencyMs: 90, jitterMs: 35, lossRate: 0.10, duplicateRate: 0.10,
                                             reorderRate: 0.10, reorderDelayMs: 40)
        }
    }

    var testDescription: String { rawValue }
}

struct MeshCase: Sendable, CustomTestStringConvertible {
    var players: Int
    var profile: NetworkProfile
    var seed: UInt64
    var delay: Int = 0
    var sparse = false
    var testDescription: String {
        "\(players)p \(profile.rawValue) seed \(seed) delay \(delay)\(sparse ? " sparse" : "")"
    }
}

/// The cases: every player count with every profile, several seeds, some input delay and
/// sparse saving.
let meshCases: [MeshCase] = {
    var cases: [MeshCase] = []
    for players in [2, 3, 4, 8] {
        for (index, profile) in NetworkProfile.allCases.enumerated() {
            let seeds: [UInt64] = players <= 3 ? [1, 2] : [UInt64(3 + index)]
            for seed in seeds {
                cases.append(MeshCase(players: players, profile: profile, seed: seed * 7919 + UInt64(players),
                                      delay: Int(seed + UInt64(index)) % 3, sparse: seed == 2 && index % 2 == 0))
            }
        }
    }
    return cases
}()

func meshConfiguration(players: Int, inputSize: Int, delay: Int = 0, sparse: Bool = false) -> SessionConfiguration {
    var configuration = SessionConfiguration(playerCount: players, inputSize: inputSize)
    configuration.inputDelay = delay
    configuration.checksumInterval = 10
    configuration.sparseSaving = sparse
    return configuration
}

@Suite("P2P sessions agree under any network")
struct P2PPropertyTests {
    @Test("every peer's state matches on every confirmed frame, and matches a replay of the inputs",
          arguments: meshCases)
    func peersAgree(_ testCase: MeshCase) throws {
        let frames = testCase.players >= 8 ? 150 : 240
        let configuration = meshConfiguration(players: testCase.players, inputSize: 2, delay: testCase.delay,
                                              sparse: testCase.sparse)
        let harness = try MeshHarness<HashGame>(playerCount: testCase.players, configuration: configuration,
                                                conditions: testCase.profile.conditions, seed: testCase.seed) { _ in
            HashGame()
        }
        let finished = try harness.run(limitMs: 120_000) { harness.minConfirmedFrame >= frames }
        #expect(finished, "confirmed only up to \(harness.minConfirmedFrame) of \(frames)")
        #expect(harness.disagreements().isEmpty, "\(harness.disagreements())")
        #expect(harness.desyncEvents().isEmpty)
        let rollbacks = harness.nodes.reduce(0) { $0 + $1.rollbacks }
        let stalls = harness.nodes.reduce(0) { $0 + $1.waits.values.reduce(0, +) }
        print("MESH \(testCase.testDescription): \(harness.nowMs) ms, rollbacks \(rollbacks), stalls \(stalls), "
              + "sent \(harness.network.sentCount) dropped \(harness.network.droppedCount)")
        if testCase.profile != .lan {
            #expect(rollbacks > 0, "a lossy, laggy network must cause rollbacks")
        }

        // Everyone simulated exactly the inputs the players pressed (zero before the delay).
        var reference = HashGame()
        let confirmed = harness.minConfirmedFrame
        for frame in 0 ... confirmed {
            let inputs = (0 ..< testCase.players).map { player in
                frame < testCase.delay ? GameInput.zero : harness.script.input(player: player, frame: frame)
            }
            reference.advanceFrame(FrameInputs(frame: frame, inputs: inputs,
                                               statuses: Array(repeating: .confirmed, count: testCase.players)))
            #expect(harness.node(0).log.state(at: frame + 1) == reference.state, "frame \(frame)")
            if harness.node(0).log.state(at: frame + 1) != reference.state { break }
        }
    }

    @Test("the arena stays identical on every peer", arguments: [
        MeshCase(players: 2, profile: .lossy, seed: 11),
        MeshCase(players: 4, profile: .hostile, seed: 12),
        MeshCase(players: 8, profile: .broadband, seed: 13),
    ])
    func arenaAgrees(_ testCase: MeshCase) throws {
        let configuration = meshConfiguration(players: testCase.players, inputSize: Arena.inputSize)
        let harness = try MeshHarness<Arena>(playerCount: testCase.players, configuration: configuration,
                                             conditions: testCase.profile.conditions, seed: testCase.seed) { _ in
            Arena(playerCount: testCase.players, seed: 99)
        }
        let finished = try harness.run(limitMs: 60_000) { harness.minConfirmedFrame >= 180 }
        #expect(finished)
        #expect(harness.disagreements().isEmpty, "\(harness.disagreements())")
        #expect(harness.desyncEvents().isEmpty)
        #expect(harness.nodes.contains { $0.rollbacks > 0 }, "the test should exercise rollbacks")
    }
}
