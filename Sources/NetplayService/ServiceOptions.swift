import ArgumentParser
import Foundation
import Logging
import MemberwiseInit
import ZeroMQ

/// The flags every service takes, each with a `NETPLAY_*` environment fallback.
///
/// Resolution order: flag, then environment variable, then the service's ``ServiceDefaults``.
/// Include it in an executable with `@OptionGroup var common: ServiceOptions` and turn it into a
/// ``ServiceConfiguration`` with ``resolve(defaults:environment:)``.
public struct ServiceOptions: ParsableArguments, Sendable {
    @Option(help: ArgumentHelp("ROUTER endpoint to bind for requests (env NETPLAY_ENDPOINT).", valueName: "endpoint"))
    public var endpoint: String?

    @Option(help: ArgumentHelp("PUB endpoint to bind for events; 'none' disables (env NETPLAY_EVENTS).", valueName: "endpoint"))
    public var events: String?

    @Option(help: ArgumentHelp("Telemetry PULL endpoint for metrics and events; 'none' disables (env NETPLAY_TELEMETRY, default \(ServiceDefaults.telemetryIngest)).", valueName: "endpoint"))
    public var telemetry: String?

    @Option(help: ArgumentHelp("Supervisor endpoint for heartbeats; 'none' disables (env NETPLAY_SUPERVISOR; unset: no heartbeats).", valueName: "endpoint"))
    public var supervisor: String?

    @Option(help: ArgumentHelp("Instance name, unique in the cluster (env NETPLAY_INSTANCE, default <service>-<pid>).", valueName: "name"))
    public var instance: String?

    @Option(help: ArgumentHelp("trace, debug, info, notice, warning, error or critical (env NETPLAY_LOG_LEVEL, default info).", valueName: "level"))
    public var logLevel: String?

    @Option(help: ArgumentHelp("Directory for anything the service stores (env NETPLAY_DATA_DIR, default ./data/<instance>).", valueName: "path"))
    public var dataDir: String?

    @Option(help: ArgumentHelp("Seconds between metric snapshots pushed to telemetry (env NETPLAY_METRICS_INTERVAL, default 5).", valueName: "seconds"))
    public var metricsInterval: Double?

    @Option(help: ArgumentHelp("CurveZMQ secret key (Z85, 40 chars) of the cluster: encrypts the public endpoints (env NETPLAY_CURVE_SECRET_KEY).", valueName: "z85"))
    public var curveSecretKey: String?

    @Option(help: ArgumentHelp("ROUTER endpoint for the cluster and operator planes (CurveZMQ, trust-store keys only); 'none' disables (env NETPLAY_CONTROL_ENDPOINT, default: the service's control port).", valueName: "endpoint"))
    public var controlEndpoint: String?

    @Option(help: ArgumentHelp("Trust store: the cluster members' and operators' public keys (env NETPLAY_KEYS_DIR, default <data-dir>/../keys).", valueName: "path"))
    public var keysDir: String?

    @Option(help: ArgumentHelp("This instance's CurveZMQ identity key file (env NETPLAY_IDENTITY_KEY_FILE, default <data-dir>/identity.secret, created 0600 when missing).", valueName: "path"))
    public var identityKeyFile: String?

    public init() {}

