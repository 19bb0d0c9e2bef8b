@testable import Discovery
import Foundation
import NetplayLAN
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

/// A netplay-discovery process on free loopback ports, LAN listeners off unless asked for.
final class DiscoveryProcess {
    let process: ServiceProcess
    let endpoint = TestPorts.endpoint()
    let events = TestPorts.endpoint()
    /// A public client (what players use).
    let client: BlockingClient
    /// The trust store discovery admits: announcers are cluster members with keys in it.
    let keys: TestKeys
    private var announcers: [String: BlockingClient] = [:]

    init(_ extra: [String] = [], lan: Bool = false) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-discovery-\(UUID().uuidString)").path
        keys = TestKeys(dataRoot: root)
        var arguments = ["--endpoint", endpoint, "--events", events, "--data-dir", root + "/discovery-test", "--instance", "discovery-test"]
        if !lan { arguments += ["--beacon-port", "0", "--retroarch-port", "0"] }
        process = try ServiceProcess("netplay-discovery", arguments + extra, environment: ["NETPLAY_TELEMETRY": "none"])
        client = try BlockingClient(endpoint: endpoint, timeout: 2)
        let probe = try BlockingClient(endpoint: endpoint, timeout: 0.2)
        guard eventually(within: 15, { (try? probe.request(.healthRequest(HealthRequest()))) != nil }) else {
            throw HarnessError("netplay-discovery did not start: \(process.log)")
        }
    }

    deinit { process.kill9() }

    /// The control-plane client of announcer `id`: a cluster member key minted for it.
    func announcer(_ id: String) throws -> BlockingClient {
        if let known = announcers[id] { return known }
        let made = try keys.clusterClient(as: "coordinator", instance: id, endpoint: endpoint)
        announcers[id] = made
        return made
    }

    /// The client a request goes through: its announcer's for room announcements, else the public one.
    func route(_ body: Envelope.Body) throws -> BlockingClient {
        switch body {
        case .announceRoomRequest(let announce): try announcer(announce.announcerId)
        case .refreshRoomRequest(let refresh): try announcer(refresh.announcerId)
        case .withdrawRoomRequest(let withdraw): try announcer(withdraw.announcerId)
        default: client
        }
    }

    func request(_ body: Envelope.Body) throws -> Envelope.Body { try route(body).request(body) }

    func announce(_ room: Room, by announcer: String = "test", ttlMs: UInt32 = 0) throws -> AnnounceRoomResponse {
        guard case .announceRoomResponse(let response) = try request(.announceRoomRequest(
            AnnounceRoomRequest(room: room, ttlMs: ttlMs, announcerId: announcer))) else { throw HarnessError("no announce reply") }
        return response
    }

    func list(_ filter: RoomFilter = RoomFilter(), pageSize: UInt32 = 100) throws -> ListRoomsResponse {
        guard case .listRoomsResponse(let response) = try client.request(.listRoomsRequest(
            ListRoomsRequest(filter: filter, pageSize: pageSize))) else { throw HarnessError("no list reply") }
        return response
    }

    func error(_ body: Envelope.Body) throws -> ErrorReply {
        let reply = try route(body).requestEnvelope(body)
        guard case .error(let error) = reply.body else { throw HarnessError("expected an Error, got \(reply.body.name)") }
        return error
    }
}

/// A UDP port that was free a moment ago.
func freeUDPPort() throws -> UInt16 {
    let socket = try UDPSocket(host: "127.0.0.1", port: 0)
    defer { socket.close() }
    return socket.localAddress.port
}
