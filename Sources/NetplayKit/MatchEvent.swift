import NetplayWire

/// Something notable that happened in a match (for logs, HUD toasts and tests).
public enum MatchEvent: Sendable, Hashable {
    /// The relay reported a participant's change (joined, left, lagging, caught up...).
    case peer(PeerEventKind, slot: Int, name: String, frame: Int, detail: String)
    /// The relay found diverging checksums at `frame`; `diverged` are the slots resynced.
    case desync(frame: Int, diverged: [Int], resyncStarted: Bool)
    /// A state was loaded from a transfer (resync, late join, reconnect) at `frame`.
    case stateLoaded(frame: Int, reason: StateTransferReason)
    /// This peer served its state to the relay for a transfer.
    case stateServed(frame: Int, bytes: Int)
    /// The connection to the relay was lost; reconnecting.
    case reconnecting(attempt: Int)
    /// Attached again after a reconnect.
    case reconnected
    /// The match started (frame 0, or the frame this peer joined at).
    case started(frame: Int)
    /// This host restarted the match from its state at `frame` (``NetplayMatch/restart(from:)``).
    case restarted(frame: Int)
    /// Additional path `path` (2 ... ``NetplayMatchOptions/paths``) attached: inputs travel on it too.
    case pathAttached(path: Int)
    /// Additional path `path` was given up (the relay refused it for good, or it kept failing);
    /// the match goes on over the others.
    case pathLost(path: Int, reason: String)
    /// A service error received for something this peer sent.
    case error(ErrorCode, String)
    /// The link showed loss (a broadcast held back on one connection while another brought it):
    /// the match now keeps `to` connections to the relay.
    case pathsWidened(to: Int)
    /// The session runs on another relay now (the coordinator moved it nearer its players, or its
    /// relay stopped answering): the match attaches there and goes on from what it holds.
    case relayMoved(from: String, to: String)
    /// The relay chose another input delay for everyone (automatic delay: the round trips moved).
    case frameDelayChanged(from: Int, to: Int)
}
