import Foundation
import Games
import NetplayService
import NetplayTestSupport
import NetplayWire
import Rollback
import Testing
@testable import NetplayKit

/// Host controls end to end: a real cluster (discovery, coordinator, relay processes) and a LAN
/// room's in-process relay.
@Suite("NetplayKit: host controls", .serialized, .ownThread)
struct HostControlsE2ETests {
    let content = ContentInfo(gameName: "Arena", crc32: 0xA7E7_A001, coreId: "netplay.games.arena", coreVersion: "1")

    func settings(_ name: String, network: NetplayNetwork) -> NetplaySettings {
        var settings = NetplaySettings(roomName: name)
        settings.network = network
        settings.maxPlayers = 3  // a free slot: the match waits for the host's start
        settings.frameRateMilliHertz = 120_000
        settings.automaticFrameDelay = false
        settings.predictionWindow = 12
        return settings
    }

    /// Runs blocking `work` on a thread of its own (the matches keep ticking meanwhile in `drive`).
    final class Pending<T: Sendable>: @unchecked Sendable {
        private let lock = NSLock()
        private var value: Result<T, Error>?
        init(_ work: @escaping @Sendable () throws -> T) {
            Thread.detachNewThread {
                let result = Result { try work() }
                self.lock.withLock { self.value = result }
            }
        }
        var result: Result<T, Error>? { lock.withLock { value } }
    }

