/// A small, fast, seedable random number generator (xoshiro256**, seeded through
/// SplitMix64). The same seed gives the same sequence on every platform, which keeps
/// sessions, the network simulator and property tests reproducible.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var s0: UInt64
    private var s1: UInt64
    private var s2: UInt64
    private var s3: UInt64

    /// A generator whose whole sequence is determined by `seed`.
    public init(seed: UInt64) {
        var mix = seed
        s0 = SeededRandom.splitMix(&mix)
        s1 = SeededRandom.splitMix(&mix)
        s2 = SeededRandom.splitMix(&mix)
        s3 = SeededRandom.splitMix(&mix)
    }

    /// One SplitMix64 step: also a good 64-bit hash of `state`'s sequence.
    public static func splitMix(_ state: inout UInt64) -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Mixes several numbers into one well-distributed 64-bit value (for per-frame seeds).
    public static func hash(_ values: UInt64...) -> UInt64 {
        var state: UInt64 = 0x243F_6A88_85A3_08D3
        var out: UInt64 = 0
        for value in values {
            state ^= value
            out ^= splitMix(&state)
        }
        return out
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        let result = ((s1 &* 5) << 7 | (s1 &* 5) >> 57) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = (s3 << 45) | (s3 >> 19)
        return result
    }

    /// A uniformly distributed value in `0 ..< bound` (bound > 0).
    public mutating func below(_ bound: UInt64) -> UInt64 {
        precondition(bound > 0)
        let (high, _) = next().multipliedFullWidth(by: bound)
        return high
    }

    /// True with probability `probability` (0 ... 1).
    public mutating func chance(_ probability: Double) -> Bool {
        probability > 0 && Double(next() >> 11) / Double(1 << 53) < probability
    }
}
