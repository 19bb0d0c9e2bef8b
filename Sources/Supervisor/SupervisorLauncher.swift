import Foundation
import Logging
import MemberwiseInit
import NetplayService
import NetplayWire

/// Runs netplay-supervisor as a process: loads and checks the cluster file, guards the pid
/// file, starts the supervisor on the shared runtime in the foreground, and reports how it
/// ended. The executable only parses flags into ``SupervisorLauncher/Settings``.
public enum SupervisorLauncher {
    /// What the command line resolved to.
    @PublicMemberwiseInit
    public struct Settings: Sendable {
        /// The cluster file.
        public var configPath: String
        /// Directory for the pid file and `logs/`.
        public var runDirectory: String
        /// Extra directories searched for commands (before the supervisor's own directory and PATH).
        public var binDirectories: [String]
        /// Echo children's output with an instance prefix on standard output.
        public var console: Bool
        /// Only validate and print the plan.
        public var checkOnly: Bool
        /// The common service flags, unresolved.
        public var common: ServiceOptions
    }

    /// Runs until the cluster stops. Throws ``RuntimeStartError`` with a one-line reason for
    /// bad configuration or a second cluster on the same run directory; throws
    /// ``ClusterFailure`` when the cluster stopped itself (restart intensity).
    public static func run(_ settings: Settings, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        let config: ClusterConfig
        do {
            config = try ClusterConfigLoader.load(path: settings.configPath, environment: environment)
        } catch {
            throw RuntimeStartError(error.description)
        }
        let ownDirectory = OwnExecutable.directory.path
        let resolver = CommandResolver(directories: settings.binDirectories + [ownDirectory], path: environment["PATH"] ?? "/usr/bin:/bin")
        let preparation: ClusterPreparation
        do {
            preparation = try ClusterSupervisor.prepare(config, resolver: resolver)
        } catch {
            throw RuntimeStartError(error.description)
        }

        let setting = SettingResolver(environment: environment)
        var common = settings.common
        if setting.text(common.instance, "NETPLAY_INSTANCE") == nil { common.instance = ClusterConfigLoader.supervisorInstance }
        // The cluster file's endpoint is the control endpoint (heartbeats, operator verbs); the
        // public one beside it (port + 5) answers only Health and Ping.
        let defaults = ServiceDefaults(kind: "supervisor", endpoint: publicEndpoint(besides: config.supervisor.endpoint), events: nil,
                                       control: config.supervisor.endpoint)
        var configuration = try common.resolve(defaults: defaults, environment: environment)
        if setting.text(common.controlEndpoint, "NETPLAY_CONTROL_ENDPOINT") == nil {
            configuration.control = config.supervisor.endpoint  // even beside a public endpoint given by flag
        }
        configuration.supervisor = nil  // it does not heartbeat to itself
        if setting.text(common.keysDir, "NETPLAY_KEYS_DIR") == nil {
            // One trust store for the whole cluster, beside the instances' data directories.
            configuration.trustStore = URL(fileURLWithPath: config.dataDirectory).appendingPathComponent("keys").standardizedFileURL
        }
        if let store = configuration.trustStore, !store.path.hasPrefix("/") {
            configuration.trustStore = URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(store.relativePath)
        }
        let controlEndpoint = configuration.control ?? configuration.endpoint
        if setting.text(settings.common.telemetry, "NETPLAY_TELEMETRY") == nil, let telemetry = config.supervisor.telemetry {
            let expanded = (try? TemplateContext(config: config, supervisorEndpoint: controlEndpoint)
                .expand(telemetry, service: nil, replica: 0)) ?? telemetry
            configuration.telemetry = expanded.lowercased() == "none" ? nil : expanded
        }
        if setting.text(common.dataDir, "NETPLAY_DATA_DIR") == nil {
            configuration.dataDirectory = URL(fileURLWithPath: settings.runDirectory).appendingPathComponent("supervisor")
        }
        let stopBudget = config.services.reduce(0.0) { $0 + $1.stopTimeout + 0.5 }
        configuration.drainTimeout = stopBudget + 5

        if settings.checkOnly {
            try printPlan(config, preparation: preparation, resolver: resolver, supervisorEndpoint: controlEndpoint, environment: environment)
            return
        }

        let pidFile = (settings.runDirectory as NSString).appendingPathComponent("supervisor.pid")
        try claimPidFile(pidFile)
        defer { releasePidFile(pidFile) }

        let logger = NetplayLogging.bootstrap(service: "supervisor", instance: configuration.instance, level: configuration.logLevel,
                                              neverBlocks: true)
        for warning in preparation.warnings { logger.warning("\(warning)") }
        let options = SupervisorOptions(resolver: resolver,
                                        logDirectory: (settings.runDirectory as NSString).appendingPathComponent("logs"),
                                        console: settings.console ? 1 : nil, baseEnvironment: environment)
        let supervisor = ClusterSupervisor(config: config, options: options, skipping: preparation.skipped)
        try ServiceHost.runMain(configuration: configuration) { supervisor }
        if let failure = supervisor.failure { throw ClusterFailure(description: failure) }
    }

