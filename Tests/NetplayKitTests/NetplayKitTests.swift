import Foundation
import Games
import InputSync
import NetplayAuth
import NetplayLAN
import NetplayService
import NetplayTestSupport
import NetplayWire
import Rollback
import Synchronization
import Testing
@testable import NetplayKit

/// Drives matches from one thread at a fixed rate until `done` holds.
func drive<G: SerializableGame>(_ matches: [NetplayMatch<G>], hz: Double = 120, seconds: Double,
                                input: (Int, Int) -> GameInput = { slot, frame in GameInput(low: UInt64((frame / 8 + slot) & 0x1F)) },
                                each: (() -> Void)? = nil, until done: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        for match in matches { match.tick(input: input(match.slot, match.currentFrame)) }
        each?()
        if done() { return true }
        usleep(UInt32(1_000_000 / hz))
    }
    return false
}

@Suite("NetplayKit: the client SDK", .serialized, .ownThread)
struct NetplayKitTests {
    let content = ContentInfo(gameName: "Arena", crc32: 0xA7E7_A001, coreId: "netplay.games.arena", coreVersion: "1")

    func settings(_ name: String, password: String? = nil) -> NetplaySettings {
        var settings = NetplaySettings(roomName: name)
        settings.network = .lan
        settings.frameRateMilliHertz = 120_000
        settings.frameDelay = 2
        settings.automaticFrameDelay = false
        settings.predictionWindow = 12
        settings.checksumInterval = 60
        settings.password = password
        return settings
    }

    func lanHost(_ name: String, password: String? = nil, port: UInt16, inspectableBy keys: TestKeys? = nil,
                 advertiseAddress: String = "127.0.0.1", admissionLimits: AdmissionPolicy.Limits = AdmissionPolicy.Limits(),
                 configureRelay: (inout RelayConfiguration) -> Void = { _ in }) throws -> LanHost {
        try LanHost(settings: settings(name, password: password), content: content, inputSize: Arena.inputSize,
                    hostName: "alice", bindAddress: "127.0.0.1", advertiseAddress: advertiseAddress,
                    beaconHost: "127.0.0.1", beaconPort: port, beaconIntervalMs: 200, inspectableBy: keys?.store.directory,
                    admissionLimits: admissionLimits, configureRelay: configureRelay)
    }

