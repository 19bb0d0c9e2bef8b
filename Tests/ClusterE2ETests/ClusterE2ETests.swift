import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

/// The real cluster (compose/cluster.yaml) started the way a developer does, `make up`, on
/// shifted ports (NETPLAY_PORT_OFFSET) so a developer's own `make up` on the default ports is
/// left alone, with the test's debug binaries (NETPLAY_BIN_DIR) instead of a release build.
@Suite("make up: the whole cluster", .serialized, .ownThread)
struct ClusterE2ETests {
    /// `make up` (or another target) running in its own process group, like a terminal's job.
    final class MakeCluster {
        let offset = ClusterPorts.freeOffset()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-up-\(UUID().uuidString)")
        private let make: ServiceProcess
        var process: Process { make.process }
        var supervisor: String { "tcp://127.0.0.1:\(7000 + offset)" }
        var http: String { "127.0.0.1:\(9400 + offset)" }
        var runDirectory: String { directory.appendingPathComponent("run").path }

        init(target: String = "up", environment extra: [String: String] = [:]) throws {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            var environment = [
                "NETPLAY_PORT_OFFSET": String(offset),
                "NETPLAY_RETROARCH_PORT": "0",
                "NETPLAY_DATA_ROOT": directory.appendingPathComponent("data").path,
                "NETPLAY_METRICS_INTERVAL": "1",  // the supervisor's own pushes (children keep theirs)
            ]
            environment.merge(extra) { $1 }
            let runDirectory = directory.appendingPathComponent("run").path
            make = try ServiceProcess(url: URL(fileURLWithPath: "/usr/bin/make"),
                                      ["-C", repositoryRoot.path, "--no-print-directory", target, "RUN_DIR=\(runDirectory)",
                                       "NETPLAY_BIN_DIR=\(BuildProducts.directory.path)"],
                                      environment: environment, unset: ["SYNC_REPLICAS"])
        }

        deinit {
            if process.isRunning { kill(-process.processIdentifier, SIGKILL) }
            if let text = try? String(contentsOfFile: "\(runDirectory)/supervisor.pid", encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                kill(pid, SIGKILL)
            }
            try? FileManager.default.removeItem(at: directory)
            ClusterPorts.release(offset)
        }

        private var madeClient: BlockingClient?

        /// The operator's client to the supervisor (the key `make up` generated in the data root);
        /// throws while the supervisor has not published its key yet.
        func client() throws -> BlockingClient {
            if let madeClient { return madeClient }
            let made = try TestKeys(dataRoot: directory.appendingPathComponent("data").path).operatorClient(instance: "supervisor", timeout: 1)
            madeClient = made
            return made
        }

        func status() -> ClusterStatusResponse? {
            guard case .clusterStatusResponse(let status)? = try? client().request(.clusterStatusRequest(ClusterStatusRequest())) else { return nil }
            return status
        }

        func waitRunning(within seconds: Double) -> ClusterStatusResponse? {
            var last: ClusterStatusResponse?
            _ = eventually(within: seconds) {
                last = status()
                return last?.state == .running
            }
            return last?.state == .running ? last : nil
        }

        var log: String { make.log }

        /// Waits (briefly) until make's last lines are out of the pipe.
        func waitForOutputEnd() { make.waitForOutputEnd() }
    }

