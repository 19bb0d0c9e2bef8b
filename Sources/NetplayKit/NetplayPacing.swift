/// How a ``NetplayMatch`` follows the relay's time sync: every player hears how far its inputs
/// run ahead of the session's mean (``NetplayWire/TimeSyncHint/aheadUs``) and corrects half of
/// it, so all players converge on simulating the same frame at the same moment (equal
/// rollbacks for everyone, near the floor the path allows).
public enum NetplayPacing: Sendable, Hashable {
    /// For frontends tied to the display (vsync): the match skips a frame (a tick that simulates
    /// nothing) when ahead, or simulates two in one tick when behind, at most once every three
    /// ticks, never two corrections in a row: no stall longer than a frame.
    case wholeFrames
    /// For frontends that set their own frame timing: the match never skips; the frontend
    /// waits ``NetplayMatch/frameIntervalScale`` times its nominal frame interval between
    /// ticks (within ±8 %), which corrects the same offsets without a visible step. Offsets
    /// beyond two frames are still corrected with whole frames.
    case frameRate
}
