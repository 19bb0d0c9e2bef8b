import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failure reported by libzmq, classified so callers can switch on it instead of parsing text.
///
/// Every throwing call of the binding throws exactly this type (typed throws), so a reactor can
/// treat ``wouldBlock`` and ``interrupted`` as routine and everything else as a real failure.
public enum ZMQError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The operation would block (`EAGAIN`): non-blocking send/receive with nothing to do,
    /// or a send/receive timeout expired.
    case wouldBlock
    /// A signal interrupted the call (`EINTR`); retrying is safe.
    case interrupted
    /// The context was terminated (`ETERM`); the socket must be closed.
    case terminated
    /// A ROUTER with ROUTER_MANDATORY was asked to send to an unknown peer (`EHOSTUNREACH`).
    case hostUnreachable
    /// The endpoint is already bound by someone else (`EADDRINUSE`).
    case addressInUse
    /// The endpoint's address does not exist on this machine (`EADDRNOTAVAIL`).
    case addressNotAvailable
    /// The endpoint's transport is unknown or unsupported (`EPROTONOSUPPORT`).
    case protocolNotSupported
    /// The transport is incompatible with the socket type (`ENOCOMPATPROTO`).
    case incompatibleProtocol
    /// The socket type does not support the operation (`ENOTSUP`).
    case notSupported
    /// The operation is not valid in the socket's current state (`EFSM`), e.g. a REQ sending twice.
    case invalidState
    /// An argument was invalid (`EINVAL`): a malformed endpoint, a bad option value.
    case invalidArgument
    /// The process ran out of file descriptors or sockets (`EMFILE`).
    case tooManyOpenFiles
    /// The endpoint names a network device that does not exist (`ENODEV`).
    case noDevice
    /// The socket handle is not valid (`ENOTSOCK`).
    case notASocket
    /// Any other libzmq error number, with libzmq's text.
    case other(code: Int32, message: String)

    /// Classifies an `errno` value as reported by `zmq_errno()`.
    public init(errno code: Int32) {
        switch code {
        case EAGAIN: self = .wouldBlock
        case EINTR: self = .interrupted
        case ETERM: self = .terminated
        case EHOSTUNREACH: self = .hostUnreachable
        case EADDRINUSE: self = .addressInUse
        case EADDRNOTAVAIL: self = .addressNotAvailable
        case EPROTONOSUPPORT: self = .protocolNotSupported
        case ENOCOMPATPROTO: self = .incompatibleProtocol
        case ENOTSUP: self = .notSupported
        case EFSM: self = .invalidState
        case EINVAL: self = .invalidArgument
        case EMFILE: self = .tooManyOpenFiles
        case ENODEV: self = .noDevice
        case ENOTSOCK: self = .notASocket
        default: self = .other(code: code, message: String(cString: zmq_strerror(code)))
        }
    }

    /// The error for the calling thread's last failed libzmq call.
    static var last: ZMQError { ZMQError(errno: zmq_errno()) }

    /// True for errors that are part of normal operation (retry or try later).
    public var isTransient: Bool {
        self == .wouldBlock || self == .interrupted
    }

    public var description: String {
        switch self {
        case .wouldBlock: return "operation would block"
        case .interrupted: return "interrupted by a signal"
        case .terminated: return "context terminated"
        case .hostUnreachable: return "peer is unknown or gone"
        case .addressInUse: return "address already in use"
        case .addressNotAvailable: return "address not available on this machine"
        case .protocolNotSupported: return "transport not supported"
        case .incompatibleProtocol: return "transport incompatible with socket type"
        case .notSupported: return "operation not supported by this socket type"
        case .invalidState: return "operation invalid in the socket's current state"
        case .invalidArgument: return "invalid argument (check the endpoint or option value)"
        case .tooManyOpenFiles: return "too many open files or sockets"
        case .noDevice: return "no such network device"
        case .notASocket: return "not a valid socket"
        case .other(let code, let message): return "zmq error \(code): \(message)"
        }
    }
}

/// Runs a libzmq call returning an `Int32` and converts `-1` into a typed error.
@inline(__always)
@discardableResult
func check(_ result: Int32) throws(ZMQError) -> Int32 {
    if result == -1 { throw ZMQError.last }
    return result
}
