import NetplayWire
import ZeroMQ

/// The hardening every socket of the toolkit gets (the design's socket rules): linger, a maximum
/// message size, high-water marks, ROUTER_MANDATORY on ROUTERs, ZMTP heartbeats, TCP keepalive,
/// and CurveZMQ when the cluster has keys.
///
/// Heartbeats are the connecting side's job. A connecting socket PINGs every
/// ``heartbeatIntervalMs``, drops a connection silent for ``heartbeatTimeoutMs`` after a PING, and
/// its PINGs carry a TTL telling the bound peer to drop the connection after the same silence.
/// A bound socket answers PINGs (libzmq always does) but sends none: libzmq 4.3 keeps an I/O
/// thread's timers in one ordered map and cancels one by walking it from the start, so a
/// server PINGing n connections walks n timers for each of the n replies — at 2,000 relay
/// connections that stalled the relay's I/O thread for tens of milliseconds every interval
/// (docs/relay.md). A peer that never PINGs is still dropped by the kernel's TCP keepalive and
/// retransmission timeouts set here.
public enum SocketDefaults {
    /// Which end of its connections a socket is; heartbeats differ (see the type's notes).
    public enum End: Sendable {
        /// The socket binds and peers connect to it (a service's ROUTER, PUB or PULL).
        case binds
        /// The socket connects to a bound peer (a DEALER, SUB or PUSH of a client).
        case connects
    }

    /// Milliseconds unsent messages may linger at close.
    public static let lingerMilliseconds: Int32 = 500
    /// Largest inbound message: the wire limit plus room for framing.
    public static let maxMessageBytes = Int64(WireLimits.default.maxFrameBytes + 64 * 1024)
    /// Queue limit per peer in each direction.
    public static let highWaterMark: Int32 = 10_000
    /// ZMTP PING interval of a connecting socket (bound sockets send none).
    public static let heartbeatIntervalMs: Int32 = 2_000
    /// ZMTP: a connection silent this long after a PING is dropped, by the connecting socket
    /// (timeout) and by the bound peer (the PING's TTL).
    public static let heartbeatTimeoutMs: Int32 = 6_000
    /// TCP keepalive: seconds a connection may be idle before the kernel probes it.
    public static let keepaliveIdleSeconds: Int32 = 10
    /// TCP keepalive: seconds between unanswered probes.
    public static let keepaliveIntervalSeconds: Int32 = 5
    /// TCP keepalive: unanswered probes before the kernel drops the connection.
    public static let keepaliveProbes: Int32 = 3
    /// Milliseconds sent data may stay unacknowledged before the kernel drops the connection
    /// (TCP_USER_TIMEOUT; the default would retransmit for about 15 minutes).
    public static let unacknowledgedTimeoutMs: Int32 = 20_000

    /// The options a socket at `end` gets, in the order they are set.
    public static func options(for type: SocketType, end: End) -> [SocketOption] {
        var options: [SocketOption] = [
            .linger(milliseconds: lingerMilliseconds),
            .maxMessageSize(bytes: maxMessageBytes),
            .sendHighWaterMark(highWaterMark),
            .receiveHighWaterMark(highWaterMark),
            .tcpKeepalive(true),
            .tcpKeepaliveIdle(seconds: keepaliveIdleSeconds),
            .tcpKeepaliveInterval(seconds: keepaliveIntervalSeconds),
            .tcpKeepaliveCount(keepaliveProbes),
            .tcpMaxRetransmitTimeout(milliseconds: unacknowledgedTimeoutMs),
        ]
        switch end {
        case .connects:
            options += [.heartbeatInterval(milliseconds: heartbeatIntervalMs),
                        .heartbeatTimeout(milliseconds: heartbeatTimeoutMs),
                        .heartbeatTTL(milliseconds: heartbeatTimeoutMs)]
        case .binds:
            options.append(.heartbeatInterval(milliseconds: 0))
        }
        if type == .router { options.append(.routerMandatory(true)) }
        return options
    }

    /// Applies the common options for `end` to `socket`.
    public static func apply(to socket: Socket, end: End) throws(ZMQError) {
        try socket.set(options(for: socket.type, end: end))
    }

    /// A hardened socket that will bind: CURVE server when `curve` is set.
    public static func server(_ type: SocketType, context: Context = .shared, curve: CurveKeyPair?) throws(ZMQError) -> Socket {
        let socket = try context.socket(type)
        try apply(to: socket, end: .binds)
        if let curve { try socket.makeCurveServer(curve) }
        return socket
    }

    /// A hardened socket connected to `endpoint` from outside the cluster (a tool, a player):
    /// linger 0, so closing never waits on unsent requests; with `serverKey`, a CurveZMQ client
    /// under `keys` (a fresh pair when nil). `configure` runs before the connect (subscriptions,
    /// `immediate`).
    public static func connectedClient(_ type: SocketType, to endpoint: String, serverKey: [UInt8]?, keys: CurveKeyPair? = nil,
                                       context: Context = .shared, configure: (Socket) throws -> Void = { _ in }) throws -> Socket {
        let socket = try context.socket(type)
        try apply(to: socket, end: .connects)
        try socket.set(.linger(milliseconds: 0))
        if let serverKey { try socket.makeCurveClient(serverKey: serverKey, keys: try keys ?? .generate()) }
        try configure(socket)
        try socket.connect(endpoint)
        return socket
    }

    /// A hardened socket that will connect: CURVE client of the cluster key when `curve` is set.
    public static func client(_ type: SocketType, context: Context = .shared, curve: CurveKeyPair?,
                              serverKey: [UInt8]? = nil) throws(ZMQError) -> Socket {
        let socket = try context.socket(type)
        try apply(to: socket, end: .connects)
        if let curve { try socket.makeCurveClient(serverKey: serverKey ?? curve.publicKey, keys: curve) }
        return socket
    }
}
