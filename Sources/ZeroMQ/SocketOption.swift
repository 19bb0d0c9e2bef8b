import CZeroMQ

/// A socket option with its value, set with ``Socket/set(_:)``.
///
/// Durations are in milliseconds unless the case says otherwise; `-1` means "infinite" where
/// libzmq allows it.
public enum SocketOption: Sendable, Equatable {
    /// How long pending outgoing messages are kept after close (0 drops them at once).
    case linger(milliseconds: Int32)
    /// The largest inbound message accepted; a peer sending more is disconnected (-1: no limit).
    case maxMessageSize(bytes: Int64)
    /// Outbound queue limit in messages.
    case sendHighWaterMark(Int32)
    /// Inbound queue limit in messages.
    case receiveHighWaterMark(Int32)
    /// ROUTER: fail with ``ZMQError/hostUnreachable`` instead of silently dropping to unknown peers.
    case routerMandatory(Bool)
    /// ROUTER: a new connection with a known routing id takes over the old one.
    case routerHandover(Bool)
    /// Queue messages only to completed connections.
    case immediate(Bool)
    /// TCP keepalive on or off.
    case tcpKeepalive(Bool)
    /// Seconds of idleness before TCP keepalive probes start.
    case tcpKeepaliveIdle(seconds: Int32)
    /// Seconds between TCP keepalive probes.
    case tcpKeepaliveInterval(seconds: Int32)
    /// Unanswered probes before the connection is dropped.
    case tcpKeepaliveCount(Int32)
    /// How long sent data may stay unacknowledged before the kernel drops the connection
    /// (ZMQ_TCP_MAXRT: TCP_USER_TIMEOUT on Linux; 0: the system default).
    case tcpMaxRetransmitTimeout(milliseconds: Int32)
    /// ZMTP heartbeat: send a PING this often.
    case heartbeatInterval(milliseconds: Int32)
    /// ZMTP heartbeat: drop the connection when no traffic arrives for this long after a PING.
    case heartbeatTimeout(milliseconds: Int32)
    /// ZMTP heartbeat: the time-to-live our PINGs ask the peer to apply.
    case heartbeatTTL(milliseconds: Int32)
    /// The identity a DEALER/ROUTER presents to a ROUTER peer (1 to 255 bytes).
    case routingId([UInt8])
    /// SUB: receive messages starting with this prefix (empty: everything).
    case subscribe([UInt8])
    /// SUB: stop receiving a prefix.
    case unsubscribe([UInt8])
    /// Blocking sends give up after this long with ``ZMQError/wouldBlock``.
    case sendTimeout(milliseconds: Int32)
    /// Blocking receives give up after this long with ``ZMQError/wouldBlock``.
    case receiveTimeout(milliseconds: Int32)
    /// Initial reconnect delay.
    case reconnectInterval(milliseconds: Int32)
    /// Reconnect back-off ceiling (0: no back-off).
    case reconnectIntervalMax(milliseconds: Int32)
    /// TCP connect timeout.
    case connectTimeout(milliseconds: Int32)
    /// Maximum time for the ZMTP handshake.
    case handshakeInterval(milliseconds: Int32)
    /// Keep only the last message (PUB/SUB/PUSH/PULL/DEALER).
    case conflate(Bool)
    /// ROUTER/DEALER: send an empty message to a peer on connect so the ROUTER learns it at once.
    case probeRouter(Bool)
    /// CurveZMQ: act as server (requires ``curveSecretKey(_:)``).
    case curveServer(Bool)
    /// CurveZMQ: our long-term public key (32 raw bytes).
    case curvePublicKey([UInt8])
    /// CurveZMQ: our long-term secret key (32 raw bytes).
    case curveSecretKey([UInt8])
    /// CurveZMQ client: the server's long-term public key (32 raw bytes).
    case curveServerKey([UInt8])
    /// The ZAP authentication domain.
    case zapDomain(String)
}

