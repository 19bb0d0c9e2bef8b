@testable import Discovery
import NetplayService
import NetplayWire
import Testing
import NetplayTestSupport

func makeRoom(_ id: String, game: String = "Super Mario Bros.", crc: UInt32 = 0x3337EC46, core: String = "nestopia",
              max: UInt32 = 2, players: UInt32 = 1, password: Bool = false, transport: Transport = .relay,
              region: String = "", system: String = "nes", inProgress: Bool = false) -> Room {
    Room(roomId: id, sessionId: id, hostName: "host-\(id)", roomName: "\(id)'s room",
         content: ContentInfo(gameName: game, crc32: crc, coreId: core, coreVersion: "1.52", system: system),
         maxPlayers: max, currentPlayers: players, spectatorsAllowed: true, maxSpectators: 4, hasPassword: password,
         inProgress: inProgress, transport: transport, region: region)
}

func at(_ ms: UInt64) -> RegistryTime { RegistryTime(monotonicMs: ms, unixMs: 1_700_000_000_000 + ms) }

@Suite("Room registry", .ownThread)
struct RoomRegistryTests {
    @Test func announceSetsRegistryFieldsAndNumbersChanges() throws {
        let registry = RoomRegistry()
        let (response, change) = try registry.announce(makeRoom("a"), announcerId: "c1", ttlMs: 0, at: at(10))
        #expect(response.created && response.revision == 1 && response.ttlMs == 60_000)
        #expect(response.expiresAtUnixMs == at(10).unixMs + 60_000)
        guard case .added(let added) = change else { Issue.record("no added event"); return }
        #expect(added.sequence == 1 && added.room.revision == 1 && added.room.source == .lobby)
        #expect(added.room.createdAtUnixMs == at(10).unixMs)
        // The same room again only extends its TTL: no event, no new revision.
        let (again, none) = try registry.announce(makeRoom("a"), announcerId: "c1", ttlMs: 0, at: at(20))
        #expect(none == nil && !again.created && again.revision == 1 && registry.sequence == 1)
        // A change is an update with the next sequence; created_at is kept.
        let (_, updated) = try registry.announce(makeRoom("a", players: 2), announcerId: "c1", ttlMs: 0, at: at(30))
        guard case .updated(let event) = updated else { Issue.record("no update"); return }
        #expect(event.sequence == 2 && event.room.currentPlayers == 2 && event.room.createdAtUnixMs == at(10).unixMs)
    }

    /// What a RetroArch LAN query is answered with: the next matching room after the last one
    /// advertised, wrapping around, so repeated queries go through them all.
    @Test func theNextMatchingRoomGoesRoundInIdOrder() throws {
        let registry = RoomRegistry()
        #expect(registry.nextRoom(after: "", where: { _ in true }) == nil)
        for (id, transport) in [("a", Transport.lan), ("b", .relay), ("c", .lan), ("d", .relay)] {
            _ = try registry.announce(makeRoom(id, transport: transport), announcerId: "c", ttlMs: 0, at: at(0))
        }
        let lan = { (room: Room) in room.transport == .lan }
        var seen: [String] = []
        var last = ""
        for _ in 0 ..< 5 {
            let room = try #require(registry.nextRoom(after: last, where: lan))
            seen.append(room.roomId)
            last = room.roomId
        }
        #expect(seen == ["a", "c", "a", "c", "a"])
        #expect(registry.nextRoom(after: "b", where: lan)?.roomId == "c")
        #expect(registry.nextRoom(after: "zzz", where: lan)?.roomId == "a", "past the last id, from the first")
        #expect(registry.nextRoom(after: "a", where: { $0.roomId == "a" })?.roomId == "a", "the room itself, last")
        #expect(registry.nextRoom(after: "a", where: { $0.region == "mars" }) == nil)
    }

    @Test func onlyTheAnnouncerMayChangeARoom() throws {
        let registry = RoomRegistry()
        _ = try registry.announce(makeRoom("a"), announcerId: "c1", ttlMs: 0, at: at(0))
        #expect(throws: ServiceError.self) { try registry.announce(makeRoom("a"), announcerId: "c2", ttlMs: 0, at: at(1)) }
        #expect(throws: ServiceError.self) { try registry.refresh(RefreshRoomRequest(roomId: "a", announcerId: "c2"), at: at(1)) }
        #expect(throws: ServiceError.self) { try registry.withdraw(roomId: "a", announcerId: "c2") }
        let (withdrawn, change) = try registry.withdraw(roomId: "a", announcerId: "c1")
        #expect(withdrawn.removed)
        #expect(change == .removed(RoomRemoved(sequence: 2, roomId: "a", reason: .withdrawn)))
        let (again, none) = try registry.withdraw(roomId: "a", announcerId: "c1")
        #expect(!again.removed && none == nil, "withdrawing is idempotent")
    }

