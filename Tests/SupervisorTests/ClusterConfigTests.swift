import Foundation
import NetplayService
import Testing
@testable import Supervisor
import NetplayTestSupport

@Suite("cluster.yaml parsing and validation", .ownThread)
struct ClusterConfigTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let composeCluster = repositoryRoot.appendingPathComponent("compose/cluster.yaml").path

    func parse(_ yaml: String, _ environment: [String: String] = [:]) throws(ClusterConfigError) -> ClusterConfig {
        try ClusterConfigLoader.parse(yaml, fileName: "cluster.yaml", environment: environment)
    }

    func failure(_ yaml: String, _ environment: [String: String] = [:]) -> String {
        do {
            _ = try parse(yaml, environment)
            return "parsed"
        } catch {
            return error.description
        }
    }

    @Test func theShippedClusterFileStartsInDependencyOrderWithTheDesignPorts() throws {
        let config = try ClusterConfigLoader.load(path: Self.composeCluster, environment: [:])
        let names = config.services.map(\.name)
        #expect(names.first == "telemetry")
        for service in config.services {
            for dependency in service.dependsOn {
                #expect(names.firstIndex(of: dependency)! < names.firstIndex(of: service.name)!, "\(service.name) before \(dependency)")
            }
        }
        #expect(config.supervisor.endpoint == "tcp://127.0.0.1:7000")
        #expect(config.service("telemetry")?.endpoint("ingest", replica: 0) == "tcp://127.0.0.1:7400")
        #expect(config.service("telemetry")?.endpoint("http", replica: 0) == "127.0.0.1:9400")
        #expect(config.service("discovery")?.endpoint("endpoint", replica: 0) == "tcp://127.0.0.1:7100")
        #expect(config.service("coordinator")?.endpoint("endpoint", replica: 0) == "tcp://127.0.0.1:7200")
        let sync = try #require(config.service("sync"))
        #expect(sync.scalable && sync.replicas == 1)
        #expect(sync.endpoint("endpoint", replica: 2) == "tcp://127.0.0.1:7320")
        #expect(sync.endpoint("events", replica: 2) == "tcp://127.0.0.1:7321")
        #expect(sync.instanceName(replica: 2) == "sync-2")
        // Telemetry is the one service the cluster runs without: its crash loop must not stop the relays.
        #expect(config.services.filter { !$0.critical }.map(\.name) == ["telemetry"])
        #expect(config.service("telemetry")?.coolDown == 300)
        // Scaled as far as it may be, sync stays off telemetry's ports (sync-10 took 7400).
        #expect(config.supervisor.maxReplicas == 10)
        #expect(sync.endpoint("retroarch-port", replica: 9) == "127.0.0.1:7396")
    }

    @Test func criticalityIntensityAndCoolDownParse() throws {
        let config = try parse("""
            supervisor:
              intensity: {max_restarts: 7, period: 30s}
              cool_down: 2m
              max_replicas: 8
            services:
              core: {command: x}
              extra: {command: x, critical: false}
              tuned: {command: x, critical: false, intensity: {max_restarts: 2}, cool_down: 10s}
            """)
        #expect(config.supervisor.maxReplicas == 8 && config.supervisor.coolDown == 120)
        let core = try #require(config.service("core")), extra = try #require(config.service("extra"))
        let tuned = try #require(config.service("tuned"))
        #expect(core.critical && !extra.critical && !tuned.critical)
        #expect(extra.intensity == IntensityLimit(maxRestarts: 7, period: 30) && extra.coolDown == 120)
        #expect(tuned.intensity == IntensityLimit(maxRestarts: 2, period: 30) && tuned.coolDown == 10)
    }

    @Test func syncReplicasAndPortOffsetComeFromTheEnvironment() throws {
        let config = try ClusterConfigLoader.load(path: Self.composeCluster,
                                                  environment: ["SYNC_REPLICAS": "3", "NETPLAY_PORT_OFFSET": "20000"])
        let sync = try #require(config.service("sync"))
        #expect(sync.replicas == 3)
        #expect((0..<3).map { sync.endpoint("endpoint", replica: $0) } == ["tcp://127.0.0.1:27300", "tcp://127.0.0.1:27310", "tcp://127.0.0.1:27320"])
        #expect((0..<3).map { sync.endpoint("retroarch-port", replica: $0) } == ["127.0.0.1:27306", "127.0.0.1:27316", "127.0.0.1:27326"])
        #expect(config.supervisor.endpoint == "tcp://127.0.0.1:27000")
        #expect(config.service("telemetry")?.endpoint("http", replica: 0) == "127.0.0.1:29400")
        let planner = LaunchPlanner(config: config, resolver: CommandResolver(directories: ["/bin"]),
                                    baseEnvironment: ["NETPLAY_ENDPOINT": "leak", "HOME": "/root"], supervisorEndpoint: config.supervisor.endpoint)
        let plan = try planner.plan(ServiceSpec(name: "probe", command: "sh"), replica: 0)
        #expect(plan.environment["NETPLAY_ENDPOINT"] == nil, "the supervisor's NETPLAY_* must not leak into children")
        #expect(plan.environment["HOME"] == "/root")
        #expect(plan.environment["NETPLAY_TELEMETRY"] == "tcp://127.0.0.1:27400")
        #expect(plan.environment["NETPLAY_SUPERVISOR"] == "tcp://127.0.0.1:27000")
    }

    /// The offset moves the supervisor's default endpoint too: two clusters told apart by their
    /// offsets alone both bound 7000.
    @Test func thePortOffsetMovesTheSupervisorsDefaultEndpoint() throws {
        #expect(try parse("port_offset: 23117\nservices:\n  a: {command: x}").supervisor.endpoint == "tcp://127.0.0.1:30117")
        #expect(try parse("services:\n  a: {command: x}").supervisor.endpoint == "tcp://127.0.0.1:7000")
    }

    @Test func replicaPlansGetTheirOwnEndpointsInstanceAndDataDirectory() throws {
        let config = try parse("""
            data_dir: /tmp/d
            services:
              sync:
                command: sh
                replicas: 2
                endpoints: {endpoint: "tcp://127.0.0.1:7300", events: "tcp://127.0.0.1:7301"}
                args: [--name, "{instance}", --peer, "{sync.endpoint}", --me, "{endpoint}", --dir, "{data_dir}", "{{literal}}"]
            """)
        let planner = LaunchPlanner(config: config, resolver: CommandResolver(directories: ["/bin", "/usr/bin"]), baseEnvironment: [:],
                                    supervisorEndpoint: "tcp://127.0.0.1:7000")
        let plan = try planner.plan(config.services[0], replica: 1)
        #expect(plan.arguments == ["--endpoint", "tcp://127.0.0.1:7310", "--events", "tcp://127.0.0.1:7311", "--name", "sync-1",
                                   "--peer", "tcp://127.0.0.1:7300", "--me", "tcp://127.0.0.1:7310", "--dir", "/tmp/d/sync-1", "{literal}"])
        #expect(plan.environment["NETPLAY_INSTANCE"] == "sync-1")
        #expect(plan.environment["NETPLAY_DATA_DIR"] == "/tmp/d/sync-1")
        #expect(plan.endpoint == "tcp://127.0.0.1:7310")
    }

    @Test func interpolationFollowsComposeRules() throws {
        let yaml = """
            cluster: ${NAME:-fallback}
            services:
              a: {command: "${CMD-sh}", args: ["$$HOME", "${EMPTY:-was empty}", "${EMPTY-kept empty}"]}
            """
        let config = try parse(yaml, ["EMPTY": ""])
        #expect(config.name == "fallback")
        #expect(config.services[0].command == "sh")
        #expect(config.services[0].arguments == ["$HOME", "was empty", ""])
        #expect(failure("services:\n  a: {command: \"${NEEDED:?set it}\"}").contains("NEEDED must be set: set it"))
    }

    @Test(arguments: [
        ("services:\n  a: {command: x, depends_on: [b]}", "services.a.depends_on: unknown service 'b'"),
        ("services:\n  a: {command: x, depends_on: [b]}\n  b: {command: x, depends_on: [c]}\n  c: {command: x, depends_on: [a]}",
         "dependency cycle: a -> b -> c -> a"),
        ("services:\n  a: {command: x, depends_on: [a]}", "a service cannot depend on itself"),
        ("services:\n  a: {command: x, replicas: three}", "services.a.replicas: must be an integer from 0 to 16"),
        ("services:\n  a: {command: x, replicas: 17}", "services.a.replicas: must be an integer from 0 to 16 (the number of instances; supervisor.max_replicas)"),
        ("supervisor: {max_replicas: 4}\nservices:\n  a: {command: x, replicas: 5}", "services.a.replicas: must be an integer from 0 to 4"),
        ("services:\n  a: {command: x, replicas: -1}", "services.a.replicas: must be an integer from 0 to 16"),
        ("supervisor: {max_replicas: 65}\nservices:\n  a: {command: x}", "supervisor.max_replicas: must be an integer from 1 to 64"),
        ("services:\n  a: {command: x, critical: maybe}", "services.a.critical: must be true or false"),
        ("services:\n  a: {command: x, intensity: {max_restarts: 3}}", "services.a: intensity: and cool_down: apply to non-critical services only"),
        ("services:\n  a: {command: x, critical: false, intensity: {max_restarts: 3, window: 1s}}", "services.a.intensity: unknown key 'window'"),
        ("services:\n  a: {command: x, critical: false, cool_down: later}", "services.a.cool_down: must be a duration"),
        ("services:\n  a: {command: x, replica: 2}", "services.a: unknown key 'replica'"),
        ("servics:\n  a: {command: x}", "unknown key 'servics'"),
        ("services:\n  a: {args: [x]}", "services.a: command: is required"),
        ("services:\n  a: {command: x, restart: sometimes}", "services.a.restart: must be always, on-failure or never"),
        ("services:\n  a: {command: x, stop_timeout: soon}", "services.a.stop_timeout: must be a duration"),
        ("services:\n  a: {command: x, args: [\"{nope}\"]}", "unknown placeholder {nope}"),
        ("services:\n  a: {command: x, args: [\"{b.endpoint}\"]}", "refers to unknown service 'b'"),
        ("services:\n  a: {command: x, endpoints: {endpoint: \"tcp://127.0.0.1\"}}", "needs a port"),
        // A port past Int's range plus the offset was an overflow trap, not a line.
        ("port_offset: 1\nservices:\n  a: {command: x, endpoints: {endpoint: \"tcp://h:9223372036854775807\"}}", "needs a port from 0 to 65535"),
        ("services:\n  a: {command: x, replicas: 2, endpoints: {endpoint: \"tcp://h:9223372036854775807\"}}", "needs a port from 0 to 65535"),
        ("services:\n  a: {command: x, replicas: 2, instance: fixed}", "must contain {replica}"),
        ("services:\n  A: {command: x}", "service names are 1 to 48 lower-case"),
        ("services: [a, b]", "services: must be a non-empty mapping"),
        ("services:\n  a: {command: x\n", "invalid YAML: line"),
        ("", "the file is empty"),
        // Timeouts that kill every start or every ready service.
        ("supervisor: {heartbeat_timeout: 500ms}\nservices:\n  a: {command: x}", "supervisor.heartbeat_timeout: must be 0 (off) or at least 2s"),
        ("services:\n  a: {command: x, heartbeat_timeout: 1s}", "services.a.heartbeat_timeout: must be 0 (off) or at least 2s"),
        ("services:\n  a: {command: x, start_timeout: 10ms}", "services.a.start_timeout: must be a duration such as 250ms, 5s or 1m (at least 0.5 s)"),
        // Environments a child could not be given, or that took another instance's identity.
        ("environment: {\"A=B\": x}\nservices:\n  a: {command: x}", "environment: 'A=B' is not a variable name"),
        ("services:\n  a: {command: x, environment: {\"1X\": y}}", "services.a.environment: '1X' is not a variable name"),
        ("services:\n  a: {command: x, environment: {NETPLAY_INSTANCE: other}}", "services.a.environment.NETPLAY_INSTANCE: is set by the supervisor"),
        ("services:\n  a: {command: x, environment: {X: \"a\\0b\"}}", "services.a.environment.X: must not hold a NUL character"),
        // Instance names whose data directory would be another's.
        ("services:\n  a: {command: x, instance: \"..\"}", "'..' cannot name an instance"),
        ("services:\n  a: {command: x, instance: keys}", "'keys' cannot name an instance"),
        ("cluster: \"\(String(repeating: "é", count: 40))\"\nservices:\n  a: {command: x}", "cluster: must be 1 to 64 bytes"),
        ("supervisor: {intensity: {max_restarts: many}}\nservices:\n  a: {command: x}", "supervisor.intensity.max_restarts"),
        // Aliases: Yams hands each back as its anchor's node, and nested ones (500 bytes of
        // them) expanded into gigabytes and an abort, not a line.
        ("x-a: &a [one, two]\nservices:\n  a: {command: x, args: *a}", "cluster.yaml: line 3, column 25: YAML aliases (*name) are not supported"),
        ((0 ..< 9).map { level in level == 0 ? "x-l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"
                            : "x-l\(level): &l\(level) [" + Array(repeating: "*l\(level - 1)", count: 10).joined(separator: ", ") + "]" }
            .joined(separator: "\n") + "\nservices:\n  a: {command: x}", "YAML aliases (*name) are not supported"),
        // Every instance a scaled service may have: unique names (also against the supervisor's
        // own), valid names and ports. Two instances named sync-1 once sync was scaled to 2
        // waited on each other for good, or ran side by side on one data directory.
        ("services:\n  sync: {command: x, replicas: 1}\n  sync-1: {command: x}",
         "instance name 'sync-1' of sync-1 is also used by sync once scaled to 2 (supervisor.max_replicas)"),
        ("services:\n  a: {command: x, instance: supervisor}", "instance name 'supervisor' of a is also used by the supervisor itself"),
        ("services:\n  web: {command: x, replicas: 1, instance: \"{service}-\(String(repeating: "a", count: 59)){replica}\"}",
         "for replica 10 (up to supervisor.max_replicas)"),
        ("port_offset: 1000\nservices:\n  web: {command: x, replicas: 2, port_step: 1000, endpoints: {endpoint: \"tcp://127.0.0.1:64000\"}}",
         "services.web.endpoints.endpoint (replica 1, port_step 1000, up to supervisor.max_replicas): 'tcp://127.0.0.1:66000' needs a port"),
        ("port_offset: 1000\nsupervisor: {endpoint: \"tcp://127.0.0.1:65000\"}\nservices:\n  a: {command: x}",
         "supervisor.endpoint: 'tcp://127.0.0.1:66000' needs a port from 0 to 65535 (after the port offset)"),
        // No two instances bind one port, however far a service is scaled: a legal scale
        // started a replica on another service's ports, which restarted until the cluster stopped.
        ("services:\n  t: {command: x, endpoints: {ingest: \"tcp://127.0.0.1:7400\"}}\n  sync: {command: x, replicas: 11, port_step: 10, endpoints: {endpoint: \"tcp://127.0.0.1:7300\"}}",
         "services.sync.endpoints.endpoint: sync-10 would bind port 7400, which t's ingest binds"),
        ("services:\n  a: {command: x, endpoints: {endpoint: \"tcp://0.0.0.0:7100\"}}\n  b: {command: x, endpoints: {endpoint: \"tcp://127.0.0.1:7100\"}}",
         "services.b.endpoints.endpoint: b would bind port 7100, which a's endpoint binds"),
        ("services:\n  a: {command: x, replicas: 2, port_step: 0, endpoints: {endpoint: \"tcp://127.0.0.1:7100\"}}",
         "a-1 would bind port 7100, which a-0's endpoint binds"),
        ("services:\n  a: {command: x, endpoints: {endpoint: \"tcp://127.0.0.1:7005\"}}",
         "a would bind port 7005, which the supervisor's public endpoint binds"),
        ("services:\n  a: {command: x, replicas: 1, endpoints: {endpoint: \"ipc:///tmp/a.sock\"}}",
         "services.a.endpoints.endpoint: 'ipc:///tmp/a.sock' is one path for all of the service's 16 possible replicas"),
    ])
    func badFilesGiveOneLineReasons(yaml: String, expected: String) {
        let message = failure(yaml)
        #expect(message.contains(expected), "\(message)")
        #expect(message.hasPrefix("cluster.yaml: "), "\(message)")
        #expect(!message.contains("\n"), "\(message)")
    }

    /// A clash only a scale-up would make (the file shipped before allowed sync 16 replicas, the
    /// eleventh on telemetry's 7400) loads, and limits that service's scaling with the reason.
    @Test func aClashOnlyAScaleUpWouldMakeLimitsTheScale() throws {
        let config = try parse("""
            services:
              t: {command: x, endpoints: {ingest: "tcp://127.0.0.1:7400"}}
              sync: {command: x, replicas: 1, port_step: 10, endpoints: {endpoint: "tcp://127.0.0.1:7300"}}
            """)
        let limit = try #require(config.service("sync")?.scaleLimit)
        #expect(limit.replicas == 10 && limit.reason == "sync-10 would bind port 7400, which t's ingest binds")
        #expect(config.service("t")?.scaleLimit == nil)
        let shipped = try ClusterConfigLoader.load(path: Self.composeCluster, environment: [:])
        #expect(shipped.services.allSatisfy { $0.scaleLimit == nil }, "the shipped file's ports allow every replica it allows")
    }

    @Test func portsOnOtherHostsOrProtocolsOrUnusedReplicasDoNotClash() throws {
        // Two hosts (neither a wildcard), TCP beside UDP, any-port binds, and a step that keeps
        // every possible replica apart all load.
        _ = try parse("""
            supervisor: {max_replicas: 4}
            services:
              a: {command: x, endpoints: {endpoint: "tcp://127.0.0.1:7100", beacon: "udp://0.0.0.0:7101"}}
              b: {command: x, endpoints: {endpoint: "tcp://127.0.0.2:7100", any: "tcp://127.0.0.1:0"}}
              c: {command: x, endpoints: {endpoint: "tcp://127.0.0.1:7101", other: "tcp://127.0.0.1:0"}}
              sync: {command: x, replicas: 1, port_step: 2, endpoints: {endpoint: "tcp://127.0.0.1:7300", events: "tcp://127.0.0.1:7301"}}
            """)
    }

    @Test func durationsAndPoliciesParse() throws {
        let config = try parse("""
            supervisor:
              stop_timeout: 250ms
              intensity: {max_restarts: 3, period: 1m}
              backoff: {initial: 10ms, max: 2s, multiplier: 3, jitter: 0, reset_after: 5}
            services:
              a: {command: x, restart: on-failure, readiness: started, heartbeat_timeout: 0}
              b: {command: x, stop_timeout: 2s, backoff: {initial: 1s}}
            """)
        #expect(config.supervisor.stopTimeout == 0.25)
        #expect(config.supervisor.intensity == IntensityLimit(maxRestarts: 3, period: 60))
        #expect(config.services[0].restart == .onFailure && config.services[0].readiness == .started)
        #expect(config.services[0].stopTimeout == 0.25 && config.services[1].stopTimeout == 2)
        #expect(config.services[0].backoff == BackoffPolicy(initial: 0.01, maximum: 2, multiplier: 3, jitter: 0, resetAfter: 5))
        #expect(config.services[1].backoff.initial == 1 && config.services[1].backoff.maximum == 2)
    }
}

