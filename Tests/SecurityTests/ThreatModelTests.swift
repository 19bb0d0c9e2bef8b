import Dispatch
import Foundation
import Synchronization
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing
import ZeroMQ

// The threat model (docs/security.md), played as attacks against a real cluster that a real
// netplay-supervisor started from compose/cluster.yaml. Each attacker is what anyone on the
// internet has: a ZeroMQ socket and the public endpoints, or a CurveZMQ key the cluster never
// issued. Every attack must be refused AND change nothing: sessions keep running, rooms and
// relays stay as they were, the cluster stays up with the same processes.

let nes = ContentInfo(gameName: "Threat Model", crc32: 0x1234_5678, coreId: "nestopia", coreVersion: "1.52.0", system: "nes")

func roomSettings(unlisted: Bool = false, password: String = "") -> SessionSettings {
    SessionSettings(roomName: "threat room", content: nes, transport: .relay, unlisted: unlisted, maxPlayers: 2,
                    spectatorsAllowed: true, maxSpectators: 2, playPassword: password)
}

/// An anonymous client: no credential at all.
func stranger(_ endpoint: String, timeout: Double = 2) throws -> BlockingClient {
    try BlockingClient(endpoint: endpoint, timeout: timeout)
}

/// The error code a request gets (nil when it succeeded or nothing answered).
func refusal(_ client: BlockingClient, _ body: Envelope.Body) -> ErrorCode? {
    guard let reply = try? client.requestEnvelope(body), case .error(let error) = reply.body else { return nil }
    return error.code
}

/// Whether anything answers `body` within the client's timeout.
func answers(_ client: BlockingClient, _ body: Envelope.Body) -> Bool {
    (try? client.requestEnvelope(body)) != nil
}

/// A host in the relay: created a session through the coordinator and attached with its ticket.
struct AttachedHost {
    let session: CreateSessionResponse
    let relay: BlockingClient

    init(cluster: SupervisedCluster, unlisted: Bool = false) throws {
        let coordinator = try stranger(cluster.coordinator)
        var created: CreateSessionResponse?
        _ = eventually(within: 15) {  // the relay registers a moment after the cluster is ready
            if case .createSessionResponse(let reply)? = try? coordinator.request(.createSessionRequest(
                CreateSessionRequest(settings: roomSettings(unlisted: unlisted), hostName: "alice"))) { created = reply }
            return created != nil
        }
        session = try #require(created, "no session could be created")
        let ticket = try #require(session.ticket)
        relay = try BlockingClient(endpoint: ticket.relayEndpoint, timeout: 2)
        guard case .attachResponse = try relay.request(.attachRequest(AttachRequest(ticket: ticket, protocolVersion: SyncProtocol.current, content: nes))) else {
            throw HarnessError("attach failed")
        }
    }

    var sessionId: String { session.session.sessionId }
}

