/// Which LAN rooms (beacon and RetroArch) came from which source address, so that no sender
/// can fill the registry: at most ``maxPerSource`` rooms per source address and ``maxTotal``
/// in all. A new room beyond a bound evicts the room heard least recently: the source's own
/// oldest when the source is at its bound, else the oldest of all. Rooms that left the
/// registry on their own (TTL, goodbye) are forgotten lazily through `isLive`.
struct LanRoomBook {
    /// Rooms one source address may hold.
    let maxPerSource: Int
    /// LAN rooms held in all.
    let maxTotal: Int

    private var rooms: [String: Entry] = [:]
    private var clock: UInt64 = 0

    private struct Entry {
        var source: UInt32
        var heard: UInt64
    }

    /// Creates an empty book (bounds of at least 1).
    init(maxPerSource: Int = 4, maxTotal: Int = 256) {
        self.maxPerSource = max(1, maxPerSource)
        self.maxTotal = max(1, maxTotal)
    }

    /// Rooms tracked.
    var count: Int { rooms.count }

    /// Rooms tracked for `source`.
    func count(from source: UInt32) -> Int { rooms.values.count(where: { $0.source == source }) }

    /// True when `roomId` is tracked as coming from `source`.
    func holds(_ roomId: String, from source: UInt32) -> Bool { rooms[roomId]?.source == source }

    /// Records that `roomId` was heard from `source` now. For a room not yet held, returns the
    /// rooms to evict first so the bounds hold (possibly empty); `isLive` says whether a tracked
    /// room is still in the registry.
    mutating func admit(_ roomId: String, from source: UInt32, isLive: (String) -> Bool) -> [String] {
        clock += 1
        if rooms[roomId] != nil {
            rooms[roomId] = Entry(source: source, heard: clock)
            return []
        }
        rooms = rooms.filter { isLive($0.key) }
        var evicted: [String] = []
        let own = rooms.filter { $0.value.source == source }
        if own.count >= maxPerSource, let oldest = own.min(by: { $0.value.heard < $1.value.heard }) {
            evicted.append(oldest.key)
            rooms[oldest.key] = nil
        } else if rooms.count >= maxTotal, let oldest = rooms.min(by: { $0.value.heard < $1.value.heard }) {
            evicted.append(oldest.key)
            rooms[oldest.key] = nil
        }
        rooms[roomId] = Entry(source: source, heard: clock)
        return evicted
    }

    /// Stops tracking `roomId` (it left, or the registry refused it).
    mutating func forget(_ roomId: String) {
        rooms[roomId] = nil
    }
}
