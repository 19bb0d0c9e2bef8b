import ArgumentParser
import Foundation
import NetplayAuth
import NetplayService
import RetroArchRelay

/// netplay-sync's own flags, each with a `NETPLAY_*` environment fallback (shown in `--help`).
/// Resolve them, with the common ``ServiceOptions``, into everything a relay replica needs with
/// ``resolve(common:environment:)``; the executable only parses and runs.
public struct SyncOptions: ParsableArguments, Sendable {
    @Option(help: ArgumentHelp("Replica index: default endpoints 7300+10i / 7301+10i / 7305+10i and instance sync-i (env NETPLAY_REPLICA, default 0).", valueName: "i"))
    public var replica: Int?

    @Option(help: ArgumentHelp("Coordinator endpoint to register with and report load to; 'none' disables (env NETPLAY_COORDINATOR, default \(ServiceDefaults.coordinatorEndpoint)).", valueName: "endpoint"))
    public var coordinator: String?

    @Option(help: ArgumentHelp("Cluster secret that signs join tickets: HEX or ID:HEX,... (env NETPLAY_CLUSTER_SECRET).", valueName: "secret"))
    public var clusterSecret: String?

    @Option(help: ArgumentHelp("File holding the cluster secret (env NETPLAY_CLUSTER_SECRET_FILE; default <data-dir>/../cluster-secret or <data-dir>/../coordinator/cluster-secret).", valueName: "path"))
    public var clusterSecretFile: String?

    @Option(help: ArgumentHelp("Endpoint peers attach to, as told to the coordinator (env NETPLAY_ADVERTISE, default the bound endpoint).", valueName: "endpoint"))
    public var advertise: String?

    @Option(help: ArgumentHelp("Region tag for the coordinator's relay choice (env NETPLAY_REGION).", valueName: "tag"))
    public var region: String?

    @Option(help: ArgumentHelp("Sessions served at most; 0 = no limit (env NETPLAY_MAX_SESSIONS).", valueName: "n"))
    public var maxSessions: Int?

    @Option(help: ArgumentHelp("Frames of inputs kept per session (env NETPLAY_HISTORY_FRAMES, default 4096).", valueName: "frames"))
    public var historyFrames: Int?

    @Option(help: ArgumentHelp("Connections one participant may hold, carrying the same inputs (env NETPLAY_MAX_PATHS, default 4, 1 ... 16; each is sent every input broadcast).", valueName: "n"))
    public var maxPaths: Int?

    @Option(help: ArgumentHelp("Bytes of a state transfer sent to a participant beyond what it acknowledged (env NETPLAY_TRANSFER_WINDOW, default 1048576, 256 ... 67108864): what one that stops reading can leave queued here; chunks are at most a quarter of it.", valueName: "bytes"))
    public var transferWindow: Int?

    @Option(help: ArgumentHelp("Bytes of states all state transfers may hold at once (env NETPLAY_TRANSFER_MEMORY, default 268435456, 67108864 ... 1099511627776): a transfer beyond it waits.", valueName: "bytes"))
    public var transferMemory: Int?

    @Option(help: ArgumentHelp("Slowest a state transfer may go (env NETPLAY_TRANSFER_MIN_RATE, default 262144, 1024 ... 1073741824): a state of n bytes has the transfer timeout plus n / rate seconds to reach every target; a target still short of it is dropped from the transfer, and retried.", valueName: "bytes/s"))
    public var transferMinRate: Int?

    @Flag(help: "Write no replay files (env NETPLAY_NO_REPLAYS=1).")
    public var noReplays = false

    @Option(help: ArgumentHelp("Relay RetroArch netplay (RetroArch's relay server protocol) on this TCP port, or HOST:PORT to bind one address; 'off' disables (env NETPLAY_RETROARCH_PORT, default off; RetroArch's default relay port is 55435). See docs/retroarch.md.", valueName: "port"))
    public var retroarchPort: String?

    @Option(help: ArgumentHelp("Host RetroArch clients reach this relay at, written into join strings HOST|PORT|SESSIONID; HOST:PORT when a port mapping changes the port (env NETPLAY_RETROARCH_ADVERTISE, default the host of --advertise, else 127.0.0.1).", valueName: "host"))
    public var retroarchAdvertise: String?

