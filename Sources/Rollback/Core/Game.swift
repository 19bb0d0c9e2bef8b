/// A deterministic simulation the rollback engine can save, restore and step.
///
/// Requirements for correct netplay:
/// - ``advanceFrame(_:)`` must depend only on the current state and the given inputs (and on
///   an input's status only when it is ``InputStatus/disconnected``), never on clocks,
///   randomness outside the state, or addresses.
/// - ``loadState(_:)`` followed by the same inputs must reproduce exactly the same states.
/// - ``checksum()`` is a 64-bit hash of everything that influences future frames.
///   `UInt64` makes accidental collisions negligible; ``StateHasher`` is a ready-made FNV-1a.
///
/// `State` can be any value: a struct copied inline (cheapest), a copy-on-write value, or a
/// byte array produced by an emulator core. The engine stores states in a ring and hands
/// them back unchanged.
public protocol Game {
    /// A snapshot of everything the simulation needs to continue.
    associatedtype State

    /// Captures the current state.
    func saveState() -> State

    /// Restores a state captured by ``saveState()``.
    mutating func loadState(_ state: State)

    /// Simulates one frame with every player's input.
    mutating func advanceFrame(_ inputs: FrameInputs)

    /// A hash of the current state, compared between peers to detect desyncs.
    func checksum() -> UInt64
}

/// An incremental 64-bit FNV-1a hash for writing ``Game/checksum()``.
public struct StateHasher: Sendable {
    /// The hash so far.
    public var value: UInt64 = 0xcbf2_9ce4_8422_2325

    /// Starts an empty hash.
    public init() {}

    /// Mixes one byte.
    @inlinable
    public mutating func combine(byte: UInt8) {
        value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
    }

    /// Mixes the 8 bytes of `word`, least significant first.
    @inlinable
    public mutating func combine(_ word: UInt64) {
        var w = word
        for _ in 0 ..< 8 {
            combine(byte: UInt8(truncatingIfNeeded: w))
            w >>= 8
        }
    }

    /// Mixes a signed integer as 8 bytes.
    @inlinable
    public mutating func combine(_ value: Int) { combine(UInt64(bitPattern: Int64(value))) }

    /// Mixes a 32-bit signed integer as 4 bytes.
    @inlinable
    public mutating func combine(_ value: Int32) {
        var w = UInt32(bitPattern: value)
        for _ in 0 ..< 4 {
            combine(byte: UInt8(truncatingIfNeeded: w))
            w >>= 8
        }
    }

    /// Mixes bytes.
    @inlinable
    public mutating func combine<S: Sequence>(bytes: S) where S.Element == UInt8 {
        for byte in bytes { combine(byte: byte) }
    }
}
