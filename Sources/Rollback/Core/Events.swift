import MemberwiseInit

/// Something the caller should know about. Sessions queue events; drain them every tick
/// with `drainEvents()`.
public enum SessionEvent: Sendable, Hashable {
    /// The handshake with `peer` progressed: `count` of `total` round trips done.
    case synchronizing(peer: PeerID, count: Int, total: Int)
    /// The handshake with `peer` is complete.
    case synchronized(peer: PeerID)
    /// Every player endpoint is synchronized; frames can be advanced.
    case running
    /// Nothing was heard from `peer` for a while; it is disconnected after `disconnectInMs` more.
    case interrupted(peer: PeerID, disconnectInMs: Int)
    /// `peer` is heard again after ``interrupted(peer:disconnectInMs:)``.
    case resumed(peer: PeerID)
    /// The endpoint `peer` is gone (timed out, left, or was disconnected by the caller).
    case peerDisconnected(peer: PeerID)
    /// `player`'s inputs are "disconnected" from `frame` on (agreed by every peer, or set by the relay).
    case playerDisconnected(player: PlayerHandle, frame: Frame)
    /// This peer is ahead of the others: skip (wait) `frames` frames to let them catch up.
    case waitRecommendation(frames: Int)
    /// A confirmed frame's checksum differs from `peer`'s.
    case desync(DesyncReport)
    /// `peer` asks for a confirmed state (see `P2PSession.latestConfirmedState()` and `sendState`).
    case stateRequested(peer: PeerID, confirmedFrame: Frame)
    /// `peer` sent a confirmed state; decode it and call `P2PSession.loadState(_:frame:)`.
    case stateReceived(peer: PeerID, transfer: StateTransfer)
}

/// The details of a detected desync.
@PublicMemberwiseInit
public struct DesyncReport: Sendable, Hashable {
    /// The frame whose starting state differs.
    public var frame: Frame
    /// This peer's checksum.
    public var localChecksum: UInt64
    /// The other side's checksum.
    public var remoteChecksum: UInt64
    /// Who reported the other checksum.
    public var peer: PeerID
}