    @Test func theHostApprovesSwapsAndAloneStartsInAClusterRoom() async throws {
        var options = TestCluster.Options(secret: String(repeating: "b8", count: 32))
        options.name = "hostctl"
        options.coordinatorArguments = ["--password-cost", "minimum", "--relay-refresh-interval", "0.5"]
        let cluster = try TestCluster(options)
        var lobby = NetplayLobby(discovery: cluster.discoveryEndpoint, coordinator: cluster.coordinatorEndpoint)
        lobby.measuresRelays = false
        lobby.approvalWaitSeconds = 30
        let alice = NetplayClient(name: "alice", lobby: lobby)
        var settings = settings("hostctl", network: .relay)
        settings.approveJoiners = true
        var hosted: (match: NetplayMatch<Arena>, lanHost: LanHost?)?
        for _ in 0 ..< 50 where hosted == nil {
            hosted = try? alice.host(game: Arena(playerCount: 3), inputSize: Arena.inputSize, settings: settings, content: content)
            if hosted == nil { try await Task.sleep(for: .milliseconds(200)) }  // the relay registers
        }
        let hostMatch = try #require(hosted?.match)
        let controls = try #require(hostMatch.hostControls)
        hostMatch.start()
        let sessionId = hostMatch.admission.sessionId
        let lobbyCopy = lobby
        let content = self.content
        let bobJoin = Pending { try lobbyCopy.join(sessionId: sessionId, name: "bob", content: content) }
        let carolJoin = Pending { try lobbyCopy.join(sessionId: sessionId, name: "carol", content: content) }

        // Both wait for the host; it admits bob and refuses carol.
        var waiting: [PendingJoin] = []
        for _ in 0 ..< 100 where waiting.count < 2 {
            _ = drive([hostMatch], seconds: 0.1, until: { false })
            waiting = try await controls.pendingJoins()
        }
        #expect(Set(waiting.map(\.name)) == ["bob", "carol"])
        #expect(bobJoin.result == nil && carolJoin.result == nil, "nobody is admitted before the host decides: \(String(describing: bobJoin.result))")
        for join in waiting {
            if join.name == "bob" { try await controls.approve(join.pendingId) } else { try await controls.refuse(join.pendingId, reason: "full") }
        }
        _ = drive([hostMatch], seconds: 10, until: { bobJoin.result != nil && carolJoin.result != nil })
        guard case .failure(let refusal as NetplayError)? = carolJoin.result else {
            Issue.record("carol's join was not refused: \(String(describing: carolJoin.result))")
            return
        }
        #expect(refusal.code == .refusedByHost)
        guard case .success(let bobAdmission)? = bobJoin.result else {
            Issue.record("bob was not admitted: \(String(describing: bobJoin.result))")
            return
        }
        #expect(bobAdmission.slot == 2 && bobAdmission.participantToken.isEmpty == false)
        let bobMatch = try NetplayMatch(game: Arena(playerCount: 3), admission: bobAdmission)
        #expect(bobMatch.hostControls == nil)
        bobMatch.start()
        #expect(drive([hostMatch, bobMatch], seconds: 10, until: { bobMatch.relayKnowsUs && hostMatch.peers.count == 2 }))

        // The host swaps with bob: the coordinator pushes it to the relay, which moves both.
        try await controls.swap(1, 2)
        #expect(drive([hostMatch, bobMatch], seconds: 10, until: { hostMatch.slot == 2 && bobMatch.slot == 1 }),
                "host in \(hostMatch.slot), bob in \(bobMatch.slot)")
        // Bob, now in slot 1, may not start the match; the host, in slot 2, may.
        bobMatch.link.send(.startSessionRequest(StartSessionRequest(sessionId: sessionId, participantId: bobAdmission.ticket.participantId,
                                                                    participantToken: bobAdmission.participantToken)),
                           requestId: bobMatch.takeRequestId(), now: bobMatch.nowMs)
        #expect(drive([hostMatch, bobMatch], seconds: 5, until: {
            bobMatch.events.contains { if case .error(.permissionDenied, _) = $0 { true } else { false } }
        }), "the relay refuses bob's start: \(bobMatch.events)")
        #expect(!hostMatch.isRunning && !bobMatch.isRunning)
        hostMatch.startNow()
        // Inputs follow the swap: each plays its new slot, and the two simulations agree.
        let agreed = drive([hostMatch, bobMatch], seconds: 30, until: {
            hostMatch.reportedChecksums[240] != nil && bobMatch.reportedChecksums[240] != nil
        })
        #expect(agreed, "host at \(hostMatch.currentFrame) \(hostMatch.state), bob at \(bobMatch.currentFrame) \(bobMatch.state)")
        #expect(hostMatch.reportedChecksums[240] == bobMatch.reportedChecksums[240] && hostMatch.desyncs == 0)
        // After the start slots stay put.
        await #expect(throws: NetplayError.self) { try await controls.swap(1, 2) }
        // The host ends the room for everyone.
        try await controls.end(reason: "good game")
        #expect(drive([hostMatch, bobMatch], seconds: 10, until: {
            if case .disconnected(.sessionEnded) = bobMatch.state { true } else { false }
        }), "bob: \(bobMatch.state)")
    }

    @Test func aLanHostKicksBansSwapsAndEnds() async throws {
        let port = UInt16(TestPorts.free())
        let alice = NetplayClient(name: "alice", lobby: NetplayLobby(discovery: nil, coordinator: nil, lanBeaconPort: port))
        let (hostMatch, lanHost) = try alice.host(game: Arena(playerCount: 3), inputSize: Arena.inputSize,
                                                  settings: settings("kit-hostctl", network: .lan), content: content,
                                                  lanBeaconHost: "127.0.0.1", lanAdvertiseAddress: "127.0.0.1")
        let host = try #require(lanHost)
        defer { host.stop() }
        let controls = try #require(hostMatch.hostControls)
        let lobby = NetplayLobby(discovery: nil, coordinator: nil, lanBeaconPort: port)
        let room = try #require(try lobby.lanRooms(listeningFor: 1_500).first { $0.roomName == "kit-hostctl" })
        hostMatch.start()
        let bob = try NetplayMatch(game: Arena(playerCount: 3), admission: try lobby.join(room, name: "bob", content: content))
        let carol = try NetplayMatch(game: Arena(playerCount: 3), admission: try lobby.join(room, name: "carol", content: content))
        bob.start()
        carol.start()
        #expect(drive([hostMatch, bob, carol], seconds: 10, until: { hostMatch.peers.filter(\.connected).count == 3 }))

        // A swap moves the host and bob; the host still alone hosts.
        try await controls.moveHost(toSlot: 2)
        #expect(drive([hostMatch, bob, carol], seconds: 10, until: { hostMatch.slot == 2 && bob.slot == 1 }),
                "host in \(hostMatch.slot), bob in \(bob.slot)")
        #expect(try await controls.session().slots.first { $0.participant?.isHost == true }?.slot == 2)

        // Carol is banned: detached, and refused when she tries again under her name.
        try await controls.ban(slot: 3, reason: "cheating")
        #expect(drive([hostMatch, bob, carol], seconds: 10, until: {
            if case .disconnected(.kicked) = carol.state { true } else { false }
        }), "carol: \(carol.state)")
        #expect(throws: NetplayError(.banned, "You were banned from this session by the host.")) {
            _ = try lobby.join(room, name: "carol", content: content)
        }
        // Bob is kicked (no ban): detached, his slot free again.
        try await controls.kick(slot: 1)
        #expect(drive([hostMatch, bob], seconds: 10, until: {
            if case .disconnected(.kicked) = bob.state { true } else { false }
        }), "bob: \(bob.state)")
        #expect(try await controls.session().slots.first { $0.slot == 1 }?.participant == nil)

        try await controls.end(reason: "bye")
        #expect(drive([hostMatch], seconds: 10, until: {
            if case .disconnected(.sessionEnded) = hostMatch.state { true } else { false }
        }), "host: \(hostMatch.state)")
        #expect(throws: NetplayError.self) { _ = try lobby.join(room, name: "dave", content: content) }
    }
}
