/// Token buckets per key (announcer, session, address): each key may spend `burst` at once and
/// regains `ratePerSecond`. Time is passed in (monotonic seconds), so the logic is testable and
/// free of clocks. Idle full buckets are pruned to bound memory.
public struct RateLimiter<Key: Hashable & Sendable>: Sendable {
    /// Tokens regained per second.
    public let ratePerSecond: Double
    /// Bucket capacity.
    public let burst: Double
    /// Keys tracked at most; beyond it, full buckets are pruned, then new keys are refused.
    public let maxKeys: Int

    private var buckets: [Key: Bucket] = [:]

    private struct Bucket: Sendable {
        var tokens: Double
        var updated: Double
    }

    /// The outcome of ``take(_:cost:now:)``.
    public enum Decision: Sendable, Equatable {
        /// Spent; go ahead.
        case allowed
        /// Not enough tokens: retry after this many milliseconds.
        case limited(retryAfterMs: UInt32)
    }

    /// Creates a limiter. A zero or negative rate disables limiting (every take is allowed).
    public init(ratePerSecond: Double, burst: Double, maxKeys: Int = 100_000) {
        self.ratePerSecond = ratePerSecond
        self.burst = max(burst, 1)
        self.maxKeys = maxKeys
    }

    /// Number of keys tracked.
    public var trackedKeys: Int { buckets.count }

    /// Spends `cost` tokens of `key` if it has them.
    public mutating func take(_ key: Key, cost: Double = 1, now: Double) -> Decision {
        guard ratePerSecond > 0 else { return .allowed }
        var bucket = refreshed(key, now: now)
        if buckets[key] == nil, buckets.count >= maxKeys {
            prune(now: now)
            if buckets.count >= maxKeys { return .limited(retryAfterMs: 1000) }
        }
        if bucket.tokens >= cost {
            bucket.tokens -= cost
            buckets[key] = bucket
            return .allowed
        }
        buckets[key] = bucket
        let missing = cost - bucket.tokens
        return .limited(retryAfterMs: UInt32(min(3_600_000, max(1, (missing / ratePerSecond * 1000).rounded(.up)))))
    }

    /// What ``take(_:cost:now:)`` would decide, without spending.
    public func check(_ key: Key, cost: Double = 1, now: Double) -> Decision {
        guard ratePerSecond > 0 else { return .allowed }
        let bucket = refreshed(key, now: now)
        if bucket.tokens >= cost { return .allowed }
        return .limited(retryAfterMs: UInt32(min(3_600_000, max(1, ((cost - bucket.tokens) / ratePerSecond * 1000).rounded(.up)))))
    }

    /// Gives `cost` tokens back to `key` (a reservation that was not used), up to the burst.
    public mutating func refund(_ key: Key, cost: Double = 1, now: Double) {
        guard ratePerSecond > 0, buckets[key] != nil else { return }
        var bucket = refreshed(key, now: now)
        bucket.tokens = min(burst, bucket.tokens + cost)
        buckets[key] = bucket
    }

    /// Forgets `key`'s bucket.
    public mutating func remove(_ key: Key) {
        buckets[key] = nil
    }

    /// Forgets every bucket that has refilled completely.
    public mutating func prune(now: Double) {
        buckets = buckets.filter { key, _ in refreshed(key, now: now).tokens < burst }
    }

    private func refreshed(_ key: Key, now: Double) -> Bucket {
        guard var bucket = buckets[key] else { return Bucket(tokens: burst, updated: now) }
        if now > bucket.updated {
            bucket.tokens = min(burst, bucket.tokens + (now - bucket.updated) * ratePerSecond)
            bucket.updated = now
        }
        return bucket
    }
}
