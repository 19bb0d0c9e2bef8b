import Games
import Rollback
import Testing
import NetplayTestSupport

/// Feeds one frame of prisoner's dilemma inputs.
func step(_ game: inout PrisonersDilemma, _ a: PrisonersDilemma.Choice, _ b: PrisonersDilemma.Choice,
          statuses: [InputStatus] = [.confirmed, .confirmed]) {
    game.advanceFrame(FrameInputs(frame: Int(game.state.frame), inputs: [PrisonersDilemma.input(a), PrisonersDilemma.input(b)],
                                  statuses: statuses))
}

@Suite("Prisoner's dilemma", .ownThread)
struct PrisonersDilemmaTests {
    @Test("the classic payoff matrix", arguments: [
        (PrisonersDilemma.Choice.cooperate, PrisonersDilemma.Choice.cooperate, Int32(3), Int32(3)),
        (.cooperate, .defect, 0, 5),
        (.defect, .cooperate, 5, 0),
        (.defect, .defect, 1, 1),
    ])
    func payoffs(a: PrisonersDilemma.Choice, b: PrisonersDilemma.Choice, scoreA: Int32, scoreB: Int32) {
        var game = PrisonersDilemma()
        step(&game, a, b)
        #expect(game.state.scores == (scoreA, scoreB))
        #expect(game.state.round == 1)
        #expect(game.state.lastRound == (a, b))
    }

    @Test("a round waits for both choices; the first choice locks")
    func lockIn() {
        var game = PrisonersDilemma(revealFrames: 0)
        step(&game, .cooperate, .none)
        #expect(game.state.round == 0 && game.state.choices.0 == .cooperate)
        step(&game, .defect, .none)  // too late to change
        #expect(game.state.choices.0 == .cooperate)
        step(&game, .none, .defect)
        #expect(game.state.round == 1 && game.state.scores == (0, 5))
        #expect(game.state.choices == (.none, .none))
    }

    @Test("the result stays revealed, then the next round starts; the match ends after maxRounds")
    func revealAndEnd() {
        var game = PrisonersDilemma(maxRounds: 2, revealFrames: 3)
        step(&game, .cooperate, .cooperate)
        for _ in 0 ..< 3 {
            step(&game, .defect, .defect)  // ignored while revealing
            #expect(game.state.round == 1 && game.state.choices == (.none, .none))
        }
        step(&game, .defect, .cooperate)
        #expect(game.state.round == 2 && game.isOver)
        #expect(game.state.scores == (8, 3))
        #expect(game.state.cooperations == (1, 2))
        for _ in 0 ..< 10 { step(&game, .cooperate, .cooperate) }
        #expect(game.state.scores == (8, 3), "no scoring after the match")
    }

    @Test("a custom matrix, like the seed's (sucker loses a point)")
    func customMatrix() {
        var game = PrisonersDilemma(payoffs: .init(reward: 2, temptation: 3, sucker: -1, punishment: 0))
        step(&game, .cooperate, .defect)
        #expect(game.state.scores == (-1, 3))
    }

    @Test("a disconnected player defects")
    func disconnectedDefects() {
        var game = PrisonersDilemma()
        step(&game, .cooperate, .none, statuses: [.confirmed, .disconnected])
        #expect(game.state.lastRound == (.cooperate, .defect))
    }

    @Test("states encode and decode; garbage is refused")
    func serialization() throws {
        var game = PrisonersDilemma()
        step(&game, .defect, .cooperate)
        step(&game, .cooperate, .none)
        let bytes = PrisonersDilemma.encode(game.state)
        #expect(PrisonersDilemma.decode(bytes) == game.state)
        #expect(PrisonersDilemma.decode(Array(bytes.dropLast())) == nil)
        var corrupt = bytes
        corrupt[8] = 9  // not a choice
        #expect(PrisonersDilemma.decode(corrupt) == nil)
    }

    @Test("passes the sync test")
    func syncTest() throws {
        let session = try SyncTestSession(game: PrisonersDilemma(maxRounds: 50, revealFrames: 4),
                                          configuration: SessionConfiguration(playerCount: 2, inputSize: 1),
                                          checkDistance: 7)
        var random = SeededRandom(seed: 3)
        for _ in 0 ..< 400 {
            for player in 0 ..< 2 {
                let choice = PrisonersDilemma.Choice(rawValue: UInt8(random.below(3)))!
                try session.addLocalInput(PrisonersDilemma.input(choice), for: player)
            }
            try session.advanceFrame()
        }
        #expect(session.mismatches.isEmpty)
        #expect(session.game.state.round > 20)
    }
}
