import Foundation
import NetplayLAN
import NetplayService
import ArgumentParser

/// netplay-discovery's own flags, each with a `NETPLAY_*` environment fallback (shown in
/// `--help`). Resolve them into a ``DiscoveryConfiguration`` with ``resolve(environment:)``.
public struct DiscoveryOptions: ParsableArguments, Sendable {
    @Option(help: ArgumentHelp("Seconds a room lives without a refresh when the announcer asks for no TTL (env NETPLAY_ROOM_TTL, default 60).", valueName: "seconds"))
    public var roomTTL: String?

    @Option(help: ArgumentHelp("Longest TTL granted, seconds (env NETPLAY_MAX_ROOM_TTL, default 600).", valueName: "seconds"))
    public var maxRoomTTL: String?

    @Option(help: ArgumentHelp("Rooms the registry holds at most (env NETPLAY_MAX_ROOMS, default 200000).", valueName: "count"))
    public var maxRooms: String?

    @Option(help: ArgumentHelp("Rooms one announcer may hold at most (env NETPLAY_MAX_ROOMS_PER_ANNOUNCER, default 100000).", valueName: "count"))
    public var maxRoomsPerAnnouncer: String?

    @Option(help: ArgumentHelp("Announce/refresh/withdraw requests per second per announcer; 0 = unlimited (env NETPLAY_ANNOUNCE_RATE, default 2000).", valueName: "per-second"))
    public var announceRate: String?

    @Option(help: ArgumentHelp("Burst of such requests per announcer (env NETPLAY_ANNOUNCE_BURST, default 4000).", valueName: "count"))
    public var announceBurst: String?

    @Option(help: ArgumentHelp("Public reads per second per source address, a get costing 1 and a list or watch page 1 per 100 rooms asked; 0 = unlimited (env NETPLAY_READ_RATE, default 50).", valueName: "per-second"))
    public var readRate: String?

    @Option(help: ArgumentHelp("Burst of read tokens per source address (env NETPLAY_READ_BURST, default 150).", valueName: "count"))
    public var readBurst: String?

    @Option(help: ArgumentHelp("Seconds between rooms.sync events for watchers, at least 0.05; 0 = none (env NETPLAY_ROOMS_SYNC_INTERVAL, default 1).", valueName: "seconds"))
    public var syncInterval: String?

    @Option(help: ArgumentHelp("UDP port of the LAN beacon listener; 0 or none disables (env NETPLAY_BEACON_PORT, default 7102).", valueName: "port"))
    public var beaconPort: String?

    @Option(help: ArgumentHelp("Address the beacon listener binds (env NETPLAY_BEACON_BIND, default 0.0.0.0).", valueName: "ipv4"))
    public var beaconBind: String?

    @Option(help: ArgumentHelp("UDP port answering RetroArch RANQ LAN scans with the relayed RetroArch rooms joinable at this machine; 0 or none disables (env NETPLAY_RETROARCH_PORT, default 55435).", valueName: "port"))
    public var retroarchPort: String?

    @Option(help: ArgumentHelp("Address the RetroArch responder and scanner bind (env NETPLAY_RETROARCH_BIND, default 0.0.0.0).", valueName: "ipv4"))
    public var retroarchBind: String?

    @Option(help: ArgumentHelp("Seconds between RANQ scans listing RetroArch hosts as rooms; 0 = off (env NETPLAY_RETROARCH_SCAN_INTERVAL, default 0).", valueName: "seconds"))
    public var retroarchScanInterval: String?

    @Option(help: ArgumentHelp("Comma-separated IPv4[:port] scan targets, or 'auto' for every interface's broadcast address (env NETPLAY_RETROARCH_SCAN_TARGETS, default auto).", valueName: "list"))
    public var retroarchScanTargets: String?

    /// Creates empty options (every value from the environment or the defaults).
    public init() {}

