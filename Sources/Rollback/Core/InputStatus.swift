/// How trustworthy the input a game receives for one player and frame is.
///
/// Only ``disconnected`` is guaranteed to be the same on every peer for a given frame, so
/// only it may influence the simulation; the other cases are for HUDs, logs and AI hints.
public enum InputStatus: UInt8, Sendable, Hashable, CaseIterable {
    /// The player's real input (local, received from a peer, or confirmed by the relay).
    case confirmed = 0
    /// Not known yet: a prediction. The frame is re-simulated if the prediction was wrong.
    case predicted = 1
    /// The relay replaced the player's input (it arrived too late or never); everyone uses this value.
    case substituted = 2
    /// The player has left; the input is ``GameInput/zero``.
    case disconnected = 3
}