    @Test func roomsExpireAfterTheirTTLUnlessRefreshed() throws {
        let registry = RoomRegistry()
        _ = try registry.announce(makeRoom("a"), announcerId: "c", ttlMs: 1_000, at: at(0))
        _ = try registry.announce(makeRoom("b"), announcerId: "c", ttlMs: 1_000, at: at(0))
        #expect(registry.expire(at: at(999)).isEmpty)
        let (refreshed, noChange) = try registry.refresh(RefreshRoomRequest(roomId: "a", announcerId: "c"), at: at(900))
        #expect(noChange == nil && refreshed.expiresAtUnixMs == at(1_900).unixMs)
        let expired = registry.expire(at: at(1_000))
        #expect(expired == [.removed(RoomRemoved(sequence: 3, roomId: "b", reason: .expired))])
        #expect(registry.room("a") != nil && registry.room("b") == nil)
        #expect(registry.expire(at: at(1_900)).map(\.roomId) == ["a"])
        #expect(throws: ServiceError.self) { try registry.refresh(RefreshRoomRequest(roomId: "a", announcerId: "c"), at: at(2_000)) }
    }

    /// Rooms the cluster announces (the lobby's, RetroArch relay rooms) expire; LAN rooms are
    /// lost (RetroArch relay rooms were reported lost, as if a LAN host had gone). Many falling
    /// due at once go in one pass, keeping the rest in id order.
    @Test func expiryNamesWhyAndTakesManyRoomsAtOnce() throws {
        let registry = RoomRegistry()
        let sources: [(String, RoomSource, RoomRemovalReason)] = [("lobby", .lobby, .expired), ("relay", .retroarchRelay, .expired),
                                                                  ("beacon", .lanBeacon, .lanLost), ("retroarch", .retroarchLan, .lanLost)]
        for (id, source, _) in sources {
            _ = try registry.announce(makeRoom(id), announcerId: id, ttlMs: 1_000, source: source, at: at(0))
        }
        let reasons = Dictionary(uniqueKeysWithValues: registry.expire(at: at(1_000)).compactMap { change -> (String, RoomRemovalReason)? in
            guard case .removed(let removed) = change else { return nil }
            return (removed.roomId, removed.reason)
        })
        #expect(reasons == Dictionary(uniqueKeysWithValues: sources.map { ($0.0, $0.2) }))

        for index in 0 ..< 10_000 {
            _ = try registry.announce(makeRoom(String(format: "r%05d", index)), announcerId: "c", ttlMs: index % 2 == 0 ? 1_000 : 5_000, at: at(2_000))
        }
        #expect(registry.expire(at: at(3_000)).count == 5_000)
        let page = try registry.page(filter: RoomFilter(), pageSize: 3, pageToken: "", tokenField: "page_token")
        #expect(page.rooms.map(\.roomId) == ["r00001", "r00003", "r00005"] && page.total == 5_000)
        #expect(registry.expire(at: at(7_000)).count == 5_000)
        #expect(try registry.page(filter: RoomFilter(), pageSize: 3, pageToken: "", tokenField: "page_token").rooms.isEmpty)
    }

    /// A page of 1,000 rooms of 2 KB did not fit a message: every watcher reaching it got
    /// INTERNAL. A page now ends at its byte budget too, and the next token carries on.
    @Test func aPageOfLargeRoomsFitsOneMessage() throws {
        let registry = RoomRegistry()
        for index in 0 ..< 1_000 {
            var room = makeRoom(String(format: "big-%04d", index) + String(repeating: "i", count: 55), region: String(repeating: "r", count: 32))
            room.sessionId = String(repeating: "s", count: 64)
            room.roomName = String(repeating: "n", count: 128)
            room.hostName = String(repeating: "h", count: 64)
            room.hostEndpoint = "tcp://" + String(repeating: "e", count: 240) + ":7300"
            room.relayEndpoint = "tcp://" + String(repeating: "e", count: 240) + ":7300"
            room.retroarchJoin = String(repeating: "j", count: 300)
            room.hostVersion = String(repeating: "v", count: 64)
            room.slots = (1 ... 2).map { RoomSlot(slot: $0, occupied: true, playerName: String(repeating: "p", count: 64)) }
            _ = try registry.announce(room, announcerId: "c", ttlMs: 0, at: at(0))
        }
        var seen: [String] = []
        var token = ""
        repeat {
            let page = try registry.page(filter: RoomFilter(), pageSize: 1_000, pageToken: token, tokenField: "page_token")
            let snapshot = try Envelope(requestId: 1, body: .watchRoomsSnapshot(WatchRoomsSnapshot(
                sequence: registry.sequence, rooms: page.rooms, nextPageToken: page.next, topicPrefix: "rooms."))).encoded()
            #expect(snapshot.count <= WireLimits.default.maxFrameBytes && page.rooms.count < 1_000 && page.total == 1_000)
            seen += page.rooms.map(\.roomId)
            token = page.next
        } while !token.isEmpty && seen.count <= 1_000
        #expect(seen == registry.allRooms.map(\.roomId), "every room once, in order")
    }

