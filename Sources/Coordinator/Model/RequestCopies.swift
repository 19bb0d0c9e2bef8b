/// Copies of a request that arrive while the first is still being served off the reactor (a
/// password create or join waiting for its hash, resent by a client on a slow or lossy path):
/// each copy waits for the first's answer instead of being hashed, rate-limited and charged a
/// password attempt again. The caller keys a request by everything that decides its answer (the
/// sender's address and the whole request, password and idempotency key included), so a copy is
/// told exactly what its own check would have told it.
///
/// Bounded: a request has at most ``maxCopies`` copies waiting, and only requests being served
/// are kept (the hashing queue bounds those). Pure bookkeeping; reactor thread only.
public struct RequestCopies<Key: Hashable, Waiter> {
    /// Copies that may wait for one request at most.
    public let maxCopies: Int
    private var waiting: [Key: [Waiter]] = [:]

    /// No request in flight.
    public init(maxCopies: Int) {
        self.maxCopies = max(0, maxCopies)
    }

    /// Requests being served now.
    public var inFlight: Int { waiting.count }

    /// Whether the request `key` is being served (so one arriving now is a copy).
    public func isServing(_ key: Key) -> Bool { waiting[key] != nil }

    /// The request `key` is being served from now on (its first arrival).
    public mutating func begin(_ key: Key) {
        if waiting[key] == nil { waiting[key] = [] }
    }

    /// A copy of `key` waits for its answer; false when `key` is not being served or already has
    /// ``maxCopies`` copies waiting (nothing is kept then).
    public mutating func wait(_ copy: Waiter, for key: Key) -> Bool {
        guard var copies = waiting[key], copies.count < maxCopies else { return false }
        copies.append(copy)
        waiting[key] = copies
        return true
    }

    /// The request `key` was answered: the copies to give the same answer, oldest first.
    public mutating func finish(_ key: Key) -> [Waiter] {
        waiting.removeValue(forKey: key) ?? []
    }
}
