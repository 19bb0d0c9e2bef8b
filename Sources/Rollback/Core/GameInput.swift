/// One player's input for one frame: up to ``maxSize`` (64) bytes held inline in eight words.
///
/// `GameInput` is a 64-byte value with no heap storage, so copying, comparing and storing
/// inputs never allocates. A session is configured with an input size (1 ... 64 bytes, the
/// wire's limit: a joypad needs 2, a joypad with two analog sticks 10, several devices more);
/// bytes at or beyond that size are always zero (sessions mask them off). Byte `i` is bits
/// `8*(i%8) ..< 8*(i%8) + 8` of word `i/8` (little-endian order); word 0 is ``low``, word 1
/// ``high``. That is also the order ``pack(_:size:)`` writes to the wire.
@frozen
public struct GameInput: Hashable, Sendable, CustomStringConvertible {
    /// The eight words, word `w` holding bytes `8*w ..< 8*w + 8`.
    public var words: SIMD8<UInt64>

    /// The largest input size a session accepts, in bytes (the wire's limit).
    public static let maxSize = 64

    /// The all-zero input: nothing pressed. Also the input of a disconnected player.
    public static let zero = GameInput(words: SIMD8<UInt64>())

    /// Bytes 0 ..< 8.
    @inlinable public var low: UInt64 {
        get { words[0] }
        set { words[0] = newValue }
    }

    /// Bytes 8 ..< 16.
    @inlinable public var high: UInt64 {
        get { words[1] }
        set { words[1] = newValue }
    }

    /// Creates an input from its eight words.
    @inlinable
    public init(words: SIMD8<UInt64>) { self.words = words }

    /// Creates an input from its first two words (bytes 0 ..< 16); the rest are zero.
    @inlinable
    public init(low: UInt64, high: UInt64 = 0) {
        words = SIMD8(low, high, 0, 0, 0, 0, 0, 0)
    }

    /// Creates an input whose first bytes are `bytes` (at most ``maxSize``; extra bytes are ignored).
    @inlinable
    public init<S: Sequence>(bytes: S) where S.Element == UInt8 {
        self = GameInput(words: SIMD8<UInt64>())
        var index = 0
        for byte in bytes {
            if index == GameInput.maxSize { break }
            words[index &>> 3] |= UInt64(byte) << UInt64((index & 7) &* 8)
            index += 1
        }
    }

    @inlinable
    public static func == (lhs: GameInput, rhs: GameInput) -> Bool {
        all(lhs.words .== rhs.words)
    }

    @inlinable
    public func hash(into hasher: inout Hasher) {
        for index in 0 ..< 8 { hasher.combine(words[index]) }
    }

    /// Reads or writes byte `index` (0 ..< 64).
    @inlinable
    public subscript(byte index: Int) -> UInt8 {
        get {
            precondition(index >= 0 && index < GameInput.maxSize, "GameInput byte index out of range")
            return UInt8(truncatingIfNeeded: words[index &>> 3] >> UInt64((index & 7) &* 8))
        }
        set {
            precondition(index >= 0 && index < GameInput.maxSize, "GameInput byte index out of range")
            let shift = UInt64((index & 7) &* 8)
            let word = index &>> 3
            words[word] = (words[word] & ~(0xFF << shift)) | (UInt64(newValue) << shift)
        }
    }

    /// Tests bit `bit` (0 ..< 512); convenient for button masks.
    @inlinable
    public func isSet(_ bit: Int) -> Bool {
        (words[bit &>> 6] >> UInt64(bit & 63)) & 1 == 1
    }

    /// The bitwise AND of two inputs (a mask of held buttons, say).
    @inlinable
    public static func & (lhs: GameInput, rhs: GameInput) -> GameInput {
        GameInput(words: lhs.words & rhs.words)
    }

    /// This input with every byte at or beyond `size` cleared.
    @inlinable
    public func masked(toSize size: Int) -> GameInput {
        if size >= GameInput.maxSize { return self }
        if size <= 16 {
            // The common sizes: only the first two words can be non-zero afterwards.
            if size >= 8 {
                let keep: UInt64 = size == 8 ? 0 : (size == 16 ? ~0 : (1 << UInt64((size - 8) * 8)) &- 1)
                return GameInput(low: words[0], high: words[1] & keep)
            }
            let keep: UInt64 = size <= 0 ? 0 : (1 << UInt64(size * 8)) &- 1
            return GameInput(low: words[0] & keep, high: 0)
        }
        var mask = SIMD8<UInt64>()
        for word in 0 ..< 8 {
            let first = word * 8
            if size >= first + 8 {
                mask[word] = ~0
            } else if size > first {
                mask[word] = (1 << UInt64((size - first) * 8)) &- 1
            }
        }
        return GameInput(words: words & mask)
    }

    /// The first `size` bytes.
    public func bytes(size: Int = GameInput.maxSize) -> [UInt8] {
        (0 ..< min(max(size, 0), GameInput.maxSize)).map { self[byte: $0] }
    }

    public var description: String {
        var used = 8
        while used > 1 && words[used - 1] == 0 { used -= 1 }
        let text = (0 ..< used).reversed().map { String(words[$0], radix: 16) }.joined(separator: ":")
        return "GameInput(0x\(text))"
    }

    /// Concatenates the first `size` bytes of every input: the wire form of an input run.
    public static func pack(_ inputs: [GameInput], size: Int) -> [UInt8] {
        precondition(size >= 1 && size <= maxSize, "input size must be 1 ... 64")
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