    /// Resolves flags, environment and defaults into a validated configuration.
    /// Throws a `ValidationError` with a one-line reason for anything malformed.
    public func resolve(
        defaults: ServiceDefaults,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> ServiceConfiguration {
        let setting = SettingResolver(environment: environment)

        let endpoint = setting.text(self.endpoint, "NETPLAY_ENDPOINT") ?? defaults.endpoint
        try EndpointValidator.validate(endpoint, name: "--endpoint")
        let events = try setting.endpoint(self.events, "NETPLAY_EVENTS", name: "--events", default: defaults.events)
        let telemetry = try setting.endpoint(self.telemetry, "NETPLAY_TELEMETRY", name: "--telemetry",
                                             default: ServiceDefaults.telemetryIngest)
        let supervisor = try setting.endpoint(self.supervisor, "NETPLAY_SUPERVISOR", name: "--supervisor", default: nil)

        let instance = setting.text(self.instance, "NETPLAY_INSTANCE") ?? "\(defaults.kind)-\(getpid())"
        guard TrustStore.isName(instance) else {
            throw ValidationError("--instance must be 1 to 64 ASCII letters, digits, '-', '_' or '.', got '\(instance)'")
        }

        let levelText = try setting.choice(logLevel, "NETPLAY_LOG_LEVEL", name: "--log-level", default: "info",
                                           choices: Logger.Level.allCases.map(\.rawValue))
        let level = Logger.Level(rawValue: levelText) ?? .info

        let dataDir = setting.text(self.dataDir, "NETPLAY_DATA_DIR") ?? "data/\(instance)"

        let interval = try setting.number(metricsInterval, "NETPLAY_METRICS_INTERVAL",
                                          name: "--metrics-interval", default: 5, range: 0.05...3600)

        var curve: CurveKeyPair?
        if let secret = setting.text(curveSecretKey, "NETPLAY_CURVE_SECRET_KEY") {
            do { curve = try CurveKeyPair(secretZ85: secret) } catch {
                throw ValidationError("--curve-secret-key must be a 40-character Z85 CurveZMQ secret key")
            }
        }

        let control = try setting.endpoint(self.controlEndpoint, "NETPLAY_CONTROL_ENDPOINT", name: "--control-endpoint",
                                           default: Self.defaultControl(endpoint: endpoint, defaults: defaults))
        let dataDirectory = URL(fileURLWithPath: dataDir)
        let keys = setting.text(self.keysDir, "NETPLAY_KEYS_DIR").map { URL(fileURLWithPath: $0) }
            ?? TrustStore.defaultDirectory(forDataDirectory: dataDirectory)
        let identityFile = setting.text(self.identityKeyFile, "NETPLAY_IDENTITY_KEY_FILE").map { URL(fileURLWithPath: $0) }

        var configuration = ServiceConfiguration(
            kind: defaults.kind, instance: instance, endpoint: endpoint, events: events,
            telemetry: telemetry, supervisor: supervisor, logLevel: level,
            dataDirectory: dataDirectory, metricsInterval: interval, curve: curve)
        configuration.control = control
        configuration.trustStore = keys
        configuration.identityKeyFile = identityFile
        configuration.publicEvents = defaults.publicEvents
        configuration.guardsUnreadReplies = defaults.guardsUnreadReplies
        return configuration
    }
}

extension ServiceOptions {
    /// The control endpoint when none is given: the table's port beside the table's public
    /// endpoint; beside any other public endpoint, a free port on the same interface (peers find
    /// it in the trust store), so services started on chosen ports never collide on the table's.
    static func defaultControl(endpoint: String, defaults: ServiceDefaults) -> String? {
        if endpoint == defaults.endpoint, let tableControl = defaults.control { return tableControl }
        if endpoint.hasPrefix("tcp://"), let colon = endpoint.lastIndex(of: ":") {
            return "\(endpoint[..<colon]):*"
        }
        return endpoint + ".control"
    }
}

/// Checks endpoint strings before they reach libzmq, so a typo gets a one-line reason.
public enum EndpointValidator {
    /// Throws a `ValidationError` naming `name` unless `endpoint` is tcp://host:port, ipc://path
    /// or inproc://name (a `*` host or port is accepted for binding).
    public static func validate(_ endpoint: String, name: String) throws {
        let reason = "\(name) must look like tcp://HOST:PORT, ipc://PATH or inproc://NAME; got '\(endpoint)'"
        if endpoint.hasPrefix("ipc://") || endpoint.hasPrefix("inproc://") {
            guard endpoint.split(separator: "/", omittingEmptySubsequences: false).count >= 3,
                  !endpoint.hasSuffix("//") else { throw ValidationError(reason) }
            return
        }
        guard endpoint.hasPrefix("tcp://") else { throw ValidationError(reason) }
        let rest = endpoint.dropFirst("tcp://".count)
        guard let colon = rest.lastIndex(of: ":") else { throw ValidationError(reason) }
        let host = rest[..<colon], port = rest[rest.index(after: colon)...]
        guard !host.isEmpty, !port.isEmpty else { throw ValidationError(reason) }
        if port != "*" {
            guard let number = Int(port), (0...65535).contains(number) else { throw ValidationError(reason) }
        }
    }
}

/// A service's resolved, validated configuration.
@PublicMemberwiseInit
public struct ServiceConfiguration: Sendable {
    /// Service kind, e.g. `"discovery"`.
    public var kind: String
    /// Instance name, unique in the cluster.
    public var instance: String
    /// ROUTER endpoint for requests.
    public var endpoint: String
    /// PUB endpoint for events, or nil when disabled.
    public var events: String? = nil
    /// Telemetry PULL endpoint, or nil when disabled.
    public var telemetry: String? = nil
    /// Supervisor endpoint for heartbeats, or nil.
    public var supervisor: String? = nil
    /// Log threshold.
    public var logLevel: Logger.Level = .info
    /// Where the service stores files.
    public var dataDirectory: URL = URL(fileURLWithPath: "data")
    /// Seconds between metric snapshots.
    public var metricsInterval: Double = 5
    /// The cluster's CurveZMQ key pair when encryption is on.
    public var curve: CurveKeyPair? = nil
    /// Seconds between heartbeats to the supervisor.
    public var heartbeatInterval: Double = 1
    /// How long a graceful stop may drain before sockets close.
    public var drainTimeout: Double = 1
    /// ROUTER endpoint of the cluster and operator planes, or nil for none.
    public var control: String? = nil
    /// The trust store's directory, or nil: no control plane, and plain connections to the
    /// cluster (a service embedded in a program, tests of the public plane).
    public var trustStore: URL? = nil
    /// Where this instance's identity key lives (default `<data dir>/identity.secret`).
    public var identityKeyFile: URL? = nil
    /// Whether anyone may subscribe to the events endpoint (discovery's room events); otherwise
    /// it is a CurveZMQ endpoint for trust-store keys only.
    public var publicEvents: Bool = false
    /// Whether the public ROUTER bounds the replies a peer has not read (``OutboundGuard``):
    /// every service but the relay, whose replies to strangers are small and whose hot path
    /// sends to admitted players only.
    public var guardsUnreadReplies: Bool = true
}
