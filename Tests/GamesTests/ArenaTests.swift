import Games
import Rollback
import Testing
import NetplayTestSupport

/// Scripted arena controls: each player holds a random control set for a few frames.
func arenaInputs(players: Int, frame: Int, seed: UInt64) -> [GameInput] {
    (0 ..< players).map { player in
        var mix = SeededRandom.hash(seed, UInt64(player), UInt64(frame / 9))
        return ArenaInput(rawValue: UInt8(truncatingIfNeeded: SeededRandom.splitMix(&mix)) & 0x1F).gameInput
    }
}

func play(_ game: inout Arena, frames: Range<Int>, players: Int, seed: UInt64) {
    let statuses = Array(repeating: InputStatus.confirmed, count: players)
    for frame in frames {
        game.advanceFrame(FrameInputs(frame: frame, inputs: arenaInputs(players: players, frame: frame, seed: seed),
                                      statuses: statuses))
    }
}

@Suite("Arena", .ownThread)
struct ArenaTests {
    @Test("the same inputs give the same states", arguments: [2, 5, 8])
    func deterministic(players: Int) {
        var a = Arena(playerCount: players, seed: 4), b = Arena(playerCount: players, seed: 4)
        play(&a, frames: 0 ..< 600, players: players, seed: 9)
        play(&b, frames: 0 ..< 600, players: players, seed: 9)
        #expect(a.state == b.state)
        #expect(a.checksum() == b.checksum())
        var c = Arena(playerCount: players, seed: 4)
        play(&c, frames: 0 ..< 600, players: players, seed: 10)
        #expect(a.checksum() != c.checksum())
    }

    @Test("save and load restore everything", arguments: [2, 8])
    func saveLoad(players: Int) {
        var game = Arena(playerCount: players)
        play(&game, frames: 0 ..< 100, players: players, seed: 1)
        let saved = game.saveState()
        play(&game, frames: 100 ..< 200, players: players, seed: 1)
        let after = game.state
        game.loadState(saved)
        play(&game, frames: 100 ..< 200, players: players, seed: 1)
        #expect(game.state == after)
    }

    @Test("states encode and decode; garbage is refused")
    func serialization() {
        var game = Arena(playerCount: 6, seed: 2)
        play(&game, frames: 0 ..< 300, players: 6, seed: 3)
        let bytes = Arena.encode(game.state)
        #expect(Arena.decode(bytes) == game.state)
        #expect(Arena(state: Arena.decode(bytes)!).checksum() == game.checksum())
        #expect(Arena.decode(Array(bytes.dropLast())) == nil)
        #expect(Arena.decode(bytes + [0]) == nil)
    }

    @Test("the checksum is the FNV-1a hash of the encoded state, and stays what it was")
    func checksumOfTheEncoding() {
        var game = Arena(playerCount: 6, seed: 2)
        play(&game, frames: 0 ..< 300, players: 6, seed: 3)
        var hasher = StateHasher()
        hasher.combine(bytes: Arena.encode(game.state))
        #expect(game.checksum() == hasher.value)
        // Peers compare this checksum and replays record it: the value older builds computed.
        #expect(game.checksum() == 4_800_885_683_080_717_911)
    }

    @Test("ships stay inside the walls and players score", arguments: [2, 8])
    func boundsAndScoring(players: Int) {
        var game = Arena(playerCount: players, seed: 5)
        play(&game, frames: 0 ..< 3000, players: players, seed: 6)
        var total: Int32 = 0
        for slot in 0 ..< players {
            let ship = game.state.ships[slot]
            #expect(ship.x >= FixedPoint.units(Arena.shipRadius) && ship.x <= FixedPoint.units(Arena.width - Arena.shipRadius))
            #expect(ship.y >= FixedPoint.units(Arena.shipRadius) && ship.y <= FixedPoint.units(Arena.height - Arena.shipRadius))
            total += ship.score
        }
        #expect(total > 0)
        #expect(game.state.frame == 3000)
    }

    @Test("colliding ships bounce apart; a dash that rams scores and stuns")
    func ramming() {
        var game = Arena(playerCount: 2)
        // Ship 0 at (40, 60), ship 1 at (120, 60): ship 0 accelerates right for 20 frames
        // (about 22 units), then dashes into ship 1.
        let right = ArenaInput.right.gameInput
        let dash = ArenaInput([.right, .dash]).gameInput
        var frame = 0
        func tick(_ input: GameInput) {
            game.advanceFrame(FrameInputs(frame: frame, inputs: [input, .zero], statuses: [.confirmed, .confirmed]))
            frame += 1
        }
        for _ in 0 ..< 20 { tick(right) }
        tick(dash)
        #expect(game.state.ships[0].dash > 0)
        var hit = false
        for _ in 0 ..< 40 {
            tick(.zero)
            if game.state.ships[1].stun > 0 { hit = true; break }
        }
        #expect(hit)
        #expect(game.state.ships[0].score >= 1)
        #expect(game.state.ships[1].vx > 0, "the rammed ship was pushed")
        let dx = Int64(game.state.ships[1].x) - Int64(game.state.ships[0].x)
        #expect(dx >= Int64(FixedPoint.units(2 * Arena.shipRadius)) - 4, "and they no longer overlap")
    }

    @Test("a disconnected player's ship leaves the arena")
    func disconnect() {
        var game = Arena(playerCount: 3)
        game.advanceFrame(FrameInputs(frame: 0, inputs: [.zero, .zero, .zero],
                                      statuses: [.confirmed, .disconnected, .confirmed]))
        #expect(!game.state.ships[1].active && game.state.ships[0].active && game.state.ships[2].active)
        #expect(!game.state.ships[5].active, "slots beyond the player count are empty")
    }

    @Test("passes the sync test with every player count", arguments: 2 ... 8)
    func syncTest(players: Int) throws {
        let session = try SyncTestSession(game: Arena(playerCount: players, seed: UInt64(players)),
                                          configuration: SessionConfiguration(playerCount: players, inputSize: Arena.inputSize),
                                          checkDistance: 8)
        for frame in 0 ..< 240 {
            for (player, input) in arenaInputs(players: players, frame: frame, seed: 7).enumerated() {
                try session.addLocalInput(input, for: player)
            }
            try session.advanceFrame()
        }
        #expect(session.mismatches.isEmpty)
    }

    @Test("integer square root is exact")
    func squareRoot() {
        for value: Int64 in [0, 1, 2, 3, 4, 15, 16, 17, 1 << 40, (1 << 40) - 1, 999_999_999_999] {
            let root = FixedPoint.squareRoot(value)
            #expect(root * root <= value && (root + 1) * (root + 1) > value)
        }
    }

    @Test("FixedArray8 reads and writes each slot independently")
    func fixedArray() {
        var array = FixedArray8(repeating: Int32(0))
        for index in 0 ..< 8 { array[index] = Int32(index * 10) }
        #expect((0 ..< 8).map { array[$0] } == [0, 10, 20, 30, 40, 50, 60, 70])
        var copy = array
        copy[3] = -1
        #expect(array[3] == 30 && copy[3] == -1 && array != copy)
    }
}
