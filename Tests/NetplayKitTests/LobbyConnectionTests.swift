import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Synchronization
import Testing
import ZeroMQ
import Games
import NetplayAuth
@testable import NetplayKit

@Suite("NetplayLobby keeps its connections and outlasts a lost request", .ownThread)
struct LobbyConnectionTests {
    func lobby(_ service: LyingService, timeout: Double = 0.3) -> NetplayLobby {
        var lobby = NetplayLobby(discovery: service.requests, coordinator: service.requests, timeout: timeout)
        lobby.measuresRelays = false
        return lobby
    }

    /// A discovery whose pages never end (an empty page with a token, a page naming itself as
    /// the next, two pages naming each other) no longer keeps a listing asking forever, nor
    /// passes off what it sent so far as the list: the call fails with the reason.
    @Test(arguments: [(0, 1, 1), (1, 1, 2), (1, 2, 3)])
    func aListingWhosePagesDoNotMoveOnFails(roomsPerPage: Int, tokens: Int, requests: Int) throws {
        let service = try LyingService { served, _ in
            .listRoomsResponse(ListRoomsResponse(rooms: (0 ..< roomsPerPage).map { Room(roomId: "r\(served)-\($0)", maxPlayers: 2) },
                                                 nextPageToken: "t\(served % tokens)"))
        }
        defer { service.stop() }
        let error = #expect(throws: NetplayError.self) { try lobby(service).lobbyRooms() }
        #expect(error?.message.contains("broke its paging") == true, "\(String(describing: error))")
        #expect(service.log.count == requests, "\(service.log.count) pages asked for")
    }

    /// Pages that move on but never end are followed up to the page limit, then the call fails.
    @Test func aListingPastThePageLimitFails() throws {
        let service = try LyingService { served, _ in
            .listRoomsResponse(ListRoomsResponse(rooms: [Room(roomId: "r\(served)", maxPlayers: 2)], nextPageToken: "t\(served)"))
        }
        defer { service.stop() }
        let error = #expect(throws: NetplayError.self) { try lobby(service).lobbyRooms(limit: .max) }
        #expect(error?.message.contains("did not end after \(NetplayLobby.maxPages) pages") == true, "\(String(describing: error))")
        #expect(service.log.count == NetplayLobby.maxPages)
    }

    /// An invite to a lobby room is joined through the cluster's coordinator. A discovery that
    /// answered the invite's room with a LAN room had the join, password and all, go in plain
    /// text to an endpoint it chose; one answering with another room had the app show it.
    @Test func anInvitesRoomIsTheRoomItNames() throws {
        let elsewhere = try LyingService(script: { _ in .emptyRoomList })
        defer { elsewhere.stop() }
        var lan = Room(roomId: "s-invited", sessionId: "s-invited", roomName: "invited", transport: .lan,
                       hostEndpoint: elsewhere.requests)
        lan.hasPassword = true
        let other = Room(roomId: "s-other", sessionId: "s-other", roomName: "other", transport: .relay)
        for answer in [lan, other] {
            let service = try LyingService(script: { _ in .reply(.getRoomResponse(GetRoomResponse(room: answer))) })
            defer { service.stop() }
            let invite = NetplayInvite(sessionId: "s-invited", discovery: service.requests, coordinator: service.requests)
            #expect(throws: NetplayError.self) { try invite.room(through: lobby(service)) }
        }
        #expect(elsewhere.log.isEmpty)
        // The room itself is taken.
        let right = Room(roomId: "s-invited", sessionId: "s-invited", roomName: "invited", transport: .relay)
        let service = try LyingService(script: { _ in .reply(.getRoomResponse(GetRoomResponse(room: right))) })
        defer { service.stop() }
        let found = try NetplayInvite(sessionId: "s-invited", discovery: service.requests, coordinator: service.requests)
            .room(through: lobby(service))
        #expect(found.roomName == "invited" && !found.isLAN)
    }

    @Test func callsShareOneConnectionInsteadOfAHandshakeEach() throws {
        let service = try LyingService(script: { _ in .emptyRoomList })
        defer { service.stop() }
        let lobby = lobby(service)
        for _ in 0 ..< 5 { _ = try lobby.lobbyRooms() }
        let copy = lobby
        _ = try copy.lobbyRooms()
        #expect(service.log.count == 6)
        #expect(Set(service.log.map(\.connection)).count == 1, "one connection for every call, copies of the lobby included")
        #expect(lobby.connections.idleCount == 1)
    }

