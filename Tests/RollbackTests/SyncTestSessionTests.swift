import Rollback
import Testing
import NetplayTestSupport

@Suite("Sync-test session", .ownThread)
struct SyncTestSessionTests {
    func drive<G: Game>(_ session: SyncTestSession<G>, frames: Int, players: Int, size: Int) throws {
        let script = InputScript(seed: 5, size: size)
        for frame in 0 ..< frames {
            for player in 0 ..< players { try session.addLocalInput(script.input(player: player, frame: frame), for: player) }
            try session.advanceFrame()
        }
    }

    @Test("a deterministic game passes at every check distance", arguments: [1, 2, 7, 8, 12])
    func deterministicPasses(distance: Int) throws {
        let session = try SyncTestSession(game: HashGame(),
                                          configuration: SessionConfiguration(playerCount: 3, inputSize: 4),
                                          checkDistance: distance)
        try drive(session, frames: 120, players: 3, size: 4)
        #expect(session.mismatches.isEmpty)
        #expect(session.currentFrame == 120)
        #expect(session.sessionStats.framesResimulated == (120 - distance + 1) * distance)
    }

    @Test("state outside save/load is caught, naming the frames")
    func leakyGameCaught() throws {
        let session = try SyncTestSession(game: LeakyGame(),
                                          configuration: SessionConfiguration(playerCount: 1, inputSize: 2),
                                          checkDistance: 4)
        try drive(session, frames: 30, players: 1, size: 2)
        #expect(!session.mismatches.isEmpty)
        let first = try #require(session.mismatches.first)
        #expect(first.frame >= 1 && first.frame <= 4)
        #expect(first.expected != first.actual)
    }

    @Test("input delay applies to every player")
    func delay() throws {
        var configuration = SessionConfiguration(playerCount: 1, inputSize: 2)
        configuration.inputDelay = 3
        let session = try SyncTestSession(game: HashGame(), configuration: configuration, checkDistance: 2)
        try drive(session, frames: 10, players: 1, size: 2)
        var reference = HashGame()
        let script = InputScript(seed: 5, size: 2)
        for frame in 0 ..< 10 {
            let input = frame < 3 ? GameInput.zero : script.input(player: 0, frame: frame - 3)
            reference.advanceFrame(FrameInputs(frame: frame, inputs: [input], statuses: [.confirmed]))
        }
        #expect(session.game.state == reference.state)
    }

    @Test("a missing input is an error")
    func missingInput() throws {
        let session = try SyncTestSession(game: HashGame(),
                                          configuration: SessionConfiguration(playerCount: 2, inputSize: 1),
                                          checkDistance: 1)
        try session.addLocalInput(.zero, for: 0)
        #expect(throws: RollbackError.missingLocalInput(1)) { try session.advanceFrame() }
    }
}
