import ArgumentParser
import NetplayAuth
import NetplayService

/// netplay-coordinator's own flags, each with a `NETPLAY_*` environment fallback (shown in
/// `--help`). Resolve them into a ``CoordinatorConfiguration`` with ``resolve(environment:)``.
public struct CoordinatorOptions: ParsableArguments, Sendable {
    @Option(help: ArgumentHelp("Discovery's request endpoint for lobby rooms; 'none' disables (env NETPLAY_DISCOVERY, default \(ServiceDefaults.discoveryEndpoint)).", valueName: "endpoint"))
    public var discovery: String?

    @Option(help: ArgumentHelp("Cluster secret signing join tickets: HEX, or ID:HEX,ID:HEX for rotation (env NETPLAY_CLUSTER_SECRET; default: generated into <data-dir>/cluster-secret).", valueName: "secret"))
    public var clusterSecret: String?

    @Option(help: ArgumentHelp("File holding the cluster secret (env NETPLAY_CLUSTER_SECRET_FILE).", valueName: "path"))
    public var clusterSecretFile: String?

    @Option(help: ArgumentHelp("Seconds a join ticket admits its holder, 1 to 600: relays take no ticket living longer, as they remember a kick that long (env NETPLAY_TICKET_TTL, default 300).", valueName: "seconds"))
    public var ticketTTL: String?

    @Option(help: ArgumentHelp("Seconds without a refresh before a relay is dropped (env NETPLAY_RELAY_TTL, default 6).", valueName: "seconds"))
    public var relayTTL: String?

    @Option(help: ArgumentHelp("Refresh interval relays are told to keep, seconds (env NETPLAY_RELAY_REFRESH_INTERVAL, default 2).", valueName: "seconds"))
    public var relayRefreshInterval: String?

    @Option(help: ArgumentHelp("Relays whose worst player round trip is within this of the nearest relay's count as equally near, and load decides, milliseconds (env NETPLAY_RELAY_RTT_TOLERANCE, default 10).", valueName: "ms"))
    public var relayRttTolerance: String?

    @Option(help: ArgumentHelp("A relay holding this percentage of its capacity or more gets a new session only when every relay does (env NETPLAY_RELAY_LOAD_CAP, default 80).", valueName: "percent"))
    public var relayLoadCap: String?

    @Option(help: ArgumentHelp("TTL asked for lobby rooms, seconds (env NETPLAY_ROOM_TTL, default 60).", valueName: "seconds"))
    public var roomTTL: String?

    @Option(help: ArgumentHelp("Seconds an ended session stays queryable (env NETPLAY_ENDED_RETENTION, default 600).", valueName: "seconds"))
    public var endedRetention: String?

    @Option(help: ArgumentHelp("Active sessions at most (env NETPLAY_MAX_SESSIONS, default 100000).", valueName: "count"))
    public var maxSessions: String?

    @Option(help: ArgumentHelp("Password attempts per session per minute, spent before the hash is checked; a correct one is given back (env NETPLAY_PASSWORD_ATTEMPTS, default 10).", valueName: "count"))
    public var passwordAttempts: String?

    @Option(help: ArgumentHelp("Sessions one address may create per minute; 0 = unlimited (env NETPLAY_CREATE_RATE, default 20).", valueName: "count"))
    public var createRate: String?

    @Option(help: ArgumentHelp("Joins one address may send per minute; 0 = unlimited (env NETPLAY_JOIN_RATE, default 120).", valueName: "count"))
    public var joinRate: String?

    @Option(help: ArgumentHelp("Not-yet-started sessions one address may host at once; 0 = unlimited (env NETPLAY_LOBBY_SESSIONS_PER_SOURCE, default 20).", valueName: "count"))
    public var lobbySessionsPerSource: String?

    @Option(help: ArgumentHelp("Sessions, in the lobby or running, one address may host at once; 0 = unlimited (env NETPLAY_SESSIONS_PER_SOURCE, default 50).", valueName: "count"))
    public var sessionsPerSource: String?

    @Option(help: ArgumentHelp("Seconds a lobby session may sit idle (never started, no change, nobody attached) before it is ended; 0 = never (env NETPLAY_LOBBY_IDLE, default 1800).", valueName: "seconds"))
    public var lobbyIdle: String?

    @Option(help: ArgumentHelp("Seconds a running session may go with nobody attached, no change and no ticket renewed before it is ended; 0 = never (env NETPLAY_RUNNING_IDLE, default 3600).", valueName: "seconds"))
    public var runningIdle: String?

    @Option(help: ArgumentHelp("Password checks pending per session and per address at most (env NETPLAY_PENDING_PASSWORD_CHECKS, default 4).", valueName: "count"))
    public var pendingPasswordChecks: String?

    @Option(help: ArgumentHelp("Argon2id cost of room passwords: interactive, moderate or minimum (tests only) (env NETPLAY_PASSWORD_COST, default interactive).", valueName: "cost"))
    public var passwordCost: String?

    @Option(help: ArgumentHelp("SQLite durability: normal (survives a killed process) or full (also power loss) (env NETPLAY_DURABILITY, default normal).", valueName: "mode"))
    public var durability: String?

    /// Creates empty options.
    public init() {}

