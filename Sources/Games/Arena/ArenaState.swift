import MemberwiseInit

/// One player's ship. Positions and velocities are 16.16 fixed point, in arena units.
public struct Ship: Sendable, Hashable, BitwiseCopyable {
    /// Position.
    public var x: Int32
    /// Position.
    public var y: Int32
    /// Velocity per frame.
    public var vx: Int32
    /// Velocity per frame.
    public var vy: Int32
    /// Points.
    public var score: Int32
    /// Frames left without control after being rammed.
    public var stun: Int32
    /// Frames left of an active dash (a dashing ship scores when it rams another).
    public var dash: Int32
    /// Frames until the next dash is allowed.
    public var cooldown: Int32
    /// Whether the ship is in play (players beyond the player count and disconnected ones are not).
    public var active: Bool

    /// A ship at rest at (`x`, `y`).
    public init(x: Int32, y: Int32, active: Bool) {
        self.x = x
        self.y = y
        vx = 0
        vy = 0
        score = 0
        stun = 0
        dash = 0
        cooldown = 0
        self.active = active
    }
}

/// A collectible worth one point; it respawns elsewhere when collected.
@PublicMemberwiseInit
public struct Pellet: Sendable, Hashable, BitwiseCopyable {
    /// Position.
    public var x: Int32
    /// Position.
    public var y: Int32
}

/// The whole arena: a few hundred bytes held inline, so saving and loading is a memory copy.
public struct ArenaState: Sendable, Equatable, BitwiseCopyable {
    /// Frames simulated.
    public var frame: Int32
    /// Players in the match (2 ... 8).
    public var playerCount: Int32
    /// The arena's own random state (pellet respawns), part of the state so it rolls back.
    public var random: UInt64
    /// Ships, one per player slot.
    public var ships: FixedArray8<Ship>
    /// Pellets.
    public var pellets: FixedArray8<Pellet>
}
