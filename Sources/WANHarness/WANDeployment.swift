import Foundation
import NetplayAuth
import NetplayService
#if canImport(Glibc)
import Glibc
#endif

/// A cluster spread over hosts on a ``WANLab`` (the multi-host layout): discovery and a
/// coordinator on the lab's service address (one host), each relay on a host of its own (a lab
/// peer: its own namespace, address, delay and region), and every player on its own. Packets
/// between a player and a relay cross the root namespace, meeting both hosts' delays. A relay's
/// host can be taken away mid-match (``takeAway(relay:)``: its link drops everything, then its
/// processes are killed), as when a machine dies.
public final class WANDeployment {
    /// One relay and the host it runs on.
    public struct RelayHost {
        /// The relay's id (its instance name).
        public let id: String
        /// Its region tag.
        public let region: String
        /// The host (lab peer) it runs on.
        public let host: WANPeer
        /// The endpoint players attach to (the host's address).
        public let endpoint: String
        /// Its log.
        public let log: String
        let process: Process
    }

    /// The lab.
    public let lab: WANLab
    /// Discovery's request endpoint.
    public let discovery: String
    /// The coordinator's request endpoint.
    public let coordinator: String
    /// The relays, in the order given.
    public private(set) var relays: [RelayHost] = []
    /// Every player's host and log, in slot order.
    public private(set) var players: [(host: WANPeer, log: String)] = []
    /// Where the logs go.
    public let directory: String

    private let binDirectory: String
    private let secret: String
    private var services: [Process] = []

    /// Starts discovery and a coordinator on the lab's service address (the coordinator drops a
    /// relay after `relayTTLSeconds` of silence), then each relay of `relays` (id, region, one-way
    /// delay of its host in ms) on a host of its own, and waits until every relay registered.
    public init(lab: WANLab, binDirectory: String, relays relaySpecs: [(id: String, region: String, delayMs: Double)],
                relayTTLSeconds: Double = 1.5) throws {
        self.lab = lab
        self.binDirectory = binDirectory
        try lab.routeBetweenPeers()
        directory = "\(lab.directory)/deployment"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        secret = TicketKeyRing.generate().text
        let address = lab.serviceAddress
        discovery = "tcp://\(address):\(try WANMatch.freePort(on: address))"
        coordinator = "tcp://\(address):\(try WANMatch.freePort(on: address))"
        let plan = ClusterLaunchPlan(discovery: discovery, coordinator: coordinator, dataRoot: directory, secret: secret,
                                     common: ["--telemetry", "none", "--log-level", "info"])
        services.append(try LoggedProcess.launch("\(binDirectory)/netplay-discovery", plan.discoveryArguments(
            instance: "discovery", extra: ["--control-endpoint", "tcp://\(address):\(try WANMatch.freePort(on: address))"]),
            log: "\(directory)/discovery.log"))
        services.append(try LoggedProcess.launch("\(binDirectory)/netplay-coordinator", plan.coordinatorArguments(
            instance: "coordinator", extra: ["--control-endpoint", "tcp://\(address):\(try WANMatch.freePort(on: address))",
                                             "--relay-ttl", String(relayTTLSeconds),
                                             "--relay-refresh-interval", String(max(0.1, relayTTLSeconds / 4))]),
            log: "\(directory)/coordinator.log"))
        for spec in relaySpecs {
            let host = try lab.addPeer(delayMs: spec.delayMs)
            let endpoint = "tcp://\(host.address):7300"
            let log = "\(directory)/\(spec.id).log"
            let process = try host.launch("\(binDirectory)/netplay-sync", plan.relayArguments(
                endpoint: endpoint, instance: spec.id,
                extra: ["--control-endpoint", "tcp://\(host.address):7305", "--region", spec.region, "--no-replays"]), log: log)
            relays.append(RelayHost(id: spec.id, region: spec.region, host: host, endpoint: endpoint, log: log, process: process))
        }
        for relay in relays {
            try WANMatch.waitFor(log: relay.log, containing: "registered with the coordinator", seconds: 20, services: services + [relay.process])
        }
    }

    deinit { stop() }

    /// The relay with id `id`.
    public func relay(_ id: String) -> RelayHost? { relays.first { $0.id == id } }

    /// Starts a match of `delaysMs.count` players (one host each, at that one-way delay from the
    /// service host): the first hosts room `room`, the others join it. `hostArguments` go to the
    /// host only (e.g. `--measure-relays off`), `arguments` to everyone.
    public func play(room: String, delaysMs: [Double], frames: Int, hostArguments: [String] = [], arguments: [String] = []) throws {
        let common = ["--discovery", discovery, "--coordinator", coordinator, "--room", room, "--frames", "\(frames)",
                      "--timeout", "240", "--hud-every", "1"] + arguments
        let peer = "\(binDirectory)/netplay-peer"
        for (index, delay) in delaysMs.enumerated() {
            let host = try lab.addPeer(delayMs: delay)
            let log = "\(directory)/player\(index + 1).log"
            players.append((host, log))
            if index == 0 {
                try host.launch(peer, ["host", "--players", "\(delaysMs.count)", "--name", "P1", "--input-seed", "21"]
                                + common + hostArguments, log: log)
                try WANMatch.waitFor(log: log, containing: "session s-", seconds: 30, services: services)
            } else {
                try host.launch(peer, ["join", "--name", "P\(index + 1)", "--input-seed", "\(21 + index)"] + common, log: log)
                usleep(200_000)
            }
        }
    }

    /// Takes relay `id`'s host away: its link drops every packet both ways (nothing it sends
    /// reaches anyone, not even a reset), then its processes are killed.
    public func takeAway(relay id: String) throws {
        guard let relay = relay(id) else { throw WANHarnessError("no relay '\(id)' in this deployment") }
        try relay.host.setLoss(percent: 100)
        kill(relay.process.processIdentifier, SIGKILL)
        relay.process.waitUntilExit()
    }

    /// Every player's RESULT, in slot order; throws when one reports nothing within `seconds`
    /// (its log's end in the error).
    public func results(within seconds: Double) throws -> [WANPlayerFigures] {
        let deadline = Date().addingTimeInterval(seconds)
        return try players.enumerated().map { index, player in
            try WANMatch.awaitResult(log: player.log, until: deadline, what: "player \(index + 1)")
        }
    }

    /// The end of every log (players, relays, coordinator), for a failure message.
    public func logTails(_ characters: Int = 2_500) -> String {
        let logs = players.map(\.log) + relays.map(\.log) + ["\(directory)/coordinator.log"]
        return logs.map { log in
            "--- \((log as NSString).lastPathComponent)\n" + String(((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").suffix(characters))
        }.joined(separator: "\n")
    }

    /// Stops the services (the lab stops what runs on its peers).
    public func stop() {
        LoggedProcess.stop(services)
        services.removeAll()
    }
}
