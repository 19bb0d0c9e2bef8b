import Foundation
import NetplayService
import NetplayWire
import Synchronization

/// One change a room watch reports (``NetplayLobby/watchRooms(filter:giveUpAfter:)``).
public enum NetplayRoomChange: Sendable, Hashable {
    /// The rooms matching the filter when the watch began (always the first element, possibly
    /// empty: the watch is live from here on).
    case snapshot([NetplayRoom])
    /// A room appeared (or started matching the filter).
    case added(NetplayRoom)
    /// A room changed: players or spectators joined or left, the match started, a slot moved.
    case updated(NetplayRoom)
    /// A room went away (or stopped matching the filter); `reason` is discovery's when it said.
    case removed(id: String, reason: RoomRemovalReason)
}

extension NetplayLobby {
    /// Rooms in the lobby matching `filter`, live: first a ``NetplayRoomChange/snapshot(_:)``,
    /// then every change as it happens, over discovery's watch protocol (its `rooms.` events,
    /// ``discoveryEventsEndpoint``, and `WatchRoomsRequest` snapshots).
    ///
    /// Any `rooms.` event newer than the view, or a `rooms.sync` whose sequence differs from it
    /// (lost events, or a restarted discovery), makes the watch take a fresh filtered snapshot and
    /// report the difference, so it never misses a change and discovery does the filtering.
    /// When discovery stops answering, the watch keeps trying and reports what changed once it is
    /// back; after `giveUpAfter` seconds without an answer the stream ends with an `.unavailable`
    /// ``NetplayError``. The first snapshot failing ends it at once. Cancelling the consuming
    /// task (or dropping the stream) stops the watch and closes its sockets.
    ///
    /// A watch holds at most `maxRooms` rooms: a snapshot with more (a lobby too large to show,
    /// or a discovery that lies) fails with ``NetplayError/Code/badRequest`` asking for a
    /// narrower filter, instead of holding every room it is sent.
    public func watchRooms(filter: RoomFilter = RoomFilter(includeInProgress: true), giveUpAfter: Double = 30,
                           maxRooms: Int = 20_000) -> AsyncThrowingStream<NetplayRoomChange, any Error> {
        let (stream, continuation) = AsyncThrowingStream<NetplayRoomChange, any Error>.makeStream(bufferingPolicy: .unbounded)
        let watch = RoomWatch(lobby: self, filter: filter, giveUpAfter: giveUpAfter, maxRooms: maxRooms)
        continuation.onTermination = { _ in watch.stop() }
        let thread = Thread { watch.run(continuation) }
        thread.name = "netplay-room-watch"
        thread.start()
        return stream
    }

    /// Discovery's events endpoint: ``discoveryEventsEndpoint`` when set, else the one beside the
    /// request endpoint (``ServiceDefaults/events(besideRequests:)``: the request port + 1).
    var resolvedDiscoveryEvents: String? {
        discoveryEventsEndpoint ?? discoveryEndpoint.flatMap(ServiceDefaults.events(besideRequests:))
    }
}

/// One running room watch: a thread of its own owns the events subscription and the request
/// client (both thread-confined); the stream's termination stops it.
final class RoomWatch: Sendable {
    /// Watches whose thread still runs (their sockets open), for tests.
    static let running = Atomic<Int>(0)
    /// What discovery may queue at a watch: room events are small (a room is a few KiB at its
    /// largest), so 1,000 of at most 64 KiB; the defaults let a hostile discovery queue about
    /// 10 GiB at an app while it answered the snapshot's pages slowly. Past them discovery drops
    /// events for this watch, which only means another snapshot sooner.
    static let eventQueueLimits = EventSubscriber.QueueLimits(events: 1_000, eventBytes: 64 << 10)
    /// Subscriptions to discovery's events made by all watches, for tests.
    static let subscriptions = Atomic<Int>(0)

    private let lobby: NetplayLobby
    private let filter: RoomFilter
    private let giveUpAfter: Double
    private let maxRooms: Int
    private let stopped = Atomic<Bool>(false)
    /// Without any event for this long, the watch asks discovery for a snapshot to see whether
    /// it is still there (it publishes `rooms.sync` every second by default).
    private let silenceLimit: Double = 3

    init(lobby: NetplayLobby, filter: RoomFilter, giveUpAfter: Double, maxRooms: Int) {
        self.lobby = lobby
        self.filter = filter
        self.giveUpAfter = giveUpAfter
        self.maxRooms = maxRooms
    }

    func stop() { stopped.store(true, ordering: .relaxed) }

    private var isStopped: Bool { stopped.load(ordering: .relaxed) }

    func run(_ continuation: AsyncThrowingStream<NetplayRoomChange, any Error>.Continuation) {
        Self.running.add(1, ordering: .relaxed)
        defer { Self.running.subtract(1, ordering: .relaxed) }
        do {
            try watch(continuation)
            continuation.finish()
        } catch {
            continuation.finish(throwing: error)
        }
    }

