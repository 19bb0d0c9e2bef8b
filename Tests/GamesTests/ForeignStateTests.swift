import Games
import Rollback
import Testing
import NetplayTestSupport

/// States from another peer: a decoded state is loaded into a running match, so one holding values
/// the simulation cannot take (a position at the end of `Int32`, a score about to overflow, a
/// timer beyond its length) used to trap this peer's next frame.
@Suite("Sample games refuse states a match cannot reach", .ownThread)
struct ForeignStateTests {
    /// An arena state with one field of ship 0 changed, encoded as a peer would send it.
    private func arenaBytes(players: Int = 2, _ change: (inout ArenaState) -> Void) -> [UInt8] {
        var state = Arena(playerCount: players).state
        change(&state)
        return Arena.encode(state)
    }

    @Test("an arena state whose values would overflow the physics does not decode")
    func arenaOutOfRangeValues() {
        #expect(Arena.decode(arenaBytes { _ in }) != nil)
        #expect(Arena.decode(arenaBytes { $0.ships[0].x = .max; $0.ships[0].vx = 65_536 }) == nil)
        #expect(Arena.decode(arenaBytes { $0.ships[0].y = .min }) == nil)
        #expect(Arena.decode(arenaBytes { $0.ships[1].vx = .min; $0.ships[1].vy = .min }) == nil)
        #expect(Arena.decode(arenaBytes { $0.ships[0].stun = -1 }) == nil)
        #expect(Arena.decode(arenaBytes { $0.ships[0].dash = .max }) == nil)
        #expect(Arena.decode(arenaBytes { $0.ships[0].cooldown = 1_000 }) == nil)
        #expect(Arena.decode(arenaBytes { $0.pellets[3].x = -1 }) == nil)
        // A zero generator never moves again: every pellet would respawn in one place.
        #expect(Arena.decode(arenaBytes { $0.random = 0 }) == nil)
    }

    /// The bounds must not refuse an honest peer: every state eight players reach in a long match
    /// (dashes, rams, wall bounces) passes them.
    @Test("every state a match reaches is playable", arguments: [2, 8])
    func reachedStatesArePlayable(players: Int) {
        var game = Arena(playerCount: players, seed: 3)
        var refused = 0
        for frame in 0 ..< 6_000 {
            play(&game, frames: frame ..< frame + 1, players: players, seed: 11)
            if !Arena.isPlayable(game.state) { refused += 1 }
        }
        #expect(refused == 0)
        #expect(Arena.decode(Arena.encode(game.state)) == game.state)
    }

    @Test("a score at the end of Int32 wraps when a pellet is collected, instead of trapping")
    func arenaScoreWraps() throws {
        let start = Arena(playerCount: 2).state
        let bytes = arenaBytes { state in
            state.ships[0].score = .max
            state.ships[0].x = start.pellets[0].x
            state.ships[0].y = start.pellets[0].y
        }
        var game = Arena(playerCount: 2)
        try game.loadForeignState(try #require(Arena.decode(bytes)))
        game.advanceFrame(FrameInputs(frame: 0, inputs: [.zero, .zero], statuses: [.confirmed, .confirmed]))
        #expect(game.state.ships[0].score == .min)
    }

    @Test("an arena state for another number of players is refused and changes nothing")
    func arenaOtherPlayerCount() throws {
        var game = Arena(playerCount: 4)
        let before = game.state
        let twoPlayers = try #require(Arena.decode(arenaBytes(players: 2) { _ in }))
        #expect(throws: RefusedGameState.self) { try game.loadForeignState(twoPlayers) }
        #expect(game.state == before)
        let fourPlayers = try #require(Arena.decode(arenaBytes(players: 4) { $0.frame = 77 }))
        try game.loadForeignState(fourPlayers)
        #expect(game.state.frame == 77)
    }

    @Test("the integer square root holds up to Int64.max")
    func squareRootOfTheLargest() {
        #expect(FixedPoint.squareRoot(.max) == 3_037_000_499)
        #expect(FixedPoint.squareRoot(3_037_000_499 * 3_037_000_499) == 3_037_000_499)
        #expect(FixedPoint.squareRoot(3_037_000_499 * 3_037_000_499 - 1) == 3_037_000_498)
    }

    private func dilemmaBytes(_ change: (inout PrisonersDilemma.State) -> Void) -> [UInt8] {
        var state = PrisonersDilemma.State()
        change(&state)
        return PrisonersDilemma.encode(state)
    }

    @Test("a dilemma state with negative counts or more cooperations than rounds does not decode")
    func dilemmaOutOfRangeValues() {
        #expect(PrisonersDilemma.decode(dilemmaBytes { $0.round = 3; $0.cooperations = (3, 0) }) != nil)
        #expect(PrisonersDilemma.decode(dilemmaBytes { $0.frame = -1 }) == nil)
        #expect(PrisonersDilemma.decode(dilemmaBytes { $0.round = -5 }) == nil)
        #expect(PrisonersDilemma.decode(dilemmaBytes { $0.revealCountdown = -1 }) == nil)
        #expect(PrisonersDilemma.decode(dilemmaBytes { $0.round = 2; $0.cooperations = (0, 3) }) == nil)
    }

    @Test("a dilemma state beyond this match's rounds or pause is refused; counters at the end of Int32 wrap")
    func dilemmaForeignStates() throws {
        var game = PrisonersDilemma(maxRounds: 10, revealFrames: 30)
        let before = game.state
        let tooManyRounds = try #require(PrisonersDilemma.decode(dilemmaBytes { $0.round = 11 }))
        #expect(throws: RefusedGameState.self) { try game.loadForeignState(tooManyRounds) }
        let longPause = try #require(PrisonersDilemma.decode(dilemmaBytes { $0.revealCountdown = .max }))
        #expect(throws: RefusedGameState.self) { try game.loadForeignState(longPause) }
        #expect(game.state == before)

        let atTheEnd = try #require(PrisonersDilemma.decode(dilemmaBytes { state in
            state.frame = .max
            state.round = 2
            state.scores = (.max, .max)
            state.cooperations = (2, 2)
        }))
        try game.loadForeignState(atTheEnd)
        let cooperate = PrisonersDilemma.input(.cooperate)
        game.advanceFrame(FrameInputs(frame: 0, inputs: [cooperate, cooperate], statuses: [.confirmed, .confirmed]))
        #expect(game.state.frame == .min)
        #expect(game.state.round == 3)
        #expect(game.state.scores.0 == Int32.max &+ 3)
    }
}
