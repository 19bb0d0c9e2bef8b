/// One relayed RetroArch session: the host's control connection, the clients waiting for a link
/// and the links piping bytes, with the health read from the streams.
final class TunnelSession {
    /// A client and (once the host claimed it) the host's connection for it.
    final class Link {
        let id: TunnelID
        let client: TunnelConnection
        let clientAddress: [UInt8]
        let createdMs: UInt64
        var host: TunnelConnection?
        /// Whether the host was told of it (`RATL`): from then on it is one of the host's pending
        /// connections until the host claims it, even after its client goes.
        var announced = false
        /// The client's bytes before the link exists.
        var buffered: [UInt8] = []
        /// The part of ``buffered`` counted against the relay's total budget: all but the first
        /// ``TunnelCore/unchargedBytesPerClient`` bytes, so a client's header always fits.
        var chargedBytes: Int { max(0, buffered.count - TunnelCore.unchargedBytesPerClient) }
        /// Host to client, and client to host.
        var fromHost = NetplayStreamMeter()
        var toHost = NetplayStreamMeter()
        var bytesFromHost: UInt64 = 0
        var bytesToHost: UInt64 = 0
        /// When the host's (or the client's) last unanswered PING_REQUEST went through.
        var hostPingAtMs: UInt64?
        var clientPingAtMs: UInt64?
        var rttMs: UInt32 = 0

        init(id: TunnelID, client: TunnelConnection, clientAddress: [UInt8], createdMs: UInt64) {
            self.id = id
            self.client = client
            self.clientAddress = clientAddress
            self.createdMs = createdMs
        }
    }

    let id: TunnelID
    let host: TunnelConnection
    let hostAddress: [UInt8]
    let openedMs: UInt64
    let openedUnixMs: UInt64
    var port: (listener: Int, port: UInt16)?
    var links: [TunnelID: Link] = [:]
    /// Links announced to the host whose client hung up before the host claimed them, with the
    /// time they are forgotten (the link timeout). RetroArch's host still holds a pending
    /// connection for each until it links it, so they count as pending (``pendingCount``).
    var abandoned: [TunnelID: UInt64] = [:]
    /// `RATL`s sent to the host, and the `RATA` address requests it sent back: an honest host
    /// asks once per link it was told of.
    var linksAnnounced: UInt64 = 0
    var addressRequests: UInt64 = 0
    /// Control bytes not yet a whole message.
    var control: [UInt8] = []
    var lastHeardMs: UInt64
    var lastPingMs: UInt64
    var pingSentMs: UInt64?
    var hostRTTMs: UInt32 = 0
    /// Clients linked since it opened (64 bits: a stranger can be host and client of its own
    /// session, and a 32-bit count of its claims trapped when it wrapped).
    var clientsJoined: UInt64 = 0
    /// Its clients' connections the tunnel closed for a fault (limits, timeouts, slow readers).
    var refused: UInt64 = 0
    var lastResyncUnixMs: UInt64 = 0
    /// What closed links showed (added when a link goes).
    var closed = TunnelSessionReport.Counters()
    /// What the streams told about the host and its content, kept when links go.
    var nick = "", coreName = "", coreVersion = "", contentCRC: UInt32 = 0, lastFrame: UInt32 = 0, linkRTTMs: UInt32 = 0

    init(id: TunnelID, host: TunnelConnection, hostAddress: [UInt8], nowMs: UInt64, nowUnixMs: UInt64) {
        self.id = id
        self.host = host
        self.hostAddress = hostAddress
        self.openedMs = nowMs
        self.openedUnixMs = nowUnixMs
        self.lastHeardMs = nowMs
        self.lastPingMs = nowMs
    }

    /// Clients waiting for their link.
    var waitingCount: Int { links.values.count { $0.host == nil } }
    /// The host's pending connections: waiting clients and abandoned links (RetroArch keeps 8).
    var pendingCount: Int { waitingCount + abandoned.count }
    var linkedCount: Int { links.values.count { $0.host != nil } }

