import Rollback

/// A real-time arena for 2 ... 8 players with integer physics: ships thrust, dash, bounce
/// off walls and each other (elastic collisions along the contact normal), collect pellets
/// for points and score by ramming an opponent while dashing (the victim is stunned).
///
/// Everything is 16.16 fixed point and the pellet respawns draw from a generator stored in
/// the state, so the simulation is bit-identical everywhere. The state is ~380 bytes inline
/// (``ArenaState``), so save and load are memory copies. Input: one byte of ``ArenaInput``.
/// A disconnected player's ship leaves the arena.
public struct Arena: SerializableGame, Sendable {
    /// Input bytes per player.
    public static let inputSize = 1
    /// Arena width in units.
    public static let width: Int32 = 320
    /// Arena height in units.
    public static let height: Int32 = 240
    /// Ship radius in units.
    public static let shipRadius: Int32 = 8
    /// Pellet radius in units.
    public static let pelletRadius: Int32 = 4
    static let thrust: Int32 = FixedPoint.one / 8
    static let maxSpeed: Int32 = FixedPoint.units(4)
    static let dashSpeed: Int32 = FixedPoint.units(7)
    static let dashFrames: Int32 = 10
    static let dashCooldown: Int32 = 45
    static let stunFrames: Int32 = 30

    /// The current state.
    public private(set) var state: ArenaState

    /// A new match for `playerCount` players (2 ... 8), pellets placed from `seed`.
    public init(playerCount: Int, seed: UInt64 = 1) {
        precondition(playerCount >= 2 && playerCount <= 8, "the arena takes 2 ... 8 players")
        var ships = FixedArray8(repeating: Ship(x: 0, y: 0, active: false))
        for slot in 0 ..< 8 {
            let column = Int32(slot % 4), row = Int32(slot / 4)
            let x = FixedPoint.units(40 + column * 80)
            let y = FixedPoint.units(row == 0 ? 60 : 180)
            ships[slot] = Ship(x: x, y: y, active: slot < playerCount)
        }
        state = ArenaState(frame: 0, playerCount: Int32(playerCount), random: seed | 1, ships: ships,
                           pellets: FixedArray8(repeating: Pellet(x: 0, y: 0)))
        for index in 0 ..< 8 { state.pellets[index] = Self.spawnPellet(&state.random) }
    }

    /// A state restored from bytes (see ``decode(_:)``).
    public init(state: ArenaState) { self.state = state }

    private static func nextRandom(_ random: inout UInt64) -> UInt64 {
        random ^= random << 13
        random ^= random >> 7
        random ^= random << 17
        return random
    }

    private static func spawnPellet(_ random: inout UInt64) -> Pellet {
        let margin = pelletRadius * 2
        let x = margin + Int32(nextRandom(&random) % UInt64(width - 2 * margin))
        let y = margin + Int32(nextRandom(&random) % UInt64(height - 2 * margin))
        return Pellet(x: FixedPoint.units(x), y: FixedPoint.units(y))
    }

    public func saveState() -> ArenaState { state }

    public mutating func loadState(_ state: ArenaState) { self.state = state }

    /// Loads a state another peer sent, refusing one for another number of players (its extra
    /// or missing ships would make this peer simulate another match). ``decode(_:)`` has
    /// already refused values the physics cannot take.
    public mutating func loadForeignState(_ state: ArenaState) throws {
        guard state.playerCount == self.state.playerCount else {
            throw RefusedGameState("an arena state for \(state.playerCount) players, this match has \(self.state.playerCount)")
        }
        self.state = state
    }

    public mutating func advanceFrame(_ inputs: FrameInputs) {
        let players = min(Int(state.playerCount), inputs.count)
        state.frame &+= 1
        for slot in 0 ..< players {
            var ship = state.ships[slot]
            guard ship.active else { continue }
            if inputs.status(of: slot) == .disconnected {
                ship.active = false
                state.ships[slot] = ship
                continue
            }
            steer(&ship, ArenaInput(inputs[slot]))
            move(&ship)
            state.ships[slot] = ship
        }
        collideShips(players)
        collectPellets(players)
    }

