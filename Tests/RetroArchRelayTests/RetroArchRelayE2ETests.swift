import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

/// Two real, unmodified RetroArch 1.14 processes (Debian's, headless, nestopia) play through
/// netplay-sync's RetroArch tunnel listener, in a real cluster (discovery, coordinator, relay) on
/// loopback: the host points its custom relay at netplay-sync, the client joins with the join
/// string discovery lists (or with only the session's plain port).
@Suite("RetroArch through netplay-sync", .serialized, .ownThread)
struct RetroArchRelayE2ETests {
    static let skipReason = RetroArchFixture.unavailableReason

    /// A cluster whose relay speaks RetroArch's relay protocol, and the RetroArch processes.
    final class Rig {
        let cluster: TestCluster
        let fixture: RetroArchFixture
        let port = TestPorts.free()
        let sessionPort = TestPorts.free()
        let coordinator: BlockingClient
        let discovery: BlockingClient
        private var processes: [ServiceProcess] = []

        init(_ name: String) throws {
            var options = TestCluster.Options(secret: String(repeating: "5a", count: 32))
            options.name = "retroarch-" + name
            options.relayArguments = ["--retroarch-port", "\(port)", "--retroarch-advertise", "127.0.0.1",
                                      "--retroarch-session-ports", "\(sessionPort)-\(sessionPort)"]
            cluster = try TestCluster(options)
            fixture = try RetroArchFixture(directory: cluster.dataRoot + "/retroarch")
            coordinator = try BlockingClient(endpoint: cluster.coordinatorEndpoint, timeout: 2, serverKey: cluster.serverKey)
            discovery = try BlockingClient(endpoint: cluster.discoveryEndpoint, timeout: 2, serverKey: cluster.serverKey)
        }

        deinit { for process in processes { process.kill9() } }

        /// A RetroArch host whose relay is our relay ("Relay Server Location: Custom").
        func host() throws -> ServiceProcess {
            let config = try fixture.config("host", nick: "ra-host", extra: RetroArchFixture.realTime.merging([
                "netplay_use_mitm_server": "true", "netplay_mitm_server": "custom",
                "netplay_custom_mitm_server": "127.0.0.1|\(port)",
            ]) { $1 })
            return try launch("host", config, ["--host"])
        }

        /// A RetroArch client connecting with `connect` arguments.
        func client(_ connect: [String]) throws -> ServiceProcess {
            try launch("client", try fixture.config("client", nick: "ra-client", extra: RetroArchFixture.realTime), connect)
        }

        private func launch(_ name: String, _ config: String, _ extra: [String]) throws -> ServiceProcess {
            let process = try ServiceProcess(Shell.which("retroarch")!, fixture.arguments(config: config, extra),
                                             environment: fixture.environment(name))
            processes.append(process)
            return process
        }

        /// The RetroArch sessions the coordinator lists.
        func sessions() -> [RetroArchSession] {
            guard case .listRetroarchSessionsResponse(let list)? = try? coordinator.request(
                .listRetroarchSessionsRequest(ListRetroArchSessionsRequest())) else { return [] }
            return list.sessions
        }

        /// Discovery's RetroArch relay rooms.
        func rooms() -> [Room] {
            guard case .listRoomsResponse(let list)? = try? discovery.request(.listRoomsRequest(ListRoomsRequest(
                filter: RoomFilter(includeInProgress: true, source: .retroarchRelay)))) else { return [] }
            return list.rooms
        }

        /// Waits for the host's session to be listed, in the coordinator and as a room.
        func listedSession(host: ServiceProcess) throws -> (RetroArchSession, Room) {
            var found: (RetroArchSession, Room)?
            _ = eventually(within: 30) {
                guard host.process.isRunning, let session = sessions().first, let room = rooms().first else { return false }
                found = (session, room)
                return true
            }
            return try #require(found, "no RetroArch session listed; relay log:\n\(cluster.relay?.log.suffix(3_000) ?? "")\nhost log:\n\(host.log.suffix(3_000))")
        }