    @Option(help: ArgumentHelp("Address the RetroArch listener binds (env NETPLAY_RETROARCH_BIND, default 0.0.0.0).", valueName: "address"))
    public var retroarchBind: String?

    @Option(help: ArgumentHelp("Plain per-session ports LOW-HIGH: each RetroArch session gets a free one, where a client joins with just an address and a port (env NETPLAY_RETROARCH_SESSION_PORTS, default none).", valueName: "range"))
    public var retroarchSessionPorts: String?

    @Option(help: ArgumentHelp("RetroArch limits, name=value,...: sessions (1000), sessions-per-address (sessions hosted from one address, 16), clients per session (32), pending links per session (8), connections (8192), per-address (connections from one address, 256), prefix-timeout (10 s), link-timeout (30 s), ping-interval (10 s), host-timeout (240 s; timeouts at most 86400 s), buffer (bytes a waiting client may send, 8192), buffer-total (bytes all waiting clients hold together, 16777216) (env NETPLAY_RETROARCH_LIMITS).", valueName: "limits"))
    public var retroarchLimits: String?

    public init() {}

    /// What a relay replica runs with.
    public struct Resolved: Sendable {
        /// The runtime's configuration.
        public var service: ServiceConfiguration
        /// The relay's own configuration.
        public var relay: RelayConfiguration
        /// The keys that verify join tickets.
        public var keyRing: TicketKeyRing
        /// The coordinator to register with, or nil.
        public var coordinator: String?
        /// RetroArch's relay protocol on its own TCP port (nil: off). See docs/retroarch.md.
        public var retroArch: TunnelConfiguration?
    }

