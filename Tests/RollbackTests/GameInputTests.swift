import Rollback
import Testing
import NetplayTestSupport

@Suite("GameInput", .ownThread)
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

@Suite("SeededRandom", .ownThread)
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

@Suite("GameInput up to 64 bytes", .ownThread)
struct WideGameInputTests {
    @Test("all 64 bytes read back in order, word by word")
    func wideBytes() {
        let input = GameInput(bytes: Array(1 ... 64))
        #expect((0 ..< 64).map { input[byte: $0] } == Array(1 ... 64))
        #expect(input.words[7] == 0x403F_3E3D_3C3B_3A39)
        var copy = input
        copy[byte: 63] = 0
        #expect(copy != input && copy[byte: 62] == 63)
        #expect(GameInput(bytes: Array(repeating: UInt8(1), count: 80)).words[7] == 0x0101_0101_0101_0101)
    }

    @Test("masking clears bytes at and beyond sizes past 16", arguments: [17, 24, 31, 40, 63, 64])
    func wideMasking(size: Int) {
        let input = GameInput(words: SIMD8(repeating: .max)).masked(toSize: size)
        for index in 0 ..< 64 { #expect(input[byte: index] == (index < size ? 0xFF : 0)) }
    }

    @Test("pack and unpack round-trip 64-byte inputs")
    func widePacking() {
        let inputs = (0 ..< 10).map { n in GameInput(bytes: (0 ..< 64).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ n) }) }
        let bytes = GameInput.pack(inputs, size: 64)
        #expect(bytes.count == 640)
        #expect(GameInput.unpack(bytes, size: 64) == inputs)
        #expect(GameInput.unpack(Array(bytes.dropLast()), size: 64) == nil)
    }

    @Test("bits past 128 and the description name the high words")
    func wideBits() {
        var input = GameInput.zero
        input[byte: 63] = 0x80
        #expect(input.isSet(511) && !input.isSet(510))
        #expect(input.description.hasPrefix("GameInput(0x8000000000000000:"))
        #expect(Set([input, .zero]).count == 2)
    }

    @Test("a session takes inputs of 1 ... 64 bytes and refuses more")
    func sessionSizes() {
        #expect(SessionConfiguration(playerCount: 2, inputSize: 64).validationError() == nil)
        #expect(SessionConfiguration(playerCount: 2, inputSize: 65).validationError() != nil)
    }

    @Test("negative intervals and sizes past what can be allocated are configuration errors, not traps or endless loops")
    func configurationBounds() throws {
        let changes: [(String, (inout SessionConfiguration) -> Void)] = [
            ("syncRetryMs", { $0.syncRetryMs = -1 }), ("resendIntervalMs", { $0.resendIntervalMs = -1 }),
            ("keepAliveIntervalMs", { $0.keepAliveIntervalMs = -5 }), ("qualityReportIntervalMs", { $0.qualityReportIntervalMs = -1 }),
            ("stateRingCapacity", { $0.stateRingCapacity = 1 << 62; $0.inputHistory = 1 << 20 }),
            ("inputHistory", { $0.inputHistory = 1 << 62 }), ("predictionWindow", { $0.predictionWindow = 5_000; $0.stateRingCapacity = 4_096 }),
        ]
        for (name, change) in changes {
            var configuration = SessionConfiguration(playerCount: 2, inputSize: 2)
            change(&configuration)
            let why = configuration.validationError()
            #expect(why?.hasPrefix(name) == true, "\(name): \(why ?? "accepted")")
            #expect(throws: RollbackError.self) {
                try P2PSession(game: HashGame(), configuration: configuration, players: [.local, .remote(PeerID(2))])
            }
        }
    }
}
