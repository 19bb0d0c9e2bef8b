import ArgumentParser
import Foundation
import NetplayAuth
import NetplayService
import NetplayWire
import Synchronization

/// `netplay-peer demo` (what `make demo` runs): a visible two-player arena match through the
/// local cluster — host and joiner as two netplay-peer processes, the host drawing the arena,
/// both printing HUD statistics — over a simulated internet link. Uses the cluster `make up`
/// runs when it is up; otherwise starts discovery, a coordinator and a relay for the demo.
struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Play a visible two-player match through the local cluster (started for the demo if none is up).")

    /// The running cluster to play through, if one is up.
    @OptionGroup var runningCluster: ClusterEndpointOptions
    @Option(help: ArgumentHelp("Frames to play, 60 per second, a multiple of 60 (env NETPLAY_FRAMES, default 1200).", valueName: "n"))
    var frames: String?
    @Option(help: ArgumentHelp("Simulated round trip of each peer to the relay, ms (env NETPLAY_RTT, default 80).", valueName: "ms"))
    var rtt: String?
    @Option(help: ArgumentHelp("Simulated jitter, ms (env NETPLAY_JITTER, default 10).", valueName: "ms"))
    var jitter: String?
    @Option(help: ArgumentHelp("Simulated loss of input traffic, 0 ... 1 (env NETPLAY_LOSS, default 0.02).", valueName: "p"))
    var loss: String?
    @Option(help: ArgumentHelp("Draw the arena every this many frames; 0 = never (env NETPLAY_RENDER_EVERY, default 60).", valueName: "frames"))
    var renderEvery: String?
    @Flag(help: "Always start a private cluster, even when one is up (env NETPLAY_OWN_CLUSTER=1).") var ownCluster = false

    /// What the demo runs with: its flags, else their variables, else the defaults.
    struct Resolved {
        /// The running cluster's endpoints and key.
        var cluster: ClusterEndpointOptions.Resolved
        var frames: Int
        var rtt: Int
        var jitter: Int
        var loss: Double
        var renderEvery: Int
        var ownCluster: Bool
    }

    func resolve(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Resolved {
        let setting = SettingResolver(environment: environment)
        let resolved = Resolved(
            cluster: try runningCluster.resolve(environment: environment),
            frames: try setting.integer(frames, "NETPLAY_FRAMES", name: "--frames", default: 1200, range: 1 ... PeerOptions.maxFrame),
            rtt: try setting.integer(rtt, "NETPLAY_RTT", name: "--rtt", default: 80, range: 0 ... 60_000),
            jitter: try setting.integer(jitter, "NETPLAY_JITTER", name: "--jitter", default: 10, range: 0 ... 60_000),
            loss: try setting.number(loss, "NETPLAY_LOSS", name: "--loss", default: 0.02, range: 0 ... 1),
            renderEvery: try setting.integer(renderEvery, "NETPLAY_RENDER_EVERY", name: "--render-every", default: 60,
                                             range: 0 ... PeerOptions.maxFrame),
            ownCluster: try setting.isOn(ownCluster, "NETPLAY_OWN_CLUSTER"))
        // The host's final checksum is a reported one: its interval (the default) divides the match.
        guard resolved.frames % Self.checksumInterval == 0 else {
            throw ValidationError("--frames must be a multiple of \(Self.checksumInterval) (the host's checksum interval), got \(resolved.frames)")
        }
        return resolved
    }

    /// The checksum interval of the demo's host (netplay-peer host's default).
    static let checksumInterval = 60

    func run() throws {
        let demo = try resolve()
        let (frames, rtt, jitter, loss, renderEvery) = (demo.frames, demo.rtt, demo.jitter, demo.loss, demo.renderEvery)
        var discoveryEndpoint = demo.cluster.discovery
        var coordinatorEndpoint = demo.cluster.coordinator
        let serverKey = demo.cluster.serverKey
        var cluster: DemoCluster?
        if !demo.ownCluster && DemoCluster.isUp(discovery: discoveryEndpoint, coordinator: coordinatorEndpoint, serverKey: serverKey) {
            say("using the cluster at \(coordinatorEndpoint) (discovery \(discoveryEndpoint))\(serverKey == nil ? "" : ", encrypted")")
        } else {
            say("no cluster is up: starting discovery, coordinator and a relay for the demo")
            let started = try DemoCluster.start()
            cluster = started
            discoveryEndpoint = started.discovery
            coordinatorEndpoint = started.coordinator
        }
        defer { cluster?.stop() }

        let room = "demo-\(UInt16.random(in: 1000 ... 9999))"
        let common = ["--discovery", discoveryEndpoint, "--coordinator", coordinatorEndpoint, "--room", room,
                      "--frames", "\(frames)", "--rtt", "\(rtt)", "--jitter", "\(jitter)", "--loss", "\(loss)",
                      "--hud-every", "2", "--timeout", "120"]
        // A running cluster's key reaches the peers as it reached the demo (flag or environment);
        // the private cluster is plain, so its peers get no key at all.
        let keyArguments = cluster == nil ? runningCluster.curve.curveServerKey.map { ["--curve-server-key", $0] } ?? [] : []
        say("room '\(room)': P1 hosts, P2 joins; \(frames) frames at 60 Hz, \(rtt) ms round trip, \(jitter) ms jitter, \(Int(loss * 100)) % loss")
        let host = try DemoChild(label: "P1", arguments: ["host", "--players", "2", "--frame-delay", "2", "--prediction-window", "12",
                                                         "--name", "Player 1", "--render-every", "\(renderEvery)", "--input-seed", "3"]
                                 + common + keyArguments, plain: cluster != nil)
        Thread.sleep(forTimeInterval: 0.5)
        let join = try DemoChild(label: "P2", arguments: ["join", "--name", "Player 2", "--input-seed", "4"] + common + keyArguments,
                                 plain: cluster != nil)
        let hostStatus = host.wait()
        let joinStatus = join.wait()
        let results = [host, join].compactMap { $0.lines.last { $0.hasPrefix("RESULT") } }
        say("")
        say("final HUD:")
        for child in [host, join] {
            if let hud = child.lines.last(where: { $0.hasPrefix("HUD") }) { say("  \(child.label): \(hud)") }
        }
        for line in results { say("  \(line)") }
        say(try Self.verdict(results: results, hostStatus: hostStatus, joinStatus: joinStatus))
    }

    /// The demo's last line when both peers finished and ended on one state; otherwise the
    /// failure, so the demo exits non-zero (`make demo` must not pass a desynced match).
    static func verdict(results: [String], hostStatus: Int32, joinStatus: Int32) throws -> String {
        guard hostStatus == 0, joinStatus == 0, results.count == 2 else {
            throw ValidationError("the demo match failed (exit \(hostStatus), \(joinStatus))")
        }
        let checksums = results.map { line in line.split(separator: " ").first { $0.hasPrefix("checksum=") } }
        guard let first = checksums[0], checksums.allSatisfy({ $0 == first }) else {
            throw ValidationError("the peers ended on different states: \(checksums.map { $0.map(String.init) ?? "no checksum" })")
        }
        return "both peers ended on the same state: \(first)"
    }

    func say(_ text: String) { emit("demo: \(text)") }
}

