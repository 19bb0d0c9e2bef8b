import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Synchronization

/// Discovery and coordinator as real processes on free loopback ports, plus fake relays.
final class ControlPlane {
    let discoveryEndpoint = TestPorts.endpoint()
    let discoveryEvents = TestPorts.endpoint()
    let coordinatorEndpoint = TestPorts.endpoint()
    let coordinatorEvents = TestPorts.endpoint()
    let dataRoot = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-cp-\(UUID().uuidString)").path
    var discovery: ServiceProcess?
    var coordinator: ServiceProcess?
    let coordinatorArguments: [String]
    /// The trust store the services share (relays and the operator are keys in it).
    var keys: TestKeys { TestKeys(dataRoot: dataRoot) }
    static let secret = String(repeating: "5a", count: 32)

    init(discovery startDiscovery: Bool = true, coordinator extra: [String] = [], discoveryArguments: [String] = []) throws {
        coordinatorArguments = extra
        if startDiscovery { try self.startDiscovery(discoveryArguments) }
        try startCoordinator()
    }

    deinit {
        discovery?.kill9()
        coordinator?.kill9()
        try? FileManager.default.removeItem(atPath: dataRoot)
    }

    func startDiscovery(_ extra: [String] = []) throws {
        discovery = try ServiceProcess("netplay-discovery", [
            "--endpoint", discoveryEndpoint, "--events", discoveryEvents, "--data-dir", dataRoot + "/discovery",
            "--instance", "discovery-1", "--beacon-port", "0", "--retroarch-port", "0", "--sync-interval", "0.2",
        ] + extra, environment: ["NETPLAY_TELEMETRY": "none"])
        try waitHealthy(discoveryEndpoint, discovery!)
    }

    func startCoordinator(instance: String = "coordinator-1") throws {
        coordinator = try ServiceProcess("netplay-coordinator", [
            "--endpoint", coordinatorEndpoint, "--events", coordinatorEvents, "--data-dir", dataRoot + "/coordinator",
            "--instance", instance, "--discovery", discoveryEndpoint, "--cluster-secret", Self.secret,
            "--room-ttl", "3",
        ] + coordinatorArguments, environment: ["NETPLAY_TELEMETRY": "none"])
        try waitHealthy(coordinatorEndpoint, coordinator!)
    }

    func waitHealthy(_ endpoint: String, _ process: ServiceProcess) throws {
        let probe = try BlockingClient(endpoint: endpoint, timeout: 0.2)
        guard eventually(within: 20, { (try? probe.request(.healthRequest(HealthRequest()))) != nil }) else {
            throw HarnessError("\(process.name) did not start: \(process.log)")
        }
    }

    func coordinatorClient(timeout: Double = 5) throws -> BlockingClient { try BlockingClient(endpoint: coordinatorEndpoint, timeout: timeout) }
    func discoveryClient() throws -> BlockingClient { try BlockingClient(endpoint: discoveryEndpoint, timeout: 2) }

    func rooms(_ filter: RoomFilter = RoomFilter(includeInProgress: true)) throws -> [Room] {
        guard case .listRoomsResponse(let list) = try discoveryClient().request(.listRoomsRequest(ListRoomsRequest(filter: filter, pageSize: 500))) else {
            throw HarnessError("no room list")
        }
        return list.rooms
    }
}

/// A stand-in for a netplay-sync replica: registers with the coordinator and refreshes from its
/// own thread until stopped (or never, to go stale).
final class FakeRelay: @unchecked Sendable {
    let relayId: String
    let endpoint: String
    private let stopped = Mutex(false)
    private let finished = DispatchSemaphore(value: 0)
    let closes = Mutex<[String]>([])

