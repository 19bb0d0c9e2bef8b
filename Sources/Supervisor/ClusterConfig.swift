import Foundation
import MemberwiseInit
import NetplayService

/// A cluster as described by `compose/cluster.yaml`, after `${VAR}` interpolation and
/// validation: what the supervisor starts, in which order, and how it restarts and stops it.
///
/// Load one with ``ClusterConfigLoader``; see docs/supervisor.md for the file format.
@PublicMemberwiseInit
public struct ClusterConfig: Sendable, Equatable {
    /// The cluster's name (shown in status and logs).
    public var name: String
    /// Added to every TCP port in the file (run a second cluster beside the first).
    public var portOffset: Int = 0
    /// The supervisor's own settings.
    public var supervisor: SupervisorSettings = SupervisorSettings()
    /// Environment for every child (templates allowed; service entries win).
    public var environment: [(String, String)] = []
    /// Root under which each instance gets `<data_dir>/<instance>` (NETPLAY_DATA_DIR).
    public var dataDirectory: String = "data"
    /// Services in start order (dependencies first; file order among independent ones).
    public var services: [ServiceSpec]

    /// The service named `name`.
    public func service(_ name: String) -> ServiceSpec? { services.first { $0.name == name } }

    public static func == (lhs: ClusterConfig, rhs: ClusterConfig) -> Bool {
        lhs.name == rhs.name && lhs.portOffset == rhs.portOffset && lhs.supervisor == rhs.supervisor
            && lhs.environment.map { [$0.0, $0.1] } == rhs.environment.map { [$0.0, $0.1] }
            && lhs.dataDirectory == rhs.dataDirectory && lhs.services == rhs.services
    }
}

/// The `supervisor:` section: the control endpoint and the policies every service inherits.
public struct SupervisorSettings: Sendable, Equatable {
    /// ROUTER endpoint for heartbeats and control requests (port offset applied).
    public var endpoint: String = "tcp://127.0.0.1:7000"
    /// Where the supervisor pushes its own metrics and events (nil: the runtime's default).
    public var telemetry: String?
    /// Default restart backoff.
    public var backoff = BackoffPolicy()
    /// OTP-style restart intensity of the critical services together: one restart more stops
    /// the cluster. Also the default of each non-critical service's own intensity.
    public var intensity = IntensityLimit()
    /// Seconds a non-critical service that exceeded its own intensity stays stopped before the
    /// supervisor tries it again (default 5 minutes).
    public var coolDown: Double = 300
    /// The most replicas a `Scale` request (or the file) may ask of one service.
    public var maxReplicas: Int = 16
    /// Default seconds between SIGTERM and SIGKILL.
    public var stopTimeout: Double = 5
    /// Default seconds a started process has to become ready.
    public var startTimeout: Double = 20
    /// Default seconds without a heartbeat before a ready process is killed and restarted.
    public var heartbeatTimeout: Double = 3
    /// A log file is rotated when it grows past this many bytes.
    public var logMaxBytes: Int = 10 * 1024 * 1024
    /// Rotated log files kept per instance (`name.log.1` ... `name.log.N`).
    public var logFiles: Int = 3

    /// Creates the defaults.
    public init() {}
}

/// Exponential restart backoff with jitter: `initial * multiplier^(failures-1)`, capped at
/// `maximum`, times a random factor in `1 ± jitter`. A process that stayed up `resetAfter`
/// seconds starts again from `initial`.
@PublicMemberwiseInit
public struct BackoffPolicy: Sendable, Equatable {
    /// First delay, seconds.
    public var initial: Double = 0.1
    /// Longest delay, seconds.
    public var maximum: Double = 10
    /// Growth per consecutive failure.
    public var multiplier: Double = 2
    /// Relative jitter, 0 to 1.
    public var jitter: Double = 0.2
    /// Seconds of uptime after which the failure count resets.
    public var resetAfter: Double = 30

    /// The delay before restart number `failures` (1 = first), with jitter from `random`
    /// (a value in 0..<1).
    public func delay(afterFailures failures: Int, random: Double) -> Double {
        let exponent = Double(max(0, failures - 1))
        let base = min(maximum, initial * pow(multiplier, min(exponent, 64)))
        let factor = 1 + jitter * (2 * random - 1)
        return max(0, min(maximum * (1 + jitter), base * factor))
    }
}

/// At most `maxRestarts` restarts within `period` seconds; one more stops the cluster (or, for a
/// non-critical service's own limit, gives up on that service) (Erlang/OTP's supervisor intensity).
@PublicMemberwiseInit
public struct IntensityLimit: Sendable, Equatable {
    /// Restarts allowed within the period.
    public var maxRestarts: Int = 10
    /// The sliding window, seconds.
    public var period: Double = 60
}

/// When a process that exited is started again.
public enum RestartPolicy: String, Sendable, Equatable, CaseIterable {
    /// Whenever it exits while the cluster runs (the default: a service is never done).
    case always
    /// Only when it failed (non-zero status or a signal).
    case onFailure = "on-failure"
    /// Never: it stays stopped.
    case never
}

/// How the supervisor decides a started process is ready.
public enum Readiness: String, Sendable, Equatable, CaseIterable {
    /// A `ServiceHeartbeat` with `ready = true` (every service on the runtime sends them).
    case heartbeat
    /// A `HealthResponse` with `ready = true` on the service's `endpoint`.
    case health
    /// As soon as the process runs (programs that are not Netplay services).
    case started
}

