import Rollback

/// The arena's controls, one bit each in the first input byte.
public struct ArenaInput: OptionSet, Sendable, Hashable {
    /// The control bits.
    public let rawValue: UInt8
    /// Creates controls from their bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Thrust up.
    public static let up = ArenaInput(rawValue: 1 << 0)
    /// Thrust down.
    public static let down = ArenaInput(rawValue: 1 << 1)
    /// Thrust left.
    public static let left = ArenaInput(rawValue: 1 << 2)
    /// Thrust right.
    public static let right = ArenaInput(rawValue: 1 << 3)
    /// Dash in the direction of motion.
    public static let dash = ArenaInput(rawValue: 1 << 4)

    /// The engine input for these controls.
    public var gameInput: GameInput { GameInput(low: UInt64(rawValue)) }

    /// Controls read from an engine input.
    public init(_ input: GameInput) { self.init(rawValue: input[byte: 0] & 0x1F) }
}
