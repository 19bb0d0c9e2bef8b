import Games
import Rollback
import Testing
import NetplayTestSupport

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

/// The cases: every player count with every profile, several seeds each (fewer for 8
/// players, whose runs cost the most), input delays 0 ... 2, and sparse saving in a quarter.
let meshCases: [MeshCase] = {
    var cases: [MeshCase] = []
    for players in [2, 3, 4, 8] {
        let seedCount = players == 8 ? 2 : players == 4 ? 3 : 4
        for (index, profile) in NetworkProfile.allCases.enumerated() {
            for seed in 0 ..< UInt64(seedCount) {
                cases.append(MeshCase(players: players, profile: profile,
                                      seed: SeededRandom.hash(UInt64(players), UInt64(index), seed) % 100_000,
                                      delay: Int(seed + UInt64(index)) % 3, sparse: (seed + UInt64(index)) % 4 == 3))
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

@Suite("P2P sessions agree under any network", .ownThread)
struct P2PPropertyTests {
    @Test("every peer's state matches on every confirmed frame, and matches a replay of the inputs",
          arguments: meshCases)
    func peersAgree(_ testCase: MeshCase) throws {
        let frames = testCase.players >= 8 ? 300 : 600
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
        MeshCase(players: 3, profile: .intercontinental, seed: 14, delay: 2),
        MeshCase(players: 4, profile: .hostile, seed: 12, delay: 1),
        MeshCase(players: 8, profile: .broadband, seed: 13),
        MeshCase(players: 8, profile: .hostile, seed: 15, sparse: true),
    ])
    func arenaAgrees(_ testCase: MeshCase) throws {
        let configuration = meshConfiguration(players: testCase.players, inputSize: Arena.inputSize,
                                              delay: testCase.delay, sparse: testCase.sparse)
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

@Suite("The prisoner's dilemma over the network", .ownThread)
struct PrisonersDilemmaNetworkTests {
    @Test("both peers see the same rounds and scores", arguments: [NetworkProfile.broadband, .hostile])
    func rounds(profile: NetworkProfile) throws {
        let configuration = meshConfiguration(players: 2, inputSize: PrisonersDilemma.inputSize)
        let harness = try MeshHarness<PrisonersDilemma>(playerCount: 2, configuration: configuration,
                                                        conditions: profile.conditions, seed: 71) { _ in
            PrisonersDilemma(maxRounds: 30, revealFrames: 10)
        }
        // Each player decides about once a second, cooperating or defecting at random.
        harness.inputOverride = { node, frame in
            let roll = SeededRandom.hash(UInt64(node.player), UInt64(frame / 20)) % 8
            return PrisonersDilemma.input(roll == 0 ? .defect : roll == 1 ? .cooperate : .none)
        }
        try harness.run(limitMs: 60_000) { harness.minConfirmedFrame >= 900 }
        #expect(harness.disagreements().isEmpty)
        #expect(harness.desyncEvents().isEmpty)
        let final = try #require(harness.node(0).log.state(at: 900))
        #expect(final.round >= 5)
        #expect(harness.node(1).log.state(at: 900) == final)
    }
}
