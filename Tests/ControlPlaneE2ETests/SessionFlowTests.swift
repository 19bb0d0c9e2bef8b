import Foundation
import NetplayAuth
import NetplayService
import NetplayTestSupport
import NetplayWire
import Synchronization
import Testing

@Suite("Control plane end to end (real processes)", .serialized, .ownThread)
struct SessionFlowTests {
    @Test func hostListJoinSpectateLeaveAndEnd() throws {
        let cluster = try ControlPlane()
        let events = try cluster.keys.operatorSubscriber(events: cluster.coordinatorEvents, prefixes: ["sessions.", "relays."])
        // Registering publishes relays.registered: register until one arrives, so the subscription is live.
        var relay = try FakeRelay("sync-0", cluster: cluster)
        while try events.next(timeout: 200) == nil {
            relay.stop()
            relay = try FakeRelay("sync-0", cluster: cluster)
        }
        defer { relay.stop() }
        let client = try cluster.coordinatorClient()
        let host = try client.create(settings(players: 2, spectators: 1))
        let id = host.session.sessionId
        #expect(host.session.relayId == "sync-0" && host.ticket?.relayEndpoint == relay.endpoint)
        try JoinTicketVerifier(keyRing: try TicketKeyRing(parsing: ControlPlane.secret)).verify(host.ticket!, relayId: "sync-0")

        // The room shows up in discovery's lobby.
        #expect(eventually(within: 5) { (try? cluster.rooms().first { $0.roomId == id }) != nil })
        var room = try #require(try cluster.rooms().first { $0.roomId == id })
        #expect(room.currentPlayers == 1 && room.maxPlayers == 2 && room.hostName == "alice" && room.relayEndpoint == relay.endpoint)

        let bob = try client.join(id, "bob")
        #expect(bob.slot == 2)
        let carol = try client.join(id, "carol", role: .spectator)
        #expect(carol.slot == 0 && carol.ticket?.role == .spectator)
        #expect(eventually(within: 5) {
            (try? cluster.rooms().first { $0.roomId == id }).map { $0.currentPlayers == 2 && $0.currentSpectators == 1 } ?? false
        })
        // A full room drops out of "has a free slot" listings.
        #expect(try cluster.rooms(RoomFilter(hasFreeSlot: true)).contains { $0.roomId == id } == false)

        _ = try client.request(.leaveSessionRequest(LeaveSessionRequest(sessionId: id, participantId: bob.participantId,
                                                                        participantToken: bob.participantToken)))
        #expect(eventually(within: 5) { (try? cluster.rooms().first { $0.roomId == id })?.currentPlayers == 1 })
        let session = try client.session(id)
        #expect(session.slots.map { $0.participant?.name } == ["alice", nil] && session.spectators.map(\.name) == ["carol"])

        _ = try client.request(.startSessionRequest(StartSessionRequest(sessionId: id, participantId: host.participantId,
                                                                        participantToken: host.participantToken)))
        #expect(eventually(within: 5) { (try? cluster.rooms().first { $0.roomId == id })?.inProgress == true })
        room = try #require(try cluster.rooms().first { $0.roomId == id })
        #expect(try cluster.rooms(RoomFilter()).contains { $0.roomId == id } == false, "in-progress rooms are hidden by default")

        _ = try client.request(.endSessionRequest(EndSessionRequest(sessionId: id, participantId: host.participantId,
                                                                    participantToken: host.participantToken, reason: "done")))
        #expect(eventually(within: 5) { (try? cluster.rooms().contains { $0.roomId == id }) == false })
        #expect(try client.session(id).state == .ended)
        #expect(eventually(within: 3) { relay.closes.withLock { $0.contains(id) } }, "the relay learns to close the session")

        var topics: [String] = []
        while let event = try events.next(timeout: 300) { if event.topic.hasPrefix("sessions.") { topics.append(event.topic) } }
        #expect(topics == ["sessions.created", "sessions.player_joined", "sessions.spectator_joined", "sessions.left",
                           "sessions.started", "sessions.ended"])
    }

    @Test func everyCheckAnswersItsErrorCode() throws {
        let cluster = try ControlPlane(coordinator: ["--password-attempts", "3"])
        let relay = try FakeRelay("sync-0", cluster: cluster)
        defer { relay.stop() }
        let client = try cluster.coordinatorClient()
        let open = try client.create(settings(players: 2, spectators: 1))
        let id = open.session.sessionId
        var wrongRom = smb
        wrongRom.crc32 = 0xDEAD_BEEF
        var wrongCore = smb
        wrongCore.coreId = "fceumm"
        var wrongVersion = smb
        wrongVersion.coreVersion = "1.40"
        func join(_ name: String, role: Role = .player, password: String = "", content: ContentInfo = smb, slot: UInt32 = 0,
                  session: String? = nil) -> Envelope.Body {
            .joinSessionRequest(JoinSessionRequest(sessionId: session ?? id, role: role, name: name, password: password,
                                                   content: content, preferredSlot: slot))
        }
        let reply = try client.requestEnvelope(join("x", content: wrongRom))
        guard case .error(let mismatch) = reply.body else { Issue.record("joined with the wrong ROM"); return }
        #expect(mismatch.code == .contentMismatch && mismatch.message.contains("Same ROM required"))
        #expect(try client.code(join("x", content: wrongCore)) == .coreMismatch)
        #expect(try client.code(join("x", content: wrongVersion)) == .coreVersionMismatch)
        #expect(try client.code(join("x", slot: 1)) == .slotTaken)
        #expect(try client.code(join("x", session: "s-missing")) == .notFound)
        _ = try client.join(id, "bob")
        #expect(try client.code(join("x")) == .roomFull)
        _ = try client.join(id, "watcher", role: .spectator)
        #expect(try client.code(join("y", role: .spectator)) == .spectatorsFull)
        let noSpectators = try client.create(settings(spectators: 0)).session.sessionId
        #expect(try client.code(join("y", role: .spectator, session: noSpectators)) == .spectatorsNotAllowed)

        // Passwords: hashed off the reactor (Argon2id), wrong ones refused, then rate-limited.
        let locked = try client.create(settings(players: 4, password: "sesame")).session.sessionId
        #expect(try client.code(join("m", password: "guess1", session: locked)) == .wrongPassword)
        #expect(try client.code(join("m", password: "guess2", session: locked)) == .wrongPassword)
        #expect(try client.code(join("m", password: "guess3", session: locked)) == .wrongPassword)
        let limited = try client.requestEnvelope(join("m", password: "sesame", session: locked))
        guard case .error(let rate) = limited.body else { Issue.record("not rate limited"); return }
        #expect(rate.code == .rateLimited && rate.retryAfterMs > 0)

        // Identity and permissions.
        let bobToken = try client.join(noSpectators, "bob").participantToken
        let hostOf = try client.session(noSpectators).hostParticipantId
        #expect(try client.code(.startSessionRequest(StartSessionRequest(sessionId: noSpectators, participantId: hostOf,
                                                                         participantToken: bobToken))) == .unauthenticated)
        #expect(try client.code(.kickParticipantRequest(KickParticipantRequest(
            sessionId: id, participantId: open.participantId, participantToken: Array(repeating: 0, count: 32),
            targetParticipantId: "x"))) == .unauthenticated)
        let start = Envelope.Body.startSessionRequest(StartSessionRequest(sessionId: id, participantId: open.participantId,
                                                                          participantToken: open.participantToken))
        #expect(try client.code(start) == nil)
        #expect(try client.code(start) == .invalidState)
        let bob = try #require(try client.session(id).slots[1].participant)
        #expect(try client.code(.kickParticipantRequest(KickParticipantRequest(
            sessionId: id, participantId: open.participantId, participantToken: open.participantToken,
            targetParticipantId: bob.participantId, ban: true))) == nil)
        #expect(try client.code(join("bob")) == .banned)
        #expect(try client.code(.endSessionRequest(EndSessionRequest(sessionId: id, participantId: open.participantId,
                                                                     participantToken: open.participantToken))) == nil)
        #expect(try client.code(join("late")) == .sessionEnded)

        // Malformed, oversize and unknown requests.
        try client.sendRaw([0x08, 0x07, 0xFF])
        guard case .error(let malformed) = try Envelope(decoding: try client.receiveRaw()).body else { Issue.record("no error"); return }
        #expect(malformed.code == .malformed)
        // A 200-byte session id in a JoinSessionRequest (body 102), hand-encoded past the client-side checks.
        try client.sendRaw(ProtobufWriter.envelope(requestId: 9, body: 102) { $0.bytesField(1, Array(repeating: 0x41, count: 200)) })
        let oversize = try Envelope(decoding: try client.receiveRaw())
        guard case .error(let tooLong) = oversize.body else { Issue.record("no error"); return }
        #expect(oversize.requestId == 9 && tooLong.code == .badRequest && tooLong.field == "JoinSessionRequest.session_id")
        // A cluster request on the public endpoint is refused before the coordinator looks at it.
        #expect(try client.code(.announceRoomRequest(AnnounceRoomRequest(room: Room(roomId: "x"), announcerId: "y"))) == .permissionDenied)

        // No relay at all: NO_RELAY with a retry hint.
        relay.stop()
        let lonely = try ControlPlane(discovery: false, coordinator: ["--discovery", "none"])
        let noRelay = try lonely.coordinatorClient().requestEnvelope(.createSessionRequest(CreateSessionRequest(settings: settings(), hostName: "a")))
        guard case .error(let none) = noRelay.body else { Issue.record("created without a relay"); return }
        #expect(none.code == .noRelay && none.retryAfterMs > 0)
        #expect(cluster.coordinator!.process.isRunning && cluster.discovery!.process.isRunning)
    }

    @Test func aCoordinatorKilledWithSIGKILLKeepsEverySession() throws {
        let cluster = try ControlPlane(coordinator: ["--password-cost", "minimum"])
        let relay = try FakeRelay("sync-0", cluster: cluster)
        defer { relay.stop() }
        let client = try cluster.coordinatorClient()
        var hosts: [CreateSessionResponse] = []
        var joiners: [JoinSessionResponse] = []
        for index in 0..<12 {
            let host = try client.create(settings(players: 4, spectators: 2, password: index % 3 == 0 ? "pw" : ""), host: "host\(index)")
            hosts.append(host)
            for player in 0..<(index % 4) {
                joiners.append(try client.join(host.session.sessionId, "p\(index)-\(player)", password: index % 3 == 0 ? "pw" : ""))
            }
            if index % 2 == 0 {
                joiners.append(try client.join(host.session.sessionId, "s\(index)", role: .spectator, password: index % 3 == 0 ? "pw" : ""))
            }
            if index % 5 == 0 {
                _ = try client.request(.startSessionRequest(StartSessionRequest(sessionId: host.session.sessionId,
                                                                                participantId: host.participantId,
                                                                                participantToken: host.participantToken)))
            }
        }
        let before = try hosts.map { try client.session($0.session.sessionId) }
        #expect(eventually(within: 5) { (try? cluster.rooms().count) == 12 })
        cluster.coordinator!.send(SIGKILL)
        #expect(cluster.coordinator!.waitForExit(seconds: 5) != nil)
        #expect(cluster.coordinator!.terminationReason == .uncaughtSignal)
        // Restarted under another instance name, it still owns (and updates) the rooms it announced.
        try cluster.startCoordinator(instance: "coordinator-2")
        let after = try cluster.coordinatorClient()
        for session in before {
            #expect(try after.session(session.sessionId) == session)
        }
        guard case .listSessionsResponse(let list) = try after.request(.listSessionsRequest(ListSessionsRequest(pageSize: 200))) else { return }
        #expect(list.totalMatching == 12)
        // Tokens issued before the crash still work, and the password is still required.
        let joiner = try #require(joiners.last)
        let sessionOfJoiner = try #require(before.first { info in
            info.slots.contains { $0.participant?.participantId == joiner.participantId } ||
                info.spectators.contains { $0.participantId == joiner.participantId }
        })
        guard case .sessionResponse(let renewed) = try after.request(.renewTicketRequest(RenewTicketRequest(
            sessionId: sessionOfJoiner.sessionId, participantId: joiner.participantId, participantToken: joiner.participantToken))) else {
            Issue.record("renew failed"); return
        }
        #expect(renewed.ticket?.participantId == joiner.participantId)
        #expect(try after.code(.joinSessionRequest(JoinSessionRequest(sessionId: hosts[0].session.sessionId, name: "z", password: "no",
                                                                      content: smb))) == .wrongPassword)
        #expect(eventually(within: 3) { cluster.coordinator!.log.contains("storage open") && cluster.coordinator!.log.contains("sessions=12") })
        let open = hosts[10]  // 4 slots, host + 2 players, no password
        _ = try after.join(open.session.sessionId, "after-restart")
        #expect(eventually(within: 5) { (try? cluster.rooms().first { $0.roomId == open.session.sessionId })?.currentPlayers == 4 })
        #expect(cluster.coordinator!.log.contains("announcer=coordinator-1"))
    }

    @Test func concurrentJoinsNeverCorruptTheStore() throws {
        let cluster = try ControlPlane()
        let relay = try FakeRelay("sync-0", cluster: cluster)
        defer { relay.stop() }
        let client = try cluster.coordinatorClient()
        let sessions = try (0..<4).map { _ in try client.create(settings(players: 8, spectators: 8)).session.sessionId }
        let results = Mutex<[String: Int]>([:])
        let group = DispatchGroup()
        let endpoint = cluster.coordinatorEndpoint
        for worker in 0..<8 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                guard let client = try? BlockingClient(endpoint: endpoint, timeout: 5) else { return }
                for attempt in 0..<12 {
                    let id = sessions[(worker + attempt) % sessions.count]
                    let role: Role = attempt % 3 == 2 ? .spectator : .player
                    let key: String
                    do {
                        let code = try client.code(.joinSessionRequest(JoinSessionRequest(
                            sessionId: id, role: role, name: "w\(worker)-\(attempt)", content: smb)))
                        key = code?.protoName ?? "joined"
                    } catch {
                        key = "transport"
                    }
                    results.withLock { $0[key, default: 0] += 1 }
                }
            }
        }
        group.wait()
        let counts = results.withLock { $0 }
        #expect(counts["transport"] == nil, "\(counts)")
        var players = 0, spectators = 0
        for id in sessions {
            let info = try client.session(id)
            let holders = info.slots.compactMap(\.participant)
            #expect(Set(holders.map(\.slot)).count == holders.count, "a slot was given twice")
            #expect(holders.allSatisfy { $0.slot >= 1 && $0.slot <= 8 })
            #expect(info.spectators.count <= 8)
            players += holders.count - 1
            spectators += info.spectators.count
        }
        #expect(players + spectators == counts["joined"], "\(counts)")
        #expect(players == 28 && spectators == 32 - (counts["ERROR_CODE_SPECTATORS_FULL"] ?? 0), "\(counts)")
        // Kill it hard, restart, and the same state comes back.
        let snapshot = try sessions.map { try client.session($0) }
        cluster.coordinator!.send(SIGKILL)
        _ = cluster.coordinator!.waitForExit(seconds: 5)
        try cluster.startCoordinator()
        let after = try cluster.coordinatorClient()
        #expect(try sessions.map { try after.session($0) } == snapshot)
        let health = try cluster.keys.operatorClient(endpoint: cluster.coordinatorEndpoint)
            .request(.introspectRequest(IntrospectRequest(section: "sessions")))
        guard case .introspectResponse(let dump) = health else { return }
        #expect(dump.json.contains("\"sessions_active\":4"))
    }
}