        /// Waits until both logs show the client playing as player 2.
        func waitJoined(host: ServiceProcess, client: ServiceProcess) throws {
            let joined = eventually(within: 45) {
                host.log.contains("has joined as player 2") && client.log.contains("You have joined as player 2")
            }
            try #require(joined, "no join; host log:\n\(host.log.suffix(4_000))\nclient log:\n\(client.log.suffix(4_000))\nrelay log:\n\(cluster.relay?.log.suffix(3_000) ?? "")")
        }

        /// After the join: CRC checks keep rising and no client asks for a resync after the first
        /// seconds; then the host leaves and the session disappears everywhere.
        func checkHealthThenEnd(host: ServiceProcess) throws {
            Thread.sleep(forTimeInterval: 5)
            let early = try #require(sessions().first, "the session is gone after the join")
            #expect(early.clients == 1)
            Thread.sleep(forTimeInterval: 5)
            let later = try #require(sessions().first, "the session is gone")
            #expect(later.crcChecks > early.crcChecks, "CRC checks stopped: \(early.crcChecks) then \(later.crcChecks)")
            #expect(later.resyncRequests == early.resyncRequests,
                    "a client asked for a resync after the first seconds (\(early.resyncRequests) then \(later.resyncRequests), last at \(later.lastResyncAtUnixMs), joined at \(early.openedAtUnixMs))")
            #expect(later.inputs > early.inputs && later.lastFrame > early.lastFrame)
            #expect(later.bytesFromHost > 0 && later.bytesToHost > 0)
            #expect(later.coreName == "Nestopia" && later.contentCrc == RetroArchFixture.crc32(fixture.rom) && later.hostNick == "ra-host")
            #expect(later.hostRttMs < 1_000)