    /// The configuration these flags, the environment and the defaults describe.
    public func resolve(environment: [String: String]? = nil) throws -> DiscoveryConfiguration {
        let resolver = environment.map { SettingResolver(environment: $0) } ?? SettingResolver()
        var configuration = DiscoveryConfiguration()
        let ttl = try resolver.number(roomTTL, "NETPLAY_ROOM_TTL", name: "--room-ttl", default: 60, range: 0.5...600)
        let maxTTL = try resolver.number(maxRoomTTL, "NETPLAY_MAX_ROOM_TTL", name: "--max-room-ttl", default: 600, range: 0.5...600)
        guard maxTTL >= ttl else { throw ValidationError("--max-room-ttl (\(maxTTL)) must not be below --room-ttl (\(ttl))") }
        configuration.limits.defaultTTLMs = UInt32(ttl * 1000)
        configuration.limits.maxTTLMs = UInt32(maxTTL * 1000)
        configuration.limits.minTTLMs = min(500, configuration.limits.defaultTTLMs)
        configuration.limits.maxRooms = try resolver.integer(maxRooms, "NETPLAY_MAX_ROOMS", name: "--max-rooms",
                                                             default: 200_000, range: 1...10_000_000)
        configuration.limits.maxRoomsPerAnnouncer = try resolver.integer(maxRoomsPerAnnouncer, "NETPLAY_MAX_ROOMS_PER_ANNOUNCER",
                                                                         name: "--max-rooms-per-announcer", default: 100_000,
                                                                         range: 1...10_000_000)
        configuration.announceRatePerSecond = try resolver.number(announceRate, "NETPLAY_ANNOUNCE_RATE", name: "--announce-rate",
                                                                  default: 2_000, range: 0...1_000_000)
        configuration.announceBurst = try resolver.number(announceBurst, "NETPLAY_ANNOUNCE_BURST", name: "--announce-burst",
                                                          default: 4_000, range: 1...10_000_000)
        configuration.readRatePerSecond = try resolver.number(readRate, "NETPLAY_READ_RATE", name: "--read-rate",
                                                              default: 50, range: 0...1_000_000)
        configuration.readBurst = try resolver.number(readBurst, "NETPLAY_READ_BURST", name: "--read-burst",
                                                      default: 150, range: 10...10_000_000)
        configuration.syncIntervalSeconds = try resolver.number(syncInterval, "NETPLAY_ROOMS_SYNC_INTERVAL", name: "--sync-interval",
                                                                default: 1, range: 0...3600)
        guard configuration.syncIntervalSeconds == 0 || configuration.syncIntervalSeconds >= 0.05 else {
            throw ValidationError("--sync-interval must be 0 (none) or at least 0.05 s, got \(configuration.syncIntervalSeconds)")
        }
        configuration.beaconPort = try resolver.port(beaconPort, "NETPLAY_BEACON_PORT", name: "--beacon-port",
                                                     default: LanBeaconCodec.defaultPort)
        configuration.beaconBind = try resolver.ipv4(beaconBind, "NETPLAY_BEACON_BIND", name: "--beacon-bind", default: "0.0.0.0")
        configuration.retroArchPort = try resolver.port(retroarchPort, "NETPLAY_RETROARCH_PORT", name: "--retroarch-port",
                                                        default: RetroArchLAN.port)
        configuration.retroArchBind = try resolver.ipv4(retroarchBind, "NETPLAY_RETROARCH_BIND", name: "--retroarch-bind",
                                                        default: "0.0.0.0")
        configuration.retroArchScanIntervalSeconds = try resolver.number(retroarchScanInterval, "NETPLAY_RETROARCH_SCAN_INTERVAL",
                                                                         name: "--retroarch-scan-interval", default: 0, range: 0...3600)
        guard configuration.retroArchScanIntervalSeconds == 0 || configuration.retroArchScanIntervalSeconds >= 0.1 else {
            throw ValidationError("--retroarch-scan-interval must be 0 (no scans) or at least 0.1 s, got \(configuration.retroArchScanIntervalSeconds)")
        }
        let targets = resolver.text(retroarchScanTargets, "NETPLAY_RETROARCH_SCAN_TARGETS", default: "auto")
        if targets.lowercased() != "auto" {
            var parsed: [UDPAddress] = []
            for item in targets.split(separator: ",") {
                let text = item.trimmingCharacters(in: .whitespaces)
                guard let address = UDPAddress(text, defaultPort: RetroArchLAN.port) else {
                    throw ValidationError("--retroarch-scan-targets must list IPv4[:port] addresses or say 'auto', got '\(text)'")
                }
                parsed.append(address)
            }
            guard !parsed.isEmpty else { throw ValidationError("--retroarch-scan-targets is empty") }
            configuration.retroArchScanTargets = parsed
        }
        return configuration
    }
}