    private func steer(_ ship: inout Ship, _ controls: ArenaInput) {
        if ship.cooldown > 0 { ship.cooldown -= 1 }
        if ship.dash > 0 { ship.dash -= 1 }
        if ship.stun > 0 {
            ship.stun -= 1
        } else {
            if controls.contains(.up) { ship.vy -= Self.thrust }
            if controls.contains(.down) { ship.vy += Self.thrust }
            if controls.contains(.left) { ship.vx -= Self.thrust }
            if controls.contains(.right) { ship.vx += Self.thrust }
            if controls.contains(.dash) && ship.cooldown == 0 && (ship.vx != 0 || ship.vy != 0) {
                let speed = FixedPoint.squareRoot(Int64(ship.vx) * Int64(ship.vx) + Int64(ship.vy) * Int64(ship.vy))
                if speed > 0 {
                    ship.vx = Int32(Int64(ship.vx) * Int64(Self.dashSpeed) / speed)
                    ship.vy = Int32(Int64(ship.vy) * Int64(Self.dashSpeed) / speed)
                    ship.dash = Self.dashFrames
                    ship.cooldown = Self.dashCooldown
                }
            }
        }
        // Friction, then the speed limit (a dash may exceed it while it lasts).
        ship.vx -= ship.vx >> 5
        ship.vy -= ship.vy >> 5
        if ship.dash == 0 {
            ship.vx = min(max(ship.vx, -Self.maxSpeed), Self.maxSpeed)
            ship.vy = min(max(ship.vy, -Self.maxSpeed), Self.maxSpeed)
        }
    }

    private func move(_ ship: inout Ship) {
        ship.x += ship.vx
        ship.y += ship.vy
        let low = FixedPoint.units(Self.shipRadius)
        let highX = FixedPoint.units(Self.width - Self.shipRadius)
        let highY = FixedPoint.units(Self.height - Self.shipRadius)
        if ship.x < low { ship.x = low; ship.vx = -ship.vx / 2 }
        if ship.x > highX { ship.x = highX; ship.vx = -ship.vx / 2 }
        if ship.y < low { ship.y = low; ship.vy = -ship.vy / 2 }
        if ship.y > highY { ship.y = highY; ship.vy = -ship.vy / 2 }
    }

    private mutating func collideShips(_ players: Int) {
        let minimum = Int64(FixedPoint.units(2 * Self.shipRadius))
        for i in 0 ..< players {
            guard state.ships[i].active else { continue }
            for j in (i + 1) ..< max(players, i + 1) {
                guard state.ships[j].active else { continue }
                var a = state.ships[i], b = state.ships[j]
                var dx = Int64(b.x) - Int64(a.x)
                var dy = Int64(b.y) - Int64(a.y)
                if abs(dx) >= minimum || abs(dy) >= minimum { continue }
                var distanceSquared = dx * dx + dy * dy
                if distanceSquared >= minimum * minimum { continue }
                if distanceSquared == 0 {
                    dx = 1
                    dy = 0
                    distanceSquared = 1
                }
                let distance = FixedPoint.squareRoot(distanceSquared)
                let nx = dx * 65536 / distance
                let ny = dy * 65536 / distance
                // Exchange the velocity components along the normal when approaching.
                let approach = ((Int64(b.vx) - Int64(a.vx)) * nx + (Int64(b.vy) - Int64(a.vy)) * ny) >> 16
                if approach < 0 {
                    a.vx = Int32(Int64(a.vx) + (approach * nx >> 16))
                    a.vy = Int32(Int64(a.vy) + (approach * ny >> 16))
                    b.vx = Int32(Int64(b.vx) - (approach * nx >> 16))
                    b.vy = Int32(Int64(b.vy) - (approach * ny >> 16))
                }
                // Push apart so they no longer overlap.
                let push = (minimum - distance) / 2 + 1
                a.x = Int32(Int64(a.x) - (push * nx >> 16))
                a.y = Int32(Int64(a.y) - (push * ny >> 16))
                b.x = Int32(Int64(b.x) + (push * nx >> 16))
                b.y = Int32(Int64(b.y) + (push * ny >> 16))
                // A dashing ship that rams a non-dashing one scores and stuns it.
                if a.dash > 0 && b.dash == 0 && b.stun == 0 {
                    a.score &+= 1
                    b.stun = Self.stunFrames
                } else if b.dash > 0 && a.dash == 0 && a.stun == 0 {
                    b.score &+= 1
                    a.stun = Self.stunFrames
                }
                state.ships[i] = a
                state.ships[j] = b
            }
        }
    }