    /// The host's match and bob's, joined to `host`'s LAN room through a lobby, both started.
    func startedPair(_ host: LanHost, port: UInt16) throws -> (lobby: NetplayLobby, room: NetplayRoom,
                                                                host: NetplayMatch<Arena>, join: NetplayMatch<Arena>) {
        let lobby = NetplayLobby(discovery: nil, coordinator: nil, lanBeaconPort: port)
        let room = try #require(try lobby.lanRooms(listeningFor: 1_000).first)
        let hostMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: host.admission)
        let joinMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: try lobby.join(room, name: "bob", content: content))
        hostMatch.start()
        joinMatch.start()
        return (lobby, room, hostMatch, joinMatch)
    }

    @Test func backoffGrowsWithJitterAndStaysUnderItsCap() {
        var backoff = Backoff(baseMs: 100, capMs: 2_000, maxAttempts: 10, seed: 42)
        var previousCeiling = 0
        for attempt in 0 ..< 10 {
            let ceiling = min(2_000, 100 << attempt)
            let delays = (0 ..< 50).map { _ in backoff.delayMs(attempt: attempt) }
            #expect(delays.allSatisfy { $0 >= ceiling / 2 && $0 <= ceiling }, "attempt \(attempt): \(delays)")
            #expect(Set(delays).count > 1 || ceiling < 4, "no jitter at attempt \(attempt)")
            #expect(ceiling >= previousCeiling)
            previousCeiling = ceiling
        }
    }

    @Test func theLinkConditionerDelaysKeepsControlOrderAndLosesOnlyInputTraffic() {
        var link = LinkConditioner(conditions: NetworkConditions(rttMs: 100, jitterMs: 20, loss: 0.5, seed: 7), salt: 1)
        for index in 0 ..< 200 {
            link.admit(Envelope(requestId: UInt64(index), body: .chatMessage(ChatMessage(text: "\(index)"))), now: 1_000)
            link.admit(Envelope(requestId: UInt64(index), body: .inputBatch(InputBatch(slot: 1, inputSize: 1, inputs: [1]))), now: 1_000)
        }
        #expect(link.due(now: 1_049).isEmpty, "nothing arrives before half the round trip")
        let arrived = link.due(now: 1_100)
        let chats = arrived.compactMap { envelope -> UInt64? in
            if case .chatMessage = envelope.body { return envelope.requestId }
            return nil
        }
        #expect(chats == (0 ..< 200).map(UInt64.init), "control messages are never lost nor reordered")
        let inputs = arrived.count - chats.count
        #expect(inputs > 50 && inputs < 150, "about half the input traffic is lost: \(inputs)")
        link.outageUntilMs = 5_000
        link.admit(Envelope(body: .chatMessage(ChatMessage(text: "lost"))), now: 2_000)
        #expect(link.due(now: 3_000).isEmpty, "an outage drops everything")
    }

    @Test func theFirstFrameIsNearOnlyOnceTheLobbyIsFullUntilItRuns() throws {
        let port = UInt16(TestPorts.free())
        let host = try lanHost("kit-near", port: port)
        defer { host.stop() }
        let hostMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: host.admission)
        #expect(!hostMatch.firstFrameIsNear, "idle")
        hostMatch.start()
        #expect(drive([hostMatch], seconds: 5, until: { if case .hosting = hostMatch.state { true } else { false } }))
        // A lobby that is not full may wait for minutes: frame-rate ticks are enough there.
        _ = drive([hostMatch], seconds: 0.3, until: { false })
        #expect(!hostMatch.firstFrameIsNear && hostMatch.currentFrame == 0)
        // Bob fills it: the relay measures his round trip (a few pings), then starts; meanwhile
        // both are near their first frame, and neither once it ran.
        let lobby = NetplayLobby(discovery: nil, coordinator: nil, lanBeaconPort: port)
        let room = try #require(try lobby.lanRooms(listeningFor: 1_000).first { $0.roomName == "kit-near" })
        let joinMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: try lobby.join(room, name: "bob", content: content))
        joinMatch.start()
        var nearBeforeFirstFrame = false, nearAfterIt = false
        let matches = [hostMatch, joinMatch]
        #expect(drive(matches, hz: 1_000, seconds: 10, each: {
            for match in matches where match.firstFrameIsNear {
                if match.currentFrame == 0 { nearBeforeFirstFrame = true } else { nearAfterIt = true }
            }
        }, until: { matches.allSatisfy { $0.currentFrame >= 30 } }), "host at \(hostMatch.currentFrame), bob at \(joinMatch.currentFrame)")
        #expect(nearBeforeFirstFrame && !nearAfterIt)
        #expect(!hostMatch.firstFrameIsNear && !joinMatch.firstFrameIsNear)
        hostMatch.leave()
        joinMatch.leave()
    }

    @Test func aHostAloneStartsWithStartNowEvenBeforeTheRelayKnowsIt() throws {
        let port = UInt16(TestPorts.free())
        let host = try lanHost("kit-alone", port: port)
        defer { host.stop() }
        let hostMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: host.admission)
        hostMatch.start()
        // Asked at once, before the attach is answered: the start goes out once it is.
        hostMatch.startNow()
        #expect(drive([hostMatch], hz: 1_000, seconds: 10, until: { hostMatch.currentFrame >= 30 }),
                "the host alone stayed at frame \(hostMatch.currentFrame), state \(hostMatch.state), events \(hostMatch.events)")
        // A LAN host holds no participant token; its restart reaches the relay all the same.
        try hostMatch.restart()
        _ = drive([hostMatch], hz: 1_000, seconds: 1, until: { false })
        #expect(!hostMatch.events.contains { if case .error = $0 { true } else { false } }, "\(hostMatch.events)")
        hostMatch.leave()
    }

    /// A cluster host's participant token is its coordinator credential (with it the coordinator
    /// renews the host's tickets, and so hands out the host's seat): the relay has no use for it
    /// and never sees it, in a start or a restart. It went in both, so a relay (or the one a
    /// session moved away from) could have taken the host's place.
    @Test func theHostsParticipantTokenNeverGoesToTheRelay() throws {
        let port = UInt16(TestPorts.free())
        let host = try lanHost("kit-token", port: port)
        defer { host.stop() }
        let starts = Mutex<[StartSessionRequest]>([])
        let path = try InterceptingPath(to: host.admission.relayEndpoint, toService: { _, envelope in
            if case .startSessionRequest(let request)? = envelope?.body { starts.withLock { $0.append(request) } }
            return .forward
        }, toClient: { _, _ in .forward })
        defer { path.stop() }
        let credential = [UInt8](repeating: 0x5A, count: 32)
        let hostMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: Admission(
            ticket: host.admission.ticket, relayEndpoint: path.endpoint, participantToken: credential))
        hostMatch.start()
        hostMatch.startNow()
        #expect(drive([hostMatch], hz: 1_000, seconds: 10, until: { hostMatch.currentFrame >= 30 }))
        try hostMatch.restart()
        _ = drive([hostMatch], hz: 1_000, seconds: 2, until: { starts.withLock { $0.count >= 2 } })
        let seen = starts.withLock { $0 }
        #expect(seen.count >= 2 && seen.contains(where: \.restart), "\(seen)")
        #expect(seen.allSatisfy { $0.participantToken.isEmpty })
        hostMatch.leave()
    }

    @Test func theRoomBrowserMeasuresEachRoomsPing() throws {
        let port = UInt16(TestPorts.free())
        let host = try lanHost("kit-browse", port: port)
        defer { host.stop() }
        let lobby = NetplayLobby(discovery: nil, coordinator: nil, lanBeaconPort: port)
        let room = try #require(lobby.browse(lanMilliseconds: 1_000).first { $0.roomName == "kit-browse" })
        let ping = try #require(room.pingMs, "no ping measured for \(room.endpoint)")
        #expect(ping >= 0 && ping < 500)
        // Nothing answers there: no ping, and the wait is bounded.
        var gone = room
        gone.endpoint = "tcp://127.0.0.1:\(TestPorts.free())"
        let started = Date()
        #expect(lobby.measurePings([gone], timeoutMs: 300).first?.pingMs == nil)
        #expect(Date().timeIntervalSince(started) < 3)
        // A listing naming hundreds of endpoints that do not answer (and some no tcp:// at all)
        // took a request timeout for each, a few at a time: a minute and more. The first 64
        // are measured, within twice the timeout in all; the room that answers still has its ping.
        let silent = (0 ..< 300).map { index -> NetplayRoom in
            var other = room
            other.id = "silent-\(index)"
            other.endpoint = index % 10 == 0 ? "ipc:///tmp/netplay-nothing-\(index)" : "tcp://127.0.0.1:\(20_000 + index)"
            return other
        }
        let crowded = Date()
        let measured = lobby.measurePings([room] + silent, timeoutMs: 300)
        #expect(Date().timeIntervalSince(crowded) < 2, "\(Date().timeIntervalSince(crowded)) s for 300 silent endpoints")
        #expect(measured.first?.pingMs != nil && measured.dropFirst().allSatisfy { $0.pingMs == nil })
    }

    @Test func aHostWaitingForPlayersMeasuresAndReportsItsRealPing() throws {
        let port = UInt16(TestPorts.free())
        let keys = TestKeys(directory: FileManager.default.temporaryDirectory.appendingPathComponent("netplay-kit-keys-\(UUID().uuidString)"))
        let host = try lanHost("kit-ping", port: port, inspectableBy: keys)
        defer { host.stop() }
        var options = NetplayMatchOptions()
        options.conditions = NetworkConditions(rttMs: 80)
        let hostMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: host.admission, options: options)
        hostMatch.start()
        defer { hostMatch.leave() }
        // Nobody joins: no engine runs, the keep-alive pings measure the round trip, and the
        // statistics it sends the relay carry it (shown on the HUD; the relay measures its own).
        let relay = try keys.operatorClient(endpoint: host.endpoint)
        func hostAsTheRelaySeesIt() -> [String: Any]? {
            guard case .introspectResponse(let dump)? = try? relay.request(.introspectRequest(IntrospectRequest(section: "all"))),
                  let json = try? JSONSerialization.jsonObject(with: Data(dump.json.utf8)) as? [String: Any],
                  let state = json["state"] as? [String: Any], let sessions = state["sessions"] as? [[String: Any]],
                  let players = sessions.first?["players"] as? [Any] else { return nil }
            return players.first as? [String: Any]
        }
        var seenByRelay: [String: Any]?
        let measured = drive([hostMatch], seconds: 10, until: {
            guard hostMatch.hud.pingMs >= 70 else { return false }
            seenByRelay = hostAsTheRelaySeesIt()
            return (seenByRelay?["reported_ping_ms"] as? Int ?? 0) >= 70
        })
        let hud = hostMatch.hud
        #expect(measured, "ping \(hud.pingMs), the relay's view \(String(describing: seenByRelay)), state \(hostMatch.state)")
        #expect(seenByRelay?["client"] as? String == "NetplayKit \(NetplayVersion.current)")
        #expect(hud.pingMs < 1_000 && !hostMatch.isRunning)
    }

    @Test func wrongPasswordsAndFullRoomsAreRefusedWithTheirCodes() throws {
        let port = UInt16(TestPorts.free())
        let host = try lanHost("kit-locked", password: "sesame", port: port)
        defer { host.stop() }
        let lobby = NetplayLobby(discovery: nil, coordinator: nil, lanBeaconPort: port)
        let room = try #require(try lobby.lanRooms(listeningFor: 1_000).first)
        #expect(room.hasPassword)
        #expect(throws: NetplayError(.wrongPassword, "Wrong password to play in this session.")) {
            try lobby.join(room, name: "mallory", password: "guess", content: content)
        }
        var wrongCore = content
        wrongCore.crc32 = 1
        do {
            _ = try lobby.join(room, name: "bob", password: "sesame", content: wrongCore)
            Issue.record("a different ROM was admitted")
        } catch let error as NetplayError {
            #expect(error.code == .contentMismatch)
        }
        _ = try lobby.join(room, name: "bob", password: "sesame", content: content)
        do {
            _ = try lobby.join(room, name: "carol", password: "sesame", content: content)
            Issue.record("a third player was admitted to a two-player room")
        } catch let error as NetplayError {
            #expect(error.code == .roomFull)
        }
    }

    @Test func aLateSpectatorStartsFromAStateAndAReconnectingPlayerResumes() throws {
        let port = UInt16(TestPorts.free())
        let host = try lanHost("kit-late", port: port)
        defer { host.stop() }
        let (lobby, room, hostMatch, joinMatch) = try startedPair(host, port: port)
        #expect(drive([hostMatch, joinMatch], seconds: 20, until: { hostMatch.currentFrame >= 400 }))
        // The joiner loses its link for 3 s; the host keeps playing; the joiner reconnects (it
        // does once it has heard nothing for 1.5 s: 2 s left a tick of a loaded machine half a
        // second to notice).
        joinMatch.simulateOutage(milliseconds: 3_000)
        var spectator: NetplayMatch<Arena>?
        var options = NetplayMatchOptions()
        options.stopAtFrame = 1_200
        let finished = drive([hostMatch, joinMatch], seconds: 40, each: {
            if spectator == nil && hostMatch.currentFrame >= 700,
               let admission = try? lobby.join(room, name: "watcher", role: .spectator) {
                spectator = try? NetplayMatch(game: Arena(playerCount: 2), admission: admission, options: options)
                spectator?.start()
            }
            spectator?.tick()
        }, until: {
            hostMatch.reportedChecksums[1_200] != nil && joinMatch.reportedChecksums[1_200] != nil
                && (spectator?.currentFrame ?? 0) >= 1_200
        })
        #expect(finished, "host \(hostMatch.currentFrame), joiner \(joinMatch.currentFrame) \(joinMatch.state), spectator \(spectator?.currentFrame ?? -1) \(spectator.map { "\($0.state)" } ?? "none")")
        let watcher = try #require(spectator)
        #expect(watcher.startFrame > 0, "the spectator should start from a state")
        #expect(watcher.game.checksum() == hostMatch.reportedChecksums[1_200])
        #expect(joinMatch.reportedChecksums[1_200] == hostMatch.reportedChecksums[1_200])
        #expect(joinMatch.events.contains { if case .reconnected = $0 { true } else { false } })
        #expect(hostMatch.substitutedInputsSeen > 0, "the host should have seen the joiner substituted while it was away")
    }

    /// A player away longer than the relay keeps inputs for comes back to a state far ahead of
    /// its own frame: it cannot run there (the relay sends inputs only from the state on), so
    /// it restarts its engine from the state, and the match still agrees.
    @Test func aPlayerAwayLongerThanTheRelayHistoryJumpsToTheTransferredState() throws {
        let port = UInt16(TestPorts.free())
        let host = try lanHost("kit-jump", port: port) { relay in
            relay.historyFrames = 256
            relay.maxFramesAhead = 128
            relay.recoveryBacklogFrames = 64
        }
        defer { host.stop() }
        let (_, _, hostMatch, joinMatch) = try startedPair(host, port: port)
        #expect(drive([hostMatch, joinMatch], seconds: 20, until: { hostMatch.currentFrame >= 300 }))
        // 4 s away at 120 frames per second: ~480 frames, more than the 256 the relay keeps.
        let awayFrom = joinMatch.currentFrame
        joinMatch.simulateOutage(milliseconds: 4_000)
        // The relay may send a second state if the first one is already older than what it keeps
        // by the time the joiner could run from it; the check follows the latest jump.
        var jumps: [Int] = []
        // Both must then agree on a checksum frame well after the latest state's frame.
        var target: Int? { jumps.last.map { ($0 / 60 + 5) * 60 } }
        let finished = drive([hostMatch, joinMatch], seconds: 40, each: {
            jumps = joinMatch.events.compactMap { event -> Int? in
                if case .stateLoaded(let frame, .reconnect) = event { return frame }
                return nil
            }
        }, until: {
            guard let target else { return false }
            return hostMatch.reportedChecksums[target] != nil && joinMatch.reportedChecksums[target] != nil
        })
        #expect(finished, "host \(hostMatch.currentFrame), joiner \(joinMatch.currentFrame) \(joinMatch.state) \(joinMatch.events)")
        let jump = try #require(jumps.first)
        #expect(jump > awayFrom + 256, "the state should be far ahead of \(awayFrom): \(jump)")
        #expect(joinMatch.reportedChecksums[target!] == hostMatch.reportedChecksums[target!])
    }

    /// A game name, password or region past the wire's limits failed to encode at the send and
    /// came back as the coordinator not answering (a LAN room's beacons failed silently): refused
    /// as the caller's mistake, naming the field, before anything is sent.
    @Test func stringsPastTheWiresLimitsAreRefusedBeforeAnythingIsSent() throws {
        let lobby = NetplayLobby(discovery: nil, coordinator: TestPorts.endpoint(), lanBeaconPort: UInt16(TestPorts.free()))
        var long = content
        long.gameName = String(repeating: "g", count: 200)
        func code(_ call: () throws -> Void) -> (ErrorCode?, String) {
            do { try call(); return (nil, "") } catch let error as NetplayError { return (error.code, error.message) } catch { return (nil, "\(error)") }
        }
        let hosted = code { _ = try lobby.host(settings: settings("r"), content: long, inputSize: 2, hostName: "h") }
        #expect(hosted.0 == .badRequest && hosted.1.contains("game_name"), "\(hosted)")
        let lan = code { _ = try lanHost("r", port: UInt16(TestPorts.free())).stop() }
        #expect(lan.0 == nil, "a plain LAN room is hosted: \(lan)")
        let lanLong = code {
            _ = try LanHost(settings: settings("r"), content: long, inputSize: Arena.inputSize, hostName: "h", bindAddress: "127.0.0.1",
                            advertiseAddress: "127.0.0.1", beaconHost: "127.0.0.1", beaconPort: UInt16(TestPorts.free()))
        }
        #expect(lanLong.0 == .badRequest && lanLong.1.contains("game_name"), "\(lanLong)")
        let joined = code { _ = try lobby.join(sessionId: "s-1", name: "j", password: String(repeating: "p", count: 200), content: content) }
        #expect(joined.0 == .badRequest && joined.1.contains("password"), "\(joined)")
        var region = settings("r")
        region.region = String(repeating: "r", count: 40)
        let regional = code { _ = try lobby.host(settings: region, content: content, inputSize: 2, hostName: "h") }
        #expect(regional.0 == .badRequest && regional.1.contains("region"), "\(regional)")
    }

    @Test func aRefusedTicketEndsTheMatchWithTheReason() throws {
        let port = UInt16(TestPorts.free())
        let host = try lanHost("kit-forged", port: port)
        defer { host.stop() }
        var forged = host.admission
        forged.ticket.slot = 2
        let match = try NetplayMatch(game: Arena(playerCount: 2), admission: forged)
        match.start()
        _ = drive([match], seconds: 5, until: { if case .disconnected = match.state { return true }; return false })
        #expect(match.state == .disconnected(.refused(.ticketInvalid, "The ticket's signature does not match: it was forged or altered.")))
    }
}
