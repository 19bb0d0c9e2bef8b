import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

@Suite("Control plane resilience (real processes)", .serialized, .ownThread)
struct ResilienceTests {
    @Test func aStaleRelayIsDroppedAndItsSessionFailsOverToALiveOne() throws {
        let cluster = try ControlPlane(coordinator: ["--relay-ttl", "2", "--relay-refresh-interval", "0.3"])
        let events = try cluster.keys.operatorSubscriber(events: cluster.coordinatorEvents, prefixes: ["relays.", "sessions.relay_assigned"])
        let client = try cluster.coordinatorClient()
        let stale = try FakeRelay("sync-stale", cluster: cluster, refresh: false)
        let host = try client.create(settings())
        #expect(host.session.relayId == "sync-stale")
        let live = try FakeRelay("sync-live", cluster: cluster)
        defer { live.stop() }
        // The stale relay misses its 2 s TTL: relays.dropped names the session it had, which moves
        // to the live relay at once (sessions.relay_assigned).
        var topics: [String] = []
        var dropped: RelayEvent?
        let deadline = Date().addingTimeInterval(10)
        while dropped == nil || !topics.contains("sessions.relay_assigned"), Date() < deadline {
            guard let event = try events.next(timeout: 200) else { continue }
            topics.append(event.topic)
            if case .success(let envelope) = event.envelope, case .relayEvent(let relayEvent) = envelope.body, relayEvent.kind == .dropped {
                dropped = relayEvent
            }
        }
        #expect(dropped?.relay.relayId == "sync-stale" && dropped?.sessionIds == [host.session.sessionId],
                "\(dropped.map { $0.jsonLine() } ?? "none") \(topics)")
        guard case .listRelaysResponse(let list) = try client.request(.listRelaysRequest(ListRelaysRequest(includeStale: true))) else {
            Issue.record("no relay list"); return
        }
        #expect(list.relays.map(\.relayId) == ["sync-live"])
        // The host's next ticket names the live relay.
        guard case .sessionResponse(let renewed) = try client.request(.renewTicketRequest(RenewTicketRequest(
            sessionId: host.session.sessionId, participantId: host.participantId, participantToken: host.participantToken))) else {
            Issue.record("no renewal"); return
        }
        #expect(renewed.session.relayId == "sync-live" && renewed.ticket?.relayEndpoint == live.endpoint)
        #expect(topics.contains("sessions.relay_assigned"), "\(topics)")
        #expect(eventually(within: 3) { cluster.coordinator!.log.contains("relay dropped") })
        _ = stale
    }

    @Test func theCoordinatorRunsWithoutDiscoveryAndAnnouncesWhenItComesBack() throws {
        let cluster = try ControlPlane(discovery: false)
        let relay = try FakeRelay("sync-0", cluster: cluster)
        defer { relay.stop() }
        let client = try cluster.coordinatorClient()
        let host = try client.create(settings())
        _ = try client.join(host.session.sessionId, "bob")
        #expect(eventually(within: 8) { cluster.coordinator!.log.contains("discovery unreachable") }, "\(cluster.coordinator!.log)")
        let operatorClient = try cluster.keys.operatorClient(endpoint: cluster.coordinatorEndpoint)
        guard case .healthResponse(let health) = try operatorClient.request(.healthRequest(HealthRequest())) else { return }
        #expect(health.ready && health.status.contains("discovery unreachable"))
        try cluster.startDiscovery()
        #expect(eventually(within: 10) { (try? cluster.rooms().first { $0.roomId == host.session.sessionId })?.currentPlayers == 2 },
                "\(cluster.coordinator!.log)")
        #expect(eventually(within: 3) { cluster.coordinator!.log.contains("discovery reachable again") })
    }

    @Test func roomsOfAHostThatStopsRefreshingDisappear() throws {
        // The coordinator announces with a 3 s TTL; killed, it stops refreshing and its rooms expire.
        let cluster = try ControlPlane()
        let relay = try FakeRelay("sync-0", cluster: cluster)
        defer { relay.stop() }
        let id = try cluster.coordinatorClient().create(settings()).session.sessionId
        #expect(eventually(within: 5) { (try? cluster.rooms().contains { $0.roomId == id }) == true })
        // Refreshed within the TTL, it stays.
        Thread.sleep(forTimeInterval: 3.5)
        #expect(try cluster.rooms().contains { $0.roomId == id })
        let subscriber = try EventSubscriber(endpoint: cluster.discoveryEvents, prefixes: ["rooms.removed"])
        Thread.sleep(forTimeInterval: 0.2)  // let the subscription reach the PUB socket
        cluster.coordinator!.kill9()
        var removal: RoomRemoved?
        _ = eventually(within: 10) {
            if let event = try? subscriber.next(timeout: 100), case .success(let envelope) = event.envelope,
               case .roomRemoved(let removed) = envelope.body { removal = removed }
            return removal != nil
        }
        #expect(removal?.roomId == id && removal?.reason == .expired)
        #expect(try cluster.rooms().isEmpty)
    }

    @Test func configurationMistakesExitWithOneLine() throws {
        let cluster = try ControlPlane(discovery: false, coordinator: ["--discovery", "none"])
        let second = try ServiceProcess("netplay-coordinator", ["--endpoint", TestPorts.endpoint(), "--events", "none",
                                                                "--data-dir", cluster.dataRoot + "/coordinator", "--discovery", "none"],
                                        environment: ["NETPLAY_TELEMETRY": "none"])
        #expect(second.waitForExit(seconds: 10) == 2)
        let secondLog = second.log
        #expect(secondLog.split(separator: "\n").last?.contains("another coordinator is using") == true, "\(secondLog)")
        for (arguments, fragment) in [(["--cluster-secret", "tooshort"], "--cluster-secret"), (["--relay-ttl", "x"], "--relay-ttl"),
                                      (["--durability", "maybe"], "--durability"), (["--discovery", "http://x"], "--discovery")] {
            let process = try ServiceProcess("netplay-coordinator", arguments)
            #expect(process.waitForExit(seconds: 10) == 2)
            let log = process.log
            let lines = log.split(separator: "\n")
            #expect(lines.count == 1 && lines.first?.hasPrefix("netplay-coordinator: ") == true
                    && lines.first?.contains(fragment) == true, "\(log)")
        }
        let help = try ServiceProcess("netplay-coordinator", ["--help"])
        #expect(help.waitForExit(seconds: 10) == 0)
        let helpText = help.log
        for variable in ["NETPLAY_DISCOVERY", "NETPLAY_CLUSTER_SECRET", "NETPLAY_CLUSTER_SECRET_FILE", "NETPLAY_TICKET_TTL",
                         "NETPLAY_RELAY_TTL", "NETPLAY_DATA_DIR", "NETPLAY_DURABILITY", "NETPLAY_PASSWORD_ATTEMPTS"] {
            #expect(helpText.contains(variable), "--help lacks \(variable)")
        }
    }
}