extension Socket {
    /// Sets one option.
    public func set(_ option: SocketOption) throws(ZMQError) {
        switch option {
        case .linger(let value): try setInt(ZMQ_LINGER, value)
        case .maxMessageSize(let value): try setInt64(ZMQ_MAXMSGSIZE, value)
        case .sendHighWaterMark(let value): try setInt(ZMQ_SNDHWM, value)
        case .receiveHighWaterMark(let value): try setInt(ZMQ_RCVHWM, value)
        case .routerMandatory(let value): try setInt(ZMQ_ROUTER_MANDATORY, value ? 1 : 0)
        case .routerHandover(let value): try setInt(ZMQ_ROUTER_HANDOVER, value ? 1 : 0)
        case .immediate(let value): try setInt(ZMQ_IMMEDIATE, value ? 1 : 0)
        case .tcpKeepalive(let value): try setInt(ZMQ_TCP_KEEPALIVE, value ? 1 : 0)
        case .tcpKeepaliveIdle(let value): try setInt(ZMQ_TCP_KEEPALIVE_IDLE, value)
        case .tcpKeepaliveInterval(let value): try setInt(ZMQ_TCP_KEEPALIVE_INTVL, value)
        case .tcpKeepaliveCount(let value): try setInt(ZMQ_TCP_KEEPALIVE_CNT, value)
        case .tcpMaxRetransmitTimeout(let value): try setInt(ZMQ_TCP_MAXRT, value)
        case .heartbeatInterval(let value): try setInt(ZMQ_HEARTBEAT_IVL, value)
        case .heartbeatTimeout(let value): try setInt(ZMQ_HEARTBEAT_TIMEOUT, value)
        case .heartbeatTTL(let value): try setInt(ZMQ_HEARTBEAT_TTL, value)
        case .routingId(let value): try setBytes(ZMQ_ROUTING_ID, value)
        case .subscribe(let value): try setBytes(ZMQ_SUBSCRIBE, value)
        case .unsubscribe(let value): try setBytes(ZMQ_UNSUBSCRIBE, value)
        case .sendTimeout(let value): try setInt(ZMQ_SNDTIMEO, value)
        case .receiveTimeout(let value): try setInt(ZMQ_RCVTIMEO, value)
        case .reconnectInterval(let value): try setInt(ZMQ_RECONNECT_IVL, value)
        case .reconnectIntervalMax(let value): try setInt(ZMQ_RECONNECT_IVL_MAX, value)
        case .connectTimeout(let value): try setInt(ZMQ_CONNECT_TIMEOUT, value)
        case .handshakeInterval(let value): try setInt(ZMQ_HANDSHAKE_IVL, value)
        case .conflate(let value): try setInt(ZMQ_CONFLATE, value ? 1 : 0)
        case .probeRouter(let value): try setInt(ZMQ_PROBE_ROUTER, value ? 1 : 0)
        case .curveServer(let value): try setInt(ZMQ_CURVE_SERVER, value ? 1 : 0)
        case .curvePublicKey(let value): try setKey(ZMQ_CURVE_PUBLICKEY, value)
        case .curveSecretKey(let value): try setKey(ZMQ_CURVE_SECRETKEY, value)
        case .curveServerKey(let value): try setKey(ZMQ_CURVE_SERVERKEY, value)
        case .zapDomain(let value): try setBytes(ZMQ_ZAP_DOMAIN, Array(value.utf8))
        }
    }

    /// Sets several options in order.
    public func set(_ options: [SocketOption]) throws(ZMQError) {
        for option in options { try set(option) }
    }

    // MARK: Typed getters

