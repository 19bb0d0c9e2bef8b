import Foundation

/// Participants removed from a session (kicked or banned by the host, or gone on their own),
/// remembered until no ticket issued to them before could still admit them: the relay refuses
/// their attaches meanwhile. Bounded: entries expire, and past the capacity the one expiring
/// soonest is forgotten first, a departure's before any kick's (joining and leaving is cheap; it
/// must not push a kick out), and the inserting session's own before another's (or, when it has
/// none, the largest session's), so one session's flood of kicks cannot evict another's. With a ``RevocationJournal`` it outlives the process. Shared by a
/// relay's sessions; reactor thread only.
final class RevocationBook {
    private struct Key: Hashable {
        let sessionId: String
        let participantId: String
    }

    private struct Entry {
        var untilUnixMs: UInt64
        /// The host removed it (kept over departures when the book is full).
        var kicked: Bool
    }

    private var entries: [Key: Entry] = [:]
    let capacity: Int
    /// Where the entries persist (nil: memory only).
    let journal: RevocationJournal?

    /// A book of at most `capacity` entries; with `journal`, holding what it recorded that is
    /// still in force at `nowUnixMs`, and recording every revocation there.
    init(capacity: Int, journal url: URL? = nil, nowUnixMs: UInt64 = 0) {
        self.capacity = max(1, capacity)
        guard let url else {
            journal = nil
            return
        }
        let journal = RevocationJournal(url: url, compactAt: 2 * min(self.capacity, 1 << 40))
        self.journal = journal
        guard let loaded = journal.load() else { return }
        // Merged in one pass (inserting one by one into a full book filtered it each time: about
        // 2 s for a journal of 20,000 lines), then cut to the capacity keeping what eviction
        // would have kept: kicks before departures, the longest-lasting first.
        for line in loaded where line.until > nowUnixMs {
            let key = Key(sessionId: line.session, participantId: line.participant)
            let old = entries[key]
            entries[key] = Entry(untilUnixMs: max(old?.untilUnixMs ?? 0, line.until), kicked: line.kicked || old?.kicked == true)
        }
        if entries.count > self.capacity {
            let kept = entries.sorted { ($0.value.kicked ? 1 : 0, $0.value.untilUnixMs) > ($1.value.kicked ? 1 : 0, $1.value.untilUnixMs) }
            entries = Dictionary(uniqueKeysWithValues: kept.prefix(self.capacity).map { ($0.key, $0.value) })
        }
        journal.rewrite(lines)
    }

    /// The entries as journal lines.
    private var lines: [RevocationJournal.Line] {
        entries.map { RevocationJournal.Line(session: $0.key.sessionId, participant: $0.key.participantId,
                                             until: $0.value.untilUnixMs, kicked: $0.value.kicked) }
    }

    /// Entries held now (expired ones included until the next purge).
    var count: Int { entries.count }

    /// Refuses `participantId` in `sessionId` until `untilUnixMs` (wall clock), or longer if it
    /// already was; `kicked` when the host removed it (else it left).
    func revoke(sessionId: String, participantId: String, untilUnixMs until: UInt64, kicked: Bool = true, nowUnixMs: UInt64) {
        let key = Key(sessionId: sessionId, participantId: participantId)
        guard let entry = insert(key, until: until, kicked: kicked, nowUnixMs: nowUnixMs), let journal else { return }
        if journal.wantsRetry(nowUnixMs: nowUnixMs) {
            // The file was lost to a failed write: written whole again, this entry included.
            purge(nowUnixMs: nowUnixMs)
            journal.rewrite(lines)
            return
        }
        journal.append(RevocationJournal.Line(session: sessionId, participant: participantId,
                                              until: entry.untilUnixMs, kicked: entry.kicked))
        if journal.wantsCompaction {
            purge(nowUnixMs: nowUnixMs)
            journal.rewrite(lines)
        }
    }

    /// Records `key` until `until` (or longer if it already was), making room past the capacity;
    /// nil when it is a departure and the book is full of kicks (a departure never pushes a kick
    /// out).
    @discardableResult
    private func insert(_ key: Key, until: UInt64, kicked: Bool, nowUnixMs: UInt64) -> Entry? {
        if entries[key] == nil, entries.count >= capacity {
            purge(nowUnixMs: nowUnixMs)
            if entries.count >= capacity {
                // Room comes from the inserting session's own entries first, else from the
                // session holding the most: a host kicking sock-puppets by the thousand pushes
                // out its own kicks, not another session's (whose kicked players would be let back in).
                let pool = Self.evictionPool(entries, for: key.sessionId)
                let departures = pool.filter { !$0.value.kicked }
                if departures.isEmpty && !kicked { return nil }
                let candidates = departures.isEmpty ? pool : departures
                if let soonest = candidates.min(by: { $0.value.untilUnixMs < $1.value.untilUnixMs })?.key {
                    entries.removeValue(forKey: soonest)
                }
            }
        }
        let old = entries[key]
        let entry = Entry(untilUnixMs: max(old?.untilUnixMs ?? 0, until), kicked: kicked || old?.kicked == true)
        entries[key] = entry
        return entry
    }

    /// The entries a full book gives room from for an entry of `sessionId`: that session's own,
    /// or when it has none, those of the session holding the most.
    private static func evictionPool(_ entries: [Key: Entry], for sessionId: String) -> [Key: Entry] {
        let own = entries.filter { $0.key.sessionId == sessionId }
        if !own.isEmpty { return own }
        var counts: [String: Int] = [:]
        for key in entries.keys { counts[key.sessionId, default: 0] += 1 }
        guard let largest = counts.max(by: { $0.value < $1.value || ($0.value == $1.value && $0.key > $1.key) })?.key else { return entries }
        return entries.filter { $0.key.sessionId == largest }
    }

    /// Whether `participantId` is refused in `sessionId` at `nowUnixMs`.
    func isRevoked(sessionId: String, participantId: String, nowUnixMs: UInt64) -> Bool {
        let key = Key(sessionId: sessionId, participantId: participantId)
        guard let until = entries[key]?.untilUnixMs else { return false }
        guard nowUnixMs < until else {
            entries.removeValue(forKey: key)
            return false
        }
        return true
    }

    /// Forgets the entries expired at `nowUnixMs`.
    func purge(nowUnixMs: UInt64) {
        if entries.contains(where: { $0.value.untilUnixMs <= nowUnixMs }) {
            entries = entries.filter { $0.value.untilUnixMs > nowUnixMs }
        }
    }
}
