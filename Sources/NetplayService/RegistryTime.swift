import MemberwiseInit

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
