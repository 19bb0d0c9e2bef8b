import NetplayWire
import ZeroMQ

/// Why a request to a service did not produce a successful reply.
public enum ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No reply within the timeout (the service is down, unreachable, or too slow).
    case timeout(endpoint: String, seconds: Double)
    /// The socket failed (bad endpoint, context terminated).
    case transport(ZMQError)
    /// The request could not be encoded, or the reply could not be decoded.
    case wire(WireError)
    /// The service answered with an `Error`.
    case remote(ErrorReply)
    /// The service answered with a body the caller did not expect.
    case unexpectedReply(String)

    public var description: String {
        switch self {
        case .timeout(let endpoint, let seconds):
            "no reply from \(endpoint) within \(seconds.formatted()) s (is the service running?)"
        case .transport(let error): "transport error: \(error)"
        case .wire(let error): "wire error: \(error)"
        case .remote(let reply): "\(reply.code.protoName): \(reply.message)"
        case .unexpectedReply(let name): "unexpected reply \(name)"
        }
    }
}

extension Double {
    fileprivate func formatted() -> String {
        self == rounded() ? String(Int(self)) : String(self)
    }
}
