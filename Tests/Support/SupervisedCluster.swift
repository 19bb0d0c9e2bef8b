import Foundation
import NetplayService
import NetplayWire

/// Port offsets that make the design's whole endpoint table free, so a test cluster on shifted
/// ports (NETPLAY_PORT_OFFSET) never meets a developer's `make up` or another test's cluster.
public enum ClusterPorts {
    /// Design ports (TCP) a cluster binds, with room for three sync replicas.
    public static let designPorts = [7000, 7005, 7100, 7101, 7105, 7200, 7201, 7205, 7300, 7301, 7305, 7310, 7311, 7315,
                                     7320, 7321, 7325, 7400, 7401, 7402, 7405, 9400, 7306, 7316, 7326]

    /// An offset that makes every design port free (TCP) and the beacon's UDP port free.
    public static func freeOffset() -> Int {
        for _ in 0..<200 {
            let offset = Int.random(in: 100...230) * 100  // ports stay below the ephemeral range (32768+)
            if designPorts.allSatisfy({ portIsFree($0 + offset, udp: false) }) && portIsFree(7102 + offset, udp: true) { return offset }
        }
        return 30000
    }

    /// Whether `port` can be bound now on loopback (TCP) or any address (UDP).
    public static func portIsFree(_ port: Int, udp: Bool) -> Bool {
        let fd = socket(AF_INET, Int32(udp ? SOCK_DGRAM.rawValue : SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr(udp ? "0.0.0.0" : "127.0.0.1")
        return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0
    }
}

/// The cluster of compose/cluster.yaml run by a real netplay-supervisor with the test's debug
/// binaries, on shifted ports, with its own data root and trust store: what `make up` starts.
public final class SupervisedCluster: @unchecked Sendable {
    /// Added to every design port.
    public let offset = ClusterPorts.freeOffset()
    /// The cluster's directory (run/ and data/).
    public let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-cluster-\(UUID().uuidString)")
    /// The supervisor process.
    public let supervisor: ServiceProcess
    /// The trust store the cluster generated (operator key included).
    public let keys: TestKeys

    /// `tcp://127.0.0.1:<design port + offset>`.
    public func endpoint(_ designPort: Int) -> String { "tcp://127.0.0.1:\(designPort + offset)" }
    /// Discovery's public endpoint.
    public var discovery: String { endpoint(7100) }
    /// The coordinator's public endpoint.
    public var coordinator: String { endpoint(7200) }
    /// Relay sync-0's public endpoint.
    public var relay: String { endpoint(7300) }
    /// Relay sync-0's RetroArch relay port (docs/retroarch.md).
    public var retroArchPort: Int { 7306 + offset }
    /// Telemetry's ingest (PULL).
    public var ingest: String { endpoint(7400) }
    /// Telemetry's HTTP address.
    public var http: String { "127.0.0.1:\(9400 + offset)" }
    /// The supervisor's control endpoint.
    public var supervisorControl: String { endpoint(7000) }
    /// The supervisor's public endpoint.
    public var supervisorPublic: String { endpoint(7005) }

    /// Starts the cluster and waits until every instance is ready.
    public init(environment extra: [String: String] = [:], readyWithin seconds: Double = 60) throws {
        let data = directory.appendingPathComponent("data")
        keys = TestKeys(dataRoot: data.path)
        var environment = ["NETPLAY_PORT_OFFSET": String(offset), "NETPLAY_RETROARCH_PORT": "0",
                           "NETPLAY_DATA_ROOT": data.path, "NETPLAY_METRICS_INTERVAL": "1"]
        environment.merge(extra) { $1 }
        supervisor = try ServiceProcess("netplay-supervisor", [
            "--config", repositoryRoot.appendingPathComponent("compose/cluster.yaml").path,
            "--run-dir", directory.appendingPathComponent("run").path, "--bin-dir", BuildProducts.directory.path, "--quiet",
        ], environment: environment)
        guard eventually(within: seconds, { status()?.state == .running }) else {
            stop()
            throw HarnessError("the cluster never became ready:\n\(supervisor.log.suffix(3000))")
        }
    }

    /// The cluster's status, asked by the operator (nil when there is no answer).
    public func status() -> ClusterStatusResponse? {
        guard let client = try? keys.operatorClient(instance: "supervisor", timeout: 1),
              case .clusterStatusResponse(let status)? = try? client.request(.clusterStatusRequest(ClusterStatusRequest())) else {
            return nil
        }
        return status
    }

    /// The pid of each instance, by instance name.
    public func pids() -> [String: UInt32] {
        Dictionary((status()?.services ?? []).map { ($0.instance, $0.pid) }, uniquingKeysWith: { first, _ in first })
    }

    /// A service's log file under run/logs.
    public func log(of instance: String) -> String {
        (try? String(contentsOf: directory.appendingPathComponent("run/logs/\(instance).log"), encoding: .utf8)) ?? ""
    }

    /// Stops the supervisor (and so every service) and removes the directory.
    public func stop() {
        supervisor.send(SIGTERM)
        if supervisor.waitForExit(seconds: 20) == nil { supervisor.kill9() }
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { if supervisor.process.isRunning { stop() } }
}
