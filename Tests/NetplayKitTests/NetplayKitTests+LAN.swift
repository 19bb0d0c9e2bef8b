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

/// LAN rooms: found by their beacons, refusing what they cannot announce, renewing tickets with no
/// coordinator, and freeing a leaver's place (part of the NetplayKit suite, so serialized with it).
extension NetplayKitTests {
    @Test func aLanRoomIsFoundByItsBeaconAndTwoMatchesAgree() throws {
        let port = UInt16(TestPorts.free())
        let host = try lanHost("kit-lan", port: port)
        defer { host.stop() }
        let lobby = NetplayLobby(discovery: nil, coordinator: nil, lanBeaconPort: port)
        let rooms = try lobby.lanRooms(listeningFor: 1_000)
        let room = try #require(rooms.first { $0.roomName == "kit-lan" }, "rooms heard: \(rooms)")
        #expect(room.isLAN && room.maxPlayers == 2 && room.endpoint == host.endpoint && !room.hasPassword)

        let hostMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: host.admission)
        let admission = try lobby.join(room, name: "bob", content: content)
        #expect(admission.slot == 2 && admission.role == .player)
        let joinMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: admission)
        var seenStates: [NetplayState] = []
        hostMatch.start()
        _ = drive([hostMatch], seconds: 2, each: {
            if seenStates.last != hostMatch.state { seenStates.append(hostMatch.state) }
        }, until: { if case .hosting = hostMatch.state { return true }; return false })
        joinMatch.start()
        var chatSent = false
        let finished = drive([hostMatch, joinMatch], seconds: 30, each: {
            if seenStates.last != hostMatch.state { seenStates.append(hostMatch.state) }
            if !chatSent && hostMatch.currentFrame > 60 {
                hostMatch.sendChat("glhf")
                chatSent = true
            }
        }, until: { hostMatch.reportedChecksums[600] != nil && joinMatch.reportedChecksums[600] != nil })
        #expect(finished, "host at \(hostMatch.currentFrame) \(hostMatch.state), joiner at \(joinMatch.currentFrame) \(joinMatch.state)")
        #expect(hostMatch.reportedChecksums[600] == joinMatch.reportedChecksums[600])
        #expect(seenStates.contains { if case .connecting = $0 { true } else { false } })
        #expect(seenStates.contains { if case .hosting = $0 { true } else { false } })
        #expect(seenStates.contains { if case .connected(slot: 1, _) = $0 { true } else { false } })
        #expect(joinMatch.chatLines.contains { $0.text == "glhf" && $0.from == "alice" && $0.slot == 1 })
        let hud = joinMatch.hud
        #expect(hud.frameDelay == 2 && hud.currentFrame >= 600 && hud.players.count == 2)
        hostMatch.leave()
        joinMatch.leave()
        #expect(hostMatch.state == .disconnected(.left))
    }

    /// Anyone on the LAN can send a beacon. A stranger that learned the host's beacon id sends
    /// a goodbye for it, the same id with its own endpoint, and beacons naming another address
    /// than its own: the host's room stays listed at the host's endpoint, the stranger's room is
    /// a room of its own, and the beacon naming someone else is not believed. The browser took
    /// every beacon's word: a goodbye hid the room, an endpoint redirected joins (and their
    /// passwords, sent in clear on a LAN) to the stranger.
    @Test func aStrangersBeaconsNeitherHideNorRedirectARoom() throws {
        let port = UInt16(TestPorts.free())
        let host = try lanHost("kit-real", port: port)
        defer { host.stop() }
        let heard = try #require(try LanBeaconListener.listen(port: port, milliseconds: 1_000).first { $0.room?.roomName == "kit-real" })
        func lie(_ id: String, endpoint: String, goodbye: Bool) throws -> [UInt8] {
            var room = try #require(heard.room)
            room.hostEndpoint = endpoint
            room.roomId = "s-lobby-room"
            return try LanBeaconCodec.encode(LanBeacon(protocolVersion: LanBeaconCodec.protocolVersion, beaconId: id, sequence: .max,
                                                       intervalMs: 200, room: room, goodbye: goodbye))
        }
        let lies = [try lie(heard.beaconId, endpoint: "tcp://127.0.0.5:1", goodbye: true),
                    try lie(heard.beaconId, endpoint: "tcp://127.0.0.5:6666", goodbye: false),
                    try lie("someone-else", endpoint: "tcp://10.1.2.3:9", goodbye: false)]
        let target = UDPAddress(ip: 0x7F00_0001, port: port)
        let lying = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            defer { lying.signal() }
            guard let stranger = try? UDPSocket(host: "127.0.0.5", port: 0) else { return }
            for _ in 0 ..< 30 {
                for datagram in lies { stranger.send(datagram, to: target) }
                usleep(50_000)
            }
        }
        let rooms = try NetplayLobby(discovery: nil, coordinator: nil, lanBeaconPort: port).lanRooms(listeningFor: 1_000)
        lying.wait()
        let real = rooms.filter { $0.roomName == "kit-real" }
        #expect(real.contains { $0.endpoint == host.endpoint }, "the host's room is gone: \(real.map(\.endpoint))")
        #expect(!rooms.contains { $0.endpoint.contains("10.1.2.3") }, "a beacon naming another address was believed")
        #expect(Set(real.map(\.id)).count == real.count && !real.contains { $0.id == "s-lobby-room" })
        #expect(real.allSatisfy { $0.isLAN })
    }

    @Test func aLanRoomSaysItsMatchRunsAndFreesThePlaceOfAPlayerWhoLeft() throws {
        let port = UInt16(TestPorts.free())
        let host = try lanHost("kit-progress", port: port)
        defer { host.stop() }
        let (lobby, room, hostMatch, joinMatch) = try startedPair(host, port: port)
        #expect(!room.inProgress)
        #expect(drive([hostMatch, joinMatch], seconds: 20, until: { hostMatch.currentFrame >= 120 }))
        // The beacon says the match runs (the browser's "in progress" filter relies on it).
        var heard: NetplayRoom?
        #expect(drive([hostMatch, joinMatch], seconds: 10, until: {
            heard = (try? lobby.lanRooms(listeningFor: 300))?.first { $0.roomName == "kit-progress" }
            return heard?.inProgress == true
        }), "the beacon still says \(String(describing: heard))")
        // Full while bob plays; bob leaves for good and his place is free again.
        #expect(throws: NetplayError.self) { try lobby.join(room, name: "carol", content: content) }
        joinMatch.leave()
        var carol: Admission?
        #expect(drive([hostMatch], seconds: 10, until: {
            carol = try? lobby.join(room, name: "carol", content: content)
            return carol != nil
        }), "no place for carol after bob left")
        #expect(carol?.slot == 2)
        hostMatch.leave()
    }

    /// A LAN joiner's ticket lives only its minute to attach, and the relay resumes an expired
    /// ticket only within its grace (10 min): any LAN match longer than that ended for a player
    /// whose link dropped after it, refused TICKET_EXPIRED, because there was no coordinator to
    /// renew at. The LAN host's relay renews it (the joiner's participant token proves the seat),
    /// and the match goes on, on the address the joiner reached the host at: the renewed ticket
    /// names the host's advertised address (here one the relay does not listen on, as the wrong
    /// network card's), and following it lost the match.
    @Test func aLanPlayerWhoseTicketRanOutReconnectsWithARenewedOne() throws {
        let port = UInt16(TestPorts.free())
        let host = try lanHost("kit-renew", port: port, advertiseAddress: "127.0.0.2",
                               admissionLimits: AdmissionPolicy.Limits(pendingJoinTimeoutMs: 1_500)) { $0.resumeGraceMs = 0 }
        defer { host.stop() }
        let reachable = "tcp://127.0.0.1:" + (host.endpoint.split(separator: ":").last ?? "")
        let lobby = NetplayLobby(discovery: nil, coordinator: nil, lanBeaconPort: port)
        var room = try #require(try lobby.lanRooms(listeningFor: 1_000).first)
        room.endpoint = reachable
        var hostAdmission = host.admission
        hostAdmission.relayEndpoint = reachable
        let hostMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: hostAdmission)
        let joinMatch = try NetplayMatch(game: Arena(playerCount: 2), admission: try lobby.join(room, name: "bob", content: content))
        hostMatch.start()
        joinMatch.start()
        let joined = joinMatch.admission.ticket
        #expect(!joinMatch.admission.participantToken.isEmpty, "a LAN join should come with a participant token")
        // Past the joiner's ticket, and (grace 0) past any resume of it.
        #expect(drive([hostMatch, joinMatch], seconds: 20, until: {
            hostMatch.currentFrame >= 400 && UnixTime.nowMs() > joined.expiresAtUnixMs + 500
        }))
        joinMatch.simulateOutage(milliseconds: 2_000)
        let target = (hostMatch.currentFrame / 60 + 10) * 60
        let finished = drive([hostMatch, joinMatch], seconds: 30, until: {
            if case .disconnected = joinMatch.state { return true }
            return hostMatch.reportedChecksums[target] != nil && joinMatch.reportedChecksums[target] != nil
        })
        #expect(finished && joinMatch.reportedChecksums[target] != nil && joinMatch.reportedChecksums[target] == hostMatch.reportedChecksums[target],
                "joiner \(joinMatch.state) at \(joinMatch.currentFrame), host at \(hostMatch.currentFrame)")
        let refused = joinMatch.events.firstIndex { if case .error(.ticketExpired, _) = $0 { true } else { false } }
        #expect(refused != nil, "the relay should have refused the expired ticket first")
        #expect(joinMatch.events[(refused ?? joinMatch.events.endIndex)...].contains { if case .reconnected = $0 { true } else { false } },
                "attached again after the refusal: \(joinMatch.events.suffix(6))")
        #expect(joinMatch.attachedPaths > 0, "\(joinMatch.state)")
        #expect(joinMatch.admission.ticket.expiresAtUnixMs > joined.expiresAtUnixMs + 60_000, "no renewed ticket")
        #expect(joinMatch.admission.ticket.slot == joined.slot)
        #expect(joinMatch.admission.relayEndpoint == reachable)
        #expect(!joinMatch.events.contains { if case .relayMoved = $0 { true } else { false } })
    }

    /// A LAN host whose relay takes tickets living less than the 10 minutes its admission gave
    /// refused the host's own ticket: the room's tickets live as long as its relay takes, and a
    /// join window longer than that is refused with one line.
    @Test func aLanRoomsTicketsLiveNoLongerThanItsRelayTakesThem() throws {
        let port = UInt16(TestPorts.free())
        let host = try lanHost("kit-short", port: port) { $0.maxTicketLifetimeMs = 120_000 }
        defer { host.stop() }
        let ticket = host.admission.ticket
        #expect(ticket.expiresAtUnixMs - ticket.issuedAtUnixMs == 120_000)
        let match = try NetplayMatch(game: Arena(playerCount: 2), admission: host.admission)
        match.start()
        #expect(drive([match], seconds: 10, until: { match.attachedPaths > 0 }), "\(match.state)")
        #expect(throws: NetplayError.self) {
            try lanHost("kit-long-window", port: port, admissionLimits: AdmissionPolicy.Limits(pendingJoinTimeoutMs: 200_000)) {
                $0.maxTicketLifetimeMs = 120_000
            }
        }
    }

    /// A LAN room's host name is checked in bytes (a name of 22 CJK characters passed a cut by
    /// characters and failed as INTERNAL), and its beacon interval is one the beacon can keep
    /// (a negative one trapped the beacon's thread).
    @Test func aLanRoomRefusesAHostNameOrBeaconIntervalItCannotAnnounce() throws {
        func host(_ name: String, interval: Int = 200) throws -> LanHost {
            try LanHost(settings: settings("kit-names"), content: content, inputSize: Arena.inputSize, hostName: name,
                        bindAddress: "127.0.0.1", advertiseAddress: "127.0.0.1", beaconHost: "127.0.0.1",
                        beaconPort: UInt16(TestPorts.free()), beaconIntervalMs: interval)
        }
        for (name, interval) in [(String(repeating: "名", count: 22), 200), ("", 200), ("alice", -5), ("alice", 120_000)] {
            #expect { _ = try host(name, interval: interval) } throws: { ($0 as? NetplayError)?.code == .badRequest }
        }
        let wide = try host(String(repeating: "名", count: 21))
        #expect(wide.room.hostName.utf8.count == 63)
        wide.stop()
    }
}
