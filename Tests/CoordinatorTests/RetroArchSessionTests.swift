@testable import Coordinator
import NetplayWire
import Testing
import NetplayTestSupport

/// Relayed RetroArch sessions reach the coordinator in relay refreshes and become lobby rooms.
@Suite("RetroArch sessions at the coordinator", .ownThread)
struct RetroArchSessionTests {
    static func session(_ id: String, clients: UInt32 = 0, crcChecks: UInt64 = 0) -> RetroArchSession {
        RetroArchSession(sessionId: id, join: "relay.example|55435|\(id)", directEndpoint: "relay.example:40001", hostNick: "ra-host",
                         coreName: "Nestopia", coreVersion: "1.52.0", contentCrc: 0x0BCB_5D3F, clients: clients, crcChecks: crcChecks)
    }

    @Test func refreshesAnnounceChangeAndWithdrawRooms() throws {
        let h = try Harness(relays: ["sync-0"])
        let id = "+/8BAgMEBQYHCAkK"
        var outcome = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-0", load: RelayLoad(sessions: 1, retroarchSessions: 1),
                                                                  retroarchSessions: [Self.session(id)]), at: h.time)
        let roomId = RetroArchSessionBook.roomId(id)
        #expect(roomId == "retroarch-relay-fbff0102030405060708090a")
        let room = try #require(outcome.retroArchRooms[roomId] ?? nil)
        #expect(room.retroarchJoin == "relay.example|55435|\(id)" && room.source == .retroarchRelay && room.transport == .relay)
        #expect(room.relayEndpoint == "retroarch://relay.example:55435" && room.hostEndpoint == "retroarch://relay.example:40001")
        #expect(room.hostName == "ra-host" && room.content?.coreId == "Nestopia" && room.content?.crc32 == 0x0BCB_5D3F)
        #expect(room.currentPlayers == 1 && !room.inProgress)
        var listed = Self.session(id)
        listed.relayId = "sync-0"
        #expect(h.core.listRetroArchSessions(ListRetroArchSessionsRequest()).reply
                == .listRetroarchSessionsResponse(ListRetroArchSessionsResponse(sessions: [listed])))

        // Health counters change every refresh; the room changes only when what it shows does.
        outcome = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-0", load: RelayLoad(),
                                                              retroarchSessions: [Self.session(id, crcChecks: 40)]), at: h.time)
        #expect(outcome.retroArchRooms.isEmpty)
        outcome = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-0", load: RelayLoad(),
                                                              retroarchSessions: [Self.session(id, clients: 1, crcChecks: 80)]), at: h.time)
        #expect((outcome.retroArchRooms[roomId] ?? nil)?.currentPlayers == 2)

        // A session left out of a refresh has ended: its room is withdrawn.
        outcome = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-0", load: RelayLoad()), at: h.time)
        #expect(outcome.retroArchRooms.count == 1 && outcome.retroArchRooms[roomId] == .some(nil))
        #expect(h.core.retroArch.count == 0)
    }

    @Test func aRelayThatStopsRefreshingTakesItsRetroArchRoomsWithIt() throws {
        let h = try Harness(relays: ["sync-0", "sync-1"])
        _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-1", load: RelayLoad(),
                                                        retroarchSessions: [Self.session("AAAAAAAAAAAAAAAB"), Self.session("AAAAAAAAAAAAAAAC")]), at: h.time)
        #expect(h.core.listRetroArchSessions(ListRetroArchSessionsRequest(relayId: "sync-0")).reply
                == .listRetroarchSessionsResponse(ListRetroArchSessionsResponse()))
        h.now += 2_000
        _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-0", load: RelayLoad()), at: h.time)
        h.now += 2_000  // sync-1 is past its 3 s TTL
        let outcome = h.core.maintain(at: h.time)
        #expect(Set(outcome.retroArchRooms.keys) == [RetroArchSessionBook.roomId("AAAAAAAAAAAAAAAB"), RetroArchSessionBook.roomId("AAAAAAAAAAAAAAAC")])
        #expect(outcome.retroArchRooms.values.allSatisfy { $0 == nil })
        #expect(h.core.retroArch.count == 0)
    }
}