@Suite("Threat model: attacks on a running cluster", .serialized, .ownThread)
struct ThreatModelTests {
    // Relay control from strangers.
    @Test func aStrangerCannotEndASessionOrDisconnectAPlayerOnTheRelay() throws {
        let cluster = try SupervisedCluster()
        defer { cluster.stop() }
        let host = try AttachedHost(cluster: cluster)
        let attacker = try stranger(cluster.relay)
        #expect(refusal(attacker, .closeRelaySessionRequest(CloseRelaySessionRequest(sessionId: host.sessionId, message: "pwned")))
                == .permissionDenied)
        #expect(refusal(attacker, .disconnectPeerRequest(DisconnectPeerRequest(
            sessionId: host.sessionId, participantId: host.session.participantId, message: "bye"))) == .permissionDenied)
        // A key the cluster never issued cannot even finish the handshake on the control plane.
        let relayMember = try cluster.keys.member("sync-0")
        let rogue = try BlockingClient(endpoint: try #require(relayMember.control), timeout: 1,
                                       serverKey: relayMember.publicKey, keys: try CurveKeyPair.generate())
        #expect(!answers(rogue, .closeRelaySessionRequest(CloseRelaySessionRequest(sessionId: host.sessionId))))
        let plain = try stranger(try #require(relayMember.control), timeout: 1)
        #expect(!answers(plain, .closeRelaySessionRequest(CloseRelaySessionRequest(sessionId: host.sessionId))))
        // A cluster member that is not the coordinator (another relay's key) is refused too.
        let otherRelay = try cluster.keys.client(to: relayMember, as: try cluster.keys.memberKeys(kind: "sync", instance: "sync-7"))
        #expect(refusal(otherRelay, .closeRelaySessionRequest(CloseRelaySessionRequest(sessionId: host.sessionId))) == .permissionDenied)

        // Nothing changed: the session is still served with its host attached, and the host
        // was told nothing.
        let relayState = try cluster.keys.operatorClient(instance: "sync-0").request(.introspectRequest(IntrospectRequest()))
        guard case .introspectResponse(let dump) = relayState else { Issue.record("no introspection"); return }
        #expect(dump.json.contains(host.sessionId), "the session is gone from the relay")
        // The relay told the host of no ending: everything it sent is play traffic (read before
        // the host's own silence could time it out).
        host.relay.timeout = 0.3
        var told: [String] = []
        while let frame = try? host.relay.receiveRaw(), told.count < 1000 {
            if let envelope = try? Envelope(decoding: frame) {
                switch envelope.body {
                case .detach(let detach) where detach.reason != .timeout:  // its own silence is no attack
                    told.append("Detach \(detach.reason) \(detach.message)")
                case .peerEvent, .error: told.append(envelope.body.name)
                default: break
                }
            }
        }
        #expect(told.isEmpty, "the host was told \(told)")
        #expect(cluster.log(of: "sync-0").contains("refused request"), "no warning in the relay's log")
        #expect(cluster.log(of: "sync-0").contains("peer=127.0.0.1"))
    }

    // Relay hijack and ticket theft; draining a relay from outside.
    @Test func onlyARelayRegistersAndOnlyForItself() throws {
        let cluster = try SupervisedCluster()
        defer { cluster.stop() }
        _ = try AttachedHost(cluster: cluster)  // the relay is registered
        let evil = RelayInfo(relayId: "sync-0", endpoint: "tcp://127.0.0.1:1", eventsEndpoint: "", region: "", version: "x")
        let attacker = try stranger(cluster.coordinator)
        #expect(refusal(attacker, .registerRelayRequest(RegisterRelayRequest(relay: evil))) == .permissionDenied)
        #expect(refusal(attacker, .refreshRelayRequest(RefreshRelayRequest(relayId: "sync-0", draining: true))) == .permissionDenied)
        // A relay key speaks only for its own instance; other members cannot register at all.
        let coordinatorMember = try cluster.keys.member("coordinator")
        let sync9 = try cluster.keys.client(to: coordinatorMember, as: try cluster.keys.memberKeys(kind: "sync", instance: "sync-9"))
        #expect(refusal(sync9, .registerRelayRequest(RegisterRelayRequest(relay: evil))) == .permissionDenied)
        #expect(refusal(sync9, .refreshRelayRequest(RefreshRelayRequest(relayId: "sync-0", draining: true))) == .permissionDenied)
        let notARelay = try cluster.keys.client(to: coordinatorMember, as: try cluster.keys.memberKeys(kind: "discovery", instance: "disc-9"))
        var selfNamed = evil
        selfNamed.relayId = "disc-9"
        #expect(refusal(notARelay, .registerRelayRequest(RegisterRelayRequest(relay: selfNamed))) == .permissionDenied)

        // Nothing changed: sync-0 keeps its endpoint, is not draining, and the next joiner's
        // ticket points at the real relay.
        guard case .listRelaysResponse(let relays) = try stranger(cluster.coordinator).request(.listRelaysRequest(ListRelaysRequest())) else {
            Issue.record("no relay list"); return
        }
        let sync0 = try #require(relays.relays.first { $0.relayId == "sync-0" })
        #expect(sync0.endpoint == cluster.relay && !sync0.draining)
        #expect(!relays.relays.contains { $0.relayId == "disc-9" || $0.relayId == "sync-9" })
        let next = try AttachedHost(cluster: cluster)
        #expect(next.session.ticket?.relayEndpoint == cluster.relay)
    }

    // Supervisor control verbs and forged heartbeats.
    @Test func theSupervisorTakesOrdersOnlyFromTheOperator() throws {
        let cluster = try SupervisedCluster()
        defer { cluster.stop() }
        let before = cluster.pids()
        let attacker = try stranger(cluster.supervisorPublic)
        #expect(refusal(attacker, .restartServiceRequest(RestartServiceRequest(service: "coordinator"))) == .permissionDenied)
        #expect(refusal(attacker, .scaleServiceRequest(ScaleServiceRequest(service: "sync", replicas: 50))) == .permissionDenied)
        #expect(refusal(attacker, .stopClusterRequest(StopClusterRequest(reason: "pwned"))) == .permissionDenied)
        #expect(refusal(attacker, .serviceHeartbeat(ServiceHeartbeat(service: "coordinator", instance: "coordinator", ready: false)))
                == .permissionDenied)
        let supervisor = try cluster.keys.member("supervisor")
        let rogue = try BlockingClient(endpoint: cluster.supervisorControl, timeout: 1, serverKey: supervisor.publicKey,
                                       keys: try CurveKeyPair.generate())
        #expect(!answers(rogue, .stopClusterRequest(StopClusterRequest())))
        // A member forging another instance's heartbeat is refused.
        let member = try cluster.keys.client(to: supervisor, as: try cluster.keys.memberKeys(kind: "sync", instance: "intruder"))
        #expect(refusal(member, .serviceHeartbeat(ServiceHeartbeat(service: "coordinator", instance: "coordinator", ready: false,
                                                                   sequence: 99))) == .permissionDenied)
        #expect(refusal(member, .stopClusterRequest(StopClusterRequest())) == .permissionDenied)
        // Nor may it speak for one through its pid: a heartbeat in its own name, which is no
        // instance of the cluster, carrying the coordinator's pid and "not ready" is refused. It
        // was taken as the coordinator's, and marked it unready (or kept a hung one alive).
        let coordinatorPid = try #require(before["coordinator"])
        #expect(refusal(member, .serviceHeartbeat(ServiceHeartbeat(service: "sync", instance: "intruder", pid: coordinatorPid,
                                                                   ready: false, sequence: 100))) == .notFound)
        #expect(cluster.status()?.services.first { $0.instance == "coordinator" }?.ready == true)
        // A heartbeat's pid is its sender's word: one no process can have is refused, not a trap
        // (pid_t(UInt32.max) took the supervisor down, and every service with it).
        for instance in ["intruder", "coordinator"] {
            let speaker = try cluster.keys.client(to: supervisor, as: try cluster.keys.memberKeys(kind: "sync", instance: instance))
            #expect(refusal(speaker, .serviceHeartbeat(ServiceHeartbeat(service: "sync", instance: instance, pid: .max, ready: true)))
                    == .badRequest)
        }
        // Even the operator cannot scale without bound.
        let operatorClient = try cluster.keys.operatorClient(instance: "supervisor")
        #expect(refusal(operatorClient, .scaleServiceRequest(ScaleServiceRequest(service: "sync", replicas: 40))) == .badRequest)

        // Nothing changed: the same processes, all ready.
        Thread.sleep(forTimeInterval: 1)
        let after = try #require(cluster.status())
        #expect(after.state == .running)
        #expect(cluster.pids() == before)
    }

    // Announcer ids were self-asserted.
    @Test func roomsAreAnnouncedOnlyByClusterMembersUnderTheirOwnName() throws {
        let cluster = try SupervisedCluster()
        defer { cluster.stop() }
        let host = try AttachedHost(cluster: cluster)
        let discovery = try stranger(cluster.discovery)
        var room: Room?
        _ = eventually(within: 10) {
            if case .getRoomResponse(let found)? = try? discovery.request(.getRoomRequest(GetRoomRequest(roomId: host.session.session.roomId))) {
                room = found.room
            }
            return room != nil
        }
        let original = try #require(room, "the session's room never appeared")
        var forged = original
        forged.roomName = "FREE SKINS"
        forged.hostEndpoint = "tcp://127.0.0.1:1"
        #expect(refusal(discovery, .announceRoomRequest(AnnounceRoomRequest(room: forged, ttlMs: 60_000, announcerId: "coordinator")))
                == .permissionDenied)
        #expect(refusal(discovery, .withdrawRoomRequest(WithdrawRoomRequest(roomId: original.roomId, announcerId: "coordinator")))
                == .permissionDenied)
        // A member key claiming the coordinator's announcer id announces as itself: the room
        // held by the coordinator stays the coordinator's.
        let member = try cluster.keys.clusterClient(as: "sync", instance: "intruder", endpoint: cluster.discovery)
        #expect(refusal(member, .announceRoomRequest(AnnounceRoomRequest(room: forged, ttlMs: 60_000, announcerId: "coordinator")))
                == .permissionDenied)
        #expect(refusal(member, .withdrawRoomRequest(WithdrawRoomRequest(roomId: original.roomId, announcerId: "coordinator")))
                == .permissionDenied)
        guard case .getRoomResponse(let after) = try discovery.request(.getRoomRequest(GetRoomRequest(roomId: original.roomId))) else {
            Issue.record("the room is gone"); return
        }
        #expect(after.room.roomName == original.roomName && after.room.hostEndpoint == original.hostEndpoint)
    }

    // Who may push, and spoofed instances.
    @Test func telemetryIngestsOnlyWhatMembersSayOfThemselves() throws {
        let cluster = try SupervisedCluster()
        defer { cluster.stop() }
        func snapshot(service: String = "sync", instance: String, metric: String) -> Envelope.Body {
            .metricsSnapshot(MetricsSnapshot(service: service, instance: instance, metrics: [
                Metric(name: metric, help: "test", kind: .gauge, value: 1)]))
        }
        // No key: the connection never completes.
        let plain = try Context.shared.socket(.push)
        try plain.set(.linger(milliseconds: 0))
        try plain.connect(cluster.ingest)
        _ = try? plain.send(try Envelope(body: snapshot(instance: "coordinator", metric: "netplay_forged_plain")).encoded(), flags: .dontWait)
        // A member's key: what it says of itself is taken, what it says of others is dropped.
        let member = try cluster.keys.telemetryPusher(to: cluster.ingest, kind: "sync", instance: "intruder")
        defer { member.close(); plain.close() }
        var page = ""
        let ownTaken = eventually(within: 10) {
            _ = try? member.send(try Envelope(body: snapshot(instance: "coordinator", metric: "netplay_forged_other")).encoded(), flags: .dontWait)
            // Nor may it name another service (it could fill every instance place as a/me, b/me, ...).
            _ = try? member.send(try Envelope(body: snapshot(service: "discovery", instance: "intruder",
                                                             metric: "netplay_forged_service")).encoded(), flags: .dontWait)
            _ = try? member.send(try Envelope(body: snapshot(instance: "intruder", metric: "netplay_own_metric")).encoded(), flags: .dontWait)
            page = httpGet(cluster.http, "/metrics")?.body ?? ""
            return page.contains("netplay_own_metric")
        }
        #expect(ownTaken, "a member's own metrics never showed")
        #expect(!page.contains("netplay_forged_other") && !page.contains("netplay_forged_plain") && !page.contains("netplay_forged_service"))
        #expect(page.contains("netplay_telemetry_spoofed_total"))
        let spoofed = page.split(separator: "\n").first { $0.hasPrefix("netplay_telemetry_spoofed_total") }
        #expect(spoofed.map { !$0.hasSuffix(" 0") } ?? false, "\(spoofed ?? "no spoofed counter")")
    }

    // One HTTP request crashed telemetry, eleven stopped the cluster.
    @Test func hostileHTTPRequestsStopNothing() throws {
        let cluster = try SupervisedCluster()
        defer { cluster.stop() }
        let before = cluster.pids()
        for path in Array(repeating: "/metrics?=", count: 11) + ["/metrics?&&=", "/api/sessions?%zz", "/?=&="] {
            #expect(httpGet(cluster.http, path) != nil, "no answer to \(path)")
        }
        #expect(httpGet(cluster.http, "/metrics")?.status == 200)
        #expect(cluster.status()?.state == .running)
        #expect(cluster.pids() == before, "a service was restarted")
    }

    // 40 parallel guesses got 39 WRONG_PASSWORD (limit 10 a minute) and singled out
    // the right one.
    @Test func parallelPasswordGuessesStayWithinTheBudgetAndRevealNothing() throws {
        let cluster = try SupervisedCluster()
        defer { cluster.stop() }
        let coordinator = try stranger(cluster.coordinator, timeout: 30)
        _ = try AttachedHost(cluster: cluster)  // a relay is registered
        guard case .createSessionResponse(let room) = try coordinator.request(.createSessionRequest(
            CreateSessionRequest(settings: roomSettings(password: "hunter2"), hostName: "alice"))) else {
            Issue.record("no session"); return
        }
        let sessionId = room.session.sessionId
        let outcomes = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 41) { index in
            let guess = index == 40 ? "hunter2" : "guess-\(index)"
            let client = try? BlockingClient(endpoint: cluster.coordinator, timeout: 60)
            let reply = try? client?.requestEnvelope(.joinSessionRequest(JoinSessionRequest(
                sessionId: sessionId, role: .player, name: "mallory\(index)", password: guess, content: nes)))
            let outcome: String
            switch reply?.body {
            case .error(let error)?: outcome = "\(error.code)"
            case .joinSessionResponse?: outcome = "joined"
            default: outcome = "no reply"
            }
            outcomes.withLock { $0.append(index == 40 ? "right:\(outcome)" : outcome) }
        }
        let all = outcomes.withLock { $0 }
        let wrong = all.filter { $0 == "\(ErrorCode.wrongPassword)" }.count
        #expect(wrong <= 10, "\(wrong) guesses were checked: \(all)")
        let right = try #require(all.first { $0.hasPrefix("right:") })
        // The right password either got in within the budget or got the same answer as the rest.
        #expect(right == "right:joined" || right == "right:\(ErrorCode.rateLimited)", "\(right)")
        #expect(!all.contains("no reply"), "\(all)")
    }

    // A kicked and banned player re-attached with its old ticket, and renaming passed
    // the ban.
    @Test func aKickedAndBannedPlayerStaysOut() throws {
        let cluster = try SupervisedCluster()
        defer { cluster.stop() }
        let host = try AttachedHost(cluster: cluster)
        let coordinator = try stranger(cluster.coordinator)
        guard case .joinSessionResponse(let joined) = try coordinator.request(.joinSessionRequest(JoinSessionRequest(
            sessionId: host.sessionId, role: .player, name: "mallory", content: nes))) else {
            Issue.record("join failed"); return
        }
        let ticket = try #require(joined.ticket)
        let player = try BlockingClient(endpoint: ticket.relayEndpoint, timeout: 2)
        guard case .attachResponse = try player.request(.attachRequest(AttachRequest(ticket: ticket, protocolVersion: SyncProtocol.current, content: nes))) else {
            Issue.record("attach failed"); return
        }
        _ = try coordinator.request(.kickParticipantRequest(KickParticipantRequest(
            sessionId: host.sessionId, participantId: host.session.participantId, participantToken: host.session.participantToken,
            targetParticipantId: joined.participantId, reason: "cheating", ban: true)))
        // The old ticket no longer admits it, on a fresh connection.
        var refused: ErrorCode?
        _ = eventually(within: 5) {
            let again = try? BlockingClient(endpoint: ticket.relayEndpoint, timeout: 2)
            refused = again.flatMap { refusal($0, .attachRequest(AttachRequest(ticket: ticket, protocolVersion: SyncProtocol.current, content: nes))) }
            return refused != nil
        }
        #expect(refused == .permissionDenied, "re-attach with the old ticket: \(String(describing: refused))")
        // Nor after the relay died and the supervisor started it again: resuming the match with
        // the old ticket would have a fresh relay rebuild it, with the kicked player in it.
        let relayPid = try #require(cluster.pids()["sync-0"])
        kill(Int32(relayPid), SIGKILL)
        var afterRestart: ErrorCode?
        _ = eventually(within: 15) {
            guard let pid = cluster.pids()["sync-0"], pid != relayPid,
                  let again = try? BlockingClient(endpoint: ticket.relayEndpoint, timeout: 2) else { return false }
            afterRestart = refusal(again, .attachRequest(AttachRequest(ticket: ticket, protocolVersion: SyncProtocol.current,
                                                                      resume: true, confirmedFrames: 60, content: nes)))
            return afterRestart != nil
        }
        #expect(afterRestart == .permissionDenied, "resume after the relay restarted: \(String(describing: afterRestart))")
        // Nor does a new name from the same address.
        #expect(refusal(coordinator, .joinSessionRequest(JoinSessionRequest(
            sessionId: host.sessionId, role: .player, name: "not-mallory", content: nes))) == .banned)
    }

    // Anonymous creates at ~4,500/s filled the 100,000-session cap in half a minute.
    @Test func sessionCreationIsLimitedPerAddress() throws {
        let cluster = try SupervisedCluster()
        defer { cluster.stop() }
        _ = try AttachedHost(cluster: cluster)
        let coordinator = try stranger(cluster.coordinator)
        var created = 1, limited = 0
        for index in 0..<40 {
            let reply = try coordinator.requestEnvelope(.createSessionRequest(CreateSessionRequest(
                settings: roomSettings(), hostName: "bot\(index)")))
            switch reply.body {
            case .createSessionResponse: created += 1
            case .error(let error) where error.code == .rateLimited: limited += 1
            default: Issue.record("unexpected \(reply.body.name)")
            }
        }
        #expect(created <= 20 && limited >= 20, "created \(created), limited \(limited)")
    }

    // The participant-token key sat in coordinator.sqlite, mode 644.
    @Test func theCoordinatorsSecretsAreItsAlone() throws {
        let cluster = try SupervisedCluster()
        defer { cluster.stop() }
        let data = cluster.directory.appendingPathComponent("data")
        for file in ["coordinator/participant-token.key", "coordinator/coordinator.sqlite", "coordinator/identity.secret",
                     "coordinator/cluster-secret", "keys/operator.secret", "sync-0/identity.secret"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: data.appendingPathComponent(file).path)
            let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? 0o777
            #expect(mode & 0o077 == 0, "\(file) has mode \(String(mode, radix: 8))")
        }
        let keysMode = (try FileManager.default.attributesOfItem(atPath: data.appendingPathComponent("keys").path)[.posixPermissions]
                        as? NSNumber)?.intValue ?? 0o777
        #expect(keysMode & 0o077 == 0, "the trust store is open to others: \(String(keysMode, radix: 8))")
    }

    // The design's rule: a public endpoint answers only public requests, tells anyone little,
    // and unlisted sessions stay unlisted; the operator finds its key with no flags.
    @Test func publicEndpointsAnswerOnlyPublicRequests() throws {
        let cluster = try SupervisedCluster()
        defer { cluster.stop() }
        let unlisted = try AttachedHost(cluster: cluster, unlisted: true)
        for (instance, port) in [("discovery", 7100), ("coordinator", 7200), ("sync-0", 7300), ("telemetry", 7402), ("supervisor", 7005)] {
            let anyone = try stranger(cluster.endpoint(port))
            #expect(refusal(anyone, .introspectRequest(IntrospectRequest())) == .permissionDenied, "\(instance) introspect")
            #expect(refusal(anyone, .clusterStatusRequest(ClusterStatusRequest())) == .permissionDenied, "\(instance) status")
            #expect(refusal(anyone, .metricsSnapshot(MetricsSnapshot(service: "x", instance: "x"))) == .permissionDenied, "\(instance)")
            guard case .healthResponse(let health) = try anyone.request(.healthRequest(HealthRequest())) else {
                Issue.record("\(instance): no health"); continue
            }
            #expect(health.details.isEmpty && health.pid == 0, "\(instance) tells strangers \(health.details)")
            #expect(eventually(within: 5) {
                (instance == "supervisor" ? cluster.supervisor.log : cluster.log(of: instance)).contains("refused request")
            }, "\(instance) logged no warning")
        }
        let coordinator = try stranger(cluster.coordinator)
        #expect(refusal(coordinator, .listSessionsRequest(ListSessionsRequest(includeUnlisted: true))) == .permissionDenied)
        guard case .listSessionsResponse(let listed) = try coordinator.request(.listSessionsRequest(ListSessionsRequest())) else {
            Issue.record("no list"); return
        }
        #expect(!listed.sessions.contains { $0.sessionId == unlisted.sessionId }, "an unlisted session was listed")

        // netplayctl, with nothing but the cluster's data root, reaches the operator plane.
        let environment = ["NETPLAY_DATA_ROOT": cluster.directory.appendingPathComponent("data").path]
        let introspect = try ServiceProcess("netplayctl", ["introspect", "coordinator", "--json"], environment: environment)
        #expect(introspect.waitForExit(seconds: 10) == 0, "\(introspect.log)")
        #expect(introspect.log.contains(unlisted.sessionId))
        let status = try ServiceProcess("netplayctl", ["cluster", "status"], environment: environment)
        #expect(status.waitForExit(seconds: 10) == 0, "\(status.log)")
        #expect(status.log.contains("sync-0"))
    }
}
