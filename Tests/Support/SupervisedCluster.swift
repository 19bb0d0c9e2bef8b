import Foundation
import Synchronization
import NetplayService
import NetplayWire

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
        releasePorts()
    }

    /// Gives the port offset back, once.
    private func releasePorts() {
        guard !portsReleased.exchange(true, ordering: .relaxed) else { return }
        ClusterPorts.release(offset)
    }

    private let portsReleased = Atomic<Bool>(false)

    deinit {
        if supervisor.process.isRunning { stop() }
        releasePorts()
    }
}
