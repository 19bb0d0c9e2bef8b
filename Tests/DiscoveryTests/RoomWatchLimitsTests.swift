import Foundation
import NetplayService
import Synchronization
import NetplayTestSupport
import NetplayWire
import Testing
@testable import Discovery

@Suite("Watch: a discovery that lies cannot hold a watcher", .ownThread)
struct RoomWatchLimitsTests {
    /// Page tokens forever (each a new one, each page with a room): the watcher gives up after
    /// its page limit instead of asking until the end of time.
    @Test func aSnapshotWhosePagesNeverEndIsRefused() throws {
        let discovery = try LyingService { served, _ in
            .watchRoomsSnapshot(WatchRoomsSnapshot(sequence: UInt64(served), rooms: [Room(roomId: "r\(served % 3)", maxPlayers: 2)],
                                                   nextPageToken: "t\(served)"))
        }
        defer { discovery.stop() }
        let watcher = try RoomWatchClient(requests: discovery.requests, events: discovery.events)
        let error = #expect(throws: RoomWatchError.self) { _ = try watcher.start(liveWithin: 0.1) }
        #expect(error?.description == "discovery's room snapshot did not end after 10000 pages", "\(String(describing: error))")
    }

    /// Two pages naming each other, or an empty page with a token: refused when seen, not after
    /// ten thousand pages.
    @Test(arguments: [(1, 2, "a next-page token it had sent before", 3), (0, 1_000, "an empty page with a next-page token", 1)])
    func aSnapshotWhosePagesDoNotMoveOnIsRefusedAtOnce(roomsPerPage: Int, tokens: Int, reason: String, requests: Int) throws {
        let discovery = try LyingService { served, _ in
            .watchRoomsSnapshot(WatchRoomsSnapshot(sequence: 1, rooms: (0 ..< roomsPerPage).map { Room(roomId: "r\(served)-\($0)", maxPlayers: 2) },
                                                   nextPageToken: "t\(served % tokens)"))
        }
        defer { discovery.stop() }
        let watcher = try RoomWatchClient(requests: discovery.requests, events: discovery.events)
        let error = #expect(throws: RoomWatchError.self) { _ = try watcher.start(liveWithin: 0.1) }
        #expect(error?.description.contains(reason) == true, "\(String(describing: error))")
        #expect(discovery.log.count == requests)
    }

    /// Events published without pause during a snapshot: the snapshot used to read for as long
    /// as the publisher kept ahead, growing all the while; it stops at its event limit (here
    /// 300, by default 200,000) with a reason.
    @Test func aSnapshotUnderAFloodOfEventsStopsAtItsLimit() throws {
        // The page takes a while: the flood fills the subscription's queue (1,000 or more) meanwhile.
        let discovery = try LyingService(answer: { served, _ in
            Thread.sleep(forTimeInterval: 0.5)
            return .watchRoomsSnapshot(WatchRoomsSnapshot(sequence: UInt64(served)))
        },
                                            publish: { sequence in
            ("rooms.added", .roomAdded(RoomAdded(sequence: sequence, room: Room(roomId: "flood-\(sequence % 50_000)", maxPlayers: 2))))
        })
        defer { discovery.stop() }
        let watcher = try RoomWatchClient(requests: discovery.requests, events: discovery.events, maxSnapshotEvents: 300)
        let started = ContinuousClock.now
        #expect(throws: RoomWatchError.self) { _ = try watcher.start(liveWithin: 2) }
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    /// A discovery whose pages are all new rooms (within its page limit), or whose events add
    /// rooms without end, is refused at the watcher's room limit instead of held.
    @Test func aWatcherHoldsNoMoreRoomsThanItsLimit() throws {
        let pages = try LyingService(answer: { served, _ in
            .watchRoomsSnapshot(WatchRoomsSnapshot(sequence: 1, rooms: (0 ..< 1_000).map { Room(roomId: "p\(served)-\($0)", maxPlayers: 2) },
                                                   nextPageToken: "page-\(served)"))
        })
        defer { pages.stop() }
        let watcher = try RoomWatchClient(requests: pages.requests, events: pages.events, maxRooms: 5_000)
        #expect { _ = try watcher.start(liveWithin: 0.2) } throws: { "\($0)".contains("more than 5000 rooms") }
        #expect(watcher.state.rooms.count <= 6_000 && pages.log.count <= 6)

        let events = try LyingService(answer: { _, _ in .watchRoomsSnapshot(WatchRoomsSnapshot(sequence: 1)) },
                                      publish: { sequence in
            ("rooms.added", .roomAdded(RoomAdded(sequence: sequence + 1, room: Room(roomId: "e\(sequence)", maxPlayers: 2, revision: sequence + 1))))
        })
        defer { events.stop() }
        let follower = try RoomWatchClient(requests: events.requests, events: events.events, maxRooms: 2_000)
        let thrown = Mutex<String?>(nil)
        do {
            _ = try follower.start(liveWithin: 2)
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline { _ = try follower.next(timeout: 50) }
        } catch {
            thrown.withLock { $0 = "\(error)" }
        }
        #expect(thrown.withLock { $0 }?.contains("more than 2000 rooms") == true, "\(String(describing: thrown.withLock { $0 }))")
        #expect(follower.state.rooms.count <= 2_000 + EventSubscriber.batchLimit)
    }

    /// Rooms come and go by the thousand after the snapshot: the watcher keeps a sequence for the
    /// rooms it shows, not one for every room it ever saw.
    @Test func churnAfterTheSnapshotDoesNotGrowTheWatcher() {
        var state = RoomWatchState(filter: RoomFilter(gameName: "Mario"))
        var kept = makeRoom("kept")
        kept.revision = 1
        _ = state.apply(page: WatchRoomsSnapshot(sequence: 1, rooms: [kept]))
        _ = state.finishSnapshot(confirmed: ["kept"])
        var sequence: UInt64 = 1
        for index in 0 ..< 10_000 {
            sequence += 1
            let game = index.isMultiple(of: 2) ? "Super Mario Bros." : "Zelda"
            _ = state.apply(event: .roomAdded(RoomAdded(sequence: sequence, room: makeRoom("c\(index)", game: game))))
            sequence += 1
            _ = state.apply(event: .roomRemoved(RoomRemoved(sequence: sequence, roomId: "c\(index)", reason: .withdrawn)))
        }
        #expect(state.rooms.keys.sorted() == ["kept"])
        #expect(state.trackedRoomCount == 1)
        // A room that comes back after its removal is shown again.
        _ = state.apply(event: .roomAdded(RoomAdded(sequence: sequence + 1, room: makeRoom("c0"))))
        #expect(state.rooms["c0"] != nil)
    }
}
