import MemberwiseInit

/// Simulated network conditions on this peer's link to the relay (tests, demos, chaos runs):
/// applied to what it sends and what it receives.
@PublicMemberwiseInit
public struct NetworkConditions: Sendable, Hashable {
    /// Round trip added to the link, milliseconds (half on each direction).
    public var rttMs: Int = 0
    /// Extra delay per message drawn from `0 ... jitterMs` (input traffic only: it may reorder).
    public var jitterMs: Int = 0
    /// Probability that an input message (inputs, acknowledgements, pings) is lost.
    public var loss: Double = 0
    /// Seeds the loss and jitter draws.
    public var seed: UInt64 = 1

    /// Whether anything is simulated.
    public var isPerfect: Bool { rttMs == 0 && jitterMs == 0 && loss == 0 }
}
