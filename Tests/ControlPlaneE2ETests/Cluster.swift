import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Synchronization

/// Discovery and coordinator as real processes on free loopback ports (events on), plus fake relays.
final class ControlPlane: TestCluster, @unchecked Sendable {
    static let secret = String(repeating: "5a", count: 32)

    init(discovery startDiscovery: Bool = true, coordinator extra: [String] = [], discoveryArguments: [String] = []) throws {
        var options = Options(secret: Self.secret)
        options.name = "cp"
        options.events = true
        options.discovery = startDiscovery
        options.relay = false
        options.discoveryArguments = discoveryArguments
        options.coordinatorArguments = ["--room-ttl", "3"] + extra
        try super.init(options)
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

