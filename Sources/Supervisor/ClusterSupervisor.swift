import CSupervisor
import Foundation
import Logging
import MemberwiseInit
import NetplayService
import NetplayWire

/// How a ``ClusterSupervisor`` runs its children: where commands are found, where logs go.
@PublicMemberwiseInit
public struct SupervisorOptions: Sendable {
    /// Finds each service's executable.
    public var resolver: CommandResolver
    /// Directory for per-instance log files (nil: no files).
    public var logDirectory: String? = nil
    /// File descriptor that receives every child line with its instance prefix (nil: none).
    public var console: Int32? = 1
    /// The environment children start from (NETPLAY_* variables are dropped).
    public var baseEnvironment: [String: String] = ProcessInfo.processInfo.environment
}

/// The result of checking a cluster against the executables that are built.
public struct ClusterPreparation: Sendable {
    /// Optional services whose command is not built; they are skipped with a warning.
    public var skipped: [String]
    /// Warnings for the log.
    public var warnings: [String]
}

/// netplay-supervisor's logic, as a ``Service`` on the shared runtime: starts the cluster's
/// services in dependency order, waits for each one's readiness (heartbeat or health), watches
/// heartbeats and exits, restarts with exponential backoff and jitter under an OTP-style
/// intensity limit, scales replicated services, and stops everything in reverse order.
///
/// Critical services share the cluster's intensity: exceeding it stops the cluster. A
/// non-critical service (`critical: false`, e.g. telemetry) is supervised as if under its own
/// sub-supervisor: exceeding its own intensity stops that service only, which is reported as
/// failed and retried after its cool-down while the rest of the cluster keeps running.
///
/// Children run in their own process groups and die with the supervisor (PR_SET_PDEATHSIG).
/// Every method runs on the reactor thread.
public final class ClusterSupervisor: Service {
    /// The cluster.
    public let config: ClusterConfig
    /// Why the cluster was stopped on its own (restart intensity), or nil.
    public internal(set) var failure: String?
    /// Services skipped because their optional command is not built.
    public let skipped: Set<String>

    let options: SupervisorOptions
    var instances: [SupervisedInstance] = []
    var desiredReplicas: [String: Int] = [:]
    var intensity: RestartIntensity
    /// Each non-critical service's own restart window.
    var serviceIntensity: [String: RestartIntensity] = [:]
    /// Non-critical services given up on, with when they are tried again.
    var givenUp: [String: (retry: ContinuousClock.Instant, reason: String)] = [:]
    var planner: LaunchPlanner!
    weak var runtime: ServiceRuntime?
    var stopping = false
    var stopCursor = 0
    var clusterState: ClusterState = .starting
    let startedAt = ContinuousClock.now
    var allReadyOnce = false
    var consoleWidth = 12
    /// The children's prefixed output on the console (``Options/console``), never blocking.
    lazy var console: ConsoleWriter? = options.console.map { ConsoleWriter(descriptor: $0) }
    var restartCounters: [String: Counter] = [:]

    /// Checks that every non-optional command exists; lists the optional ones to skip.
    /// Throws a one-line reason for a missing command.
    public static func prepare(_ config: ClusterConfig, resolver: CommandResolver) throws(ClusterConfigError) -> ClusterPreparation {
        var skipped: [String] = [], warnings: [String] = []
        for service in config.services where resolver.resolve(service.command) == nil {
            if service.optional {
                skipped.append(service.name)
                warnings.append("\(service.name): '\(service.command)' is not built; skipped (optional service)")
            } else {
                throw ClusterConfigError("services.\(service.name).command: '\(service.command)' not found in \(resolver.directories.joined(separator: ", ")) or PATH (build it first)")
            }
        }
        for service in config.services {
            guard let limit = service.scaleLimit else { continue }
            warnings.append("\(service.name) can be scaled to \(limit.replicas) replicas, not supervisor.max_replicas (\(config.supervisor.maxReplicas)): \(limit.reason)")
        }
        return ClusterPreparation(skipped: skipped, warnings: warnings)
    }

    /// Creates the supervisor; nothing starts before the runtime calls ``start(runtime:)``.
    public init(config: ClusterConfig, options: SupervisorOptions, skipping skipped: [String] = []) {
        self.config = config
        self.options = options
        self.skipped = Set(skipped)
        intensity = RestartIntensity(limit: config.supervisor.intensity)
        for service in config.services where !self.skipped.contains(service.name) {
            desiredReplicas[service.name] = service.replicas
            if !service.critical { serviceIntensity[service.name] = RestartIntensity(limit: service.intensity) }
            for replica in 0..<service.replicas {
                consoleWidth = max(consoleWidth, service.instanceName(replica: replica).count)
            }
        }
    }

    // MARK: Service

