import Rollback
import Testing

@Suite("GameInput")
struct GameInputTests {
    @Test("bytes read back in order across both words")
    func bytes() {
        let input = GameInput(bytes: Array(1 ... 16))
        #expect((0 ..< 16).map { input[byte: $0] } == Array(1 ... 16))
        #expect(input.low == 0x0807_0605_0403_0201)
        #expect(input.high == 0x100F_0E0D_0C0B_0A09)
        var copy = input
        copy[byte: 9] = 0xAA
        #expect(copy[byte: 9] == 0xAA && copy[byte: 8] == 9 && copy[byte: 10] == 11)
    }

    @Test("masking clears bytes at and beyond the size", arguments: [1, 3, 8, 9, 15, 16])
    func masking(size: Int) {
        let input = GameInput(low: .max, high: .max).masked(toSize: size)
        for index in 0 ..< 16 { #expect(input[byte: index] == (index < size ? 0xFF : 0)) }
    }

    @Test("pack and unpack round-trip runs of inputs", arguments: [1, 2, 5, 16])
    func packing(size: Int) {
        var random = SeededRandom(seed: UInt64(size))
        let inputs = (0 ..< 20).map { _ in GameInput(low: random.next(), high: random.next()).masked(toSize: size) }
        let bytes = GameInput.pack(inputs, size: size)
        #expect(bytes.count == 20 * size)
        #expect(GameInput.unpack(bytes, size: size) == inputs)
        #expect(GameInput.unpack(Array(bytes.dropLast()), size: size) == nil || size == 1)
    }

    @Test("bits")
    func bits() {
        let input = GameInput(low: 0b1010, high: 1)
        #expect(input.isSet(1) && input.isSet(3) && !input.isSet(0) && input.isSet(64) && !input.isSet(65))
    }
}

@Suite("SeededRandom")
struct SeededRandomTests {
    @Test("the same seed gives the same sequence, different seeds differ")
    func reproducible() {
        func sequence(_ seed: UInt64) -> [UInt64] {
            var random = SeededRandom(seed: seed)
            return (0 ..< 8).map { _ in random.next() }
        }
        #expect(sequence(42) == sequence(42))
        #expect(sequence(42) != sequence(43))
    }

    @Test("below stays in range and chance follows its probability")
    func ranges() {
        var random = SeededRandom(seed: 7)
        var maximum: UInt64 = 0
        var hits = 0
        var never = 0
        for _ in 0 ..< 10_000 {
            maximum = max(maximum, random.below(10))
            if random.chance(0.25) { hits += 1 }
            if random.chance(0) { never += 1 }
        }
        #expect(maximum == 9)
        #expect(hits > 2300 && hits < 2700)
        #expect(never == 0)
    }
}
