import Rollback

/// What one ``NetplayMatch/tick(input:)`` did.
public struct TickResult: Sendable, Hashable {
    /// Frames simulated for the first time (0 while waiting; more than 1 while catching up).
    public var framesAdvanced = 0
    /// Frames re-simulated by rollbacks during this tick.
    public var rolledBackFrames = 0
    /// Why no frame advanced, when none did and the match runs.
    public var waiting: WaitReason?
    /// Whether the match is running (inputs are being simulated).
    public var running = false
}