    @Test func aRequestSafeToRepeatIsSentAgainWhenItsReplyDoesNotCome() throws {
        // The first copy of every request is lost; the second is answered.
        let service = try LyingService(script: { arrival in arrival.copy == 1 ? .silence : .emptyRoomList })
        defer { service.stop() }
        let rooms = try lobby(service).lobbyRooms()
        #expect(rooms.isEmpty)
        let log = service.log
        #expect(log.count == 2 && Set(log.map(\.requestId)).count == 1, "the same request, sent twice: \(log.count) arrivals")
    }

    @Test func aResentCopyRefusedWhileTheFirstIsServedDoesNotHideItsSuccess() throws {
        // The first copy is served slowly (past one timeout); the resent copy is refused at
        // once, as a coordinator's rate limit refuses a repeated create. The call succeeds.
        let service = try LyingService(script: { arrival in arrival.copy == 1 ? .replyAfter(milliseconds: 700, .listRoomsResponse(ListRoomsResponse())) : .refuse(.rateLimited) })
        defer { service.stop() }
        let rooms = try lobby(service).lobbyRooms()
        #expect(rooms.isEmpty)
        #expect(service.log.count == 2, "sent once, resent once after the first timeout: \(service.log.count)")
    }

    @Test func everyCopyRefusedIsTheServicesWordNotATimeout() throws {
        let service = try LyingService(script: { arrival in arrival.copy == 1 ? .silence : .refuse(.rateLimited) })
        defer { service.stop() }
        var lobby = lobby(service, timeout: 0.2)
        lobby.tries = 2
        let error = #expect(throws: NetplayError.self) { try lobby.lobbyRooms() }
        #expect(error?.code == .rateLimited, "the held refusal, once the time is up: \(String(describing: error))")
    }

    @Test func anyOtherRequestIsSentOnceAndWaitedForLonger() throws {
        // The answer comes after two timeouts: within the three tries a call waits.
        let service = try LyingService(script: { _ in .replyAfter(milliseconds: 700, .listRoomsResponse(ListRoomsResponse())) })
        defer { service.stop() }
        let lobby = lobby(service)
        let body = try lobby.call(lobby.coordinatorEndpoint, "coordinator", .startSessionRequest(StartSessionRequest(
            sessionId: "s-1", participantId: "host-1", participantToken: [1, 2, 3])))
        guard case .listRoomsResponse = body else { Issue.record("answered \(body.name)"); return }
        #expect(service.log.count == 1, "a request that is not safe to repeat went out \(service.log.count) times")
    }

    @Test func silenceFailsAfterEveryTryAndTheConnectionIsClosed() throws {
        let service = try LyingService(script: { _ in .silence })
        defer { service.stop() }
        var lobby = lobby(service, timeout: 0.2)
        lobby.tries = 2
        let started = ContinuousClock.now
        let error = #expect(throws: NetplayError.self) { try lobby.lobbyRooms() }
        let waited = ContinuousClock.now - started
        #expect(error?.code == .unavailable)
        #expect(error?.message.contains("did not answer within 0.4 s") == true, "\(error?.message ?? "")")
        #expect(waited >= .milliseconds(390) && waited < .seconds(3), "waited \(waited)")
        #expect(service.log.count == 2, "one send and one resend, not \(service.log.count)")
        #expect(lobby.connections.idleCount == 0, "a connection that timed out is not kept")
        // The next call opens a fresh connection rather than one with a request still queued.
        _ = try? lobby.lobbyRooms()
        #expect(Set(service.log.map(\.connection)).count == 2)
    }

    @Test func aConnectionUnusedForItsIdleTimeIsClosedAtBothEnds() throws {
        let service = try LyingService(script: { _ in .emptyRoomList })
        defer { service.stop() }
        var lobby = lobby(service)
        lobby.idleConnectionSeconds = 3
        let port = try #require(service.requests.split(separator: ":").last.flatMap { Int($0) })
        // Each use starts the idle time again: one connection for calls 0.5 s apart, 2 s in all.
        for _ in 0 ..< 4 {
            _ = try lobby.lobbyRooms()
            Thread.sleep(forTimeInterval: 0.5)
        }
        #expect(Set(service.log.map(\.connection)).count == 1)
        #expect(lobby.connections.idleCount == 1 && establishedConnections(toPort: port) == 1)
        #expect(eventually(within: 8) { lobby.connections.idleCount == 0 }, "the lobby still keeps it")
        #expect(eventually(within: 5) { establishedConnections(toPort: port) == 0 }, "the service still holds it")
        // The next call opens a new one.
        _ = try lobby.lobbyRooms()
        #expect(Set(service.log.map(\.connection)).count == 2)
    }

