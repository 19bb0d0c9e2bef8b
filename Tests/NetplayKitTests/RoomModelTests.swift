import Foundation
import NetplayWire
import Testing
import ZeroMQ
@testable import NetplayKit
import NetplayTestSupport

/// The room browser's model: every wire field a browser shows, the per-slot view, the content
/// match (the coordinator's rule) and invite links.
@Suite("NetplayKit: the room model, content match and invite links", .ownThread)
struct RoomModelTests {
    let arena = ContentInfo(gameName: "Arena", crc32: 0xA7E7_A001, md5: Array(repeating: 7, count: 16),
                            coreId: "netplay.games.arena", coreVersion: "1")

    @Test func aFullWireRoomKeepsEveryFieldABrowserShows() {
        let wire = Room(roomId: "s-1", sessionId: "s-1", hostName: "alice", roomName: "Alice's", content: arena,
                        maxPlayers: 3, currentPlayers: 2, spectatorsAllowed: true, maxSpectators: 6, currentSpectators: 6,
                        hasPassword: true, hasSpectatePassword: true, inProgress: true, frameDelay: 3, transport: .relay,
                        relayEndpoint: "tcp://10.0.0.9:7300", region: "eu-west", source: .lobby, hostVersion: "netplay 1.2",
                        slots: [RoomSlot(slot: 2, occupied: true, playerName: "bob", connected: false),
                                RoomSlot(slot: 1, occupied: true, playerName: "alice", connected: true),
                                RoomSlot(slot: 3, occupied: false)])
        let room = NetplayRoom(wire)
        #expect(room.region == "eu-west")
        #expect(room.maxSpectators == 6 && room.currentSpectators == 6 && !room.hasSpectatorPlace)
        #expect(room.hasSpectatePassword && room.hasPassword)
        #expect(room.hostVersion == "netplay 1.2")
        #expect(room.source == .lobby)
        #expect(!room.isLAN && room.endpoint == "tcp://10.0.0.9:7300")
        #expect(room.slots == [
            NetplayRoom.Slot(number: 1, holder: .player(name: "alice"), connected: true),
            NetplayRoom.Slot(number: 2, holder: .player(name: "bob"), connected: false),
            NetplayRoom.Slot(number: 3, holder: .free),
        ])
        #expect(room.slots.filter(\.isFree).map(\.number) == [3])
    }

    @Test func slotsTheAnnouncerDoesNotNameAreUnknownAndExtraOnesAreDropped() {
        // A LAN beacon names no holders: every slot is unknown, none offered as free.
        let lan = NetplayRoom(Room(roomId: "l-1", maxPlayers: 2, currentPlayers: 1, transport: .lan, source: .lanBeacon))
        #expect(lan.slots == [NetplayRoom.Slot(number: 1, holder: .unknown), NetplayRoom.Slot(number: 2, holder: .unknown)])
        #expect(lan.slots.allSatisfy { !$0.isFree })
        // An announcer naming a slot beyond max players, or one twice: only 1 ... max, first wins.
        let odd = NetplayRoom(Room(roomId: "s-2", maxPlayers: 2, slots: [
            RoomSlot(slot: 5, occupied: true, playerName: "ghost"), RoomSlot(slot: 2, occupied: false),
            RoomSlot(slot: 2, occupied: true, playerName: "late"),
        ]))
        #expect(odd.slots == [NetplayRoom.Slot(number: 1, holder: .unknown), NetplayRoom.Slot(number: 2, holder: .free)])
        // A RetroArch room of unknown size has no slots at all.
        #expect(NetplayRoom(Room(roomId: "ra", source: .retroarchLan)).slots.isEmpty)
    }

    @Test func contentMatchAgreesWithTheCoordinatorsRule() {
        let room = NetplayRoom(Room(roomId: "s-1", content: arena, maxPlayers: 2))
        #expect(room.contentMatch(for: arena) == .same)
        var otherDump = arena
        otherDump.md5 = Array(repeating: 8, count: 16)
        #expect(room.contentMatch(for: otherDump) == .differentContent)
        var otherGame = arena
        otherGame.crc32 = 1
        #expect(room.contentMatch(for: otherGame) == .differentContent)
        #expect(room.contentMatch(for: ContentInfo()) == .differentContent)
        var otherCore = arena
        otherCore.coreId = "libretro.fceumm"
        #expect(room.contentMatch(for: otherCore) == .differentCore)
        #expect(room.contentMatch(for: otherCore).refusal == .coreMismatch)
        var otherVersion = arena
        otherVersion.coreVersion = "2"
        #expect(room.contentMatch(for: otherVersion) == .differentCoreVersion)
        #expect(!room.contentMatch(for: otherVersion).isJoinable)
        // A room naming only its core: the game cannot be compared, the host admits anyone on that core.
        let coreOnly = NetplayRoom(Room(roomId: "s-2", content: ContentInfo(gameName: "?", coreId: "netplay.games.arena"), maxPlayers: 2))
        #expect(coreOnly.contentMatch(for: arena) == .unknown)
        #expect(coreOnly.contentMatch(for: arena).isJoinable)
        #expect(coreOnly.contentMatch(for: otherCore) == .differentCore)
        // A room that names nothing: unknown, and joinable.
        #expect(NetplayRoom(Room(roomId: "s-3")).contentMatch(for: arena) == .unknown)
    }

    @Test func anInviteSurvivesTheRoundTripWithAKeyAndAwkwardCharacters() throws {
        let key = try CurveKeyPair.generate().publicKey
        let invite = NetplayInvite(sessionId: "s-4f2a", roomName: "Joe's Room & friends = 100% fun?",
                                   discovery: "tcp://203.0.113.5:7100", coordinator: "tcp://203.0.113.5:7200", serverKey: key)
        let url = invite.url
        #expect(url.hasPrefix("netplay://join?session=s-4f2a&"))
        #expect(!url.contains(" ") && !url.contains("'") && !url.contains("//203"))
        #expect(try NetplayInvite(url: url) == invite)
        #expect(try NetplayInvite(url: "  \(url)\n") == invite)
        let lan = NetplayInvite(lanSessionId: "lan-77", roomName: "couch", endpoint: "tcp://192.168.1.20:7300")
        let parsedLAN = try NetplayInvite(url: lan.url)
        #expect(parsedLAN == lan && parsedLAN.isLAN && parsedLAN.serverKey == nil)
        #expect(parsedLAN.room.isLAN && parsedLAN.room.endpoint == "tcp://192.168.1.20:7300" && parsedLAN.room.sessionId == "lan-77")
        // From a browsed room through a lobby: the lobby's cluster and key, never a password.
        let room = NetplayRoom(Room(roomId: "s-9", sessionId: "s-9", roomName: "locked", hasPassword: true, transport: .relay))
        let lobby = NetplayLobby(discovery: "tcp://127.0.0.1:7100", coordinator: "tcp://127.0.0.1:7200", serverKey: key)
        let fromRoom = try NetplayInvite(room: room, lobby: lobby)
        #expect(fromRoom.serverKey == key && fromRoom.coordinatorEndpoint == "tcp://127.0.0.1:7200" && !fromRoom.url.contains("password"))
    }

    @Test func everyBadLinkIsRefusedWithItsReason() throws {
        let key = Z85.encode(try CurveKeyPair.generate().publicKey)!.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let ok = "session=s-1&coordinator=tcp%3A%2F%2F127.0.0.1%3A7200"
        let cases: [(String, NetplayInvite.InviteError)] = [
            ("https://join?\(ok)", .badScheme("https")),
            ("netplay:join?\(ok)", .badScheme("netplay")),
            ("no scheme at all", .badScheme("no scheme at all")),
            ("netplay://host?\(ok)", .notAJoinLink("host")),
            ("netplay://join?coordinator=tcp%3A%2F%2F127.0.0.1%3A7200", .missing("session")),
            ("netplay://join?session=&coordinator=tcp%3A%2F%2F127.0.0.1%3A7200", .missing("session")),
            ("netplay://join?session=s-1", .missing("coordinator")),
            ("netplay://join?session=s-1&lan=1", .missing("endpoint (the LAN host's relay)")),
            ("netplay://join?\(ok)&key=abc", .badKeyLength(3)),
            ("netplay://join?\(ok)&key=\(String(repeating: "~", count: 40))", .badKeyEncoding),
            ("netplay://join?\(ok)&key=\(key)0", .badKeyLength(41)),
            ("netplay://join?\(ok)&password=sesame", .passwordInLink),
            ("netplay://join?\(ok)&session=s-2", .badParameter("session")),
            ("netplay://join?\(ok)&colour=red", .badParameter("colour")),
            ("netplay://join?\(ok)&lan=yes", .badValue(parameter: "lan", reason: "'yes' is not 0 or 1")),
            ("netplay://join?session=%ZZ&coordinator=x", .badValue(parameter: "session", reason: "bad percent-encoding")),
            ("netplay://join?session=s-1&coordinator=http%3A%2F%2Fx",
             .badValue(parameter: "coordinator", reason: "'http://x' is not a ZeroMQ endpoint such as tcp://HOST:PORT")),
            ("netplay://join?session=\(String(repeating: "s", count: 65))&coordinator=tcp%3A%2F%2Fh%3A1",
             .badValue(parameter: "session", reason: "longer than 64 characters")),
            ("netplay://join?session=l-1&lan=1&endpoint=tcp%3A%2F%2Fh%3A1&key=\(key)",
             .badValue(parameter: "lan", reason: "a LAN room has no coordinator, discovery or key")),
            ("netplay://join?\(ok)&endpoint=tcp%3A%2F%2Fh%3A1",
             .badValue(parameter: "endpoint", reason: "only LAN rooms name their host's relay")),
        ]
        for (link, expected) in cases {
            #expect(throws: expected, "\(link)") { try NetplayInvite(url: link) }
        }
        // Every error reads as a sentence saying what is wrong.
        #expect(NetplayInvite.InviteError.badKeyLength(3).description.contains("40-character Z85"))
        #expect(NetplayInvite.InviteError.passwordInLink.description.contains("never carry a password"))
        // A room through a lobby without a coordinator cannot make a lobby invite.
        #expect(throws: NetplayInvite.InviteError.missing("coordinator")) {
            try NetplayInvite(room: NetplayRoom(Room(roomId: "s-1", transport: .relay)), lobby: NetplayLobby(discovery: nil, coordinator: nil))
        }
    }
}
