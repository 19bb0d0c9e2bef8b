import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

/// Sessions end: after matches played to their last frame with netplay-peer (each ending with
/// `leave()`), nothing is left anywhere (docs/coordinator.md, "Lifecycle").
@Suite("Session lifecycle through the cluster", .ownThread)
struct LifecycleE2ETests {
    @Test(.timeLimit(.minutes(4)))
    func matchesBackToBackLeaveTheCoordinatorDiscoveryAndTheRelayEmpty() throws {
        let cluster = try PlayCluster()
        let frames = 240
        for round in 1 ... 3 {
            let room = "ghost-\(round)"
            let host = try cluster.peer("host", ["--players", "2"] + Match.host + Match.common(room: room, frames: frames, seed: 10 * round))
            #expect(host.waitFor("session s-", within: 30), "round \(round): the host got no session: \(host.log)")
            let join = try cluster.peer("join", Match.common(room: room, frames: frames, seed: 10 * round + 1))
            let results = [host, join].map { $0.result(within: 90) }
            for (process, result) in zip([host, join], results) {
                #expect(result != nil, "round \(round): \(process.name) failed:\n\(process.log.suffix(3000))")
            }
            #expect(Set(results.compactMap { $0?.checksum }).count == 1, "round \(round): \(results)")
        }
        let coordinator = try BlockingClient(endpoint: cluster.coordinatorEndpoint, timeout: 5)
        let discovery = try BlockingClient(endpoint: cluster.discoveryEndpoint, timeout: 5)
        let relay = try TestKeys(dataRoot: cluster.dataRoot).operatorClient(endpoint: cluster.relayEndpoint, timeout: 3)

        // The coordinator: no session in the lobby or running; the three ended.
        var active = -1, ended = -1
        #expect(eventually(within: 10) {
            guard case .listSessionsResponse(let open)? = try? coordinator.request(.listSessionsRequest(ListSessionsRequest())),
                  case .listSessionsResponse(let over)? = try? coordinator.request(.listSessionsRequest(ListSessionsRequest(state: .ended)))
            else { return false }
            active = Int(open.totalMatching)
            ended = Int(over.totalMatching)
            return active == 0 && ended == 3
        }, "sessions still active: \(active), ended: \(ended)")
        // Discovery: no room left, in progress or not.
        var rooms = -1
        #expect(eventually(within: 10) {
            guard case .listRoomsResponse(let list)? = try? discovery.request(.listRoomsRequest(ListRoomsRequest(
                filter: RoomFilter(includeInProgress: true)))) else { return false }
            rooms = Int(list.totalMatching)
            return rooms == 0
        }, "rooms left in discovery: \(rooms)")
        // The relay serves nothing, and the load it reports to the coordinator says so.
        var served = -1
        #expect(eventually(within: 10) {
            guard case .introspectResponse(let report)? = try? relay.request(.introspectRequest(IntrospectRequest())),
                  let object = try? JSONSerialization.jsonObject(with: Data(report.json.utf8)) as? [String: Any],
                  let state = object["state"] as? [String: Any],
                  let sessions = state["sessions"] as? [Any] else { return false }
            served = sessions.count
            return served == 0 && state["peers"] as? Int == 0
        }, "the relay still serves \(served) sessions")
        var load = ""
        #expect(eventually(within: 10) {
            guard case .listRelaysResponse(let list)? = try? coordinator.request(.listRelaysRequest(ListRelaysRequest())),
                  let only = list.relays.first else { return false }
            load = "\(only.load.map { "\($0.sessions) sessions, \($0.peers) peers" } ?? "none")"
            return list.relays.count == 1 && only.load?.sessions == 0 && only.load?.peers == 0
        }, "the relay's load at the coordinator: \(load)")
    }
}
