import MemberwiseInit

/// One TCP connection of the tunnel listener: which listening socket took it (0: the main port;
/// others: a session's plain port) and the socket's routing id for it.
@PublicMemberwiseInit
public struct TunnelConnection: Hashable, Sendable, CustomStringConvertible {
    /// The listening socket (as the transport numbers them).
    public let listener: Int
    /// The connection's routing id on that socket.
    public let id: UInt64

    public var description: String { "\(listener)/\(id)" }
}

/// Why the tunnel closed a connection it was not asked to close: each is counted, so an operator
/// sees what strangers and broken clients send.
public enum TunnelCloseReason: String, Sendable, CaseIterable {
    /// The first 16 bytes were no RATS or RATL message.
    case badMagic = "bad_magic"
    /// A plain RetroArch client (a netplay header, no tunnel prefix) on the main port: told the
    /// server is out of date.
    case notTunnel = "not_tunnel"
    /// The first 16 bytes did not arrive in time.
    case prefixTimeout = "prefix_timeout"
    /// A client named a session the relay does not hold.
    case unknownSession = "unknown_session"
    /// A host claimed a link the relay does not hold.
    case unknownLink = "unknown_link"
    /// A host asked for a session beyond the session limit.
    case sessionLimit = "session_limit"
    /// A client joined a session that holds its limit of clients or waiting links.
    case clientLimit = "client_limit"
    /// More connections than the relay accepts.
    case connectionLimit = "connection_limit"
    /// More connections from one address than the relay accepts.
    case addressLimit = "address_limit"
    /// A waiting client sent more than may be buffered before its link exists.
    case bufferOverflow = "buffer_overflow"
    /// A waiting client's bytes would take the waiting clients together past the relay's buffer
    /// budget (``TunnelConfiguration/maxBufferedTotalBytes``).
    case bufferBudget = "buffer_budget"
    /// The host did not open a client's link in time.
    case linkTimeout = "link_timeout"
    /// The host's control connection stayed silent (no ping echo).
    case hostTimeout = "host_timeout"
    /// The host sent something its control connection does not carry.
    case badControlMessage = "bad_control_message"
    /// A connection could not take what was sent to it: over 8 MiB queued (a reader that stops
    /// reading; piped bytes slow their writer down instead, see ``TunnelServer``).
    case slowReader = "slow_reader"
    /// The other end of a link closed.
    case partnerClosed = "partner_closed"
    /// The host's session ended (its control connection closed).
    case sessionEnded = "session_ended"
    /// The relay is shutting down.
    case shutdown = "shutdown"
}

/// Something the tunnel did that the service logs and publishes.
public enum TunnelEvent: Sendable {
    /// A host opened a session.
    case sessionOpened(session: TunnelID, join: String, directPort: UInt16?, hostAddress: String)
    /// A client's link to the host is up.
    case clientLinked(session: TunnelID, link: TunnelID, clientAddress: String, clients: Int)
    /// A session ended; its last report.
    case sessionClosed(session: TunnelID, reason: TunnelCloseReason?, report: TunnelSessionReport)
    /// A connection was closed for `reason`.
    case refused(reason: TunnelCloseReason, address: String)
}

/// What the tunnel needs from the sockets under it: sending and closing connections, and plain
/// per-session ports. Calls come on the thread that drives the ``TunnelCore``.
public protocol TunnelTransport: AnyObject {
    /// Queues `bytes` to `connection`; false when it cannot take them (gone, or its queue is full).
    func send(_ bytes: UnsafeRawBufferPointer, to connection: TunnelConnection) -> Bool
    /// Closes `connection` (after what was queued to it).
    func close(_ connection: TunnelConnection)
    /// Opens a plain port for `session`: its listener number and port, or nil when none is free.
    func openSessionPort(for session: TunnelID) -> (listener: Int, port: UInt16)?
    /// Closes a plain session port.
    func closeSessionPort(listener: Int)
    /// Reports what happened.
    func tunnelEvent(_ event: TunnelEvent)
}
