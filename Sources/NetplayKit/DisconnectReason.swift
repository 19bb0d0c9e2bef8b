import NetplayWire

/// Why a match ended or could not continue.
public enum DisconnectReason: Sendable, Hashable, CustomStringConvertible {
    /// This side left.
    case left
    /// The host kicked this peer.
    case kicked(String)
    /// The host ended the session, or everyone left.
    case sessionEnded(String)
    /// The relay was unreachable for too long (reconnection gave up).
    case relayLost(String)
    /// The relay refused the ticket (forged, expired, wrong relay) or the join was refused.
    case refused(ErrorCode, String)
    /// Another connection took this participant's place.
    case replaced
    /// Anything else.
    case failed(String)

    public var description: String {
        switch self {
        case .left: "left"
        case .kicked(let why): "kicked: \(why)"
        case .sessionEnded(let why): "session ended: \(why)"
        case .relayLost(let why): "relay lost: \(why)"
        case .refused(let code, let why): "refused (\(code.protoName)): \(why)"
        case .replaced: "replaced by another connection"
        case .failed(let why): "failed: \(why)"
        }
    }
}
