import MemberwiseInit

/// How the coordinator weighs players' round trips against relay load when it picks a relay.
@PublicMemberwiseInit
public struct RelayChoicePolicy: Sendable, Equatable {
    /// Relays whose worst round trip is within this of the nearest count as equally near (load
    /// decides between them), microseconds.
    public var rttToleranceUs: UInt32 = 10_000
    /// A relay holding this share of its capacity (percent) or more is chosen only when every
    /// candidate does (nearness then decides among them).
    public var loadCapPercent: UInt32 = 80
}
