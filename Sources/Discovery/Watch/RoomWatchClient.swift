import Foundation
import NetplayService
import NetplayWire

/// A blocking room watcher for tools and tests (`netplayctl rooms watch`): subscribes to
/// discovery's `rooms.` events, waits until the subscription is live (the first event, at the
/// latest the periodic `rooms.sync`), pages through the snapshot while applying events, then
/// streams updates. Resynchronises by itself when `rooms.sync` reveals lost events.
/// Thread-confined like its sockets.
public final class RoomWatchClient {
    /// The current view.
    public private(set) var state: RoomWatchState
    private let client: BlockingClient
    private let subscriber: EventSubscriber
    private let filter: RoomFilter
    private let pageSize: UInt32
    private var pending: [Envelope.Body] = []
    /// The most events read while one snapshot is taken: a discovery publishing faster than its
    /// events can be read is refused instead of followed without end.
    private let maxSnapshotEvents: Int
    /// The most rooms the view holds (and room ids it tracks during a snapshot): a discovery
    /// sending endless pages of new rooms, or endless `rooms.added` events, is refused instead of
    /// held (10,000 pages of 1,000 rooms was about 20 GB).
    private let maxRooms: Int

    /// Connects to discovery's request and events endpoints. `maxRooms` defaults to discovery's
    /// own registry limit.
    public init(requests: String, events: String, filter: RoomFilter = RoomFilter(), pageSize: UInt32 = 500,
                timeout: Double = 2, serverKey: [UInt8]? = nil, maxSnapshotEvents: Int = 200_000,
                maxRooms: Int = RoomRegistryLimits().maxRooms) throws {
        self.maxSnapshotEvents = maxSnapshotEvents
        self.maxRooms = maxRooms
        client = try BlockingClient(endpoint: requests, timeout: timeout, serverKey: serverKey)
        subscriber = try EventSubscriber(endpoint: events, prefixes: [RoomTopics.prefix], serverKey: serverKey)
        self.filter = filter
        self.pageSize = pageSize
        state = RoomWatchState(filter: filter)
    }

    /// Waits up to `liveWithin` seconds for the subscription to carry an event, then takes the
    /// snapshot. Returns the rooms visible at the end of the snapshot as `.added` updates.
    public func start(liveWithin: Double = 3) throws -> [RoomWatchState.Update] {
        let deadline = Date().addingTimeInterval(liveWithin)
        while Date() < deadline {
            if let event = try subscriber.next(timeout: 100), case .success(let envelope) = event.envelope {
                pending.append(envelope.body)
                break
            }
        }
        return try snapshot()
    }

    /// Waits up to `milliseconds` for the next batch of visible changes (empty on a quiet wait).
    public func next(timeout milliseconds: Int) throws -> [RoomWatchState.Update] {
        var updates: [RoomWatchState.Update] = []
        if let event = try subscriber.next(timeout: milliseconds), case .success(let envelope) = event.envelope {
            updates += state.apply(event: envelope.body)
            try checkSize()
        }
        if state.needsResync { updates += try resync() }
        return updates
    }

    /// Throws once the view, the ids it tracks or those a snapshot confirmed pass ``maxRooms``.
    private func checkSize(confirmed: Int = 0) throws {
        guard state.rooms.count <= maxRooms, state.trackedRoomCount <= maxRooms, confirmed <= maxRooms else {
            throw RoomWatchError("discovery sent more than \(maxRooms) rooms: more than its registry holds, so not followed")
        }
    }

    private func snapshot() throws -> [RoomWatchState.Update] {
        var updates: [RoomWatchState.Update] = []
        var confirmed = Set<String>()
        var token = ""
        var events = 0
        // A million rooms at 500 a page is 2,000 pages: a discovery handing out tokens forever
        // is refused at the walk's 10,000 instead of followed.
        var walk = PageWalk(listing: "discovery's room snapshot")
        /// Applies the events queued (a batch at most) and says whether more may be waiting.
        func applyQueuedEvents() throws -> Bool {
            let (bodies, full) = drainEvents()
            events += bodies.count
            guard events <= maxSnapshotEvents else {
                throw RoomWatchError("discovery published more than \(maxSnapshotEvents) room events during one snapshot: too many to follow")
            }
            for body in bodies {
                updates += state.apply(event: body)
                if let id = Self.roomId(of: body) { confirmed.insert(id) }
            }
            try checkSize(confirmed: confirmed.count)
            return full
        }
        repeat {
            // Discovery limits an address's reads: a snapshot of many pages waits its turn.
            let reply = try client.pacedRead(.watchRoomsRequest(WatchRoomsRequest(filter: filter, pageSize: pageSize, pageToken: token)))
            guard case .watchRoomsSnapshot(let page) = reply else { throw ClientError.unexpectedReply(reply.name) }
            _ = try applyQueuedEvents()
            updates += state.apply(page: page)
            confirmed.formUnion(page.rooms.map(\.roomId))
            try checkSize(confirmed: confirmed.count)
            do { token = try walk.next(after: page.rooms.count, nextToken: page.nextPageToken) } catch {
                throw RoomWatchError(error.description)
            }
        } while !token.isEmpty
        // Every event published before the last page is read before the snapshot ends.
        while try applyQueuedEvents() {}
        updates += state.finishSnapshot(confirmed: confirmed)
        return updates
    }

    private func resync() throws -> [RoomWatchState.Update] {
        state.resetForResync()
        return try snapshot()
    }

    /// The events waiting (those set aside first, then a batch from the subscription), and
    /// whether the batch was full (more may be queued).
    private func drainEvents() -> (bodies: [Envelope.Body], full: Bool) {
        var bodies = pending
        pending.removeAll()
        let batch = subscriber.drain()
        for event in batch { if case .success(let envelope) = event.envelope { bodies.append(envelope.body) } }
        return (bodies, batch.count == EventSubscriber.batchLimit)
    }

    private static func roomId(of body: Envelope.Body) -> String? {
        switch body {
        case .roomAdded(let event): event.room.roomId
        case .roomUpdated(let event): event.room.roomId
        case .roomRemoved(let event): event.roomId
        default: nil
        }
    }
}
