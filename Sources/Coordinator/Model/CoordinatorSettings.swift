import NetplayAuth
import NetplayService

/// The coordinator's rules and limits (flags of netplay-coordinator).
public struct CoordinatorSettings: Sendable {
    /// How long a join ticket admits its holder.
    public var ticketTTLMs: UInt64 = 300_000
    /// A relay not refreshed for this long is dropped.
    public var relayTTLMs: UInt32 = 6_000
    /// The refresh interval relays are told to keep.
    public var relayRefreshIntervalMs: UInt32 = 2_000
    /// How players' measured round trips and relay load weigh when a relay is picked.
    public var relayChoice = RelayChoicePolicy()
    /// Ended sessions stay queryable this long, then are deleted.
    public var endedRetentionMs: UInt64 = 600_000
    /// Active sessions at most (beyond: OVERLOADED).
    public var maxSessions = 100_000
    /// Password attempts allowed per session per minute (and as a burst). An attempt is spent
    /// before its password is verified; a correct password gives it back.
    public var passwordAttemptsPerMinute: Double = 10
    /// Session creates per source address per minute (and as a burst); 0 = unlimited.
    public var createsPerMinutePerSource: Double = 20
    /// Joins per source address per minute (and as a burst); 0 = unlimited.
    public var joinsPerMinutePerSource: Double = 120
    /// Sessions in the lobby created from one source address at most; 0 = unlimited.
    public var lobbySessionsPerSource = 20
    /// Sessions (in the lobby or running) created from one source address at most; 0 =
    /// unlimited. Each running session holds memory on its relay (its input history: up to
    /// 2 MiB for 8 players of 64-byte inputs), so a stranger must not hold them without bound.
    public var sessionsPerSource = 50
    /// A lobby session (never started) with no activity for this long is ended; 0 = never.
    public var lobbyIdleMs: UInt64 = 1_800_000
    /// A running session with no activity for this long (nobody attached to its relay, no
    /// change, no ticket renewed) is ended; 0 = never. Without it, a match nobody plays (or a
    /// relay lost) held its place under ``maxSessions`` for good.
    public var runningIdleMs: UInt64 = 3_600_000
    /// Password hashes waiting or running for one session at most (beyond: RATE_LIMITED).
    public var pendingHashesPerSession = 4
    /// Password hashes waiting or running for one source address at most (beyond: RATE_LIMITED).
    public var pendingHashesPerSource = 4
    /// Password hashes run in parallel (worker threads).
    public var hashingWorkers = 2
    /// Cost of hashing room passwords.
    public var passwordHasher: PasswordHasher = .interactive
    /// A join waiting for its host's decision that its joiner stopped asking about for this long
    /// is dropped.
    public var pendingJoinAskTimeoutMs: UInt64 = 15_000
    /// A join waits for its host's decision this long at most.
    public var pendingJoinMaxWaitMs: UInt64 = 180_000
    /// The version reported in lobby rooms.
    public var hostVersion = NetplayVersion.current

    /// The defaults.
    public init() {}
}

/// A point in time for the coordinator (monotonic and wall-clock milliseconds), passed in so
/// the logic has no clock of its own.
public typealias CoordinatorTime = RegistryTime
