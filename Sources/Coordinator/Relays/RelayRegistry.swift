import NetplayService
import NetplayWire

/// The relay (sync replica) registry: replicas register and refresh with their load; a new
/// session goes to the live replica nearest its players (their measured round trips), the
/// least-loaded one between equals; a replica that misses its TTL is dropped (its sessions fail
/// over to another). Pure logic on the reactor thread; time is passed in as monotonic milliseconds.
public final class RelayRegistry {
    /// One relay as tracked.
    public struct Entry: Sendable, Equatable {
        /// What the relay reported (load, draining, endpoints).
        public var info: RelayInfo
        /// Monotonic time of the last registration or refresh.
        public var lastSeenMs: UInt64
    }

    /// Milliseconds without a refresh before a relay is dropped.
    public let ttlMs: UInt32
    /// The refresh interval relays are told to keep.
    public let refreshIntervalMs: UInt32
    /// How round trips and load weigh in ``pick(region:rtts:nowMs:)``.
    public var choice = RelayChoicePolicy()
    private(set) var entries: [String: Entry] = [:]
    /// Active sessions assigned to each relay by this coordinator (kept by the owner).
    public var assigned: [String: Int] = [:]
    /// Per relay, sessions it should close, each with whether it moved to another relay.
    private var pendingClose: [String: [String: Bool]] = [:]

    /// Creates an empty registry.
    public init(ttlMs: UInt32, refreshIntervalMs: UInt32) {
        self.ttlMs = ttlMs
        self.refreshIntervalMs = refreshIntervalMs
    }

    /// Relays currently registered (stale ones included until swept).
    public var relays: [Entry] { entries.values.sorted { $0.info.relayId < $1.info.relayId } }

    /// The entry for `relayId`.
    public func entry(_ relayId: String) -> Entry? { entries[relayId] }

    /// True when `relayId` is registered and within its TTL at `nowMs`.
    public func isLive(_ relayId: String, nowMs: UInt64) -> Bool {
        guard let entry = entries[relayId] else { return false }
        return nowMs < entry.lastSeenMs + UInt64(ttlMs)
    }

    /// Restores relays from storage after a restart, each given a fresh TTL to refresh within.
    public func restore(_ infos: [RelayInfo], nowMs: UInt64) {
        for info in infos { entries[info.relayId] = Entry(info: info, lastSeenMs: nowMs) }
    }

    /// Registers (or re-registers) a relay. Returns whether it was new.
    @discardableResult
    public func register(_ info: RelayInfo, nowMs: UInt64, nowUnixMs: UInt64) -> Bool {
        let isNew = entries[info.relayId] == nil
        entries[info.relayId] = Entry(info: registration(of: info, nowUnixMs: nowUnixMs), lastSeenMs: nowMs)
        return isNew
    }

    /// What ``register(_:nowMs:nowUnixMs:)`` keeps of `info`: seen now, with a load.
    public func registration(of info: RelayInfo, nowUnixMs: UInt64) -> RelayInfo {
        var info = info
        info.lastSeenUnixMs = nowUnixMs
        if info.load == nil { info.load = RelayLoad() }
        return info
    }

    /// Applies a refresh. NOT_FOUND when the relay is unknown (it must register again). Returns
    /// the relay's updated info and whether its draining flag changed.
    public func refresh(_ request: RefreshRelayRequest, nowMs: UInt64, nowUnixMs: UInt64) throws(ServiceError) -> (RelayInfo, drainingChanged: Bool) {
        guard var entry = entries[request.relayId] else {
            throw ServiceError(.notFound, "Relay '\(request.relayId)' is not registered (dropped after its TTL?); register again.",
                               field: "RefreshRelayRequest.relay_id")
        }
        let changed = entry.info.draining != request.draining
        entry.info.load = request.load
        entry.info.draining = request.draining
        entry.info.lastSeenUnixMs = nowUnixMs
        entry.lastSeenMs = nowMs
        entries[request.relayId] = entry
        return (entry.info, changed)
    }

    /// Removes and returns every relay past its TTL at `nowMs`.
    public func sweep(nowMs: UInt64) -> [RelayInfo] {
        let stale = entries.values.filter { nowMs >= $0.lastSeenMs + UInt64(ttlMs) }.map(\.info)
        for info in stale {
            entries[info.relayId] = nil
            pendingClose[info.relayId] = nil
        }
        return stale.sorted { $0.relayId < $1.relayId }
    }

