/// Participants the host removed (kicked or banned), per session, remembered until no ticket
/// issued to them before could still admit them: the relay refuses their attaches meanwhile.
/// Bounded: entries expire, and past the capacity the one expiring soonest is forgotten first.
/// Shared by a relay's sessions; reactor thread only.
final class RevocationBook {
    private struct Key: Hashable {
        let sessionId: String
        let participantId: String
    }

    private var untilUnixMs: [Key: UInt64] = [:]
    let capacity: Int

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Entries held now (expired ones included until the next purge).
    var count: Int { untilUnixMs.count }

    /// Refuses `participantId` in `sessionId` until `untilUnixMs` (wall clock), or longer if it
    /// already was.
    func revoke(sessionId: String, participantId: String, untilUnixMs until: UInt64, nowUnixMs: UInt64) {
        let key = Key(sessionId: sessionId, participantId: participantId)
        if untilUnixMs[key] == nil, untilUnixMs.count >= capacity {
            untilUnixMs = untilUnixMs.filter { $0.value > nowUnixMs }
            if untilUnixMs.count >= capacity, let soonest = untilUnixMs.min(by: { $0.value < $1.value })?.key {
                untilUnixMs.removeValue(forKey: soonest)
            }
        }
        untilUnixMs[key] = max(untilUnixMs[key] ?? 0, until)
    }

    /// Whether `participantId` is refused in `sessionId` at `nowUnixMs`.
    func isRevoked(sessionId: String, participantId: String, nowUnixMs: UInt64) -> Bool {
        let key = Key(sessionId: sessionId, participantId: participantId)
        guard let until = untilUnixMs[key] else { return false }
        guard nowUnixMs < until else {
            untilUnixMs.removeValue(forKey: key)
            return false
        }
        return true
    }

    /// Forgets the entries expired at `nowUnixMs`.
    func purge(nowUnixMs: UInt64) {
        if untilUnixMs.contains(where: { $0.value <= nowUnixMs }) {
            untilUnixMs = untilUnixMs.filter { $0.value > nowUnixMs }
        }
    }
}
