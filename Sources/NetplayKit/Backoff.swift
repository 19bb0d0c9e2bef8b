import Rollback

/// Exponential backoff with jitter for reconnecting: attempt `n` waits a random time between
/// half and all of `min(cap, base * 2^n)`, so many clients losing the same relay do not return
/// in lockstep.
public struct Backoff: Sendable {
    /// The first delay, milliseconds.
    public var baseMs: Int
    /// The longest delay, milliseconds.
    public var capMs: Int
    /// Attempts before giving up.
    public var maxAttempts: Int
    private var random: SeededRandom

    /// A backoff starting at `baseMs`, capped at `capMs`, giving up after `maxAttempts`.
    public init(baseMs: Int = 100, capMs: Int = 4_000, maxAttempts: Int = 12, seed: UInt64 = UInt64.random(in: 1 ... .max)) {
        self.baseMs = baseMs
        self.capMs = capMs
        self.maxAttempts = maxAttempts
        random = SeededRandom(seed: seed)
    }

    /// The delay before attempt `attempt` (0-based).
    public mutating func delayMs(attempt: Int) -> Int {
        let ceiling = min(capMs, baseMs << min(attempt, 20))
        let half = ceiling / 2
        return half + Int(random.below(UInt64(max(ceiling - half, 1))))
    }
}