    /// The configuration these flags, the environment and the defaults describe.
    public func resolve(environment: [String: String]? = nil) throws -> CoordinatorConfiguration {
        let resolver = environment.map { SettingResolver(environment: $0) } ?? SettingResolver()
        var configuration = CoordinatorConfiguration()
        configuration.discovery = try resolver.endpoint(discovery, "NETPLAY_DISCOVERY", name: "--discovery",
                                                        default: ServiceDefaults.discoveryEndpoint)
        configuration.keyRing = try TicketKeyRing.configured(secret: clusterSecret, file: clusterSecretFile, setting: resolver)
        var settings = CoordinatorSettings()
        settings.ticketTTLMs = UInt64(try resolver.number(ticketTTL, "NETPLAY_TICKET_TTL", name: "--ticket-ttl", default: 300,
                                                          range: 1...600) * 1000)
        settings.relayTTLMs = UInt32(try resolver.number(relayTTL, "NETPLAY_RELAY_TTL", name: "--relay-ttl", default: 6,
                                                         range: 0.2...600) * 1000)
        let refresh = try resolver.number(relayRefreshInterval, "NETPLAY_RELAY_REFRESH_INTERVAL", name: "--relay-refresh-interval",
                                          // A third of the TTL, within the range a given value must be in (the
                                          // wire's 100 ms floor: below it no relay could register).
                                          default: max(0.1, min(2, Double(settings.relayTTLMs) / 3000)), range: 0.1...60)
        guard refresh * 1000 < Double(settings.relayTTLMs) else {
            throw ValidationError("--relay-refresh-interval (\(refresh) s) must be shorter than --relay-ttl")
        }
        settings.relayRefreshIntervalMs = UInt32(refresh * 1000)
        settings.relayChoice.rttToleranceUs = UInt32(try resolver.number(relayRttTolerance, "NETPLAY_RELAY_RTT_TOLERANCE",
                                                                         name: "--relay-rtt-tolerance", default: 10, range: 0...10_000) * 1000)
        settings.relayChoice.loadCapPercent = UInt32(try resolver.integer(relayLoadCap, "NETPLAY_RELAY_LOAD_CAP", name: "--relay-load-cap",
                                                                          default: 80, range: 1...100))
        configuration.roomTTLMs = UInt32(try resolver.number(roomTTL, "NETPLAY_ROOM_TTL", name: "--room-ttl", default: 60,
                                                             range: 0.5...600) * 1000)
        settings.endedRetentionMs = UInt64(try resolver.number(endedRetention, "NETPLAY_ENDED_RETENTION", name: "--ended-retention",
                                                               default: 600, range: 0...604_800) * 1000)
        settings.maxSessions = try resolver.integer(maxSessions, "NETPLAY_MAX_SESSIONS", name: "--max-sessions",
                                                    default: 100_000, range: 1...10_000_000)
        settings.passwordAttemptsPerMinute = try resolver.number(passwordAttempts, "NETPLAY_PASSWORD_ATTEMPTS",
                                                                 name: "--password-attempts", default: 10, range: 1...100_000)
        settings.createsPerMinutePerSource = try resolver.number(createRate, "NETPLAY_CREATE_RATE", name: "--create-rate",
                                                                 default: 20, range: 0...1_000_000)
        settings.joinsPerMinutePerSource = try resolver.number(joinRate, "NETPLAY_JOIN_RATE", name: "--join-rate",
                                                               default: 120, range: 0...1_000_000)
        settings.lobbySessionsPerSource = try resolver.integer(lobbySessionsPerSource, "NETPLAY_LOBBY_SESSIONS_PER_SOURCE",
                                                               name: "--lobby-sessions-per-source", default: 20, range: 0...10_000_000)
        settings.sessionsPerSource = try resolver.integer(sessionsPerSource, "NETPLAY_SESSIONS_PER_SOURCE",
                                                          name: "--sessions-per-source", default: 50, range: 0...10_000_000)
        settings.lobbyIdleMs = UInt64(try resolver.number(lobbyIdle, "NETPLAY_LOBBY_IDLE", name: "--lobby-idle", default: 1800,
                                                          range: 0...604_800) * 1000)
        settings.runningIdleMs = UInt64(try resolver.number(runningIdle, "NETPLAY_RUNNING_IDLE", name: "--running-idle", default: 3600,
                                                            range: 0...604_800) * 1000)
        let pending = try resolver.integer(pendingPasswordChecks, "NETPLAY_PENDING_PASSWORD_CHECKS", name: "--pending-password-checks",
                                           default: 4, range: 1...1000)
        settings.pendingHashesPerSession = pending
        settings.pendingHashesPerSource = pending
        switch try resolver.choice(passwordCost, "NETPLAY_PASSWORD_COST", name: "--password-cost", default: "interactive",
                                   choices: ["interactive", "moderate", "minimum"]) {
        case "moderate": settings.passwordHasher = .moderate
        case "minimum": settings.passwordHasher = .testing
        default: settings.passwordHasher = .interactive
        }
        configuration.settings = settings
        let mode = try resolver.choice(durability, "NETPLAY_DURABILITY", name: "--durability", default: "normal",
                                       choices: SessionStore.Durability.allCases.map(\.rawValue))
        configuration.durability = SessionStore.Durability(rawValue: mode) ?? .normal
        return configuration
    }
}