    /// Milliseconds pending messages are kept after close.
    public var linger: Int32 { get throws(ZMQError) { try intOption(ZMQ_LINGER) } }
    /// Largest inbound message accepted (-1: unlimited).
    public var maxMessageSize: Int64 { get throws(ZMQError) { try int64Option(ZMQ_MAXMSGSIZE) } }
    /// Outbound queue limit in messages.
    public var sendHighWaterMark: Int32 { get throws(ZMQError) { try intOption(ZMQ_SNDHWM) } }
    /// Inbound queue limit in messages.
    public var receiveHighWaterMark: Int32 { get throws(ZMQError) { try intOption(ZMQ_RCVHWM) } }
    /// The ZMTP heartbeat interval in milliseconds (0: off).
    public var heartbeatInterval: Int32 { get throws(ZMQError) { try intOption(ZMQ_HEARTBEAT_IVL) } }
    /// The ZMTP heartbeat timeout in milliseconds.
    public var heartbeatTimeout: Int32 { get throws(ZMQError) { try intOption(ZMQ_HEARTBEAT_TIMEOUT) } }
    /// The ZMTP heartbeat TTL our PINGs carry, in milliseconds (libzmq keeps deciseconds).
    public var heartbeatTTL: Int32 { get throws(ZMQError) { try intOption(ZMQ_HEARTBEAT_TTL) } }
    /// Whether TCP keepalive is on (-1: OS default).
    public var tcpKeepalive: Int32 { get throws(ZMQError) { try intOption(ZMQ_TCP_KEEPALIVE) } }
    /// Seconds of idleness before TCP keepalive probes (-1: OS default).
    public var tcpKeepaliveIdle: Int32 { get throws(ZMQError) { try intOption(ZMQ_TCP_KEEPALIVE_IDLE) } }
    /// Seconds between TCP keepalive probes (-1: OS default).
    public var tcpKeepaliveInterval: Int32 { get throws(ZMQError) { try intOption(ZMQ_TCP_KEEPALIVE_INTVL) } }
    /// Unanswered TCP keepalive probes before a drop (-1: OS default).
    public var tcpKeepaliveCount: Int32 { get throws(ZMQError) { try intOption(ZMQ_TCP_KEEPALIVE_CNT) } }
    /// Milliseconds sent data may stay unacknowledged (0: OS default).
    public var tcpMaxRetransmitTimeout: Int32 { get throws(ZMQError) { try intOption(ZMQ_TCP_MAXRT) } }
    /// Whether messages are queued only to completed connections.
    public var immediate: Bool { get throws(ZMQError) { try intOption(ZMQ_IMMEDIATE) != 0 } }
    /// The routing id presented to ROUTER peers.
    public var routingId: [UInt8] { get throws(ZMQError) { try bytesOption(ZMQ_ROUTING_ID, capacity: 256) } }
    /// The security mechanism in use: 0 NULL, 1 PLAIN, 2 CURVE.
    public var mechanism: Int32 { get throws(ZMQError) { try intOption(ZMQ_MECHANISM) } }
    /// The file descriptor libzmq signals for edge-triggered integration (ZMQ_FD).
    public var fileDescriptor: Int32 { get throws(ZMQError) { try intOption(ZMQ_FD) } }

    // MARK: Raw accessors

    func setInt(_ name: Int32, _ value: Int32) throws(ZMQError) {
        var value = value
        try check(zmq_setsockopt(try raw, name, &value, MemoryLayout<Int32>.size))
    }

    func setInt64(_ name: Int32, _ value: Int64) throws(ZMQError) {
        var value = value
        try check(zmq_setsockopt(try raw, name, &value, MemoryLayout<Int64>.size))
    }

    func setBytes(_ name: Int32, _ value: [UInt8]) throws(ZMQError) {
        let socket = try raw
        let result = value.withUnsafeBytes { zmq_setsockopt(socket, name, $0.baseAddress, $0.count) }
        try check(result)
    }

    func setKey(_ name: Int32, _ key: [UInt8]) throws(ZMQError) {
        guard key.count == 32 else { throw ZMQError.invalidArgument }
        try setBytes(name, key)
    }

    func intOption(_ name: Int32) throws(ZMQError) -> Int32 {
        var value: Int32 = 0
        var size = MemoryLayout<Int32>.size
        try check(zmq_getsockopt(try raw, name, &value, &size))
        return value
    }

    func int64Option(_ name: Int32) throws(ZMQError) -> Int64 {
        var value: Int64 = 0
        var size = MemoryLayout<Int64>.size
        try check(zmq_getsockopt(try raw, name, &value, &size))
        return value
    }

    func bytesOption(_ name: Int32, capacity: Int) throws(ZMQError) -> [UInt8] {
        let socket = try raw
        var buffer = [UInt8](repeating: 0, count: capacity)
        var size = capacity
        let result = buffer.withUnsafeMutableBytes { zmq_getsockopt(socket, name, $0.baseAddress, &size) }
        try check(result)
        return Array(buffer.prefix(size))
    }

    func stringOption(_ name: Int32) throws(ZMQError) -> String {
        var bytes = try bytesOption(name, capacity: 1024)
        if let end = bytes.firstIndex(of: 0) { bytes.removeSubrange(end...) }
        return String(decoding: bytes, as: UTF8.self)
    }
}
