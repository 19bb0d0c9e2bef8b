/// One player's input for one frame: up to ``maxSize`` (16) bytes held inline in two words.
///
/// `GameInput` is a 16-byte value with no heap storage, so copying, comparing and storing
/// inputs never allocates. A session is configured with an input size (1 ... 16 bytes);
/// bytes at or beyond that size are always zero (sessions mask them off). Byte `i` is bits
/// `8*i ..< 8*i + 8` of ``low`` for `i < 8` and of ``high`` otherwise (little-endian order),
/// which is also the order ``pack(_:size:)`` writes to the wire.
@frozen
public struct GameInput: Hashable, Sendable, CustomStringConvertible {
    /// Bytes 0 ..< 8.
    public var low: UInt64
    /// Bytes 8 ..< 16.
    public var high: UInt64

    /// The largest input size a session accepts, in bytes.
    public static let maxSize = 16

    /// The all-zero input: nothing pressed. Also the input of a disconnected player.
    public static let zero = GameInput(low: 0, high: 0)

    /// Creates an input from its two words.
    @inlinable
    public init(low: UInt64, high: UInt64 = 0) {
        self.low = low
        self.high = high
    }

    /// Creates an input whose first bytes are `bytes` (at most ``maxSize``; extra bytes are ignored).
    @inlinable
    public init<S: Sequence>(bytes: S) where S.Element == UInt8 {
        self = .zero
        var index = 0
        for byte in bytes {
            if index == GameInput.maxSize { break }
            self[byte: index] = byte
            index += 1
        }
    }

    /// Reads or writes byte `index` (0 ..< 16).
    @inlinable
    public subscript(byte index: Int) -> UInt8 {
        get {
            precondition(index >= 0 && index < GameInput.maxSize, "GameInput byte index out of range")
            let word = index < 8 ? low : high
            return UInt8(truncatingIfNeeded: word >> UInt64((index & 7) * 8))
        }
        set {
            precondition(index >= 0 && index < GameInput.maxSize, "GameInput byte index out of range")
            let shift = UInt64((index & 7) * 8)
            let mask: UInt64 = 0xFF << shift
            let bits = UInt64(newValue) << shift
            if index < 8 {
                low = (low & ~mask) | bits
            } else {
                high = (high & ~mask) | bits
            }
        }
    }

    /// Tests bit `bit` (0 ..< 128); convenient for button masks.
    @inlinable
    public func isSet(_ bit: Int) -> Bool {
        bit < 64 ? (low >> UInt64(bit)) & 1 == 1 : (high >> UInt64(bit - 64)) & 1 == 1
    }

    /// This input with every byte at or beyond `size` cleared.
    @inlinable
    public func masked(toSize size: Int) -> GameInput {
        if size >= 16 { return self }
        if size >= 8 {
            let keep: UInt64 = size == 8 ? 0 : (1 << UInt64((size - 8) * 8)) &- 1
            return GameInput(low: low, high: high & keep)
        }
        let keep: UInt64 = size <= 0 ? 0 : (1 << UInt64(size * 8)) &- 1
        return GameInput(low: low & keep, high: 0)
    }

    /// The first `size` bytes.
    public func bytes(size: Int = GameInput.maxSize) -> [UInt8] {
        (0 ..< min(max(size, 0), GameInput.maxSize)).map { self[byte: $0] }
    }

    public var description: String {
        high == 0 ? "GameInput(0x\(String(low, radix: 16)))"
            : "GameInput(0x\(String(high, radix: 16)):\(String(low, radix: 16)))"
    }

    /// Concatenates the first `size` bytes of every input: the wire form of an input run.
    public static func pack(_ inputs: [GameInput], size: Int) -> [UInt8] {
        precondition(size >= 1 && size <= maxSize, "input size must be 1 ... 16")
        var out = [UInt8]()
        out.reserveCapacity(inputs.count * size)
        for input in inputs {
            for index in 0 ..< size { out.append(input[byte: index]) }
        }
        return out
    }

    /// Splits bytes written by ``pack(_:size:)``; returns nil when the length is not a multiple of `size`.
    public static func unpack(_ bytes: [UInt8], size: Int) -> [GameInput]? {
        guard size >= 1, size <= maxSize, bytes.count % size == 0 else { return nil }
        var out = [GameInput]()
        out.reserveCapacity(bytes.count / size)
        var start = 0
        while start < bytes.count {
            out.append(GameInput(bytes: bytes[start ..< start + size]))
            start += size
        }
        return out
    }
}