/// One service of the cluster (possibly replicated).
public struct ServiceSpec: Sendable, Equatable {
    /// Its name in the file, e.g. `"sync"`.
    public var name: String
    /// Executable name (looked up in the bin directory, next to the supervisor, then PATH)
    /// or path.
    public var command: String
    /// Extra arguments after the endpoint flags (templates allowed).
    public var arguments: [String]
    /// Extra environment (templates allowed).
    public var environment: [(String, String)]
    /// Named endpoints, each passed as `--NAME VALUE`; `endpoint` is the request endpoint
    /// used for health checks. Ports get the port offset and `portStep * replica`.
    public var endpoints: [(String, String)]
    /// Services that must be ready before this one starts.
    public var dependsOn: [String]
    /// Number of instances.
    public var replicas: Int
    /// True when the file gives `replicas:`: the service can be scaled while running.
    public var scalable: Bool
    /// Port distance between replicas.
    public var portStep: Int
    /// Instance name template (`{service}`, `{replica}`).
    public var instanceTemplate: String
    /// When to restart it.
    public var restart: RestartPolicy
    /// How readiness is detected.
    public var readiness: Readiness
    /// Seconds to become ready.
    public var startTimeout: Double
    /// Seconds between SIGTERM and SIGKILL.
    public var stopTimeout: Double
    /// Seconds without heartbeat before a restart (0: not watched).
    public var heartbeatTimeout: Double
    /// Restart backoff.
    public var backoff: BackoffPolicy
    /// When the command is not built, skip the service with a warning instead of failing.
    public var optional: Bool
    /// True (the default) when the cluster cannot run without it: its restarts count against the
    /// cluster's intensity, and exceeding that stops the cluster. A non-critical service (e.g.
    /// telemetry) has its own ``intensity``; exceeding it stops that service only, which is
    /// retried after ``coolDown`` while the rest keeps running.
    public var critical: Bool
    /// A non-critical service's own restart intensity (all its replicas together).
    public var intensity: IntensityLimit
    /// Seconds a non-critical service that exceeded its intensity stays stopped before a retry.
    public var coolDown: Double
    /// How far a replicated service may be scaled before a replica would bind a port something
    /// else binds (below `supervisor.max_replicas`), and why; nil when it may go all the way.
    public var scaleLimit: ScaleLimit?

    /// Creates a service with the supervisor's defaults.
    public init(name: String, command: String, arguments: [String] = [], environment: [(String, String)] = [],
                endpoints: [(String, String)] = [], dependsOn: [String] = [], replicas: Int = 1, scalable: Bool = false,
                portStep: Int = 10, instanceTemplate: String? = nil, restart: RestartPolicy = .always,
                readiness: Readiness = .heartbeat, settings: SupervisorSettings = SupervisorSettings(), optional: Bool = false,
                critical: Bool = true) {
        self.name = name
        self.command = command
        self.arguments = arguments
        self.environment = environment
        self.endpoints = endpoints
        self.dependsOn = dependsOn
        self.replicas = replicas
        self.scalable = scalable
        self.portStep = portStep
        self.instanceTemplate = instanceTemplate ?? (scalable ? "{service}-{replica}" : "{service}")
        self.restart = restart
        self.readiness = readiness
        self.startTimeout = settings.startTimeout
        self.stopTimeout = settings.stopTimeout
        self.heartbeatTimeout = settings.heartbeatTimeout
        self.backoff = settings.backoff
        self.optional = optional
        self.critical = critical
        self.intensity = settings.intensity
        self.coolDown = settings.coolDown
    }

    /// The instance name of replica `index`.
    public func instanceName(replica index: Int) -> String {
        instanceTemplate.replacingOccurrences(of: "{service}", with: name)
            .replacingOccurrences(of: "{replica}", with: String(index))
    }

    /// How many instances the service may have: a replicated one as many as `settings` lets it
    /// be scaled to, any other one.
    public func possibleReplicas(_ settings: SupervisorSettings) -> Int {
        scalable ? max(replicas, settings.maxReplicas) : 1
    }

    /// Endpoint `key` of replica `index`, with the replica's port step applied (the port
    /// offset is already in the stored value).
    public func endpoint(_ key: String, replica index: Int) -> String? {
        guard let value = endpoints.first(where: { $0.0 == key })?.1 else { return nil }
        return EndpointPorts.shift(value, by: portStep * index)
    }

    public static func == (lhs: ServiceSpec, rhs: ServiceSpec) -> Bool {
        lhs.name == rhs.name && lhs.command == rhs.command && lhs.arguments == rhs.arguments
            && lhs.environment.map { [$0.0, $0.1] } == rhs.environment.map { [$0.0, $0.1] }
            && lhs.endpoints.map { [$0.0, $0.1] } == rhs.endpoints.map { [$0.0, $0.1] }
            && lhs.dependsOn == rhs.dependsOn && lhs.replicas == rhs.replicas && lhs.scalable == rhs.scalable
            && lhs.portStep == rhs.portStep && lhs.instanceTemplate == rhs.instanceTemplate && lhs.restart == rhs.restart
            && lhs.readiness == rhs.readiness && lhs.startTimeout == rhs.startTimeout && lhs.stopTimeout == rhs.stopTimeout
            && lhs.heartbeatTimeout == rhs.heartbeatTimeout && lhs.backoff == rhs.backoff && lhs.optional == rhs.optional
            && lhs.critical == rhs.critical && lhs.intensity == rhs.intensity && lhs.coolDown == rhs.coolDown
            && lhs.scaleLimit == rhs.scaleLimit
    }
}

/// The most replicas a service may have before one would bind a port something else binds.
public struct ScaleLimit: Sendable, Equatable {
    /// Replicas at most.
    public var replicas: Int
    /// The clash one more would make, e.g. "sync-10 would bind port 7400, which telemetry's ingest binds".
    public var reason: String
}
