import Foundation
import NetplayService
import NetplayWire

/// Discovery, a coordinator and (optionally) relay sync-0 as real processes on free loopback
/// ports, sharing a data root (so a trust store: `keys`) and a cluster secret, plus the
/// netplay-peer processes a test starts against them; everything is killed with the cluster.
/// The end-to-end suites' clusters (ControlPlane, PlayCluster, CoreCluster) are this with their
/// own helpers on top.
open class TestCluster: @unchecked Sendable {
    /// What to start and how.
    public struct Options: Sendable {
        /// The cluster secret that signs join tickets (hex).
        public var secret: String
        /// Bind discovery's and the coordinator's events endpoints (for tests that subscribe).
        public var events = false
        /// Start discovery.
        public var discovery = true
        /// Start relay sync-0 (and wait until the coordinator lists it).
        public var relay = true
        /// Extra flags for discovery and the coordinator.
        public var discoveryArguments: [String] = []
        public var coordinatorArguments: [String] = []
        /// Extra flags for relay sync-0.
        public var relayArguments: [String] = []
        /// NETPLAY_CURVE_SECRET_KEY for every service (encrypted public endpoints), or nil.
        public var curveSecretKey: String?
        /// Prefix of the data root's name (which suite's cluster it is, in /tmp).
        public var name = "cluster"

        /// Options for a cluster signing tickets with `secret`.
        public init(secret: String) { self.secret = secret }
    }

    public let options: Options
    public let discoveryEndpoint = TestPorts.endpoint()
    public let discoveryEvents = TestPorts.endpoint()
    public let coordinatorEndpoint = TestPorts.endpoint()
    public let coordinatorEvents = TestPorts.endpoint()
    public let relayEndpoint = TestPorts.endpoint()
    public let relayEvents = TestPorts.endpoint()
    public let dataRoot: String
    /// The cluster's trust store (the operator key, and keys a test mints to act as a member).
    public var keys: TestKeys { TestKeys(dataRoot: dataRoot) }
    /// The services' environment: no telemetry, and the CurveZMQ secret key when set.
    public let serviceEnvironment: [String: String]
    /// The public endpoints' CurveZMQ key (nil: plain); the harness's own requests use it.
    public let serverKey: [UInt8]?
    public private(set) var discovery: ServiceProcess?
    public private(set) var coordinator: ServiceProcess?
    public private(set) var relay: ServiceProcess?
    private var peers: [ServiceProcess] = []

    /// Starts the services `options` asks for and waits until each answers (and the relay is listed).
    public init(_ options: Options) throws {
        self.options = options
        dataRoot = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-\(options.name)-\(UUID().uuidString)").path
        serviceEnvironment = ["NETPLAY_TELEMETRY": "none"].merging(options.curveSecretKey.map { ["NETPLAY_CURVE_SECRET_KEY": $0] } ?? [:]) { $1 }
        serverKey = try CurveClientOptions.serverKey(flag: nil, environment: serviceEnvironment)
        if options.discovery { try startDiscovery() }
        try startCoordinator()
        if options.relay { try startRelay() }
    }

    deinit {
        for process in peers { process.kill9() }
        relay?.kill9()
        coordinator?.kill9()
        discovery?.kill9()
        try? FileManager.default.removeItem(atPath: dataRoot)
    }

    /// The flags the services start with (the plan `netplay-peer demo` and the WAN lab share).
    public var plan: ClusterLaunchPlan {
        ClusterLaunchPlan(discovery: discoveryEndpoint, coordinator: coordinatorEndpoint, dataRoot: dataRoot, secret: options.secret)
    }

    /// Starts discovery (again) on its endpoint.
    public func startDiscovery(_ extra: [String] = []) throws {
        discovery = try ServiceProcess("netplay-discovery", plan.discoveryArguments(
            instance: "discovery-1", events: options.events ? discoveryEvents : "none",
            extra: ["--sync-interval", "0.2"] + options.discoveryArguments + extra), environment: serviceEnvironment)
        try waitHealthy(discoveryEndpoint, discovery!)
    }

    /// Starts the coordinator (again) on its endpoint and data directory.
    public func startCoordinator(instance: String = "coordinator-1") throws {
        coordinator = try ServiceProcess("netplay-coordinator", plan.coordinatorArguments(
            instance: instance, events: options.events ? coordinatorEvents : "none", extra: options.coordinatorArguments),
            environment: serviceEnvironment)
        try waitHealthy(coordinatorEndpoint, coordinator!)
    }

    /// Starts (or restarts) relay `sync-0` and waits until the coordinator lists it.
    public func startRelay(extraArguments: [String] = []) throws {
        relay = try ServiceProcess("netplay-sync", plan.relayArguments(
            endpoint: relayEndpoint, instance: "sync-0", events: relayEvents, extra: options.relayArguments + extraArguments),
            environment: serviceEnvironment)
        try waitHealthy(relayEndpoint, relay!)
        let client = try BlockingClient(endpoint: coordinatorEndpoint, timeout: 1, serverKey: serverKey)
        let listed = eventually(within: 10) { ClusterLaunchPlan.listsRelay(client, relayId: "sync-0") }
        guard listed else { throw HarnessError("the relay did not register: \(relay!.log)") }
    }

    /// Kills the relay with SIGKILL (no drain, no goodbye) and starts a fresh one on the same
    /// endpoint and data directory (with `extraArguments` added to its command line).
    public func restartRelayAfterCrash(extraArguments: [String] = []) throws {
        relay?.kill9()
        try startRelay(extraArguments: extraArguments)
    }

    /// Waits until `endpoint` answers Health (30 s at most).
    public func waitHealthy(_ endpoint: String, _ process: ServiceProcess) throws {
        let probe = try BlockingClient(endpoint: endpoint, timeout: 0.2, serverKey: serverKey)
        guard eventually(within: 30, { ClusterLaunchPlan.answersHealth(probe) }) else {
            throw HarnessError("\(process.name) did not start: \(process.log)")
        }
    }

    /// Starts `netplay-peer <command>` against this cluster (with `environment` added).
    public func peer(_ command: String, _ arguments: [String], environment: [String: String] = [:]) throws -> ServiceProcess {
        let process = try ServiceProcess("netplay-peer", [command, "--discovery", discoveryEndpoint,
                                                          "--coordinator", coordinatorEndpoint] + arguments, environment: environment)
        peers.append(process)
        return process
    }

    /// The replay files relay sync-0 wrote, in name order.
    public var replayFiles: [String] {
        let directory = plan.dataDirectory("sync-0") + "/replays"
        return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted().map { directory + "/" + $0 }
    }
}
