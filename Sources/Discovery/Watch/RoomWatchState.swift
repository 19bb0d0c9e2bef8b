import NetplayWire

/// A watcher's view of the registry, built by the snapshot-then-updates protocol (the ZeroMQ
/// guide's Clone pattern): apply snapshot pages and `rooms.*` events in any interleaving and the
/// view converges on the registry's, never missing or double-counting a change.
///
/// The rule: every room (and every removal) carries a registry sequence; the state remembers the
/// newest sequence it holds per room id (tombstones included) and ignores anything older. Events
/// arriving during the snapshot are applied as they come. A `rooms.sync` whose sequence is newer
/// than anything applied means events were lost: ``needsResync`` turns true and the caller takes a
/// new snapshot.
public struct RoomWatchState: Sendable {
    /// The rooms visible through the filter, by id.
    public private(set) var rooms: [String: Room] = [:]
    /// The highest registry sequence applied (from snapshot pages and events).
    public private(set) var sequence: UInt64 = 0
    /// True when a `rooms.sync` showed that events were lost; take a new snapshot.
    public private(set) var needsResync = false

    private let filter: CompiledRoomFilter
    /// The newest sequence applied per room id. While a snapshot is taken, pages and events
    /// interleave and removed or filtered-out rooms need their entry (an older page must not
    /// bring them back); once it is complete, events arrive in order and only visible rooms
    /// keep one, so a registry's churn does not grow the watcher.
    private var seen: [String: UInt64] = [:]
    private var highestEvent: UInt64 = 0
    private var snapshotComplete = false

    /// A visible change produced by applying a page or an event.
    public enum Update: Sendable, Equatable {
        /// A room became visible.
        case added(Room)
        /// A visible room changed.
        case updated(Room)
        /// A room stopped being visible (removed, or no longer matching the filter).
        case removed(roomId: String, reason: RoomRemovalReason)
    }

    /// An empty view for rooms matching `filter`.
    public init(filter: RoomFilter = RoomFilter()) {
        self.filter = CompiledRoomFilter(filter)
    }

    /// Applies one snapshot page.
    public mutating func apply(page: WatchRoomsSnapshot) -> [Update] {
        var updates: [Update] = []
        for room in page.rooms {
            if let update = upsert(room, sequence: room.revision) { updates.append(update) }
        }
        sequence = max(sequence, page.sequence)
        return updates
    }

    /// Starts over for a new snapshot (after ``needsResync``); keeps the visible rooms so the
    /// caller can diff, but forgets what was seen.
    public mutating func resetForResync() {
        seen.removeAll()
        needsResync = false
        snapshotComplete = false
        highestEvent = 0
        sequence = 0
    }

    /// Ends a snapshot: from now on `rooms.sync` events are checked for lost events, and visible
    /// rooms the snapshot did not confirm are dropped (after a resync, their removal may have been
    /// lost). `confirmed` is the set of ids seen in the snapshot pages or in events since the
    /// snapshot began.
    public mutating func finishSnapshot(confirmed: Set<String>) -> [Update] {
        snapshotComplete = true
        var updates: [Update] = []
        for id in rooms.keys.sorted() where !confirmed.contains(id) {
            rooms[id] = nil
            updates.append(.removed(roomId: id, reason: .unspecified))
        }
        seen = seen.filter { rooms[$0.key] != nil }
        return updates
    }

    /// Room ids whose sequence the state keeps (the visible rooms once a snapshot is complete).
    var trackedRoomCount: Int { seen.count }

    /// Applies one event body (`RoomAdded`, `RoomUpdated`, `RoomRemoved`, `RoomsSync`); other
    /// bodies are ignored.
    public mutating func apply(event body: Envelope.Body) -> [Update] {
        switch body {
        case .roomAdded(let event):
            noteEvent(event.sequence)
            return upsert(event.room, sequence: event.sequence).map { [$0] } ?? []
        case .roomUpdated(let event):
            noteEvent(event.sequence)
            return upsert(event.room, sequence: event.sequence).map { [$0] } ?? []
        case .roomRemoved(let event):
            noteEvent(event.sequence)
            guard event.sequence > seen[event.roomId, default: 0] else { return [] }
            seen[event.roomId] = snapshotComplete ? nil : event.sequence
            guard rooms.removeValue(forKey: event.roomId) != nil else { return [] }
            return [.removed(roomId: event.roomId, reason: event.reason)]
        case .roomsSync(let sync):
            // During the snapshot the pages are the truth; afterwards a sync ahead of everything
            // applied means events were lost.
            if snapshotComplete, sync.sequence > max(sequence, highestEvent) { needsResync = true }
            return []
        default:
            return []
        }
    }

    private mutating func noteEvent(_ eventSequence: UInt64) {
        highestEvent = max(highestEvent, eventSequence)
        sequence = max(sequence, eventSequence)
    }

    private mutating func upsert(_ room: Room, sequence roomSequence: UInt64) -> Update? {
        let id = room.roomId
        guard roomSequence > seen[id, default: 0] else { return nil }
        seen[id] = roomSequence
        let visible = filter.matches(room)
        let had = rooms[id] != nil
        if visible {
            rooms[id] = room
            return had ? .updated(room) : .added(room)
        }
        if snapshotComplete { seen[id] = nil }
        if had {
            rooms[id] = nil
            return .removed(roomId: id, reason: .unspecified)
        }
        return nil
    }
}
