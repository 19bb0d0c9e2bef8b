import NetplayWire
import ZeroMQ

/// The hardening every socket of the toolkit gets (the design's socket rules): linger, a maximum
/// message size, high-water marks, ROUTER_MANDATORY on ROUTERs, ZMTP heartbeats, TCP keepalive,
/// and CurveZMQ when the cluster has keys.
public enum SocketDefaults {
    /// Milliseconds unsent messages may linger at close.
    public static let lingerMilliseconds: Int32 = 500
    /// Largest inbound message: the wire limit plus room for framing.
    public static let maxMessageBytes = Int64(WireLimits.default.maxFrameBytes + 64 * 1024)
    /// Queue limit per peer in each direction.
    public static let highWaterMark: Int32 = 10_000
    /// ZMTP PING interval.
    public static let heartbeatIntervalMs: Int32 = 2_000
    /// ZMTP: drop a connection silent this long after a PING.
    public static let heartbeatTimeoutMs: Int32 = 6_000

    /// Applies the common options to `socket`.
    public static func apply(to socket: Socket) throws(ZMQError) {
        try socket.set([
            .linger(milliseconds: lingerMilliseconds),
            .maxMessageSize(bytes: maxMessageBytes),
            .sendHighWaterMark(highWaterMark),
            .receiveHighWaterMark(highWaterMark),
            .heartbeatInterval(milliseconds: heartbeatIntervalMs),
            .heartbeatTimeout(milliseconds: heartbeatTimeoutMs),
            .heartbeatTTL(milliseconds: heartbeatTimeoutMs),
            .tcpKeepalive(true),
        ])
        if socket.type == .router {
            try socket.set(.routerMandatory(true))
        }
    }

    /// A hardened socket that will bind: CURVE server when `curve` is set.
    public static func server(_ type: SocketType, context: Context = .shared, curve: CurveKeyPair?) throws(ZMQError) -> Socket {
        let socket = try context.socket(type)
        try apply(to: socket)
        if let curve { try socket.makeCurveServer(curve) }
        return socket
    }

    /// A hardened socket that will connect: CURVE client of the cluster key when `curve` is set.
    public static func client(_ type: SocketType, context: Context = .shared, curve: CurveKeyPair?,
                              serverKey: [UInt8]? = nil) throws(ZMQError) -> Socket {
        let socket = try context.socket(type)
        try apply(to: socket)
        if let curve { try socket.makeCurveClient(serverKey: serverKey ?? curve.publicKey, keys: curve) }
        return socket
    }
}