/// A netplay-peer child whose output is shown line by line with its label.
final class DemoChild: @unchecked Sendable {
    let label: String
    private let process = Process()
    private let log = LineLog()
    private var drain: PipeDrain?

    /// The child plays with the demo's `arguments` alone: of the `NETPLAY_*` variables (every
    /// netplay-peer flag has one) it keeps only the cluster's key, and none when `plain` (it plays
    /// in the demo's unencrypted cluster).
    init(label: String, arguments: [String], plain: Bool) throws {
        self.label = label
        process.executableURL = OwnExecutable.url
        process.arguments = arguments
        let kept: Set<String> = plain ? [] : ["NETPLAY_CURVE_SERVER_KEY", "NETPLAY_CURVE_SECRET_KEY"]
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("NETPLAY_") || kept.contains($0.key) }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        let label = self.label
        let log = self.log
        let show = { @Sendable (lines: [String]) in
            for line in lines {
                let shown = line.hasPrefix("+") || line.hasPrefix("|") ? line : "[\(label)] \(line)"
                FileHandle.standardOutput.write(Data((shown + "\n").utf8))
            }
        }
        drain = PipeDrain(pipe, deliver: { show(log.append($0)) }, finished: { show(log.finish()) })
        try process.run()
    }

    /// Waits for the child and returns its exit status.
    func wait() -> Int32 {
        process.waitUntilExit()
        drain?.waitForEnd(seconds: 1)
        return process.terminationStatus
    }

    var lines: [String] { log.lines }
}

