import Foundation
import Synchronization
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

/// A netplay-supervisor process running a generated cluster file of sample services on free
/// loopback ports, in its own temporary run directory.
final class SupervisedCluster {
    let directory: URL
    let endpoint: String
    let process: ServiceProcess
    /// The operator's client to the supervisor's control endpoint.
    lazy var client: BlockingClient = (try? keys.operatorClient(instance: "supervisor", timeout: 1))
        ?? (try! BlockingClient(endpoint: endpoint, timeout: 1))
    /// What netplayctl needs to find the operator key.
    var netplayctlEnvironment: [String: String] { ["NETPLAY_KEYS_DIR": keys.store.directory.path] }
    /// The cluster's trust store (the operator key netplayctl would use).
    let keys: TestKeys

    /// Writes `yaml` (with `SUPERVISOR` replaced by a free endpoint) and starts the supervisor.
    /// `console`, when given, is the supervisor's standard output (its console) instead of the log.
    init(_ yaml: (_ supervisor: String) -> String, extraArguments: [String] = [], environment: [String: String] = [:],
         console: FileHandle? = nil) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-sv-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        endpoint = TestPorts.endpoint()
        let file = directory.appendingPathComponent("cluster.yaml")
        try yaml(endpoint).write(to: file, atomically: true, encoding: .utf8)
        // The yaml's endpoint is the supervisor's control endpoint; its public one gets a free port.
        process = try ServiceProcess("netplay-supervisor",
                                     ["--config", file.path, "--run-dir", directory.appendingPathComponent("run").path,
                                      "--bin-dir", BuildProducts.directory.path, "--telemetry", "none",
                                      "--endpoint", TestPorts.endpoint()] + extraArguments,
                                     environment: ["NETPLAY_DATA_ROOT": directory.appendingPathComponent("data").path].merging(environment) { $1 },
                                     standardOutput: console)
        keys = TestKeys(dataRoot: directory.appendingPathComponent("data").path)
    }

    deinit {
        process.kill9()
        try? FileManager.default.removeItem(at: directory)
    }

    func status() -> ClusterStatusResponse? {
        guard case .clusterStatusResponse(let status)? = try? client.request(.clusterStatusRequest(ClusterStatusRequest())) else { return nil }
        return status
    }

    /// Waits until every instance is ready; returns the status then.
    func waitRunning(within seconds: Double = 20) -> ClusterStatusResponse? {
        var last: ClusterStatusResponse?
        _ = eventually(within: seconds) {
            last = status()
            return last?.state == .running || !process.process.isRunning
        }
        return last?.state == .running ? last : nil
    }

    func instance(_ name: String) -> ServiceStatus? { status()?.services.first { $0.instance == name } }

    var log: String { process.log }
}

/// True when `pid` is gone (or a zombie nobody reaped yet).
func processIsGone(_ pid: Int32) -> Bool {
    guard pid > 0 else { return true }
    if kill(pid, 0) != 0 { return true }
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return true }
    let state = stat[stat.index(close, offsetBy: 2)]
    return state == "Z" || state == "X"
}

/// A cluster file of sample services: `a`, then replicated `b` (depends on a).
func sampleCluster(supervisor: String, replicas: Int = 2, extraServices: String = "", intensity: String = "{max_restarts: 20, period: 60s}",
                   stopTimeout: String = "2s", bArguments: String = "[]", supervisorExtra: String = "", bPort: Int? = nil) -> String {
    let a = TestPorts.free(), aEvents = TestPorts.free()
    // Replicas of b use base + i: a block outside the kernel's ephemeral range, so no
    // outgoing connection of a parallel test can be holding b + i.
    let b = bPort ?? freePortBlock(8)
    return """
    cluster: test
    supervisor:
      endpoint: \(supervisor)
      stop_timeout: \(stopTimeout)
      start_timeout: 10s
      heartbeat_timeout: 2s
      backoff: {initial: 50ms, max: 500ms, jitter: 0.2}
      intensity: \(intensity)
      log_max_bytes: 4096
      log_files: 2
      \(supervisorExtra)
    environment:
      NETPLAY_TELEMETRY: none
    services:
      a:
        command: netplay-sample-service
        endpoints: {endpoint: "tcp://127.0.0.1:\(a)", events: "tcp://127.0.0.1:\(aEvents)"}
      b:
        command: netplay-sample-service
        depends_on: [a]
        replicas: \(replicas)
        port_step: 1
        endpoints: {endpoint: "tcp://127.0.0.1:\(b)", events: none}
        args: \(bArguments)
    \(extraServices)
    """
}

/// The first of `count` consecutive free TCP ports below the ephemeral range (20000-32000),
/// each handed out once per test run.
func freePortBlock(_ count: Int) -> Int {
    while true {
        let base = Int.random(in: 20000...(32000 - count))
        let fresh = handedOutBlocks.withLock { blocks -> Bool in
            guard !blocks.contains(where: { abs($0 - base) < 16 }) else { return false }
            blocks.insert(base)
            return true
        }
        if fresh && (base..<(base + count)).allSatisfy({ FreePort.isFree($0) }) { return base }
    }
}

private let handedOutBlocks = Mutex<Set<Int>>([])