    @Test func makeUpReachesAllReadyRecoversFromSigkillScalesAndStopsOnCtrlC() throws {
        let cluster = try MakeCluster(environment: ["SYNC_REPLICAS": "1"])
        let started = Date()
        let status = try #require(cluster.waitRunning(within: 90), "make up never reached all-ready:\n\(cluster.log.suffix(4000))")
        print("make up: all \(status.services.count) instances ready after \(String(format: "%.2f", Date().timeIntervalSince(started))) s")
        let names = status.services.map(\.instance)
        for required in ["telemetry", "discovery", "coordinator"] { #expect(names.contains(required), "\(names)") }
        #expect(status.cluster == "netplay")
        let hasSync = names.contains("sync-0")

        // Telemetry serves the cluster: the supervisor's restart counters for every instance and
        // each service's own metrics; the dashboard API shows the cluster as running.
        var page = ""
        let scraped = eventually(within: 15) {
            page = httpGet(cluster.http, "/metrics")?.body ?? ""
            return names.allSatisfy { page.contains("supervised_instance=\"\($0)\"") && page.contains("netplay_uptime_seconds{instance=\"\($0)\"") }
        }
        #expect(scraped, "missing series in /metrics:\n\(page.prefix(3000))")
        // Every service follows the naming rules (telemetry dropped nothing) and promtool agrees.
        let rejected = page.split(separator: "\n").filter { $0.hasPrefix("netplay_telemetry_rejected_metrics_total{") && !$0.hasSuffix(" 0") }
        #expect(rejected.isEmpty, "metrics dropped for breaking the naming rules: \(rejected)")
        if let promtool = DebianTools.require("promtool", package: "prometheus") {
            let file = cluster.directory.appendingPathComponent("metrics.txt")
            try page.write(to: file, atomically: true, encoding: .utf8)
            let check = try run("/bin/sh", ["-c", "\(promtool) check metrics < '\(file.path)'"])
            #expect(check.status == 0, "promtool check metrics on the cluster:\n\(check.output)")
        } else {
            Issue.record("promtool is not installed: apt-get install prometheus (make deps-ops)")
        }
        let services = jsonObject(httpGet(cluster.http, "/api/services")?.body ?? "")
        #expect((services?["cluster"] as? [String: Any])?["state"] as? String == "running")

        // SIGKILL of each service: restarted and ready again within 2 s.
        for victim in status.services {
            let killedAt = Date()
            kill(Int32(victim.pid), SIGKILL)
            var current: ServiceStatus?
            let back = eventually(within: 2) {
                current = cluster.status()?.services.first { $0.instance == victim.instance }
                return current.map { $0.state == .ready && $0.pid != victim.pid && $0.pid > 0 } ?? false
            }
            #expect(back, "\(victim.instance) not ready within 2 s of SIGKILL: \(String(describing: current))\n\(cluster.log.suffix(3000))")
            print("restart-to-ready \(victim.instance): \(String(format: "%.0f", Date().timeIntervalSince(killedAt) * 1000)) ms")
        }
        #expect(cluster.waitRunning(within: 10) != nil)

        // The relay scales out and back in while the cluster runs.
        if hasSync {
            _ = try cluster.client().request(.scaleServiceRequest(ScaleServiceRequest(service: "sync", replicas: 3)))
            let three = try #require(cluster.waitRunning(within: 20), "\(cluster.log.suffix(3000))")
            #expect(three.services.filter { $0.service == "sync" }.map(\.instance) == ["sync-0", "sync-1", "sync-2"])
            #expect(three.services.first { $0.instance == "sync-2" }?.endpoint == "tcp://127.0.0.1:\(7320 + cluster.offset)")
            let leaving = three.services.filter { $0.instance != "sync-0" && $0.service == "sync" }.map { Int32($0.pid) }
            _ = try cluster.client().request(.scaleServiceRequest(ScaleServiceRequest(service: "sync", replicas: 1)))
            #expect(eventually(within: 15) {
                cluster.status()?.services.filter { $0.service == "sync" }.map(\.instance) == ["sync-0"] && leaving.allSatisfy { kill($0, 0) != 0 }
            }, "\(cluster.log.suffix(3000))")
        }

