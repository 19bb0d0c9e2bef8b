/// Where a player of a ``P2PSession`` plays.
public enum PlayerLocation: Sendable, Hashable {
    /// On this machine: the caller adds its inputs.
    case local
    /// Behind a remote endpoint: a peer, or the relay when the session has one.
    case remote(PeerID)
}

/// A session's lifecycle.
public enum SessionState: Sendable, Hashable {
    /// Handshaking with the remote endpoints; frames cannot advance yet.
    case synchronizing
    /// Frames advance.
    case running
}

/// What ``P2PSession/advanceFrame()`` did.
public enum AdvanceResult: Sendable, Hashable {
    /// One new frame was simulated, after re-simulating `rolledBackFrames` frames (0: no rollback).
    case advanced(rolledBackFrames: Int)
    /// Nothing was simulated; call again next tick. The local inputs given for this frame
    /// were queued and sent; inputs given again while the same frame waits are ignored.
    case waiting(WaitReason)

    /// Whether a frame was simulated.
    public var didAdvance: Bool {
        if case .advanced = self { return true }
        return false
    }
}

/// Why a session did not advance.
public enum WaitReason: Sendable, Hashable {
    /// The handshake is not complete.
    case synchronizing
    /// Running further would predict more than ``SessionConfiguration/predictionWindow`` frames.
    case predictionBarrier
    /// Frames confirmed by everyone lag too far behind for the saved-state ring.
    case confirmationBarrier
}

/// A saved state whose inputs are final everywhere, for a state transfer.
public struct ConfirmedState<State> {
    /// The frame the state belongs to (the state at the start of that frame).
    public var frame: Frame
    /// The state.
    public var state: State
    /// Its checksum, when that frame is a checksum frame.
    public var checksum: UInt64?
}

extension ConfirmedState: Sendable where State: Sendable {}
