/// One row of the expanded HUD: a participant and its link.
public struct PlayerHUD: Sendable, Hashable {
    /// 1-based slot; 0 for spectators.
    public var slot: Int
    /// Display name.
    public var name: String
    /// Attached now.
    public var connected: Bool
    /// Round trip to the relay in milliseconds.
    public var pingMs: Int
    /// Frames of its input the relay substituted.
    public var substitutedFrames: Int
    /// This row is the local peer.
    public var isLocal: Bool
}