    /// Resolves flags, environment and defaults; throws a one-line `ValidationError` for anything
    /// malformed (and when no cluster secret can be found).
    public func resolve(common: ServiceOptions,
                        environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Resolved {
        let setting = SettingResolver(environment: environment)
        let index = try setting.integer(replica, "NETPLAY_REPLICA", name: "--replica", default: 0, range: 0 ... 99)
        var options = common
        if setting.text(options.instance, "NETPLAY_INSTANCE") == nil { options.instance = "sync-\(index)" }
        let service = try options.resolve(defaults: ServiceDefaults.sync(replica: index), environment: environment)

        // Without one given: beside the data directory, or the file a development coordinator generates.
        let root = service.dataDirectory.deletingLastPathComponent()
        let fallbacks = [root.appendingPathComponent("cluster-secret").path, root.appendingPathComponent("coordinator/cluster-secret").path]
        guard let keyRing = try TicketKeyRing.configured(secret: clusterSecret, file: clusterSecretFile, setting: setting,
                                                         fallbackFiles: fallbacks) else {
            throw ValidationError("--cluster-secret (or NETPLAY_CLUSTER_SECRET, or a readable --cluster-secret-file) is required to verify join tickets; no file at \(fallbacks.joined(separator: " or "))")
        }

        let coordinatorEndpoint = try setting.endpoint(coordinator, "NETPLAY_COORDINATOR", name: "--coordinator",
                                                       default: ServiceDefaults.coordinatorEndpoint)
        let advertised = setting.text(advertise, "NETPLAY_ADVERTISE") ?? ""
        if !advertised.isEmpty { try EndpointValidator.validate(advertised, name: "--advertise") }
        guard !advertised.contains("*") else {
            throw ValidationError("--advertise must name a reachable host and port, got '\(advertised)' (bind with a wildcard, advertise the address)")
        }

        var relay = RelayConfiguration(relayId: service.instance, advertisedEndpoint: advertised)
        relay.eventsEndpoint = service.events ?? ""
        relay.region = setting.text(region, "NETPLAY_REGION") ?? ""
        if let text = maxSessions.map(String.init) ?? setting.text(nil, "NETPLAY_MAX_SESSIONS") {
            guard let value = Int(text), value >= 0 else { throw ValidationError("--max-sessions must be a number >= 0, got '\(text)'") }
            relay.maxSessions = value
        }
        let history = setting.text(historyFrames.map(String.init), "NETPLAY_HISTORY_FRAMES", default: String(relay.historyFrames))
        guard let historyValue = Int(history) else { throw ValidationError("--history-frames must be a number, got '\(history)'") }
        relay.historyFrames = historyValue
        let paths = setting.text(maxPaths.map(String.init), "NETPLAY_MAX_PATHS", default: String(relay.maxPathsPerParticipant))
        guard let pathsValue = Int(paths) else { throw ValidationError("--max-paths must be a number, got '\(paths)'") }
        relay.maxPathsPerParticipant = pathsValue
        relay.transferWindowBytes = try setting.integer(transferWindow, "NETPLAY_TRANSFER_WINDOW", name: "--transfer-window",
                                                        default: relay.transferWindowBytes, range: 256 ... 64 << 20)
        relay.transferMinRateBytes = try setting.integer(transferMinRate, "NETPLAY_TRANSFER_MIN_RATE", name: "--transfer-min-rate",
                                                         default: relay.transferMinRateBytes, range: 1024 ... 1 << 30)
        relay.maxTransferBytes = try setting.integer(transferMemory, "NETPLAY_TRANSFER_MEMORY", name: "--transfer-memory",
                                                     default: relay.maxTransferBytes, range: relay.maxStateBytes ... 1 << 40)
        relay.replayDirectory = try setting.isOn(noReplays, "NETPLAY_NO_REPLAYS") ? nil : service.dataDirectory.appendingPathComponent("replays")
        relay.revocationsFile = service.dataDirectory.appendingPathComponent("revocations.jsonl")
        let retroArch = try resolveRetroArch(setting, advertised: advertised.isEmpty ? service.endpoint : advertised)
        if let problem = relay.validationError() { throw ValidationError(problem) }
        return Resolved(service: service, relay: relay, keyRing: keyRing, coordinator: coordinatorEndpoint, retroArch: retroArch)
    }

    /// The RetroArch tunnel's configuration, or nil when it is off.
    func resolveRetroArch(_ setting: SettingResolver, advertised: String) throws -> TunnelConfiguration? {
        let value = setting.text(retroarchPort, "NETPLAY_RETROARCH_PORT", default: "off")
        guard value.lowercased() != "off" else { return nil }
        // PORT, or HOST:PORT (the address to bind, as the supervisor's endpoints are written).
        var bindHost: String?
        var portText = value
        if let colon = value.lastIndex(of: ":") {
            bindHost = String(value[..<colon])
            portText = String(value[value.index(after: colon)...])
        }
        guard let port = UInt16(portText), bindHost.map({ !$0.isEmpty }) ?? true else {
            throw ValidationError("--retroarch-port must be a TCP port (0 to 65535), HOST:PORT or 'off', got '\(value)'")
        }
        var tunnel = TunnelConfiguration(port: port)
        tunnel.bindHost = bindHost ?? setting.text(retroarchBind, "NETPLAY_RETROARCH_BIND", default: "0.0.0.0")
        guard !tunnel.bindHost.isEmpty, !tunnel.bindHost.contains(":") || tunnel.bindHost.hasPrefix("[") else {
            throw ValidationError("--retroarch-bind must be an address, got '\(tunnel.bindHost)'")
        }
        if let text = setting.text(retroarchAdvertise, "NETPLAY_RETROARCH_ADVERTISE") {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count), !parts[0].isEmpty, !parts[0].contains("|"),
                  parts.count == 1 || UInt16(parts[1]).map({ $0 > 0 }) == true else {
                throw ValidationError("--retroarch-advertise must be HOST or HOST:PORT, got '\(text)'")
            }
            tunnel.advertiseHost = String(parts[0])
            if parts.count == 2 { tunnel.advertisePort = UInt16(parts[1])! }
        } else {
            tunnel.advertiseHost = TunnelConfiguration.reachableHost(ofEndpoint: advertised)
        }
        if let text = setting.text(retroarchSessionPorts, "NETPLAY_RETROARCH_SESSION_PORTS"), text.lowercased() != "none" {
            guard let range = TunnelConfiguration.parsePortRange(text) else {
                throw ValidationError("--retroarch-session-ports must be LOW-HIGH (ports 1-65535), got '\(text)'")
            }
            guard port == 0 || !range.contains(port) else {
                throw ValidationError("--retroarch-session-ports \(text) holds the main --retroarch-port \(port)")
            }
            tunnel.sessionPorts = range
        }
        if let text = setting.text(retroarchLimits, "NETPLAY_RETROARCH_LIMITS") {
            do { try tunnel.applyLimits(text) } catch { throw ValidationError("--retroarch-limits: \(error.description)") }
        }
        return tunnel
    }
}