    /// The relay for a session: among live relays that accept sessions (not draining, below
    /// capacity), the one whose worst round trip among `rtts` (one map a player: relay id ->
    /// measured round trip, microseconds) is smallest. Relays within ``RelayChoicePolicy/rttToleranceUs``
    /// of that count as equally near; a relay at or above ``RelayChoicePolicy/loadCapPercent`` of its
    /// capacity is taken only when every candidate is. Between equals: a relay in `region`, then
    /// the least loaded (``pickLeastLoaded(_:)``). A relay some player did not measure ranks
    /// after every relay all of them measured. Without measurements: relays in `region` when
    /// any is available, the least loaded of them.
    public func pick(region: String, rtts: [[String: UInt32]] = [], nowMs: UInt64) -> RelayInfo? {
        let candidates = entries.values.filter { entry in
            guard nowMs < entry.lastSeenMs + UInt64(ttlMs), !entry.info.draining else { return false }
            let capacity = entry.info.load?.capacitySessions ?? 0
            return capacity == 0 || sessions(of: entry) < Int(capacity)
        }
        let measured = rtts.filter { !$0.isEmpty }
        guard !measured.isEmpty else {
            let regional = region.isEmpty ? [] : candidates.filter { $0.info.region == region }
            return pickLeastLoaded(regional.isEmpty ? candidates : regional)?.info
        }
        let uncapped = candidates.filter { !isOverLoadCap($0) }
        let pool = uncapped.isEmpty ? candidates : uncapped
        let worst = Dictionary(uniqueKeysWithValues: pool.map { ($0.info.relayId, Self.worstRtt(to: $0.info.relayId, among: measured)) })
        guard let best = worst.values.min() else { return nil }
        let tolerance = UInt64(choice.rttToleranceUs)
        let limit = best > UInt64.max - tolerance ? UInt64.max : best + tolerance
        let near = pool.filter { worst[$0.info.relayId]! <= limit }
        let regional = region.isEmpty ? [] : near.filter { $0.info.region == region }
        return pickLeastLoaded(regional.isEmpty ? near : regional)?.info
    }

    /// The largest round trip to `relayId` among `rtts` (microseconds; `UInt64.max` when a
    /// player did not measure it).
    public static func worstRtt(to relayId: String, among rtts: [[String: UInt32]]) -> UInt64 {
        rtts.reduce(0) { worst, player in max(worst, player[relayId].map(UInt64.init) ?? .max) }
    }

    /// Whether a relay is at or above the load cap of its capacity (never without a capacity).
    private func isOverLoadCap(_ entry: Entry) -> Bool {
        let capacity = entry.info.load?.capacitySessions ?? 0
        return capacity > 0 && sessions(of: entry) * 100 >= Int(capacity) * Int(choice.loadCapPercent)
    }

    /// Fewest sessions (the larger of what a relay reported and what this coordinator assigned),
    /// relative to capacity when one is set; then fewest peers; then relay id.
    private func pickLeastLoaded(_ pool: [Entry]) -> Entry? {
        pool.min { a, b in
            let (la, lb) = (score(a), score(b))
            if la != lb { return la < lb }
            let (pa, pb) = (a.info.load?.peers ?? 0, b.info.load?.peers ?? 0)
            if pa != pb { return pa < pb }
            return a.info.relayId < b.info.relayId
        }
    }

    private func sessions(of entry: Entry) -> Int {
        max(Int(entry.info.load?.sessions ?? 0), assigned[entry.info.relayId, default: 0])
    }

    private func score(_ entry: Entry) -> Double {
        let capacity = entry.info.load?.capacitySessions ?? 0
        let count = Double(sessions(of: entry))
        return capacity == 0 ? count : count / Double(capacity) * 1_000_000
    }

    /// Notes that `relayId` should close `sessionId` (`moved`: it moved to another relay; else it
    /// ended); it learns so in its next refresh reply.
    public func scheduleClose(_ sessionId: String, on relayId: String, moved: Bool = false) {
        guard !relayId.isEmpty, entries[relayId] != nil else { return }
        pendingClose[relayId, default: [:]][sessionId] = moved
    }

    /// Forgets a close of `sessionId` queued for `relayId`: the session is that relay's again (it
    /// moved away and back before the relay's next refresh took the close).
    public func cancelClose(_ sessionId: String, on relayId: String) {
        guard pendingClose[relayId]?.removeValue(forKey: sessionId) != nil else { return }
        if pendingClose[relayId]?.isEmpty == true { pendingClose[relayId] = nil }
    }

    /// Takes (up to 1000 of) the sessions `relayId` should close, and which of them moved.
    public func takeCloses(for relayId: String) -> (close: [String], moved: [String]) {
        guard var pending = pendingClose[relayId], !pending.isEmpty else { return ([], []) }
        let batch = Array(pending.keys.sorted().prefix(1000))
        let moved = batch.filter { pending[$0] == true }
        for id in batch { pending[id] = nil }
        pendingClose[relayId] = pending.isEmpty ? nil : pending
        return (batch, moved)
    }
}