        // Ctrl-C: SIGINT to the foreground process group (make and the supervisor).
        let pids = (cluster.status()?.services ?? []).map { Int32($0.pid) } + [Int32(status.supervisorPid)]
        kill(-cluster.process.processIdentifier, SIGINT)
        #expect(eventually(within: 30) { !cluster.process.isRunning }, "make up did not exit on Ctrl-C")
        #expect(eventually(within: 5) { pids.allSatisfy { kill($0, 0) != 0 } }, "processes left behind after Ctrl-C:\n\(cluster.log.suffix(2000))")
        cluster.waitForOutputEnd()
        #expect(cluster.log.contains("cluster stopped"))
        #expect(!FileManager.default.fileExists(atPath: "\(cluster.runDirectory)/supervisor.pid"))
        #expect(FileManager.default.fileExists(atPath: "\(cluster.runDirectory)/logs/coordinator.log"))
    }

    @Test func upDetachedThenDown() throws {
        let offset = ClusterPorts.freeOffset()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-detached-\(UUID().uuidString)")
        defer {
            try? FileManager.default.removeItem(at: directory)
            ClusterPorts.release(offset)
        }
        let runDirectory = directory.appendingPathComponent("run").path
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("NETPLAY_") && $0.key != "SYNC_REPLICAS" }
        environment["NETPLAY_PORT_OFFSET"] = String(offset)
        environment["NETPLAY_RETROARCH_PORT"] = "0"
        environment["NETPLAY_DATA_ROOT"] = directory.appendingPathComponent("data").path
        let make = ["-C", repositoryRoot.path, "--no-print-directory"]
        let up = runLeavingDaemon("/usr/bin/make", make + ["up-detached", "RUN_DIR=\(runDirectory)", "NETPLAY_BIN_DIR=\(BuildProducts.directory.path)"],
                                  environment: environment, timeout: 90)
        defer {  // whatever happens, no supervisor outlives the test
            if let text = try? String(contentsOfFile: "\(runDirectory)/supervisor.pid", encoding: .utf8),
               let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) { kill(pid, SIGKILL) }
        }
        #expect(up.status == 0, "make up-detached: \(up.output)")
        #expect(up.output.contains("cluster ready (pid"), "\(up.output)")
        let client = try TestKeys(dataRoot: directory.appendingPathComponent("data").path).operatorClient(instance: "supervisor")
        guard case .clusterStatusResponse(let status) = try client.request(.clusterStatusRequest(ClusterStatusRequest())) else {
            Issue.record("no status"); return
        }
        #expect(status.state == .running)
        let pids = status.services.map { Int32($0.pid) } + [Int32(status.supervisorPid)]
        let down = runLeavingDaemon("/usr/bin/make", make + ["down", "RUN_DIR=\(runDirectory)"], environment: environment, timeout: 60)
        #expect(down.status == 0, "\(down.output)")
        #expect(down.output.contains("down: cluster stopped"), "\(down.output)")
        #expect(pids.allSatisfy { kill($0, 0) != 0 }, "processes left behind after make down")
        let again = runLeavingDaemon("/usr/bin/make", make + ["down", "RUN_DIR=\(runDirectory)"], environment: environment, timeout: 60)
        #expect(again.output.contains("no cluster running"), "\(again.output)")
    }

    @Test func theComposeFileIsValidAndSyncScales() throws {
        guard let compose = DebianTools.require("docker-compose", package: "docker-compose") else {
            print("SKIPPED: docker-compose (Debian package docker-compose) is not installed and cannot be installed here")
            return
        }
        let file = repositoryRoot.appendingPathComponent("compose/docker-compose.yml").path
        let check = try run(compose, ["-f", file, "config", "-q"])
        #expect(check.status == 0, "docker-compose config:\n\(check.output)")
        let services = try run(compose, ["-f", file, "config", "--services"])
        #expect(Set(services.output.split(separator: "\n").map(String.init)) == ["telemetry", "discovery", "coordinator", "sync", "prometheus"],
                "\(services.output)")
        // `--scale sync=N` needs a sync service without fixed host ports or a container name.
        let config = try run(compose, ["-f", file, "config"]).output
        let sync = config.components(separatedBy: "\n  sync:\n").dropFirst().first?.components(separatedBy: "\n  ").first ?? ""
        #expect(!sync.isEmpty)
        #expect(!sync.contains("ports:") && !sync.contains("container_name"), "sync cannot scale:\n\(sync)")
        #expect(config.contains("prometheus.yml:/etc/prometheus/prometheus.yml"))
        // Cluster traffic goes over CurveZMQ control endpoints admitted by the trust store: every
        // service shares it and publishes a control endpoint on its container's address (a
        // compose cluster without them could not register a relay or push a metric).
        for service in ["telemetry", "discovery", "coordinator", "sync"] {
            // The service's lines: after `  <service>:`, up to the next key indented two spaces.
            let lines = config.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let start = (lines.firstIndex(of: "  \(service):") ?? lines.endIndex) + 1
            let section = lines[min(start, lines.endIndex)...].prefix { $0.hasPrefix("    ") }.joined(separator: "\n")
            #expect(section.contains("NETPLAY_KEYS_DIR: /var/lib/netplay/keys"), "\(service) has no shared trust store:\n\(section)")
            #expect(section.contains("target: /var/lib/netplay/keys") || section.contains("trust-store:/var/lib/netplay/keys"),
                    "\(service) does not mount the trust store:\n\(section)")
            #expect(section.contains("--control-endpoint") && section.contains("hostname -i"),
                    "\(service) publishes no control endpoint on its address:\n\(section)")
            // A recreated container keeps its identity key (the others' connections were made with
            // it); the relays, which read the coordinator's data for the cluster secret, never see
            // the coordinator's key.
            switch service {
            case "coordinator":
                #expect(section.contains("NETPLAY_IDENTITY_KEY_FILE: /var/lib/netplay-identity/identity.secret")
                        && (section.contains("target: /var/lib/netplay-identity") || section.contains("coordinator-identity:/var/lib/netplay-identity")),
                        "the coordinator's identity key sits where the relays read:\n\(section)")
            case "sync":
                #expect(!section.contains("netplay-identity"), "a relay mounts the coordinator's identity key:\n\(section)")
            default:
                #expect(section.contains("/var/lib/netplay:rw") || section.contains("target: /var/lib/netplay\n"),
                        "\(service) keeps its identity key in the container layer:\n\(section)")
            }
        }
        let dockerfile = try String(contentsOf: repositoryRoot.appendingPathComponent("compose/Dockerfile"), encoding: .utf8)
        #expect(dockerfile.contains("swift build -c release"))
    }
}