    @Test func anEndlessIdleTimeKeepsTheConnectionAndNoTimeIsNoneAtAll() throws {
        let service = try LyingService(script: { _ in .emptyRoomList })
        defer { service.stop() }
        var lobby = lobby(service)
        lobby.idleConnectionSeconds = .infinity
        _ = try lobby.lobbyRooms()
        lobby.idleConnectionSeconds = .nan
        _ = try lobby.lobbyRooms()
        #expect(Set(service.log.map(\.connection)).count == 1)
        #expect(eventually(within: 5) { lobby.connections.idleCount == 0 }, "NaN is no idle time: closed at once")
        lobby.idleConnectionSeconds = 1e300
        _ = try lobby.lobbyRooms()
        Thread.sleep(forTimeInterval: 0.3)
        #expect(lobby.connections.idleCount == 1, "kept for the lobby's life")
    }

    /// Established TCP connections on this host whose local port is `port`: a service's side of
    /// its clients' connections.
    func establishedConnections(toPort port: Int) -> Int {
        // Read to the end: the file's size says 0, and a one-size read stops at the first page.
        guard let data = FileHandle(forReadingAtPath: "/proc/net/tcp")?.readDataToEndOfFile(),
              let table = String(data: data, encoding: .utf8) else { return -1 }
        let local = ":" + String(format: "%04X", port)
        return table.split(separator: "\n").dropFirst().filter { line in
            let fields = line.split(separator: " ")
            return fields.count > 3 && fields[1].hasSuffix(local) && fields[3] == "01"
        }.count
    }

    @Test func anErrorReplyIsTheServicesWordAndKeepsTheConnection() throws {
        let service = try LyingService(script: { _ in .refuse(.notFound) })
        defer { service.stop() }
        let lobby = lobby(service)
        let error = #expect(throws: NetplayError.self) { try lobby.lobbyRoom(id: "nowhere") }
        #expect(error?.code == .notFound && error?.message == "scripted")
        #expect(service.log.count == 1, "an answered request is not repeated")
        #expect(lobby.connections.idleCount == 1)
    }

    /// A room the coordinator made whose match could not be built (its relay endpoint one the
    /// app cannot connect to) stayed listed until the coordinator expired it, its seat taken,
    /// and a retry made a second one: the seat is given back.
    @Test func aMatchThatCannotBeMadeGivesItsSeatBack() throws {
        let ticket = try JoinTicketSigner(keyRing: TicketKeyRing.generate()).issue(
            sessionId: "s-1", participantId: "p1", role: .player, slot: 1, relayId: "r", relayEndpoint: "tcp://127.0.0.1:port",
            params: SyncParams(inputSize: 2, maxPlayers: 2), name: "h", ttlMs: 60_000, nowUnixMs: UnixTime.nowMs())
        let coordinator = try LyingService(script: { arrival in
            if case .createSessionRequest = arrival.request.body {
                return .reply(.createSessionResponse(CreateSessionResponse(session: SessionInfo(sessionId: "s-1"), participantId: "p1",
                                                                           participantToken: [1, 2, 3], ticket: ticket)))
            }
            return .reply(.sessionResponse(SessionResponse(session: SessionInfo(sessionId: "s-1"))))
        })
        defer { coordinator.stop() }
        var lobby = NetplayLobby(discovery: nil, coordinator: coordinator.requests)
        lobby.measuresRelays = false
        let client = NetplayClient(name: "h", lobby: lobby)
        var settings = NetplaySettings(roomName: "r")
        settings.network = .relay
        #expect(throws: (any Error).self) {
            _ = try client.host(game: Arena(playerCount: 2), inputSize: 2, settings: settings,
                                content: ContentInfo(gameName: "g", coreId: "c", coreVersion: "1"))
        }
        #expect(coordinator.log.contains { if case .leaveSessionRequest(let leave) = $0.request.body { leave.sessionId == "s-1" } else { false } },
                "\(coordinator.log.map { $0.request.body.name })")
    }
}
