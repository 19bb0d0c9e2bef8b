/// What the service's reactor reads of the tunnel: the sessions' reports and the counters, as the
/// tunnel's thread last published them (every 250 ms, and within 50 ms when a session opens, links
/// a client or ends).
public struct TunnelSnapshot: Sendable {
    /// Every session's report, by id.
    public var reports: [TunnelSessionReport] = []
    /// Connections closed by the tunnel, by reason.
    public var closes: [TunnelCloseReason: UInt64] = [:]
    /// Bytes piped since the start.
    public var bytesPiped: UInt64 = 0
    /// Sessions, piping links, open connections.
    public var sessions = 0
    public var links = 0
    public var connections = 0
    /// Snapshots published before this one since the tunnel started.
    public var generation: UInt64 = 0

    /// An empty snapshot.
    public init() {}
}