/// A match between two netplay-peer processes through the `make up` cluster while the relay
/// is scaled out to three replicas and back to one.
@Suite("make up: scaling the relay under a match", .serialized, .ownThread)
struct RelayScalingTests {
    /// The `RESULT key=value ...` line a netplay-peer prints last.
    static func result(_ log: String) -> [String: String]? {
        guard let line = log.split(separator: "\n").last(where: { $0.hasPrefix("RESULT ") }) else { return nil }
        var fields: [String: String] = [:]
        for pair in line.dropFirst("RESULT ".count).split(separator: " ") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return fields
    }

    @Test(.timeLimit(.minutes(4)))
    func syncScalesFromOneToThreeAndBackWhileAMatchRuns() throws {
        let cluster = try ClusterE2ETests.MakeCluster(environment: ["SYNC_REPLICAS": "1"])
        let status = try #require(cluster.waitRunning(within: 90), "\(cluster.log.suffix(3000))")
        guard status.services.contains(where: { $0.instance == "sync-0" }) else {
            Issue.record("netplay-sync is not built: no relay to scale")
            return
        }
        let frames = 1500  // 12.5 s at 120 frames per second: long enough to scale out and in mid-match
        let endpoints = ["--discovery", "tcp://127.0.0.1:\(7100 + cluster.offset)", "--coordinator", "tcp://127.0.0.1:\(7200 + cluster.offset)"]
        let common = ["--room", "scaling", "--frames", "\(frames)", "--timeout", "120"]
        let host = try ServiceProcess("netplay-peer", ["host"] + endpoints + common + ["--players", "2", "--frame-rate", "120", "--input-seed", "1"])
        defer { host.kill9() }
        #expect(eventually(within: 30) { host.log.contains("session s-") }, "host did not get a session: \(host.log)")
        let join = try ServiceProcess("netplay-peer", ["join"] + endpoints + common + ["--input-seed", "2"])
        defer { join.kill9() }
        #expect(eventually(within: 60) { host.log.contains("match running") }, "the match did not start:\n\(host.log)\n\(join.log)")

        // Telemetry shows the room (from discovery) and the session's HUD stats (pushed by the relay).
        var rooms = ""
        #expect(eventually(within: 10) {
            rooms = httpGet(cluster.http, "/api/rooms")?.body ?? ""
            return rooms.contains("\"room_name\":\"scaling\"")
        }, "the dashboard API never listed the room: \(rooms)")
        var sessions: [[String: Any]] = []
        #expect(eventually(within: 10) {
            sessions = (jsonObject(httpGet(cluster.http, "/api/sessions")?.body ?? "")?["sessions"] as? [[String: Any]]) ?? []
            return (sessions.first?["peers"] as? [[String: Any]])?.count == 2
        }, "no HUD stats for the match: \(sessions)")
        #expect(sessions.first?["relay_id"] as? String == "sync-0")

        // Scale out: two more relays start, become ready and register with the coordinator.
        let coordinator = try BlockingClient(endpoint: "tcp://127.0.0.1:\(7200 + cluster.offset)", timeout: 1)
        _ = try cluster.client().request(.scaleServiceRequest(ScaleServiceRequest(service: "sync", replicas: 3)))
        let three = try #require(cluster.waitRunning(within: 20), "\(cluster.log.suffix(3000))")
        #expect(three.services.filter { $0.service == "sync" }.map(\.instance) == ["sync-0", "sync-1", "sync-2"])
        #expect(eventually(within: 10) {
            guard case .listRelaysResponse(let list)? = try? coordinator.request(.listRelaysRequest(ListRelaysRequest())) else { return false }
            return Set(list.relays.map(\.relayId)).isSuperset(of: ["sync-0", "sync-1", "sync-2"])
        }, "the new replicas did not register with the coordinator")
        #expect(host.process.isRunning && join.process.isRunning, "the match ended before the relay was scaled out")

        // Scale back in: the extra replicas drain and exit; the match (on sync-0) goes on.
        let leaving = three.services.filter { $0.instance == "sync-1" || $0.instance == "sync-2" }.map { Int32($0.pid) }
        _ = try cluster.client().request(.scaleServiceRequest(ScaleServiceRequest(service: "sync", replicas: 1)))
        #expect(eventually(within: 15) {
            cluster.status()?.services.filter { $0.service == "sync" }.map(\.instance) == ["sync-0"] && leaving.allSatisfy { kill($0, 0) != 0 }
        }, "\(cluster.log.suffix(3000))")
        #expect(host.process.isRunning && join.process.isRunning, "the match ended before the relay was scaled back in")

        // The match completes with identical checksums on both players.
        #expect(host.waitForExit(seconds: 120) == 0, "host:\n\(host.log.suffix(3000))")
        #expect(join.waitForExit(seconds: 30) == 0, "join:\n\(join.log.suffix(3000))")
        _ = eventually(within: 2) { Self.result(host.log) != nil && Self.result(join.log) != nil }
        let results = [Self.result(host.log), Self.result(join.log)]
        #expect(results.allSatisfy { $0?["frames"] == "\(frames)" }, "\(results)")
        #expect(results[0]?["checksum"] != nil && results[0]?["checksum"] == results[1]?["checksum"], "checksums differ: \(results)")
        #expect(cluster.waitRunning(within: 5) != nil, "the cluster is not all-ready after the match")
        kill(-cluster.process.processIdentifier, SIGINT)
        #expect(eventually(within: 30) { !cluster.process.isRunning })
    }
}