/// Complete lines of a child's output, collected from the pipe's reader thread.
final class LineLog: Sendable {
    private let complete = Mutex<[String]>([])
    private let partial = Mutex("")

    /// Adds output; returns the lines it completed.
    func append(_ data: Data) -> [String] {
        let lines = partial.withLock { rest -> [String] in
            rest += String(decoding: data, as: UTF8.self)
            var lines = rest.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            rest = lines.removeLast()
            return lines
        }
        complete.withLock { $0 += lines }
        return lines
    }

    /// At the end of the output: a last line without a newline, if any, as a line.
    func finish() -> [String] {
        let last = partial.withLock { rest -> [String] in
            defer { rest = "" }
            return rest.isEmpty ? [] : [rest]
        }
        complete.withLock { $0 += last }
        return last
    }

    var lines: [String] { complete.withLock { $0 } }
}

/// Discovery, coordinator and one relay started for the demo, from the binaries next to
/// netplay-peer, on free loopback ports, sharing a fresh cluster secret.
final class DemoCluster {
    let discovery: String
    let coordinator: String
    private var processes: [Process] = []
    private let directory: URL

    static func isUp(discovery: String, coordinator: String, serverKey: [UInt8]? = nil) -> Bool {
        ClusterLaunchPlan.answersHealth(discovery, serverKey: serverKey) && ClusterLaunchPlan.listsRelay(coordinator, serverKey: serverKey)
    }

    private init(discovery: String, coordinator: String, directory: URL) {
        self.discovery = discovery
        self.coordinator = coordinator
        self.directory = directory
    }

    static func start() throws -> DemoCluster {
        let binaries = OwnExecutable.directory
        for name in ["netplay-discovery", "netplay-coordinator", "netplay-sync"] {
            guard FileManager.default.isExecutableFile(atPath: binaries.appendingPathComponent(name).path) else {
                throw ValidationError("\(name) is not built next to netplay-peer (\(binaries.path)); run `swift build` first")
            }
        }
        func endpoint() -> String { FreePort.loopbackEndpoint() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-demo-\(UUID().uuidString.prefix(8))")
        let cluster = DemoCluster(discovery: endpoint(), coordinator: endpoint(), directory: directory)
        let plan = ClusterLaunchPlan(discovery: cluster.discovery, coordinator: cluster.coordinator, dataRoot: directory.path,
                                     secret: TicketKeyRing.generate().text, common: ["--telemetry", "none", "--log-level", "warning"])
        do {
            try cluster.launch(binaries, "netplay-discovery", plan.discoveryArguments(instance: "demo-discovery"))
            try cluster.launch(binaries, "netplay-coordinator", plan.coordinatorArguments(instance: "demo-coordinator"))
            try cluster.launch(binaries, "netplay-sync", plan.relayArguments(endpoint: endpoint(), instance: "demo-sync"))
            let discoveryProbe = try BlockingClient(endpoint: cluster.discovery, timeout: 0.5)
            let coordinatorProbe = try BlockingClient(endpoint: cluster.coordinator, timeout: 0.5)
            func up() -> Bool { ClusterLaunchPlan.answersHealth(discoveryProbe) && ClusterLaunchPlan.listsRelay(coordinatorProbe) }
            for _ in 0 ..< 100 where !up() { usleep(100_000) }
            guard up() else {
                throw ValidationError("the demo cluster did not come up")
            }
        } catch {
            cluster.stop()
            throw error
        }
        return cluster
    }

    private func launch(_ binaries: URL, _ name: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = binaries.appendingPathComponent(name)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        for key in environment.keys where key.hasPrefix("NETPLAY_") { environment.removeValue(forKey: key) }
        process.environment = environment
        try process.run()
        processes.append(process)
    }

    func stop() {
        for process in processes.reversed() where process.isRunning { process.terminate() }
        for process in processes { process.waitUntilExit() }
        processes.removeAll()
        try? FileManager.default.removeItem(at: directory)
    }
}