    /// The counters of `link` (to fold into `closed` when it goes).
    static func counters(of link: Link) -> TunnelSessionReport.Counters {
        let out = link.fromHost.observation, back = link.toHost.observation
        return TunnelSessionReport.Counters(
            bytesFromHost: link.bytesFromHost, bytesToHost: link.bytesToHost, inputs: out.inputs + back.inputs,
            crcChecks: out.crcChecks, resyncRequests: back.resyncRequests, savestates: out.savestates)
    }

    /// Takes what `link`'s streams told about the host and its content.
    func learn(from link: Link) {
        if let name = link.fromHost.observation.nick { nick = name }
        // A client's INFO names the host's content only once the host played on with it (sent
        // inputs, a CRC or a state after it): any joiner could otherwise rename the session's
        // core and content in the lobby, even one the host turned away.
        let back = link.fromHost.observation
        let hostPlayedOn = back.inputs > 0 || back.crcChecks > 0 || back.savestates > 0
        if let info = (hostPlayedOn ? link.toHost.observation.info : nil) ?? back.info {
            (coreName, coreVersion, contentCRC) = (info.core, info.version, info.crc)
        }
        lastFrame = max(lastFrame, link.fromHost.observation.lastCRCFrame, link.fromHost.observation.lastHostFrame)
        if link.rttMs > 0 { linkRTTMs = link.rttMs }
    }

    /// The session's report now.
    func report(join: String, directEndpoint: String) -> TunnelSessionReport {
        var counters = closed
        for link in links.values.sorted(by: { $0.createdMs < $1.createdMs }) {
            counters.add(Self.counters(of: link))
            learn(from: link)
        }
        return TunnelSessionReport(
            session: id, join: join, directEndpoint: directEndpoint, hostNick: nick, coreName: coreName, coreVersion: coreVersion,
            contentCRC: contentCRC, clients: linkedCount, pendingClients: waitingCount, counters: counters, lastFrame: lastFrame,
            hostRTTMs: hostRTTMs, linkRTTMs: linkRTTMs, openedAtUnixMs: openedUnixMs, lastResyncAtUnixMs: lastResyncUnixMs,
            clientsJoined: UInt32(clamping: clientsJoined), refusedConnections: UInt32(clamping: refused))
    }
}

/// A relayed session's state and health, as reported to the coordinator, telemetry and netplayctl.
public struct TunnelSessionReport: Sendable, Equatable {
    /// Byte and message counts of a session's links.
    public struct Counters: Sendable, Equatable {
        public var bytesFromHost: UInt64 = 0
        public var bytesToHost: UInt64 = 0
        public var inputs: UInt64 = 0
        public var crcChecks: UInt64 = 0
        public var resyncRequests: UInt64 = 0
        public var savestates: UInt64 = 0

        mutating func add(_ other: Counters) {
            bytesFromHost += other.bytesFromHost
            bytesToHost += other.bytesToHost
            inputs += other.inputs
            crcChecks += other.crcChecks
            resyncRequests += other.resyncRequests
            savestates += other.savestates
        }
    }

    /// The session id.
    public var session: TunnelID
    /// "HOST|PORT|SESSIONID".
    public var join: String
    /// "HOST:PORT" of its plain port, "" without one.
    public var directEndpoint: String
    /// The host's nickname, core and content, once the stream told them.
    public var hostNick: String
    public var coreName: String
    public var coreVersion: String
    public var contentCRC: UInt32
    /// Clients linked, and waiting for a link.
    public var clients: Int
    public var pendingClients: Int
    /// What the links carried.
    public var counters: Counters
    /// The frame of the last CRC check.
    public var lastFrame: UInt32
    /// The host's round trip to the relay (RATP), and the longest host-client round trip seen in
    /// the stream (netplay's own pings), in milliseconds; 0 until measured.
    public var hostRTTMs: UInt32
    public var linkRTTMs: UInt32
    /// When it opened, and when a client last asked for a resync (0: never).
    public var openedAtUnixMs: UInt64
    public var lastResyncAtUnixMs: UInt64
    /// Clients linked since it opened.
    public var clientsJoined: UInt32
    /// Its connections closed for a fault.
    public var refusedConnections: UInt32
}
