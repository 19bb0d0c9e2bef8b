import MemberwiseInit
import NetplayWire

/// A point in time for a registry (discovery's rooms, the coordinator's sessions): monotonic
/// milliseconds (expiry) and wall-clock milliseconds (the timestamps records carry). Passed in,
/// so a registry has no clock of its own.
@PublicMemberwiseInit
public struct RegistryTime: Sendable, Equatable {
    /// Monotonic milliseconds (any origin).
    public var monotonicMs: UInt64
    /// Milliseconds since the Unix epoch.
    public var unixMs: UInt64
}

extension RegistryTime {
    /// Now: milliseconds since `origin` on the monotonic clock, and the wall clock.
    public static func now(since origin: ContinuousClock.Instant) -> RegistryTime {
        RegistryTime(monotonicMs: UInt64((ContinuousClock.now - origin) / .milliseconds(1)), unixMs: UnixTime.nowMs())
    }
}