@Suite("Restart backoff and intensity", .ownThread)
struct RestartPolicyTests {
    @Test func backoffGrowsExponentiallyUpToTheCap() {
        let policy = BackoffPolicy(initial: 0.1, maximum: 2, multiplier: 2, jitter: 0)
        #expect((1...7).map { policy.delay(afterFailures: $0, random: 0.5) } == [0.1, 0.2, 0.4, 0.8, 1.6, 2, 2])
    }

    @Test func jitterStaysWithinItsBand() {
        let policy = BackoffPolicy(initial: 1, maximum: 10, multiplier: 2, jitter: 0.2)
        #expect(abs(policy.delay(afterFailures: 1, random: 0) - 0.8) < 1e-9)
        #expect(abs(policy.delay(afterFailures: 1, random: 0.999999) - 1.2) < 1e-5)
        var generator = SystemRandomNumberGenerator()
        let samples = (0..<1000).map { _ in policy.delay(afterFailures: 3, random: Double.random(in: 0..<1, using: &generator)) }
        #expect(samples.allSatisfy { (3.2...4.8).contains($0) })
        #expect(Set(samples.map { ($0 * 100).rounded() }).count > 20, "jitter should spread restarts")
    }

    @Test func intensityTripsOnTheRestartBeyondTheLimitWithinThePeriod() {
        var window = RestartIntensity(limit: IntensityLimit(maxRestarts: 3, period: 10))
        let firstThree = [window.record(at: 0), window.record(at: 1), window.record(at: 2)]
        let fourth = window.record(at: 3)
        #expect(firstThree == [true, true, true])
        #expect(!fourth)
        var slow = RestartIntensity(limit: IntensityLimit(maxRestarts: 3, period: 10))
        var accepted: [Bool] = []
        for second in stride(from: 0.0, to: 100, by: 4) { accepted.append(slow.record(at: second)) }
        #expect(accepted.allSatisfy { $0 })
        #expect(slow.count(at: 100) == 2)
        var none = RestartIntensity(limit: IntensityLimit(maxRestarts: 0, period: 10))
        let first = none.record(at: 0)
        #expect(!first)
    }

    @Test func endpointPortsShift() {
        #expect(EndpointPorts.shift("tcp://127.0.0.1:7300", by: 20) == "tcp://127.0.0.1:7320")
        #expect(EndpointPorts.shift("127.0.0.1:9400", by: 1) == "127.0.0.1:9401")
        #expect(EndpointPorts.shift("tcp://*:0", by: 10) == "tcp://*:0")
        #expect(EndpointPorts.shift("ipc:///tmp/x", by: 10) == "ipc:///tmp/x")
        #expect(EndpointPorts.shift("tcp://h:9223372036854775807", by: 1) == "tcp://h:9223372036854775807", "no overflow trap")
    }
}
