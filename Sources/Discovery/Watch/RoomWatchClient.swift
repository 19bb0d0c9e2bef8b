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

    /// Connects to discovery's request and events endpoints.
    public init(requests: String, events: String, filter: RoomFilter = RoomFilter(), pageSize: UInt32 = 500,
                timeout: Double = 2, serverKey: [UInt8]? = nil, maxSnapshotEvents: Int = 200_000) throws {
        self.maxSnapshotEvents = maxSnapshotEvents
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
        }
        if state.needsResync { updates += try resync() }
        return updates
    }

    /// The most pages one snapshot may take (a million rooms at 500 a page is 2,000): a
    /// discovery that hands out page tokens forever is refused instead of followed.
    static let maxSnapshotPages = 10_000
    /// The most events read at once (each page, each wait for updates).
    static let eventBatch = 4_096

    private func snapshot() throws -> [RoomWatchState.Update] {
        var updates: [RoomWatchState.Update] = []
        var confirmed = Set<String>()
        var token = ""
        var pages = 0, events = 0
        func applyQueuedEvents() throws -> Int {
            let bodies = drainEvents(limit: Self.eventBatch)
            events += bodies.count
            guard events <= maxSnapshotEvents else {
                throw RoomWatchError("discovery published more than \(maxSnapshotEvents) room events during one snapshot: too many to follow")
            }
            for body in bodies {
                updates += state.apply(event: body)
                if let id = Self.roomId(of: body) { confirmed.insert(id) }
            }
            return bodies.count
        }
        repeat {
            pages += 1
            guard pages <= Self.maxSnapshotPages else {
                throw RoomWatchError("discovery's room snapshot did not end after \(Self.maxSnapshotPages) pages")
            }
            let reply = try client.request(.watchRoomsRequest(WatchRoomsRequest(filter: filter, pageSize: pageSize, pageToken: token)))
            guard case .watchRoomsSnapshot(let page) = reply else { throw ClientError.unexpectedReply(reply.name) }
            _ = try applyQueuedEvents()
            updates += state.apply(page: page)
            confirmed.formUnion(page.rooms.map(\.roomId))
            token = page.nextPageToken
        } while !token.isEmpty
        // Every event published before the last page is read before the snapshot ends.
        while try applyQueuedEvents() == Self.eventBatch {}
        updates += state.finishSnapshot(confirmed: confirmed)
        return updates
    }

    private func resync() throws -> [RoomWatchState.Update] {
        state.resetForResync()
        return try snapshot()
    }

    /// The events waiting, `limit` at most (the rest wait for the next call).
    private func drainEvents(limit: Int) -> [Envelope.Body] {
        var bodies = pending
        pending.removeAll()
        var read = 0
        while read < limit, let event = try? subscriber.next(timeout: 0) {
            read += 1
            if case .success(let envelope) = event.envelope { bodies.append(envelope.body) }
        }
        return bodies
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
