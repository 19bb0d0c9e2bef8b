import CZeroMQ
import Synchronization

/// A transport event of a monitored socket (`zmq_socket_monitor`).
public struct MonitorEvent: Sendable, Equatable, CustomStringConvertible {
    /// What happened.
    public enum Kind: Sendable, Equatable {
        case connected, connectDelayed, connectRetried, listening, bindFailed
        case accepted, acceptFailed, closed, closeFailed, disconnected, monitorStopped
        case handshakeFailedNoDetail, handshakeSucceeded, handshakeFailedProtocol, handshakeFailedAuth
        case unknown(UInt16)

        init(_ raw: UInt16) {
            switch Int32(raw) {
            case ZMQ_EVENT_CONNECTED: self = .connected
            case ZMQ_EVENT_CONNECT_DELAYED: self = .connectDelayed
            case ZMQ_EVENT_CONNECT_RETRIED: self = .connectRetried
            case ZMQ_EVENT_LISTENING: self = .listening
            case ZMQ_EVENT_BIND_FAILED: self = .bindFailed
            case ZMQ_EVENT_ACCEPTED: self = .accepted
            case ZMQ_EVENT_ACCEPT_FAILED: self = .acceptFailed
            case ZMQ_EVENT_CLOSED: self = .closed
            case ZMQ_EVENT_CLOSE_FAILED: self = .closeFailed
            case ZMQ_EVENT_DISCONNECTED: self = .disconnected
            case ZMQ_EVENT_MONITOR_STOPPED: self = .monitorStopped
            case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL: self = .handshakeFailedNoDetail
            case ZMQ_EVENT_HANDSHAKE_SUCCEEDED: self = .handshakeSucceeded
            case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL: self = .handshakeFailedProtocol
            case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: self = .handshakeFailedAuth
            default: self = .unknown(raw)
            }
        }
    }

    /// The event.
    public let kind: Kind
    /// The event's value: a file descriptor, an errno, or a reconnect interval, per libzmq's docs.
    public let value: UInt32
    /// The endpoint the event concerns.
    public let endpoint: String

    public var description: String { "\(kind) \(endpoint) (\(value))" }
}

/// Receives the transport events of one socket. Create it with ``Socket/monitor(events:)`` on
/// the socket's thread and read it on the same thread (poll ``socket`` like any other).
public final class SocketMonitor {
    private static let counter = Atomic<UInt64>(0)

    /// The PAIR socket that receives the events; add it to a ``Poller`` to wait for events.
    public let socket: Socket
    /// The inproc endpoint libzmq publishes events on.
    public let endpoint: String
    private weak var monitored: Socket?

    init(monitoring target: Socket, events: Int32) throws(ZMQError) {
        let id = SocketMonitor.counter.add(1, ordering: .relaxed).newValue
        endpoint = "inproc://netplay-monitor-\(id)"
        try check(zmq_socket_monitor(try target.raw, endpoint, events))
        socket = try target.context.socket(.pair)
        try socket.set(.linger(milliseconds: 0))
        try socket.connect(endpoint)
        monitored = target
    }

    deinit { close() }

    /// Stops monitoring and closes ``socket``: a context is terminated only once every socket
    /// made in it is closed, so a monitor must be closed before its context ends. Idempotent.
    public func close() {
        if let handle = monitored?.handle { zmq_socket_monitor(handle, nil, 0) }
        monitored = nil
        socket.close()
    }

    /// Waits up to `timeout` milliseconds for the next event; `nil` when none arrived in time.
    public func next(timeout milliseconds: Int32) throws(ZMQError) -> MonitorEvent? {
        try socket.set(.receiveTimeout(milliseconds: milliseconds))
        let header: [UInt8]
        do { header = try socket.receive() } catch .wouldBlock { return nil }
        let address = try socket.receiveString()
        guard header.count >= 6 else { return nil }
        let raw = UInt16(header[0]) | UInt16(header[1]) << 8
        let value = UInt32(header[2]) | UInt32(header[3]) << 8 | UInt32(header[4]) << 16 | UInt32(header[5]) << 24
        return MonitorEvent(kind: .init(raw), value: value, endpoint: address)
    }
}

extension Socket {
    /// Starts monitoring this socket's transport events (all of them by default).
    public func monitor(events: Int32 = ZMQ_EVENT_ALL) throws(ZMQError) -> SocketMonitor {
        try SocketMonitor(monitoring: self, events: events)
    }
}