    private func watch(_ continuation: AsyncThrowingStream<NetplayRoomChange, any Error>.Continuation) throws {
        guard let requests = lobby.discoveryEndpoint else { throw NetplayError(.unavailable, "No discovery service is configured.") }
        guard let events = lobby.resolvedDiscoveryEvents else {
            throw NetplayError(.unavailable, "Cannot tell discovery's events endpoint from \(requests): set discoveryEventsEndpoint.")
        }
        func subscribe() throws -> EventSubscriber {
            let subscriber = try EventSubscriber(endpoint: events, prefixes: ["rooms."], serverKey: lobby.serverKey,
                                                 limits: Self.eventQueueLimits)
            Self.subscriptions.add(1, ordering: .relaxed)
            return subscriber
        }
        var subscriber: EventSubscriber
        do {
            subscriber = try subscribe()
        } catch {
            throw NetplayError(.unavailable, "Cannot subscribe to discovery's events at \(events): \(error)")
        }
        var rooms: [String: Room] = [:]
        var held: UInt64 = 0
        var removals: [String: RoomRemovalReason] = [:]
        var due = true
        var first = true
        var lastHeard = Date()
        var failingSince: Date?
        // A snapshot taken for a silence: if the registry changed meanwhile, the subscription
        // missed it.
        var silent = false
        while !isStopped {
            if due {
                do {
                    let (fresh, sequence) = try snapshot(requests)
                    if silent, !first, sequence != held, let fresh = try? subscribe() {
                        // libzmq drops a connection for good after a protocol error (an event
                        // over the limit, a garbled frame): such a subscription never comes back
                        // by itself, and the watch polled for the rest of its life.
                        subscriber = fresh
                    }
                    silent = false
                    if first {
                        continuation.yield(.snapshot(fresh.keys.sorted().map { NetplayRoom(fresh[$0]!) }))
                        first = false
                    } else {
                        for change in Self.changes(from: rooms, to: fresh, removals: removals) { continuation.yield(change) }
                    }
                    rooms = fresh
                    held = sequence
                    removals.removeAll()
                    due = false
                    failingSince = nil
                    lastHeard = Date()
                } catch {
                    if first { throw error }
                    let since = failingSince ?? Date()
                    failingSince = since
                    if Date().timeIntervalSince(since) >= giveUpAfter {
                        throw NetplayError(.unavailable, "Discovery at \(requests) stopped answering for \(Int(giveUpAfter)) s; "
                                                         + "the room watch ended (\(error)).")
                    }
                    for _ in 0 ..< 5 where !isStopped { usleep(100_000) }
                    continue
                }
            }
            // Wait for an event (short, to notice a stop), then take the ones already queued (a
            // batch at most, so a publisher that never pauses still lets the snapshot come): a
            // burst of changes costs one snapshot.
            let batch = subscriber.drain(waitingUpTo: 200)
            if !batch.isEmpty { lastHeard = Date() }
            for event in batch {
                guard case .success(let envelope) = event.envelope else { continue }
                switch envelope.body {
                case .roomAdded(let added): due = due || added.sequence > held
                case .roomUpdated(let updated): due = due || updated.sequence > held
                case .roomRemoved(let removed) where removed.sequence > held:
                    due = true
                    removals[removed.roomId] = removed.reason
                case .roomsSync(let sync): due = due || sync.sequence != held
                default: break
                }
            }
            if Date().timeIntervalSince(lastHeard) > silenceLimit {
                due = true
                silent = true
            }
        }
    }

    /// The filtered rooms now, by id, and the registry sequence the first page was taken at (a
    /// change during paging is newer, so it brings another snapshot).
    private func snapshot(_ requests: String) throws -> ([String: Room], UInt64) {
        var rooms: [String: Room] = [:]
        var sequence: UInt64?
        var token = ""
        var walk = PageWalk(listing: "its room snapshot", maxPages: NetplayLobby.maxPages)
        repeat {
            let reply = try lobby.call(requests, "discovery service",
                                       .watchRoomsRequest(WatchRoomsRequest(filter: filter, pageSize: 500, pageToken: token)),
                                       repeatable: true, pacedRead: true)
            guard case .watchRoomsSnapshot(let page) = reply else {
                throw NetplayError(.internal, "The discovery service answered \(reply.name) to a room watch.")
            }
            sequence = sequence ?? page.sequence
            for room in page.rooms { rooms[room.roomId] = room }
            guard rooms.count <= maxRooms else {
                throw NetplayError(.badRequest, "More than \(maxRooms) rooms match this watch: narrow its filter.")
            }
            token = try NetplayLobby.nextPage(&walk, after: page.rooms.count, nextToken: page.nextPageToken)
        } while !token.isEmpty && !isStopped
        return (rooms, sequence ?? 0)
    }

    /// What changed between two views, in room id order: timestamps and revision alone (a
    /// refresh, an identical re-announce) are no change.
    static func changes(from old: [String: Room], to new: [String: Room], removals: [String: RoomRemovalReason]) -> [NetplayRoomChange] {
        var changes: [NetplayRoomChange] = []
        for id in Set(old.keys).union(new.keys).sorted() {
            switch (old[id], new[id]) {
            case (nil, let room?): changes.append(.added(NetplayRoom(room)))
            case (let before?, let room?) where unstamped(before) != unstamped(room): changes.append(.updated(NetplayRoom(room)))
            case (_?, nil): changes.append(.removed(id: id, reason: removals[id] ?? .unspecified))
            default: break
            }
        }
        return changes
    }

    private static func unstamped(_ room: Room) -> Room {
        var room = room
        room.updatedAtUnixMs = 0
        room.expiresAtUnixMs = 0
        room.revision = 0
        return room
    }
}
