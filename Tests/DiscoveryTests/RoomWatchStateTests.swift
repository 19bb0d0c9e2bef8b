@testable import Discovery
import NetplayWire
import Rollback
import Testing
import NetplayTestSupport

@Suite("Watch: snapshot then updates", .ownThread)
struct RoomWatchStateTests {
    /// Replays a random history against a registry and feeds a watcher the snapshot pages and
    /// the events in a random interleaving; the watcher must end with exactly the registry's rooms.
    @Test(arguments: 0..<40)
    func anyInterleavingConvergesOnTheRegistry(seed: Int) throws {
        var rng = SeededRandom(seed: UInt64(seed))
        let registry = RoomRegistry()
        var events: [Envelope.Body] = []
        func step(_ t: UInt64) throws {
            let id = "r\(rng.next() % 30)"
            switch rng.next() % 4 {
            case 0, 1:
                let players = UInt32(rng.next() % 3)
                if let change = try registry.announce(makeRoom(id, max: 2, players: players), announcerId: "c", ttlMs: 0, at: at(t)).1 {
                    events.append(change.body)
                }
            case 2:
                if let change = try registry.withdraw(roomId: id, announcerId: "c").1 { events.append(change.body) }
            default:
                if registry.room(id) != nil, let change = try registry.refresh(
                    RefreshRoomRequest(roomId: id, announcerId: "c", updateOccupancy: true, currentPlayers: UInt32(rng.next() % 3)),
                    at: at(t)).1 {
                    events.append(change.body)
                }
            }
        }
        for t in 0..<40 { try step(UInt64(t)) }
        // The watcher subscribed here: it sees the events from now on.
        let firstEvent = events.count
        var state = RoomWatchState()
        var token = ""
        var pending: [Envelope.Body] = []
        var t: UInt64 = 100
        repeat {
            // Changes happen between pages.
            for _ in 0..<(rng.next() % 6) {
                try step(t)
                t += 1
            }
            pending = Array(events[firstEvent...])
            let page = try registry.page(filter: RoomFilter(), pageSize: 4, pageToken: token, tokenField: "f")
            let snapshot = WatchRoomsSnapshot(sequence: registry.sequence, rooms: page.rooms, nextPageToken: page.next)
            // Apply some of the buffered events before the page, the rest after.
            let split = Int(rng.next() % UInt64(pending.count + 1))
            for body in pending[..<split] { _ = state.apply(event: body) }
            _ = state.apply(page: snapshot)
            for body in pending[split...] { _ = state.apply(event: body) }
            token = page.next
        } while !token.isEmpty
        for _ in 0..<20 {
            let before = events.count
            try step(t)
            t += 1
            for body in events[before...] { _ = state.apply(event: body) }
        }
        // Duplicated delivery changes nothing.
        for body in events[firstEvent...] { _ = state.apply(event: body) }
        // Refreshes move expires/updated_at without a new revision (no event): compare the rest.
        func stable(_ room: Room) -> Room {
            var room = room
            room.updatedAtUnixMs = 0
            room.expiresAtUnixMs = 0
            return room
        }
        let expected = Dictionary(uniqueKeysWithValues: registry.allRooms.map { ($0.roomId, stable($0)) })
        let actual = state.rooms.mapValues(stable)
        #expect(actual == expected, "ids \(actual.keys.sorted()) vs \(expected.keys.sorted())")
        #expect(!state.needsResync)
    }

    @Test func filteredWatchersSeeRoomsLeaveTheirFilter() {
        var state = RoomWatchState(filter: RoomFilter(hasFreeSlot: true))
        let open = makeRoom("a", max: 2, players: 1)
        let full = makeRoom("a", max: 2, players: 2)
        #expect(state.apply(event: .roomAdded(RoomAdded(sequence: 1, room: withRevision(open, 1)))) == [.added(withRevision(open, 1))])
        #expect(state.apply(event: .roomUpdated(RoomUpdated(sequence: 2, room: withRevision(full, 2))))
                == [.removed(roomId: "a", reason: .unspecified)])
        #expect(state.apply(event: .roomUpdated(RoomUpdated(sequence: 3, room: withRevision(open, 3)))) == [.added(withRevision(open, 3))])
        #expect(state.apply(event: .roomRemoved(RoomRemoved(sequence: 4, roomId: "a", reason: .expired)))
                == [.removed(roomId: "a", reason: .expired)])
        // An older event about a removed room is ignored (the tombstone remembers).
        #expect(state.apply(event: .roomUpdated(RoomUpdated(sequence: 3, room: withRevision(open, 3)))).isEmpty)
    }

    @Test func aSyncAheadOfEverythingAppliedAsksForResync() {
        var state = RoomWatchState()
        _ = state.apply(event: .roomsSync(RoomsSync(sequence: 10)))
        #expect(!state.needsResync, "syncs during the snapshot are ignored")
        _ = state.apply(page: WatchRoomsSnapshot(sequence: 10))
        _ = state.finishSnapshot(confirmed: [])
        _ = state.apply(event: .roomsSync(RoomsSync(sequence: 10)))
        #expect(!state.needsResync)
        _ = state.apply(event: .roomAdded(RoomAdded(sequence: 11, room: withRevision(makeRoom("a"), 11))))
        _ = state.apply(event: .roomsSync(RoomsSync(sequence: 11)))
        #expect(!state.needsResync)
        _ = state.apply(event: .roomsSync(RoomsSync(sequence: 13)))  // events 12 and 13 were lost
        #expect(state.needsResync)
        state.resetForResync()
        _ = state.apply(page: WatchRoomsSnapshot(sequence: 13, rooms: [withRevision(makeRoom("b"), 12)]))
        #expect(state.finishSnapshot(confirmed: ["b"]) == [.removed(roomId: "a", reason: .unspecified)])
        #expect(state.rooms.keys.sorted() == ["b"])
    }

    func withRevision(_ room: Room, _ revision: UInt64) -> Room {
        var room = room
        room.revision = revision
        return room
    }
}
