import Rollback
import Testing
import NetplayTestSupport

/// Keeps a copy of every `FrameInputs` it is given, with what it read from it at the time.
final class InputsKeeper {
    struct Kept {
        var copy: FrameInputs
        var frame: Frame
        var inputs: [GameInput]
        var statuses: [InputStatus]
    }

    var kept: [Kept] = []
}

/// A `HashGame` that keeps every frame's inputs (which sessions lend from a shared table).
struct KeepingGame: Game {
    var base = HashGame()
    let keeper: InputsKeeper

    func saveState() -> HashGame.State { base.saveState() }
    mutating func loadState(_ state: HashGame.State) { base.loadState(state) }
    mutating func advanceFrame(_ inputs: FrameInputs) {
        let players = (0 ..< inputs.count)
        keeper.kept.append(InputsKeeper.Kept(copy: inputs, frame: inputs.frame, inputs: players.map { inputs[$0] },
                                             statuses: players.map { inputs.status(of: $0) }))
        base.advanceFrame(inputs)
    }
    func checksum() -> UInt64 { base.checksum() }
}

@Suite("Frame inputs", .ownThread)
struct FrameInputsTests {
    @Test("a kept copy of a frame's inputs never changes while the session simulates and rolls back")
    func keptCopies() throws {
        let keepers = (0 ..< 3).map { _ in InputsKeeper() }
        let harness = try MeshHarness<KeepingGame>(playerCount: 3, configuration: meshConfiguration(players: 3, inputSize: 2),
                                                   conditions: NetworkProfile.lossy.conditions, seed: 77) { player in
            KeepingGame(keeper: keepers[player])
        }
        try harness.run(limitMs: 20_000) { harness.minConfirmedFrame >= 200 }
        #expect(harness.disagreements().isEmpty)
        #expect(harness.node(0).session.sessionStats.framesResimulated > 0, "the scenario must roll back")
        for keeper in keepers {
            #expect(keeper.kept.count > 200)
            for kept in keeper.kept {
                #expect(kept.copy.frame == kept.frame)
                #expect(kept.copy.count == 3)
                #expect(kept.copy.allInputs == kept.inputs)
                #expect(kept.copy.allStatuses == kept.statuses)
            }
        }
    }

    @Test("inputs built by hand read back by player")
    func handBuilt() {
        let inputs = FrameInputs(frame: 7, inputs: [GameInput(low: 1), GameInput(low: 2, high: 3)],
                                 statuses: [.confirmed, .predicted])
        #expect(inputs.frame == 7 && inputs.count == 2)
        #expect(inputs[1] == GameInput(low: 2, high: 3) && inputs.status(of: 1) == .predicted)
        #expect(inputs.allInputs == [GameInput(low: 1), GameInput(low: 2, high: 3)])
        #expect(inputs.allStatuses == [.confirmed, .predicted])
    }

    @Test("the rollback histogram counts by length, longer ones in the last bucket")
    func histogram() {
        var histogram = RollbackHistogram()
        for length in [1, 1, 3, 15, 16, 40, 0] { histogram.record(length: length) }
        #expect(histogram.count == 7)
        #expect(histogram.count(length: 1) == 3, "0 counts as 1")
        #expect(histogram.count(length: 3) == 1 && histogram.count(length: 15) == 1)
        #expect(histogram.count(length: 16) == 2 && histogram.count(length: 99) == 2)
        #expect(histogram.buckets.count == RollbackHistogram.bucketCount && histogram.buckets[0] == 0)
        var same = RollbackHistogram()
        for length in [16, 1, 15, 1, 3, 1, 40] { same.record(length: length) }
        #expect(same == histogram && same.hashValue == histogram.hashValue)
        #expect(RollbackHistogram() != histogram)
    }
}

@Suite("Outgoing input runs", .ownThread)
struct OutgoingRunTests {
    @Test("input messages a caller keeps never change, though drained runs' buffers are reused")
    func keptMessagesStayIntact() throws {
        let configuration = SessionConfiguration(playerCount: 2, inputSize: 1)
        let first = try P2PSession(game: HashGame(), configuration: configuration,
                                   players: [.local, .remote(PeerID(2))])
        let second = try P2PSession(game: HashGame(), configuration: configuration,
                                    players: [.remote(PeerID(1)), .local])
        var kept: [(message: InputMessage, inputs: [UInt64])] = []
        var sent = 0
        var now: UInt64 = 0
        for tick in 0 ..< 300 {
            now += 16
            first.poll(now: now)
            second.poll(now: now)
            if first.state == .running && second.state == .running {
                try first.addLocalInput(GameInput(low: UInt64(tick & 0x7F)), for: 0)
                try second.addLocalInput(GameInput(low: UInt64((tick * 7) & 0x7F)), for: 1)
                _ = try first.advanceFrame()
                _ = try second.advanceFrame()
            }
            first.drainOutgoing { outgoing in
                if case .input(let message) = outgoing.message {
                    sent += 1
                    // Every third one is kept (its buffer stays shared); the others come back
                    // to the session and are rebuilt in place.
                    if sent % 3 == 0 { kept.append((message, message.inputs.map(\.low))) }
                }
                second.handle(outgoing.message, from: PeerID(1), now: now)
            }
            second.drainOutgoing { outgoing in first.handle(outgoing.message, from: PeerID(2), now: now) }
        }
        #expect(kept.count > 50)
        for entry in kept { #expect(entry.message.inputs.map(\.low) == entry.inputs) }
        #expect(first.confirmedFrame > 200 && second.confirmedFrame > 200)
    }
}