    /// A relay `relayId` of `cluster`: a cluster key of kind sync minted for it in the trust store.
    init(_ relayId: String, cluster: ControlPlane, refresh: Bool = true, capacity: UInt32 = 0, region: String = "") throws {
        self.relayId = relayId
        endpoint = TestPorts.endpoint()
        let store = cluster.keys
        let identity = try store.memberKeys(kind: "sync", instance: relayId)
        let coordinator = try store.member(endpoint: cluster.coordinatorEndpoint)
        let client = try store.client(to: coordinator, as: identity, timeout: 3)
        _ = try client.request(.registerRelayRequest(RegisterRelayRequest(relay: RelayInfo(
            relayId: relayId, endpoint: endpoint, region: region, load: RelayLoad(capacitySessions: capacity)))))
        guard refresh else { finished.signal(); return }
        let relayId = relayId
        Thread.detachNewThread { [self] in
            defer { finished.signal() }
            guard let client = try? store.client(to: coordinator, as: identity, timeout: 1) else { return }
            while !stopped.withLock({ $0 }) {
                if case .refreshRelayResponse(let reply)? = try? client.request(.refreshRelayRequest(
                    RefreshRelayRequest(relayId: relayId, load: RelayLoad(capacitySessions: capacity)))) {
                    closes.withLock { $0 += reply.closeSessionIds }
                }
                usleep(200_000)
            }
        }
    }

    func stop() {
        stopped.withLock { $0 = true }
        finished.wait()
        finished.signal()
    }

    deinit { stop() }
}

let smb = ContentInfo(gameName: "Super Mario Bros.", crc32: 0x3337_EC46, coreId: "nestopia", coreVersion: "1.52.0", system: "nes")

func settings(players: UInt32 = 2, spectators: UInt32 = 2, password: String = "", spectatePassword: String = "",
              unlisted: Bool = false) -> SessionSettings {
    SessionSettings(roomName: "test room", content: smb, transport: .relay, unlisted: unlisted, maxPlayers: players,
                    spectatorsAllowed: spectators > 0, maxSpectators: spectators, playPassword: password,
                    spectatePassword: spectatePassword)
}

extension BlockingClient {
    func create(_ settings: SessionSettings, host: String = "alice") throws -> CreateSessionResponse {
        let reply = try request(.createSessionRequest(CreateSessionRequest(settings: settings, hostName: host)))
        guard case .createSessionResponse(let created) = reply else { throw HarnessError("create answered \(reply.name)") }
        return created
    }

    func join(_ sessionId: String, _ name: String, role: Role = .player, password: String = "", content: ContentInfo = smb,
              slot: UInt32 = 0) throws -> JoinSessionResponse {
        let reply = try request(.joinSessionRequest(JoinSessionRequest(sessionId: sessionId, role: role, name: name, password: password,
                                                                       content: content, preferredSlot: slot)))
        guard case .joinSessionResponse(let joined) = reply else { throw HarnessError("join answered \(reply.name)") }
        return joined
    }

    func session(_ id: String) throws -> SessionInfo {
        let reply = try request(.getSessionRequest(GetSessionRequest(sessionId: id)))
        guard case .sessionResponse(let response) = reply else { throw HarnessError("get answered \(reply.name)") }
        return response.session
    }

    /// The error code `body` is answered with (nil for a success).
    func code(_ body: Envelope.Body) throws -> ErrorCode? {
        let reply = try requestEnvelope(body)
        if case .error(let error) = reply.body { return error.code }
        return nil
    }
}

/// Encodes protobuf by hand, to send what NetplayWire would refuse to encode.
enum RawProto {
    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value, out: [UInt8] = []
        while value >= 0x80 { out.append(UInt8(value & 0x7F) | 0x80); value >>= 7 }
        out.append(UInt8(value))
        return out
    }

    static func field(_ number: UInt64, bytes: [UInt8]) -> [UInt8] {
        varint(number << 3 | 2) + varint(UInt64(bytes.count)) + bytes
    }

    static func envelope(requestId: UInt64, body number: UInt64, _ body: [UInt8]) -> [UInt8] {
        [0x08] + varint(requestId) + field(number, bytes: body)
    }
}

/// The complete output of a process that has exited: its pipe may still be draining when the
/// exit is seen, so wait until the output stops growing (at most 3 s).
func settledLog(_ process: ServiceProcess) -> String {
    var last = process.log
    let deadline = Date().addingTimeInterval(3)
    while Date() < deadline {
        usleep(100_000)
        let now = process.log
        if now == last && !now.isEmpty { return now }
        last = now
    }
    return last
}