    @Test func refreshCanUpdateOccupancy() throws {
        let registry = RoomRegistry()
        _ = try registry.announce(makeRoom("a", max: 4), announcerId: "c", ttlMs: 0, at: at(0))
        let (response, change) = try registry.refresh(RefreshRoomRequest(roomId: "a", announcerId: "c", updateOccupancy: true,
                                                                         currentPlayers: 3, inProgress: true), at: at(5))
        #expect(response.revision == 2)
        guard case .updated(let event) = change else { Issue.record("no update"); return }
        #expect(event.room.currentPlayers == 3 && event.room.inProgress)
        #expect(throws: ServiceError.self) {
            try registry.refresh(RefreshRoomRequest(roomId: "a", announcerId: "c", updateOccupancy: true, currentPlayers: 5), at: at(6))
        }
    }

    @Test func ttlIsClamped() throws {
        var limits = RoomRegistryLimits()
        limits.maxTTLMs = 10_000
        let registry = RoomRegistry(limits: limits)
        #expect(try registry.announce(makeRoom("a"), announcerId: "c", ttlMs: 600_000, at: at(0)).0.ttlMs == 10_000)
        #expect(try registry.announce(makeRoom("b"), announcerId: "c", ttlMs: 1, at: at(0)).0.ttlMs == 500)
    }

    @Test func invalidRoomsAreRefusedWithTheField() {
        let registry = RoomRegistry()
        let cases: [(Room, String)] = [
            (makeRoom("a", max: 0), "Room.max_players"),
            (makeRoom("a", max: 2, players: 3), "Room.current_players"),
            (makeRoom("bad\u{1}id"), "Room.room_id"),
        ]
        for (room, field) in cases {
            do {
                _ = try registry.announce(room, announcerId: "c", ttlMs: 0, at: at(0))
                Issue.record("accepted \(room.roomId)")
            } catch {
                #expect(error.code == .badRequest && error.field == field)
            }
        }
        var spectators = makeRoom("s")
        spectators.currentSpectators = 5
        #expect(throws: ServiceError.self) { try registry.announce(spectators, announcerId: "c", ttlMs: 0, at: at(0)) }
        #expect(registry.count == 0)
    }

    @Test func capacityLimitsAnswerOverloaded() throws {
        var limits = RoomRegistryLimits()
        limits.maxRooms = 3
        limits.maxRoomsPerAnnouncer = 2
        let registry = RoomRegistry(limits: limits)
        _ = try registry.announce(makeRoom("a"), announcerId: "x", ttlMs: 0, at: at(0))
        _ = try registry.announce(makeRoom("b"), announcerId: "x", ttlMs: 0, at: at(0))
        #expect { try registry.announce(makeRoom("c"), announcerId: "x", ttlMs: 0, at: at(0)) } throws: { ($0 as? ServiceError)?.code == .overloaded }
        _ = try registry.announce(makeRoom("c"), announcerId: "y", ttlMs: 0, at: at(0))
        #expect { try registry.announce(makeRoom("d"), announcerId: "z", ttlMs: 0, at: at(0)) } throws: { ($0 as? ServiceError)?.code == .overloaded }
        _ = try registry.withdraw(roomId: "a", announcerId: "x")
        #expect(registry.announcerCounts == ["x": 1, "y": 1])
    }

    @Test func filtersMatchEveryField() throws {
        let registry = RoomRegistry()
        let rooms = [
            makeRoom("r1", game: "Super Mario Bros. 3", crc: 1),
            makeRoom("r2", game: "The Legend of Zelda", crc: 2, core: "fceumm"),
            makeRoom("r3", game: "super mario world", crc: 3, core: "snes9x", system: "snes"),
            makeRoom("r4", game: "Tetris", crc: 4, max: 2, players: 2),
            makeRoom("r5", game: "Tetris", crc: 4, password: true),
            makeRoom("r6", game: "Contra", crc: 6, transport: .lan, region: "eu"),
            makeRoom("r7", game: "Contra", crc: 6, inProgress: true),
        ]
        for room in rooms { _ = try registry.announce(room, announcerId: "c", ttlMs: 0, at: at(0)) }
        func ids(_ filter: RoomFilter) throws -> [String] {
            try registry.page(filter: filter, pageSize: 100, pageToken: "", tokenField: "f").rooms.map(\.roomId)
        }
        #expect(try ids(RoomFilter()) == ["r1", "r2", "r3", "r4", "r5", "r6"])
        #expect(try ids(RoomFilter(includeInProgress: true)).count == 7)
        #expect(try ids(RoomFilter(gameName: "MARIO")) == ["r1", "r3"])
        #expect(try ids(RoomFilter(coreId: "fceumm")) == ["r2"])
        #expect(try ids(RoomFilter(crc32: 4)) == ["r4", "r5"])
        #expect(try ids(RoomFilter(hasFreeSlot: true)).contains("r4") == false)
        #expect(try ids(RoomFilter(noPassword: true)).contains("r5") == false)
        #expect(try ids(RoomFilter(transport: .lan)) == ["r6"])
        #expect(try ids(RoomFilter(transport: .relay)).contains("r6") == false)
        #expect(try ids(RoomFilter(region: "eu")) == ["r6"])
        #expect(try ids(RoomFilter(system: "snes")) == ["r3"])
        #expect(try ids(RoomFilter(source: .retroarchLan)).isEmpty)
        #expect(try ids(RoomFilter(gameName: "tetris", hasFreeSlot: true, noPassword: true)).isEmpty)
        var md5Room = makeRoom("r8")
        md5Room.content?.md5 = Array(repeating: 0xAA, count: 16)
        _ = try registry.announce(md5Room, announcerId: "c", ttlMs: 0, at: at(0))
        #expect(try ids(RoomFilter(md5: Array(repeating: 0xAA, count: 16))) == ["r8"])
    }

    @Test func pagingWalksEveryMatchOnceInIdOrder() throws {
        let registry = RoomRegistry()
        for index in (0..<250).shuffled() {
            _ = try registry.announce(makeRoom(String(format: "room-%03d", index), crc: UInt32(index % 2)),
                                      announcerId: "c", ttlMs: 0, at: at(0))
        }
        var token = ""
        var seen: [String] = []
        repeat {
            let page = try registry.page(filter: RoomFilter(crc32: 1), pageSize: 40, pageToken: token, tokenField: "f")
            #expect(page.total == (seen.count < 40 ? 125 : 124))
            seen += page.rooms.map(\.roomId)
            token = page.next
            // Changes between pages neither repeat nor skip rooms that stay.
            if seen.count == 40 { _ = try registry.withdraw(roomId: "room-001", announcerId: "c") }
        } while !token.isEmpty
        let expected = (0..<250).filter { $0 % 2 == 1 }.map { String(format: "room-%03d", $0) }
        #expect(seen == expected, "the page with room-001 was served before it was withdrawn")
        #expect(Set(seen).count == seen.count)
    }

    @Test func badPageTokensAreBadRequests() {
        let registry = RoomRegistry()
        for token in ["garbage", "r1.zz", "r1.", "r1.abc"] {
            #expect { try registry.page(filter: RoomFilter(), pageSize: 10, pageToken: token, tokenField: "ListRoomsRequest.page_token") }
                throws: { ($0 as? ServiceError)?.field == "ListRoomsRequest.page_token" }
        }
        #expect((try? PageToken.decode(PageToken.after("ñandú-1"), field: "f")) == "ñandú-1")
    }

    @Test func listingTenThousandRoomsIsFast() throws {
        let registry = RoomRegistry()
        for index in 0..<10_000 {
            _ = try registry.announce(makeRoom("room-\(index)", game: index % 10 == 0 ? "Mario \(index)" : "Zelda \(index)",
                                               crc: UInt32(index)), announcerId: "c", ttlMs: 0, at: at(0))
        }
        let clock = ContinuousClock()
        let elapsed = try clock.measure {
            for _ in 0..<20 {
                let page = try registry.page(filter: RoomFilter(gameName: "mario", hasFreeSlot: true), pageSize: 100,
                                             pageToken: "", tokenField: "f")
                #expect(page.total == 1_000 && page.rooms.count == 100)
            }
        }
        // A smoke check for a debug build on a loaded machine; `netplay-bench controlplane` measures.
        #expect(elapsed < .seconds(20), "20 filtered lists of 10,000 rooms took \(elapsed) (debug build)")
    }
}
