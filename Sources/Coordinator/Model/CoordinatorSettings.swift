import Discovery
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
    /// Ended sessions stay queryable this long, then are deleted.
    public var endedRetentionMs: UInt64 = 600_000
    /// Active sessions at most (beyond: OVERLOADED).
    public var maxSessions = 100_000
    /// Wrong-password attempts allowed per session per minute (and as a burst).
    public var passwordAttemptsPerMinute: Double = 10
    /// Cost of hashing room passwords.
    public var passwordHasher: PasswordHasher = .interactive
    /// The version reported in lobby rooms.
    public var hostVersion = NetplayVersion.current

    /// The defaults.
    public init() {}
}

/// A point in time for the coordinator (monotonic and wall-clock milliseconds), passed in so
/// the logic has no clock of its own.
public typealias CoordinatorTime = RegistryTime