    /// The supervisor's public endpoint for a control endpoint: the same host, port + 5.
    static func publicEndpoint(besides control: String) -> String {
        guard control.hasPrefix("tcp://"), let port = EndpointPorts.port(of: control), port > 0, port + 5 <= 65535 else {
            return control + "-public"
        }
        return EndpointPorts.shift(control, by: 5)
    }

    static func printPlan(_ config: ClusterConfig, preparation: ClusterPreparation, resolver: CommandResolver,
                          supervisorEndpoint: String, environment: [String: String]) throws {
        let planner = LaunchPlanner(config: config, resolver: resolver, baseEnvironment: [:], supervisorEndpoint: supervisorEndpoint)
        var lines = ["cluster \(config.name): supervisor \(supervisorEndpoint), port offset \(config.portOffset), intensity \(config.supervisor.intensity.maxRestarts) restarts in \(ClusterSupervisor.seconds(config.supervisor.intensity.period))"]
        for service in config.services {
            let dependencies = service.dependsOn.isEmpty ? "" : " after \(service.dependsOn.joined(separator: ", "))"
            let replicas = service.scalable ? " replicas=\(service.replicas)" : ""
            lines.append("\(service.name):\(replicas)\(dependencies) restart=\(service.restart.rawValue) readiness=\(service.readiness.rawValue)")
            if preparation.skipped.contains(service.name) {
                lines.append("  skipped: '\(service.command)' is not built")
                for replica in 0..<service.replicas {
                    let endpoints = service.endpoints.map { "--\($0.0) \(service.endpoint($0.0, replica: replica)!)" }.joined(separator: " ")
                    lines.append("  \(service.instanceName(replica: replica)): \(service.command) \(endpoints)")
                }
                continue
            }
            for replica in 0..<service.replicas {
                do {
                    let plan = try planner.plan(service, replica: replica)
                    lines.append("  \(plan.instance): \(plan.commandLine)")
                } catch {
                    throw RuntimeStartError(error.description)
                }
            }
        }
        FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
    }

    static func claimPidFile(_ path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw RuntimeStartError("cannot create run directory \(directory): \(error.localizedDescription)")
        }
        if let text = try? String(contentsOfFile: path, encoding: .utf8),
           let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0, pid != getpid(), kill(pid, 0) == 0,
           (try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8))?.contains("netplay-supervisor") ?? true {
            throw RuntimeStartError("a cluster is already running from \(directory) (supervisor pid \(pid)); stop it first (make down) or use another --run-dir")
        }
        do {
            try "\(getpid())\n".write(toFile: path, atomically: true, encoding: .utf8)
        } catch {
            throw RuntimeStartError("cannot write \(path): \(error.localizedDescription)")
        }
    }

    static func releasePidFile(_ path: String) {
        if let text = try? String(contentsOfFile: path, encoding: .utf8),
           Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) == getpid() {
            unlink(path)
        }
    }
}

/// The cluster stopped itself (restart intensity exceeded); `description` says why.
public struct ClusterFailure: OneLineExitError {
    /// The reason, one line.
    public let description: String
    /// The supervisor exits with status 1 when the cluster stopped itself.
    public var exitStatus: Int32 { 1 }
}
