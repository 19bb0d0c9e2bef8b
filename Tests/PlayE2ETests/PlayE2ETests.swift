import Foundation
import InputSync
import NetplayAuth
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

/// Whole matches over real processes: discovery, coordinator, a relay and netplay-peer instances
/// on loopback, each peer behind a simulated 100 ms round trip with jitter and loss. Every match
/// plays 3,000 frames and must end with identical checksums; each also exercises one of the
/// relay's promises (substitution, desync healing, late spectators, reconnection, replays).
@Suite("Play through the cluster", .ownThread)
struct PlayE2ETests {
    @Test(.timeLimit(.minutes(4)))
    func twoPlayersAndALateSpectatorAgreeAndTheReplayReproducesTheChecksum() throws {
        let cluster = try PlayCluster()
        let room = "two"
        let (host, join) = try cluster.runningPair(room: room, hostSeed: 1, joinSeed: 2)
        let started = Date()
        // The coordinator shows both players attached, as the relay reports in its refreshes.
        let sessionId = host.log.split(separator: " ").first { $0.hasPrefix("s-") }.map(String.init) ?? "?"
        var shown = ""
        #expect(eventually(within: 8) {
            let show = try? ServiceProcess("netplayctl", ["sessions", "show", sessionId, "--coordinator", cluster.coordinatorEndpoint])
            _ = show?.waitForExit(seconds: 5)
            shown = show?.log ?? ""
            return shown.components(separatedBy: " attached").count - 1 == 2
        }, "sessions show: \(shown)")
        // The relay's load report carries the match's input rate (two players at 120 frames/s).
        var relays = ""
        #expect(eventually(within: 8) {
            let list = try? ServiceProcess("netplayctl", ["relays", "list", "--coordinator", cluster.coordinatorEndpoint])
            _ = list?.waitForExit(seconds: 5)
            relays = list?.log ?? ""
            let rate = relays.components(separatedBy: "inputs/s ").dropFirst().first?.split(separator: " ").first.flatMap { Int($0) }
            return (rate ?? 0) >= 100
        }, "relays list: \(relays)")
        // Mid-match (the match runs at 120 frames per second): a spectator comes in from a state.
        Thread.sleep(forTimeInterval: max(0, 9 - Date().timeIntervalSince(started)))
        let spectator = try cluster.peer("spectate", ["--room", room, "--frames", "\(Match.frames)", "--timeout", "150"])
        let results = [host, join, spectator].map { $0.result(within: 150) }
        for (process, result) in zip([host, join, spectator], results) {
            #expect(result != nil, "\(process.name) failed:\n\(process.log.suffix(3000))")
        }
        let checksums = Set(results.compactMap { $0?.checksum })
        #expect(checksums.count == 1, "checksums differ: \(results.map { $0?.description ?? "none" })")
        #expect(results.allSatisfy { $0?.frames == Match.frames })
        let watcher = try #require(results[2])
        #expect(watcher.int("start") > 0, "the spectator should have joined mid-match from a state: \(watcher)")
        #expect(watcher.int("states_loaded") == 1)

        // The relay's replay of the match reproduces the players' checksum (once the relay has
        // ended the session and finished the file).
        let replayed = try cluster.replayTheMatch(frames: Match.frames)
        #expect(replayed?.checksum == results[0]?.checksum, "replay: \(replayed?.description ?? "none")")
        #expect((replayed?.int("checked_checksums") ?? 0) >= Match.frames / 60 - 2)
    }

    /// The other sample game, the prisoner's dilemma (2 players, a byte of input each), plays
    /// through the same cluster: the joiner learns the game from the room, both ends and the
    /// relay's replay agree on the checksum.
    @Test(.timeLimit(.minutes(3)))
    func thePrisonersDilemmaPlaysThroughTheCluster() throws {
        let cluster = try PlayCluster()
        let room = "dilemma", frames = 1200
        let host = try cluster.peer("host", ["--players", "2", "--game", "pd"] + Match.host + Match.common(room: room, frames: frames, seed: 41))
        #expect(host.waitFor("session s-", within: 30), "host did not get a session: \(host.log)")
        let join = try cluster.peer("join", Match.common(room: room, frames: frames, seed: 42))
        // The room announces the dilemma (the joiner plays what the room says, not its own --game).
        let discovery = try BlockingClient(endpoint: cluster.discoveryEndpoint, timeout: 2)
        var listed: [Room] = []
        #expect(eventually(within: 20) {
            guard case .listRoomsResponse(let list)? = try? discovery.request(.listRoomsRequest(ListRoomsRequest(
                filter: RoomFilter(includeInProgress: true), pageSize: 50))) else { return false }
            listed = list.rooms.filter { $0.roomName == room }
            return listed.count == 1
        }, "rooms: \(listed)")
        #expect(listed.first?.content?.coreId == "netplay.games.pd" && listed.first?.content?.gameName == "Prisoner's Dilemma")
        let results = [host, join].map { $0.result(within: 120) }
        for (process, result) in zip([host, join], results) {
            #expect(result != nil, "\(process.name) failed:\n\(process.log.suffix(3000))")
        }
        let checksums = Set(results.compactMap { $0?.checksum })
        #expect(checksums.count == 1, "checksums differ: \(results.map { $0?.description ?? "none" })")
        #expect(results.allSatisfy { $0?.frames == frames })
        #expect(Set(results.compactMap { $0?.int("slot") }) == [1, 2])
        let replayed = try cluster.replayTheMatch(frames: frames)
        #expect(replayed?.checksum == results[0]?.checksum, "replay: \(replayed?.description ?? "none")")
    }

    @Test(.timeLimit(.minutes(4)))
    func threePlayersAgreeWhileOneLagsAndAnInjectedDesyncIsHealed() throws {
        let cluster = try PlayCluster()
        let room = "three"
        let host = try cluster.host(room: room, players: 3, seed: 11)
        // Player 2 freezes for 1.5 s (a weak client): the relay substitutes it; nobody waits.
        let laggard = try cluster.peer("join", Match.common(room: room, seed: 12) + ["--lag-at", "800", "--lag-ms", "1500"])
        // Player 3's state is corrupted at frame 1500: the relay detects it and resyncs it.
        let corrupt = try cluster.peer("join", Match.common(room: room, seed: 13) + ["--desync-at", "1500"])
        let processes = [host, laggard, corrupt]
        let results = expectSameChecksums(processes, within: 150)
        let hostResult = try #require(results[0])
        let corruptResult = try #require(results[2])
        #expect(hostResult.int("substituted_seen") > 30, "the laggard's inputs were not substituted: \(hostResult)")
        #expect(hostResult.int("max_stall_ms") < 700, "the host stalled behind the laggard: \(hostResult)")
        #expect(corruptResult.int("max_stall_ms") < 700, "player 3 stalled behind the laggard: \(corruptResult)")
        #expect(hostResult.int("desync_notices") >= 1, "no desync was reported: \(hostResult)")
        #expect(corruptResult.int("states_loaded") >= 1, "the diverged player was not resynced: \(corruptResult)")
    }

    @Test(.timeLimit(.minutes(4)))
    func fourPlayersAgreeAfterOneReconnects() throws {
        let cluster = try PlayCluster()
        let room = "four"
        let host = try cluster.host(room: room, players: 4, seed: 21)
        let second = try cluster.peer("join", Match.common(room: room, seed: 22))
        let third = try cluster.peer("join", Match.common(room: room, seed: 23))
        // Player 4 loses its link for 2.5 s: it notices the silence, reconnects and resumes.
        let fourth = try cluster.peer("join", Match.common(room: room, seed: 24) + ["--outage-at", "1000", "--outage-ms", "2500"])
        let processes = [host, second, third, fourth]
        let results = expectSameChecksums(processes, within: 150)
        #expect((results[3]?.int("reconnects") ?? 0) >= 1, "player 4 did not reconnect: \(results[3]?.description ?? "none")")
    }

    /// The relay dies mid-match (SIGKILL) and comes back empty on the same endpoint: both peers
    /// notice, attach again with `resume`, and the relay rebuilds the match from the history
    /// they resend (which their lossy links may drop: they repeat it until it is confirmed).
    @Test(.timeLimit(.minutes(4)))
    func aRelayKilledMidMatchIsRebuiltFromWhatThePeersResend() throws {
        let cluster = try PlayCluster()
        let room = "restart"
        let (host, join) = try cluster.runningPair(room: room, hostSeed: 31, joinSeed: 32)
        Thread.sleep(forTimeInterval: 8)  // about frame 1000
        try cluster.restartRelayAfterCrash()
        // It takes the frames confirmed before the crash from the dead relay's replay, not from a
        // peer's word (netplayctl introspect: rebuilt_from_replay_to).
        let probe = try TestKeys(dataRoot: cluster.dataRoot).operatorClient(endpoint: cluster.relayEndpoint, timeout: 3)
        let rebuilt = eventually(within: 20) {
            guard case .introspectResponse(let report)? = try? probe.request(.introspectRequest(IntrospectRequest())) else { return false }
            return report.json.range(of: #""rebuilt_from_replay_to": ?[0-9]"#, options: .regularExpression) != nil
        }
        #expect(rebuilt, "the rebuilt session did not take the dead relay's replay")
        let results = [host, join].map { $0.result(within: 150) }
        for (process, result) in zip([host, join], results) {
            #expect(result != nil, "\(process.name) failed:\n\(process.log.suffix(3000))\nrelay:\n\(cluster.relay?.log.suffix(6000) ?? "")")
        }
        let checksums = Set(results.compactMap { $0?.checksum })
        #expect(checksums.count == 1, "checksums differ: \(results.map { $0?.description ?? "none" })")
        #expect(results.allSatisfy { ($0?.int("reconnects") ?? 0) >= 1 }, "\(results.map { $0?.description ?? "none" })")

        // The restarted relay continued the dead one's replay: one file, the whole match.
        let replayed = try cluster.replayTheMatch(frames: Match.frames)
        #expect(replayed?.checksum == results[0]?.checksum, "replay: \(replayed?.description ?? "none")")
    }

    /// Restarted without the dead relay's replay (`--no-replays`, as a relay taking a session
    /// over from another replica), the rebuild starts only from a claim a progress proof covers,
    /// which NetplayKit kept from the relay's statistics: past NetplayKit's 1,024 frames of
    /// history, the honest peers' claims count in full, and the match ends agreed. Without the
    /// proofs it is never rebuilt.
    @Test(.timeLimit(.minutes(4)))
    func aRelayKilledMidMatchWithoutItsReplayCountsTheProvenClaims() throws {
        let cluster = try PlayCluster()
        let (host, join) = try cluster.runningPair(room: "restart-unrecorded", hostSeed: 33, joinSeed: 34)
        Thread.sleep(forTimeInterval: 12)
        let keys = TestKeys(dataRoot: cluster.dataRoot)
        /// Every number `"key": N` in the relay's introspection report.
        func introspected(_ key: String) -> [Int] {
            guard let probe = try? keys.operatorClient(endpoint: cluster.relayEndpoint, timeout: 3),
                  case .introspectResponse(let report)? = try? probe.request(.introspectRequest(IntrospectRequest())) else { return [] }
            let json = report.json
            let pattern = try! NSRegularExpression(pattern: "\"\(key)\": ?([0-9]+)")
            return pattern.matches(in: json, range: NSRange(json.startIndex..., in: json)).compactMap { match in
                Range(match.range(at: 1), in: json).flatMap { Int(json[$0]) }
            }
        }
        // What the match had confirmed just before the kill: the peers hold about as much.
        let confirmed = try #require(introspected("confirmed_frames").first)
        try cluster.restartRelayAfterCrash(extraArguments: ["--no-replays"])
        var claims: [Int] = []
        let counted = eventually(within: 20) {
            claims = introspected("resumed_proven")
            return claims.count == 2
        }
        #expect(counted, "both players did not resume on the restarted relay")
        // An unproven claim counts 3 s of play (360 frames at the match's 120 Hz): far short.
        #expect(confirmed > 1_100 && claims.allSatisfy { $0 >= confirmed - 30 }, "claims proven \(claims) of \(confirmed) confirmed")
        let results = [host, join].map { $0.result(within: 150) }
        for (process, result) in zip([host, join], results) {
            #expect(result != nil, "\(process.name) failed:\n\(process.log.suffix(3000))\nrelay:\n\(cluster.relay?.log.suffix(6000) ?? "")")
        }
        #expect(Set(results.compactMap { $0?.checksum }).count == 1, "checksums differ: \(results.map { $0?.description ?? "none" })")
    }

    /// The host's decisions at the coordinator reach the relay at once: a kicked player is
    /// detached there (its inputs are refused from then on), and ending the session detaches
    /// everyone and ends it on the relay.
    @Test func aKickAndAnEndedSessionAtTheCoordinatorArePushedToTheRelay() throws {
        let cluster = try PlayCluster()
        let coordinator = try BlockingClient(endpoint: cluster.coordinatorEndpoint, timeout: 5)
        let created = try cluster.createSession(room: "kick", maxPlayers: 3, coordinator: coordinator)
        let hostTicket = try #require(created.ticket)
        let sessionId = created.session.sessionId
        guard case .joinSessionResponse(let joined) = try coordinator.request(.joinSessionRequest(JoinSessionRequest(
            sessionId: sessionId, role: .player, name: "bob", content: PlayCluster.arena))), let bobTicket = joined.ticket else {
            Issue.record("bob could not join")
            return
        }
        let alice = try BlockingClient(endpoint: cluster.relayEndpoint, timeout: 5)
        let bob = try BlockingClient(endpoint: cluster.relayEndpoint, timeout: 5)
        for (client, ticket) in [(alice, hostTicket), (bob, bobTicket)] {
            guard case .attachResponse = try client.requestEnvelope(.attachRequest(AttachRequest(ticket: ticket, protocolVersion: SyncProtocol.current))).body else {
                Issue.record("attach refused for \(ticket.name)")
                return
            }
        }
        let probe = try TestKeys(dataRoot: cluster.dataRoot).operatorClient(endpoint: cluster.relayEndpoint, timeout: 3)
        func relayServes(_ sessionId: String) -> Bool? {
            guard case .introspectResponse(let report)? = try? probe.request(.introspectRequest(IntrospectRequest())) else { return nil }
            return report.json.contains(sessionId)
        }
        #expect(relayServes(sessionId) == true)
        /// The next Detach `client` receives (other messages, such as peer events, are skipped).
        func detach(_ client: BlockingClient) -> Detach? {
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline {
                guard let frame = try? client.receiveRaw(), let envelope = try? Envelope(decoding: frame) else { continue }
                if case .detach(let detach) = envelope.body { return detach }
            }
            return nil
        }
        _ = try coordinator.request(.kickParticipantRequest(KickParticipantRequest(
            sessionId: sessionId, participantId: created.participantId, participantToken: created.participantToken,
            targetParticipantId: joined.participantId, reason: "griefing")))
        let kicked = detach(bob)
        #expect(kicked?.reason == .kicked, "bob got \(String(describing: kicked))")
        guard case .error(let refused) = try bob.requestEnvelope(.inputBatch(InputBatch(slot: 2, inputSize: 1, inputs: [1]))).body else {
            Issue.record("a kicked player's inputs were accepted")
            return
        }
        #expect(refused.code == .unauthenticated)

        _ = try coordinator.request(.endSessionRequest(EndSessionRequest(
            sessionId: sessionId, participantId: created.participantId, participantToken: created.participantToken,
            reason: "good game")))
        let ended = detach(alice)
        #expect(ended?.reason == .sessionEnded, "alice got \(String(describing: ended))")
        let gone = eventually(within: 5) { relayServes(sessionId) == false }
        #expect(gone, "the relay still serves \(sessionId)")
    }

    @Test func forgedOrExpiredTicketsAreRefusedAndBadFramesAnsweredWithErrors() throws {
        let cluster = try PlayCluster()
        let coordinator = try BlockingClient(endpoint: cluster.coordinatorEndpoint, timeout: 5)
        let ticket = try #require(try cluster.createSession(room: "tickets", maxPlayers: 2, coordinator: coordinator).ticket)
        let relay = try BlockingClient(endpoint: cluster.relayEndpoint, timeout: 3)
        func attach(_ ticket: JoinTicket) throws -> Envelope {
            try relay.requestEnvelope(.attachRequest(AttachRequest(ticket: ticket, protocolVersion: SyncProtocol.current)))
        }
        // Forged: a genuine ticket with its slot changed, and one signed with another secret.
        var altered = ticket
        altered.slot = 2
        let other = try JoinTicketSigner(keyRing: TicketKeyRing(secret: Array(repeating: 7, count: 32))).sign(ticket)
        for forged in [altered, other] {
            guard case .error(let error) = try attach(forged).body else {
                Issue.record("a forged ticket was admitted")
                continue
            }
            #expect(error.code == .ticketInvalid, "\(error)")
        }
        // Expired: properly signed with the cluster secret, but past its expiry.
        let keys = try TicketKeyRing(parsing: PlayCluster.secret)
        let now = UnixTime.nowMs()
        let expired = try JoinTicketSigner(keyRing: keys).issue(
            sessionId: ticket.sessionId, participantId: ticket.participantId, role: .player, slot: 1,
            relayId: ticket.relayId, relayEndpoint: ticket.relayEndpoint, params: ticket.params, name: "alice",
            ttlMs: 1_000, nowUnixMs: now - 60_000)
        guard case .error(let expiredError) = try attach(expired).body else {
            Issue.record("an expired ticket was admitted")
            return
        }
        #expect(expiredError.code == .ticketExpired, "\(expiredError)")
        // Junk never crashes the relay: malformed frames and unattached inputs get errors.
        try relay.sendRaw([0xFF, 0x00, 0x13, 0x37])
        guard case .error(let malformed) = try Envelope(decoding: relay.receiveRaw()).body else {
            Issue.record("no error for a malformed frame")
            return
        }
        #expect(malformed.code == .malformed || malformed.code == .badRequest)
        guard case .error(let stranger) = try relay.requestEnvelope(.inputBatch(InputBatch(slot: 1, inputSize: 1, inputs: [1]))).body else {
            Issue.record("inputs before attaching were accepted")
            return
        }
        #expect(stranger.code == .unauthenticated)
        // The genuine ticket still works, and the relay is healthy.
        guard case .attachResponse(let response) = try attach(ticket).body else {
            Issue.record("the genuine ticket was refused")
            return
        }
        #expect(response.slot == 1 && response.sessionId == ticket.sessionId)
        #expect((try? relay.request(.healthRequest(HealthRequest()))) != nil)
    }
}
