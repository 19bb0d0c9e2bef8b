import Foundation
import NetplayService
import NetplayWire
import Testing
import WANHarness

/// Relays on hosts of their own: network namespaces stand in for machines. The
/// coordinator picks the relay nearest the players from the round trips they measured, and when
/// that relay's host dies mid-match the session fails over to the other relay, where the players
/// rebuild the match from what they hold and finish it with one checksum.
/// Nested in ``WANPlayTests`` so that it runs serialized with the timing checks there, never beside them.
extension WANPlayTests {
    @Suite("Relays across hosts: chosen by latency, failing over")
    struct RelayFailoverTests {
        /// Layout: the service host (discovery, coordinator); relay sync-a ("us") 30 ms one way from
        /// it, sync-b ("eu") 3 ms; four players 4 to 10 ms from it. A player's round trip to a relay
        /// crosses both hosts' delays, so sync-b is nearer for every player (worst ~26 ms against
        /// ~80 ms). The host does not measure (`--measure-relays off`, an old client): with nothing
        /// measured and equal load the coordinator takes sync-a (the first id); the first joiner's
        /// measurements move the lobby to sync-b, and the host follows. Mid-match sync-b's host is
        /// taken away (its link drops everything, its process is killed): the coordinator drops it
        /// after its TTL and moves the session to sync-a, the players ask where it went, attach there
        /// and rebuild the match.
        @Test(.timeLimit(.minutes(5)))
        func theNearestRelayIsChosenAndAMatchSurvivesItsHostDying() throws {
            let bin = URL(fileURLWithPath: try WANLab.locateWanlink()).deletingLastPathComponent().path
            let lab = try WANLab(wanlinkPath: "\(bin)/netplay-wanlink")
            defer { lab.tearDown() }
            let deployment = try WANDeployment(lab: lab, binDirectory: bin,
                                               relays: [("sync-a", "us", 30), ("sync-b", "eu", 3)], relayTTLSeconds: 1.5)
            defer { deployment.stop() }
            let coordinator = try BlockingClient(endpoint: deployment.coordinator, timeout: 3)
            let discovery = try BlockingClient(endpoint: deployment.discovery, timeout: 3)
            func session() -> SessionInfo? {
                guard case .listSessionsResponse(let list)? = try? coordinator.request(.listSessionsRequest(ListSessionsRequest())) else { return nil }
                return list.sessions.first
            }

            try deployment.play(room: "failover", delaysMs: [4, 6, 8, 10], frames: 1200, hostArguments: ["--measure-relays", "off"])

            // The relay the layout predicts, once everyone is in and the match runs.
            var seen = "none"
            let chosen = eventually(within: 40) {
                guard let info = session() else { return false }
                seen = "\(info.relayId) \(info.state)"
                return info.relayId == "sync-b" && info.state == .running
            }
            #expect(chosen, "session: \(seen)\n\(deployment.logTails())")
            guard chosen else { return }
            Thread.sleep(forTimeInterval: 3)  // mid-match

            try deployment.takeAway(relay: "sync-b")
            let movedBy = Date()
            #expect(eventually(within: 15) { session()?.relayId == "sync-a" }, "the session did not move: \(session().map { "\($0)" } ?? "none")")
            let moveSeconds = Date().timeIntervalSince(movedBy)

            let results: [WANPlayerFigures]
            do {
                results = try deployment.results(within: 180)
            } catch {
                Issue.record("\(error)\n\(deployment.logTails())")
                return
            }
            let context = Comment(rawValue: results.map(\.description).joined(separator: "\n") + "\nmoved after \(moveSeconds) s")
            print("failover: \(context.rawValue)")
            #expect(results.count == 4, context)
            #expect(Set(results.map(\.checksum)).count == 1 && results.first?.checksum != "?", context)
            let survivor = deployment.relay("sync-a")!.endpoint
            for (index, player) in results.enumerated() {
                #expect(player.relay == survivor, context)
                // The host moved twice (to the nearer relay in the lobby, then away from the dead one).
                #expect(player.relayMoves >= (index == 0 ? 2 : 1), context)
            }

            // Afterwards the coordinator, discovery and the surviving relay agree: nothing is left.
            var state = ""
            #expect(eventually(within: 15) {
                guard case .listSessionsResponse(let open)? = try? coordinator.request(.listSessionsRequest(ListSessionsRequest())),
                      case .listRelaysResponse(let relays)? = try? coordinator.request(.listRelaysRequest(ListRelaysRequest(includeStale: true))),
                      case .listRoomsResponse(let rooms)? = try? discovery.request(.listRoomsRequest(ListRoomsRequest(
                          filter: RoomFilter(includeInProgress: true)))) else { return false }
                state = "active sessions \(open.totalMatching), rooms \(rooms.totalMatching), relays "
                    + relays.relays.map { "\($0.relayId): \($0.load?.sessions ?? 99) sessions \($0.load?.peers ?? 99) peers" }.joined(separator: ", ")
                return open.totalMatching == 0 && rooms.totalMatching == 0 && relays.relays.map(\.relayId) == ["sync-a"]
                    && relays.relays[0].load?.sessions == 0 && relays.relays[0].load?.peers == 0
            }, "\(state)")
        }

        /// True once `condition` holds, checked every 100 ms for at most `seconds`.
        func eventually(within seconds: Double, _ condition: () -> Bool) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if condition() { return true }
                Thread.sleep(forTimeInterval: 0.1)
            }
            return condition()
        }
    }
}
