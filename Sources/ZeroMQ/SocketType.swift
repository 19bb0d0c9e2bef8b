import CZeroMQ

/// The non-draft ZeroMQ socket types.
public enum SocketType: Sendable, CaseIterable, CustomStringConvertible {
    case pair, pub, sub, req, rep, dealer, router, pull, push, xpub, xsub, stream

    /// The libzmq constant for this type.
    public var rawValue: Int32 {
        switch self {
        case .pair: return ZMQ_PAIR
        case .pub: return ZMQ_PUB
        case .sub: return ZMQ_SUB
        case .req: return ZMQ_REQ
        case .rep: return ZMQ_REP
        case .dealer: return ZMQ_DEALER
        case .router: return ZMQ_ROUTER
        case .pull: return ZMQ_PULL
        case .push: return ZMQ_PUSH
        case .xpub: return ZMQ_XPUB
        case .xsub: return ZMQ_XSUB
        case .stream: return ZMQ_STREAM
        }
    }

    public var description: String {
        switch self {
        case .pair: return "PAIR"
        case .pub: return "PUB"
        case .sub: return "SUB"
        case .req: return "REQ"
        case .rep: return "REP"
        case .dealer: return "DEALER"
        case .router: return "ROUTER"
        case .pull: return "PULL"
        case .push: return "PUSH"
        case .xpub: return "XPUB"
        case .xsub: return "XSUB"
        case .stream: return "STREAM"
        }
    }
}