            // The host quits (RetroArch takes SIGTERM as "quit"; a host that hangs is killed).
            host.send(SIGTERM)
            if host.waitForExit(seconds: 5) == nil { host.kill9() }
            let gone = eventually(within: 15) { sessions().isEmpty && rooms().isEmpty }
            #expect(gone, "the ended session is still listed: \(sessions().map(\.join)) rooms \(rooms().map(\.roomId))")
            #expect(cluster.relay?.log.contains("RetroArch session closed") == true)
        }
    }

    @Test(.disabled(if: skipReason != nil, Comment(rawValue: "skipped: \(skipReason ?? "")")))
    func twoRetroArchesPlayThroughTheRelayWithTheListedJoinString() throws {
        let rig = try Rig("join")
        let host = try rig.host()
        let (session, room) = try rig.listedSession(host: host)
        #expect(session.join.hasPrefix("127.0.0.1|\(rig.port)|") && session.join.count == "127.0.0.1|\(rig.port)|".count + 16)
        #expect(session.directEndpoint == "127.0.0.1:\(rig.sessionPort)")
        #expect(room.retroarchJoin == session.join && room.source == .retroarchRelay && room.transport == .relay)

        let client = try rig.client(["--connect", room.retroarchJoin])
        try rig.waitJoined(host: host, client: client)
        let linked = eventually(within: 10) { rig.rooms().first?.currentPlayers == 2 && rig.rooms().first?.content?.coreId == "Nestopia" }
        #expect(linked, "the room does not show the client and the core: \(rig.rooms())")
        try rig.checkHealthThenEnd(host: host)
    }

    @Test(.disabled(if: skipReason != nil, Comment(rawValue: "skipped: \(skipReason ?? "")")))
    func aClientWithOnlyAnAddressAndAPortJoinsThroughTheSessionsPlainPort() throws {
        let rig = try Rig("plain")
        let host = try rig.host()
        let (session, room) = try rig.listedSession(host: host)
        #expect(room.hostEndpoint == "retroarch://127.0.0.1:\(rig.sessionPort)")
        #expect(session.directEndpoint == "127.0.0.1:\(rig.sessionPort)")

        let client = try rig.client(["--connect", "127.0.0.1", "--port", "\(rig.sessionPort)"])
        try rig.waitJoined(host: host, client: client)
        try rig.checkHealthThenEnd(host: host)
    }

    /// What `make up` runs (the supervisor with compose/cluster.yaml): its relay relays RetroArch
    /// on 7306, and telemetry shows the session's health (`/api/retroarch`, Prometheus series)
    /// while it runs, then forgets it.
    @Test(.disabled(if: skipReason != nil, Comment(rawValue: "skipped: \(skipReason ?? "")")))
    func theLocalClusterRelaysRetroArchAndTelemetryShowsTheSessionsHealth() throws {
        let cluster = try SupervisedCluster()
        defer { cluster.stop() }
        let fixture = try RetroArchFixture(directory: cluster.directory.appendingPathComponent("retroarch").path)
        var processes: [ServiceProcess] = []
        defer { for process in processes { process.kill9() } }
        func launch(_ name: String, _ extra: [String: String], _ arguments: [String]) throws -> ServiceProcess {
            let config = try fixture.config(name, nick: "ra-" + name, extra: RetroArchFixture.realTime.merging(extra) { $1 })
            let process = try ServiceProcess(Shell.which("retroarch")!, fixture.arguments(config: config, arguments),
                                             environment: fixture.environment(name))
            processes.append(process)
            return process
        }
        let host = try launch("host", ["netplay_use_mitm_server": "true", "netplay_mitm_server": "custom",
                                       "netplay_custom_mitm_server": "127.0.0.1|\(cluster.retroArchPort)"], ["--host"])
        let discovery = try BlockingClient(endpoint: cluster.discovery, timeout: 2)
        var join = ""
        _ = eventually(within: 30) {
            guard case .listRoomsResponse(let list)? = try? discovery.request(.listRoomsRequest(ListRoomsRequest(
                filter: RoomFilter(source: .retroarchRelay)))), let room = list.rooms.first else { return false }
            join = room.retroarchJoin
            return true
        }
        try #require(!join.isEmpty, "no RetroArch room in the local cluster; relay log:\n\(cluster.log(of: "sync-0").suffix(3_000))")
        #expect(join.hasPrefix("127.0.0.1|\(cluster.retroArchPort)|"))
        let client = try launch("client", [:], ["--connect", join])
        let joined = eventually(within: 45) { client.log.contains("You have joined as player 2") && host.log.contains("has joined as player 2") }
        try #require(joined, "no join:\n\(client.log.suffix(3_000))")

        // Telemetry: the session's row and series, with CRC checks rising.
        func row() -> [String: Any]? {
            guard let body = httpGet(cluster.http, "/api/retroarch")?.body, let json = jsonObject(body) else { return nil }
            return (json["sessions"] as? [[String: Any]])?.first
        }
        var first: [String: Any]?
        _ = eventually(within: 15) { first = row(); return (first?["crc_checks"] as? Int ?? 0) > 0 && first?["clients"] as? Int == 1 }
        let early = try #require(first, "telemetry shows no RetroArch session")
        #expect(early["join"] as? String == join && early["core"] as? String == "Nestopia" && early["relay"] as? String == "sync-0")
        let rising = eventually(within: 15) { (row()?["crc_checks"] as? Int ?? 0) > (early["crc_checks"] as? Int ?? 0) }
        #expect(rising)
        let metrics = httpGet(cluster.http, "/metrics")?.body ?? ""
        #expect(metrics.contains("netplay_retroarch_session_crc_checks_total{relay=\"sync-0\",session=\""))
        // The relay's own series come with its metric snapshots (every 5 s by default).
        let relaySeries = eventually(within: 15) {
            (httpGet(cluster.http, "/metrics")?.body ?? "").contains("netplay_retroarch_sessions{instance=\"sync-0\",service=\"sync\"} 1")
        }
        #expect(relaySeries)
        #expect((row()?["resync_requests"] as? Int) == 0)

        host.kill9()
        #expect(eventually(within: 15) { row() == nil }, "telemetry still shows the ended session")
    }
}
