import MemberwiseInit

/// A message between two rollback endpoints. The engine does no I/O: sessions put these in
/// an outbox (``P2PSession/drainOutgoing()``) and accept them through `handle(_:from:now:)`;
/// the caller's transport carries them. Every payload is a small struct of integers and
/// bytes so that it maps one-to-one onto a protobuf `oneof` (see docs/rollback.md).
public enum RollbackMessage: Sendable, Hashable {
    /// Handshake probe; answered with ``syncReply(_:)`` carrying the same nonce.
    case syncRequest(SyncRequest)
    /// Handshake answer.
    case syncReply(SyncReply)
    /// A run of consecutive inputs of one player.
    case input(InputMessage)
    /// Acknowledgement and frame status from an endpoint with no inputs to send right now.
    case inputAck(InputAck)
    /// Ping plus time-sync figures; answered with ``qualityReply(_:)``.
    case qualityReport(QualityReport)
    /// Pong.
    case qualityReply(QualityReply)
    /// The checksum of a confirmed frame, for desync detection.
    case checksumReport(ChecksumReport)
    /// Sent when nothing else was sent for a while so the link does not look dead.
    case keepAlive(KeepAlive)
    /// A player left: their inputs are "disconnected" from a frame on.
    case disconnectNotice(DisconnectNotice)
    /// Asks the receiver for a confirmed game state (desync recovery, late join).
    case stateRequest(StateRequest)
    /// A serialised confirmed game state.
    case stateTransfer(StateTransfer)

    /// A rough size in bytes for statistics (payload plus a small header); not an exact wire size.
    public func estimatedSize(inputSize: Int) -> Int {
        switch self {
        case .syncRequest, .syncReply, .keepAlive: return 8
        case .input(let message): return 20 + message.inputs.count * inputSize
        case .inputAck: return 16
        case .qualityReport: return 20
        case .qualityReply: return 12
        case .checksumReport: return 16
        case .disconnectNotice: return 10
        case .stateRequest: return 8
        case .stateTransfer(let transfer): return 20 + transfer.state.count
        }
    }
}

/// Handshake probe.
public struct SyncRequest: Sendable, Hashable {
    /// A random number the reply must echo.
    public var nonce: UInt32
    /// Creates a probe.
    public init(nonce: UInt32) { self.nonce = nonce }
}

/// Handshake answer.
public struct SyncReply: Sendable, Hashable {
    /// The nonce of the request being answered.
    public var nonce: UInt32
    /// Creates an answer.
    public init(nonce: UInt32) { self.nonce = nonce }
}

/// Where the inputs of an ``InputMessage`` come from, which decides how much they are trusted.
public enum InputOrigin: UInt8, Sendable, Hashable {
    /// A player's own peer. Final in a mesh; provisional when the session has a relay.
    case peer = 0
    /// The relay (or a host feeding spectators): final, replaces anything else for those frames.
    case authoritative = 1
    /// Authoritative, and the relay substituted it for an input that came too late.
    case substituted = 2
    /// Authoritative: the player was disconnected for these frames (the inputs are zero).
    case disconnected = 3
}

/// A run of consecutive inputs of one player, plus the sender's acknowledgement and frames.
///
/// Senders repeat every input the receiver has not acknowledged yet, so a lost message costs
/// nothing but a little delay. Receivers accept a run only if it continues what they have.
@PublicMemberwiseInit
public struct InputMessage: Sendable, Hashable {
    /// The player these inputs belong to.
    public var player: PlayerHandle
    /// How far to trust them. Only a session's configured relay may send anything but ``InputOrigin/peer``.
    public var origin: InputOrigin = .peer
    /// The frame of `inputs[0]`.
    public var startFrame: Frame
    /// Consecutive inputs from ``startFrame`` on.
    public var inputs: [GameInput]
    /// The newest frame of the *receiver's* inputs the sender holds without gaps (``nullFrame`` if none).
    public var ackFrame: Frame
    /// The newest frame for which the sender holds every player's input (its confirmed frame).
    public var confirmedFrame: Frame
    /// The sender's current frame (for time sync).
    public var senderFrame: Frame

    /// The frame of the last input, or `startFrame - 1` when empty.
    public var endFrame: Frame { startFrame + inputs.count - 1 }
}

/// Acknowledgement and frame status without inputs (spectators, stalled peers).
@PublicMemberwiseInit
public struct InputAck: Sendable, Hashable {
    /// The newest frame of the receiver's inputs the sender holds without gaps.
    public var ackFrame: Frame
    /// The sender's confirmed frame.
    public var confirmedFrame: Frame
    /// The sender's current frame.
    public var senderFrame: Frame
}

/// Ping with the figures time sync needs.
@PublicMemberwiseInit
public struct QualityReport: Sendable, Hashable {
    /// The sender's clock (milliseconds) when sent; echoed back in ``QualityReply``.
    public var sentAtMs: UInt64
    /// The sender's current frame.
    public var frame: Frame
    /// The sender's local frame advantage: how many frames the receiver is estimated to be ahead of the sender.
    public var frameAdvantage: Int
}

/// Pong.
public struct QualityReply: Sendable, Hashable {
    /// ``QualityReport/sentAtMs`` of the report answered.
    public var echoedSentAtMs: UInt64
    /// Creates a reply.
    public init(echoedSentAtMs: UInt64) { self.echoedSentAtMs = echoedSentAtMs }
}

/// The checksum of the game state at the start of a confirmed frame.
@PublicMemberwiseInit
public struct ChecksumReport: Sendable, Hashable {
    /// The frame whose starting state was hashed.
    public var frame: Frame
    /// ``Game/checksum()`` of that state.
    public var checksum: UInt64
}

/// Keeps a quiet link alive.
public struct KeepAlive: Sendable, Hashable {
    /// Creates a keep-alive.
    public init() {}
}

/// A player is disconnected from ``frame`` on.
///
/// Between peers this is the sender's proposal (every peer proposes the frame after the last
/// input it holds; all agree on the smallest); from the relay it is final.
@PublicMemberwiseInit
public struct DisconnectNotice: Sendable, Hashable {
    /// The player who left.
    public var player: PlayerHandle
    /// The first frame whose input is "disconnected".
    public var frame: Frame
}

/// Asks for a confirmed state.
public struct StateRequest: Sendable, Hashable {
    /// The requester's newest confirmed frame, a hint for the sender.
    public var confirmedFrame: Frame
    /// Creates a request.
    public init(confirmedFrame: Frame) { self.confirmedFrame = confirmedFrame }
}

/// A confirmed state in the game's own serialisation.
@PublicMemberwiseInit
public struct StateTransfer: Sendable, Hashable {
    /// The frame the state belongs to (the state before that frame is simulated).
    public var frame: Frame
    /// The state's checksum, so the receiver can verify its decoding.
    public var checksum: UInt64
    /// The serialised state.
    public var state: [UInt8]
}

/// A message paired with the endpoint it goes to.
@PublicMemberwiseInit
public struct OutgoingMessage: Sendable, Hashable {
    /// The destination.
    public var peer: PeerID
    /// The message.
    public var message: RollbackMessage
}
