/// Writes a game state as little-endian integers, for state transfer and replays.
public struct StateWriter: Sendable {
    /// The bytes written so far.
    public private(set) var bytes: [UInt8] = []

    /// An empty writer.
    public init() {}

    /// Appends one byte.
    public mutating func write(_ value: UInt8) { bytes.append(value) }

    /// Appends a 32-bit integer.
    public mutating func write(_ value: Int32) { write(UInt32(bitPattern: value)) }

    /// Appends an unsigned 32-bit integer.
    public mutating func write(_ value: UInt32) { writeLittleEndian(value) }

    /// Appends an unsigned 64-bit integer.
    public mutating func write(_ value: UInt64) { writeLittleEndian(value) }

    /// Appends `value` least significant byte first.
    private mutating func writeLittleEndian<Value: FixedWidthInteger & UnsignedInteger>(_ value: Value) {
        var v = value
        for _ in 0 ..< MemoryLayout<Value>.size {
            bytes.append(UInt8(truncatingIfNeeded: v))
            v >>= 8
        }
    }
}

/// Reads what ``StateWriter`` wrote; every read fails (returns nil) past the end.
public struct StateReader: Sendable {
    private let bytes: [UInt8]
    private var offset = 0

    /// A reader over `bytes`.
    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Whether every byte was consumed.
    public var isAtEnd: Bool { offset == bytes.count }

    /// Reads one byte.
    public mutating func readUInt8() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// Reads an unsigned 32-bit integer.
    public mutating func readUInt32() -> UInt32? { readLittleEndian() }

    /// Reads a 32-bit integer.
    public mutating func readInt32() -> Int32? { readUInt32().map { Int32(bitPattern: $0) } }

    /// Reads an unsigned 64-bit integer.
    public mutating func readUInt64() -> UInt64? { readLittleEndian() }

    /// Reads an unsigned integer stored least significant byte first.
    private mutating func readLittleEndian<Value: FixedWidthInteger & UnsignedInteger>() -> Value? {
        let size = MemoryLayout<Value>.size
        guard offset + size <= bytes.count else { return nil }
        var value: Value = 0
        for index in 0 ..< size { value |= Value(bytes[offset + index]) << (8 * index) }
        offset += size
        return value
    }
}

/// A game whose state can be turned into bytes and back: what a state transfer (resync,
/// late join) or a replay file needs.
public protocol SerializableGame: Game {
    /// The state as bytes.
    static func encode(_ state: State) -> [UInt8]
    /// The state from bytes, or nil if they are not a valid state.
    static func decode(_ bytes: [UInt8]) -> State?
    /// Loads a state that came from elsewhere (a peer, a relay, a file). A game that can still
    /// refuse a state that decoded (a libretro core refusing a corrupt serialization) throws, and
    /// stays as it was; the caller refuses the state instead of the process trapping. By default,
    /// ``Game/loadState(_:)``.
    mutating func loadForeignState(_ state: State) throws
}

extension SerializableGame {
    /// ``Game/loadState(_:)``: a state that decoded always loads.
    public mutating func loadForeignState(_ state: State) throws { loadState(state) }
}

/// Where a game writes its state field by field, least significant byte first. A ``StateWriter``
/// keeps the bytes (state transfer, replays); a ``StateHasher`` hashes them (``Game/checksum()``).
/// A game that writes its state once, generic over the sink, gets both from one field order, and
/// its checksum is the FNV-1a hash of its encoding.
public protocol StateSink {
    /// Writes one byte.
    mutating func write(_ value: UInt8)
    /// Writes a 32-bit integer.
    mutating func write(_ value: Int32)
    /// Writes a 64-bit unsigned integer.
    mutating func write(_ value: UInt64)
}

extension StateWriter: StateSink {}

extension StateHasher: StateSink {
    /// Mixes one byte.
    @inlinable public mutating func write(_ value: UInt8) { combine(byte: value) }
    /// Mixes a 32-bit integer's 4 bytes.
    @inlinable public mutating func write(_ value: Int32) { combine(value) }
    /// Mixes a 64-bit integer's 8 bytes.
    @inlinable public mutating func write(_ value: UInt64) { combine(value) }
}