    private mutating func collectPellets(_ players: Int) {
        let reach = Int64(FixedPoint.units(Self.shipRadius + Self.pelletRadius))
        for p in 0 ..< 8 {
            let pellet = state.pellets[p]
            for slot in 0 ..< players {
                let ship = state.ships[slot]
                guard ship.active else { continue }
                let dx = Int64(ship.x) - Int64(pellet.x)
                let dy = Int64(ship.y) - Int64(pellet.y)
                if abs(dx) < reach && abs(dy) < reach && dx * dx + dy * dy < reach * reach {
                    state.ships[slot].score &+= 1
                    state.pellets[p] = Self.spawnPellet(&state.random)
                    break
                }
            }
        }
    }

    public func checksum() -> UInt64 {
        var hasher = StateHasher()
        Self.write(state, to: &hasher)
        return hasher.value
    }

    public static func encode(_ state: ArenaState) -> [UInt8] {
        var writer = StateWriter()
        write(state, to: &writer)
        return writer.bytes
    }

    /// The state field by field, in the one order its checksum and its encoding share
    /// (``decode(_:)`` reads it back).
    @inline(__always)
    static func write<Sink: StateSink>(_ state: ArenaState, to sink: inout Sink) {
        sink.write(state.frame)
        sink.write(state.playerCount)
        sink.write(state.random)
        for slot in 0 ..< 8 {
            let ship = state.ships[slot]
            sink.write(ship.x)
            sink.write(ship.y)
            sink.write(ship.vx)
            sink.write(ship.vy)
            sink.write(ship.score)
            sink.write(ship.stun)
            sink.write(ship.dash)
            sink.write(ship.cooldown)
            sink.write(ship.active ? 1 as UInt8 : 0)
        }
        for index in 0 ..< 8 {
            sink.write(state.pellets[index].x)
            sink.write(state.pellets[index].y)
        }
    }

    /// A state from bytes (``encode(_:)``), or nil when they are not one, or hold values the
    /// physics cannot take (``isPlayable(_:)``): a peer's state is checked before it is loaded.
    public static func decode(_ bytes: [UInt8]) -> ArenaState? {
        var reader = StateReader(bytes)
        guard let frame = reader.readInt32(), let playerCount = reader.readInt32(), (2 ... 8).contains(playerCount),
              let random = reader.readUInt64() else { return nil }
        var ships = FixedArray8(repeating: Ship(x: 0, y: 0, active: false))
        for slot in 0 ..< 8 {
            var values = [Int32]()
            for _ in 0 ..< 8 {
                guard let value = reader.readInt32() else { return nil }
                values.append(value)
            }
            guard let active = reader.readUInt8(), active <= 1 else { return nil }
            var ship = Ship(x: values[0], y: values[1], active: active == 1)
            ship.vx = values[2]
            ship.vy = values[3]
            ship.score = values[4]
            ship.stun = values[5]
            ship.dash = values[6]
            ship.cooldown = values[7]
            ships[slot] = ship
        }
        var pellets = FixedArray8(repeating: Pellet(x: 0, y: 0))
        for index in 0 ..< 8 {
            guard let x = reader.readInt32(), let y = reader.readInt32() else { return nil }
            pellets[index] = Pellet(x: x, y: y)
        }
        guard reader.isAtEnd else { return nil }
        let state = ArenaState(frame: frame, playerCount: playerCount, random: random, ships: ships, pellets: pellets)
        return isPlayable(state) ? state : nil
    }

    /// Whether every value lies where the simulation can take it without overflowing: ships
    /// within an arena's size of the arena (collisions push them past the walls a little),
    /// moving less than an arena a frame, timers within their lengths, pellets inside, a
    /// non-zero generator. Every state the simulation reaches from one passes.
    public static func isPlayable(_ state: ArenaState) -> Bool {
        let width = FixedPoint.units(Self.width), height = FixedPoint.units(Self.height)
        guard (2 ... 8).contains(state.playerCount), state.random != 0 else { return false }
        for slot in 0 ..< 8 {
            let ship = state.ships[slot]
            guard (-width ... 2 * width).contains(ship.x), (-height ... 2 * height).contains(ship.y),
                  (-width ... width).contains(ship.vx), (-width ... width).contains(ship.vy),
                  (0 ... stunFrames).contains(ship.stun), (0 ... dashFrames).contains(ship.dash),
                  (0 ... dashCooldown).contains(ship.cooldown) else { return false }
        }
        for index in 0 ..< 8 {
            guard (0 ... width).contains(state.pellets[index].x), (0 ... height).contains(state.pellets[index].y) else { return false }
        }
        return true
    }
}
