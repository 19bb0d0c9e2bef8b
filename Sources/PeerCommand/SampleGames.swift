import ArgumentParser
import Foundation
import Games
import NetplayWire
import Rollback

/// The sample games netplay-peer plays, with what a replay needs to rebuild them.
enum SampleGame: String, CaseIterable {
    case arena
    case pd

    var coreId: String { "netplay.games.\(rawValue)" }
    var displayName: String { self == .arena ? "Arena" : "Prisoner's Dilemma" }
    var inputSize: Int { self == .arena ? Arena.inputSize : PrisonersDilemma.inputSize }

    func content() -> ContentInfo {
        ContentInfo(gameName: displayName, crc32: self == .arena ? 0xA7E7_A001 : 0x9D1E_33A1, coreId: coreId,
                    coreVersion: "1", system: "netplay")
    }

    /// Refuses a player count the game cannot be played with: a room, a ticket or a replay
    /// another peer made may say any.
    func checkPlayers(_ players: Int) throws {
        switch self {
        case .arena where !(2 ... 8).contains(players):
            throw ValidationError("the arena takes 2 ... 8 players; this match has \(players)")
        case .pd where players != 2:
            throw ValidationError("the prisoner's dilemma takes exactly 2 players; this match has \(players)")
        default: return
        }
    }

    /// `game=arena;players=N;seed=S`, stored in the replay header.
    static func options(game: SampleGame, players: Int, seed: UInt64) -> [UInt8] {
        GameOptions(["game": game.rawValue, "players": String(players), "seed": String(seed)]).bytes
    }

    /// Parses ``options(game:players:seed:)``.
    static func parse(options: [UInt8], coreId: String) -> (SampleGame, Int, UInt64)? {
        let fields = GameOptions(decoding: options)
        let game = fields["game"].flatMap(SampleGame.init(rawValue:))
            ?? SampleGame.allCases.first { $0.coreId == coreId }
        guard let game, let players = fields["players"].flatMap(Int.init) else { return nil }
        return (game, players, fields["seed"].flatMap(UInt64.init) ?? 1)
    }
}

/// Wraps a game to corrupt its state once, at one frame, on this peer only: an injected desync
/// (the relay must detect it and heal it with a state transfer).
struct DesyncingGame<Base: SerializableGame>: SerializableGame {
    typealias State = Base.State
    var base: Base
    let corruptAtFrame: Int?

    func saveState() -> Base.State { base.saveState() }
    mutating func loadState(_ state: Base.State) { base.loadState(state) }
    mutating func loadForeignState(_ state: Base.State) throws { try base.loadForeignState(state) }
    func checksum() -> UInt64 { base.checksum() }
    static func encode(_ state: Base.State) -> [UInt8] { Base.encode(state) }
    static func decode(_ bytes: [UInt8]) -> Base.State? { Base.decode(bytes) }

    mutating func advanceFrame(_ inputs: FrameInputs) {
        base.advanceFrame(inputs)
        guard inputs.frame == corruptAtFrame else { return }
        // Flip bits in the serialised state until it still decodes and hashes differently.
        let before = base.checksum()
        var bytes = Base.encode(base.saveState())
        for index in stride(from: bytes.count / 2, to: bytes.count, by: 1) {
            bytes[index] ^= 0x5A
            if let state = Base.decode(bytes) {
                var probe = base
                probe.loadState(state)
                if probe.checksum() != before {
                    base.loadState(state)
                    return
                }
            }
            bytes[index] ^= 0x5A
        }
    }
}

/// Deterministic inputs per slot: random held buttons (changing every few frames), or idle.
struct InputScript {
    enum Kind: String, CaseIterable { case random, idle, cooperate, defect }
    let kind: Kind
    let seed: UInt64
    let slot: Int
    let game: SampleGame

    func input(frame: Int) -> GameInput {
        switch kind {
        case .idle: return .zero
        case .cooperate: return PrisonersDilemma.input(.cooperate)
        case .defect: return PrisonersDilemma.input(.defect)
        case .random:
            let step = UInt64(max(frame, 0) / 8)
            let value = SeededRandom.hash(seed, UInt64(slot), step)
            if game == .pd { return PrisonersDilemma.input(value & 1 == 0 ? .cooperate : .defect) }
            return GameInput(low: value & 0x1F)
        }
    }
}

/// A small ASCII view of the arena (the demo's "visible" match) or the dilemma's scores.
enum Renderer {
    static func render<G: Game>(_ game: G, frame: Int) -> String {
        if let arena = game as? DesyncingGame<Arena> { return renderArena(arena.base.state, frame: frame) }
        if let arena = game as? Arena { return renderArena(arena.state, frame: frame) }
        if let dilemma = game as? DesyncingGame<PrisonersDilemma> { return renderDilemma(dilemma.base, frame: frame) }
        return "frame \(frame)"
    }

    static func renderArena(_ state: ArenaState, frame: Int) -> String {
        let columns = 48, rows = 12
        var grid = Array(repeating: Array(repeating: Character(" "), count: columns), count: rows)
        func place(_ x: Int32, _ y: Int32, _ glyph: Character) {
            let column = Int(x >> FixedPoint.shift) * columns / Int(Arena.width)
            let row = Int(y >> FixedPoint.shift) * rows / Int(Arena.height)
            guard (0 ..< columns).contains(column), (0 ..< rows).contains(row) else { return }
            grid[row][column] = glyph
        }
        for index in 0 ..< 8 { place(state.pellets[index].x, state.pellets[index].y, "·") }
        var scores: [String] = []
        for slot in 0 ..< Int(state.playerCount) {
            let ship = state.ships[slot]
            guard ship.active else { continue }
            place(ship.x, ship.y, Character(String(slot + 1)))
            scores.append("P\(slot + 1):\(ship.score)")
        }
        let border = "+" + String(repeating: "-", count: columns) + "+"
        return ([border] + grid.map { "|" + String($0) + "|" } + [border, "frame \(frame)  " + scores.joined(separator: "  ")])
            .joined(separator: "\n")
    }

    static func renderDilemma(_ game: PrisonersDilemma, frame: Int) -> String {
        let state = game.state
        return "frame \(frame)  round \(state.round)  scores \(state.scores.0) : \(state.scores.1)"
    }
}
