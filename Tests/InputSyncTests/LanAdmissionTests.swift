import NetplayAuth
import NetplayService
import NetplayWire
import Testing
@testable import InputSync
import NetplayTestSupport

/// A LAN host's admission follows its in-process relay's session: the room says when the match
/// runs, and a place frees up once its holder has been in the match and is gone.
@Suite("LAN admission follows the relay's session", .ownThread)
struct LanAdmissionTests {
    func admission(players: UInt32 = 2) -> LanAdmission {
        var settings = SessionSettings(roomName: "lan", content: ContentInfo(gameName: "Arena"))
        settings.maxPlayers = players
        settings.inputSize = 1
        settings.spectatorsAllowed = true
        settings.maxSpectators = 2
        return LanAdmission(sessionId: "lan-1", settings: settings, relayEndpoint: "tcp://127.0.0.1:1",
                            keyRing: TicketKeyRing.generate())
    }

    func join(_ admission: LanAdmission, _ name: String, role: Role = .player) throws(ServiceError) -> JoinSessionResponse {
        let body = try admission.handle(.joinSessionRequest(JoinSessionRequest(sessionId: "lan-1", role: role, name: name,
                                                                                content: ContentInfo(gameName: "Arena"))))
        guard case .joinSessionResponse(let response)? = body else { throw ServiceError(.internal, "no join response") }
        return response
    }

    @Test func placesFreeUpOnlyOnceTheirHolderWasInTheMatchAndLeft() throws {
        let lan = admission()
        let host = try lan.hostTicket(name: "alice").ticket
        let bob = try join(lan, "bob")
        let watcher = try join(lan, "watcher", role: .spectator)
        #expect(lan.occupancy == (2, 1))
        // The relay has only seen the host so far: bob and the watcher hold fresh tickets and keep their places.
        lan.sessionChanged(running: false, present: [host.participantId])
        #expect(lan.occupancy == (2, 1))
        #expect(throws: ServiceError.self) { try join(lan, "carol") }
        // Everyone attached and the match runs.
        lan.sessionChanged(running: true, present: [host.participantId, bob.participantId, watcher.participantId])
        #expect(lan.inProgress)
        guard case .sessionResponse(let described)? = try lan.handle(.getSessionRequest(GetSessionRequest(sessionId: "lan-1"))) else {
            Issue.record("no session response")
            return
        }
        #expect(described.session.state == .running)
        // Bob and the watcher are gone: carol takes slot 2. The watcher keeps its place for the
        // pending-join timeout (the relay drops a spectator whose link falls quiet, and it may
        // come back; LanSessionGoneTests follows it to the end).
        lan.sessionChanged(running: true, present: [host.participantId])
        #expect(lan.occupancy == (1, 1))
        #expect(try join(lan, "carol").slot == 2)
        #expect(lan.inProgress, "a match that ran stays started")
    }

    /// A joiner coming and going for the room's whole life (join, attach, leave; or join and
    /// never attach) leaves nothing behind: the admission remembered every participant it ever
    /// saw and where each joined from.
    @Test func joinersComingAndGoingLeaveNothingBehind() throws {
        let lan = admission()
        let host = try lan.hostTicket(name: "alice").ticket
        lan.sessionChanged(running: true, present: [host.participantId])
        for round in 0 ..< 200 {
            let joined = try join(lan, "mallory \(round)")
            lan.sessionChanged(running: true, present: [host.participantId, joined.participantId])
            lan.sessionChanged(running: true, present: [host.participantId])
        }
        #expect(lan.rememberedParticipants <= 2, "\(lan.rememberedParticipants) participants remembered")
        #expect(try join(lan, "bob").slot == 2)
    }

    /// One address may send 60 joins a minute, 15 at once: a LAN stranger could otherwise hold
    /// every open place with joins it never attaches, over and over. Others are not limited by it.
    @Test func oneAddressJoinsAtTheCoordinatorsPaceNotWithoutBound() throws {
        let lan = admission(players: 8)
        _ = try lan.hostTicket(name: "alice")
        func join(_ name: String, from source: String) -> ErrorCode? {
            do {
                _ = try lan.handle(.joinSessionRequest(JoinSessionRequest(sessionId: "lan-1", role: .player, name: name,
                                                                          content: ContentInfo(gameName: "Arena"))), source: source)
                return nil
            } catch { return error.code }
        }
        let answers = (0 ..< 15).map { join("mallory \($0)", from: "10.0.0.9") }
        #expect(answers.prefix(7).allSatisfy { $0 == nil } && answers.dropFirst(7).allSatisfy { $0 == .roomFull }, "\(answers)")
        #expect(join("mallory 15", from: "10.0.0.9") == .rateLimited)
        #expect(join("bob", from: "10.0.0.10") == .roomFull, "another address is not limited by mallory's joins")
    }
}