    public func start(runtime: ServiceRuntime) throws {
        self.runtime = runtime
        planner = LaunchPlanner(config: config, resolver: options.resolver, baseEnvironment: options.baseEnvironment,
                                supervisorEndpoint: runtime.boundControlEndpoint ?? runtime.boundEndpoint,
                                keysDirectory: runtime.trust?.directory.path)
        if let directory = options.logDirectory {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        for service in config.services where !skipped.contains(service.name) {
            for replica in 0..<service.replicas { instances.append(try makeInstance(service, replica: replica)) }
        }
        runtime.metrics.gauge("netplay_supervisor_cluster_ready", help: "1 when every supervised instance is ready.") { [weak self] in
            self?.clusterState == .running ? 1 : 0
        }
        runtime.metrics.gauge("netplay_supervisor_instances", help: "Supervised instances wanted.") { [weak self] in
            Double(self?.instances.filter(\.wanted).count ?? 0)
        }
        runtime.logger.info("cluster starting", metadata: [
            "cluster": "\(config.name)", "instances": "\(instances.count)",
            "order": "\(config.services.filter { !skipped.contains($0.name) }.map(\.name).joined(separator: ","))",
        ])
        runtime.every(seconds: 0.05) { [weak self] _ in self?.tick() }
        tick()
    }

    public func handle(_ request: Request, runtime: ServiceRuntime) throws(ServiceError) -> HandlerOutcome {
        switch request.body {
        case .serviceHeartbeat(let beat):
            // A heartbeat speaks for the instance whose key sent it, never for another.
            guard request.caller.clusterInstance == beat.instance else {
                throw ServiceError(.permissionDenied, "A heartbeat for '\(beat.instance)' must come from that instance's key.")
            }
            return heartbeat(beat)
        case .clusterStatusRequest(let query):
            if !query.service.isEmpty && config.service(query.service) == nil {
                throw ServiceError(.notFound, "No service '\(query.service)' in cluster \(config.name).", field: "ClusterStatusRequest.service")
            }
            return .reply(.clusterStatusResponse(clusterStatus(service: query.service)))
        case .restartServiceRequest(let restart):
            return .reply(.restartServiceResponse(try self.restart(restart)))
        case .scaleServiceRequest(let scale):
            return .reply(.scaleServiceResponse(try self.scale(scale)))
        case .stopClusterRequest(let stop):
            let reason = stop.reason.isEmpty ? "stop requested" : "stop requested: \(stop.reason)"
            runtime.logger.notice("stopping the cluster on request", metadata: ["reason": "\(stop.reason)"])
            runtime.handle.requestStop(reason: reason)
            return .reply(.ack(Ack()))
        default:
            throw ServiceError(.unknownRequest, "The supervisor does not handle \(request.body.name).")
        }
    }

    public var isReady: Bool { true }

    public var status: String {
        let wanted = instances.filter(\.wanted)
        let ready = wanted.filter { $0.state == .ready }.count
        return "\(clusterState.shortName): \(ready)/\(wanted.count) ready"
    }

    public func introspect(section: String) -> JSONValue {
        [
            "cluster": .string(config.name),
            "state": .string(clusterState.shortName),
            "port_offset": .number(config.portOffset),
            "skipped": .array(skipped.sorted().map(JSONValue.string)),
            "failure": failure.map(JSONValue.string) ?? .null,
            "intensity": [
                "max_restarts": .number(config.supervisor.intensity.maxRestarts),
                "period_s": .double(config.supervisor.intensity.period),
                "recent_restarts": .number(intensity.count(at: now())),
            ],
            "max_replicas": .number(config.supervisor.maxReplicas),
            "given_up": .object(Dictionary(uniqueKeysWithValues: givenUp.map { name, entry in
                (name, JSONValue.object(["reason": .string(entry.reason),
                                         "retry_in_ms": .number(Int(Self.milliseconds(max(.zero, entry.retry - .now))))]))
            })),
            "instances": .array(instances.map { instance in
                [
                    "service": .string(instance.spec.name), "instance": .string(instance.name),
                    "state": .string(instance.state.shortName), "pid": .number(instance.pid),
                    "ready": .bool(instance.ready), "restarts": .number(instance.restarts), "critical": .bool(instance.spec.critical),
                    "uptime_ms": .number(instance.uptimeMs), "last_reason": .string(ControlCharacters.fitted(instance.lastReason, maxBytes: 512)),
                    "command": .string(instance.plan.commandLine),
                ]
            }),
        ]
    }

    public func drain(runtime: ServiceRuntime) {
        beginStop(reason: runtime.handle.stopRequested ?? "stop requested")
    }

    public var isDraining: Bool { instances.contains(where: \.running) }

    public func stop(runtime: ServiceRuntime) {
        for instance in instances where instance.running {
            _ = nps_kill_group(instance.pid, SIGKILL)
        }
        reapAll()
        let summary = failure.map { "cluster failed: \($0)" } ?? "cluster stopped"
        runtime.logger.info("\(summary)")
    }

    // MARK: Public state (tests)

    /// The status of every instance, in start order.
    public func clusterStatus(service: String = "") -> ClusterStatusResponse {
        ClusterStatusResponse(cluster: String(config.name.prefix(64)), state: clusterState,
                              uptimeMs: Self.milliseconds(ContinuousClock.now - startedAt),
                              services: instances.filter { service.isEmpty || $0.spec.name == service }.prefix(256).map(\.status),
                              supervisorPid: UInt32(getpid()))
    }

    // MARK: Helpers

    func now() -> Double {
        let elapsed = ContinuousClock.now - startedAt
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    static func milliseconds(_ duration: Duration) -> UInt64 {
        UInt64(max(0, Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15))
    }

    static func seconds(_ duration: Duration) -> String {
        seconds(Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }

    static func seconds(_ value: Double) -> String {
        value < 10 ? String(format: "%.2f s", value) : String(format: "%.0f s", value)
    }

    static func signalName(_ signal: Int32) -> String {
        switch signal {
        case SIGKILL: return "SIGKILL"
        case SIGTERM: return "SIGTERM"
        case SIGINT: return "SIGINT"
        case SIGSEGV: return "SIGSEGV"
        case SIGABRT: return "SIGABRT"
        case SIGILL: return "SIGILL"
        case SIGTRAP: return "SIGTRAP (crash)"
        case SIGBUS: return "SIGBUS"
        case SIGHUP: return "SIGHUP"
        case SIGPIPE: return "SIGPIPE"
        default: return "signal \(signal)"
        }
    }
}
