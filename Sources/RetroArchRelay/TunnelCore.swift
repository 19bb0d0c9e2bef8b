/// The RetroArch relay ("MITM tunnel") as pure logic: it reads what arrives on each connection of
/// the tunnel listener, answers hosts' and clients' prefixes, pairs each client with the host's
/// connection for it, pipes bytes both ways and reads the stream's health on the way. Sockets,
/// time and randomness come from the caller (the ``TunnelTransport`` and the `now` arguments), so
/// every behaviour is testable without a network. Not thread-safe: one thread drives it.
///
/// A connection's life: on the main port it must send a 16-byte prefix within the prefix timeout:
/// `RATS`+zero (a host: it gets `RATS`+a new session id and becomes the session's control
/// connection), `RATS`+id (a client: the host is told `RATL`+a link id, and the client's bytes are
/// buffered), or `RATL`+link id (the host's connection for that link: the buffered bytes flow and
/// the two are piped). On a session's plain port a connection is that session's client at once.
/// Anything else, any limit passed, or any timeout closes the connection with a counted reason.
public final class TunnelCore {
    private enum State {
        case prefix(bytes: [UInt8], sinceMs: UInt64)
        case host(TunnelSession)
        case waiting(TunnelSession, TunnelSession.Link)
        case piped(TunnelSession, TunnelSession.Link, fromHost: Bool, to: TunnelConnection)
        /// Answered (or its partner hung up), to be closed once what was sent to it had time to
        /// leave, whatever the transport does with a queue it is told to close.
        case answered(closeAtMs: UInt64, reason: TunnelCloseReason)
    }

    /// How long an answered connection stays open for its answer to be written.
    static let answerFlushMs: UInt64 = 500
    /// Bytes of each waiting client kept outside the total budget: RetroArch's client sends a
    /// 24-byte header and waits, so a real client's header always fits, even while strangers fill
    /// the budget (8,192 connections hold 512 KiB of these at most).
    public static let unchargedBytesPerClient = 64

    /// The configuration (limits, join strings).
    public let configuration: TunnelConfiguration
    private unowned let transport: any TunnelTransport
    private let wallClockMs: () -> UInt64
    private var generator: any RandomNumberGenerator
    private var connections: [TunnelConnection: State] = [:]
    private var addresses: [TunnelConnection: [UInt8]] = [:]
    /// Open connections per address.
    private var perAddress: [[UInt8]: Int] = [:]
    private var sessions: [TunnelID: TunnelSession] = [:]
    private var linkSessions: [TunnelID: TunnelSession] = [:]
    private var portSessions: [Int: TunnelSession] = [:]
    private var awaitingPrefix: Set<TunnelConnection> = []
    private var answered: Set<TunnelConnection> = []
    /// The time of the event being handled.
    private var nowMs: UInt64 = 0
    /// Connections closed by the tunnel, by reason.
    public private(set) var closes: [TunnelCloseReason: UInt64] = [:]
    /// Bytes piped since the relay started.
    public private(set) var bytesPiped: UInt64 = 0
    private var scratch: [UInt8] = []
    /// Bytes waiting clients hold now beyond their first ``unchargedBytesPerClient`` each, all
    /// together (within ``TunnelConfiguration/maxBufferedTotalBytes``).
    public private(set) var bufferedBytes = 0
    /// Sessions hosted per address (within ``TunnelConfiguration/maxSessionsPerAddress``).
    private var sessionsPerAddress: [[UInt8]: Int] = [:]

    /// A tunnel over `transport`; `wallClockMs` dates the reports (Unix milliseconds).
    public init(configuration: TunnelConfiguration, transport: any TunnelTransport,
                wallClockMs: @escaping () -> UInt64, generator: any RandomNumberGenerator = SystemRandomNumberGenerator()) {
        self.configuration = configuration
        self.transport = transport
        self.wallClockMs = wallClockMs
        self.generator = generator
    }

    /// Sessions held.
    public var sessionCount: Int { sessions.count }
    /// Connections open.
    public var connectionCount: Int { connections.count }
    /// Links piping bytes.
    public var linkCount: Int { sessions.values.reduce(0) { $0 + $1.linkedCount } }

    // MARK: Events from the sockets

    /// A connection opened on `listener` from `address` (4 or 16 bytes; [] unknown).
    public func opened(_ connection: TunnelConnection, address: [UInt8], nowMs: UInt64) {
        self.nowMs = nowMs
        guard connections[connection] == nil else { return }
        guard connections.count < configuration.maxConnections else {
            refuse(connection, .connectionLimit, address: address)
            return
        }
        guard perAddress[address, default: 0] < configuration.maxConnectionsPerAddress else {
            refuse(connection, .addressLimit, address: address)
            return
        }
        perAddress[address, default: 0] += 1
        addresses[connection] = address
        if let session = portSessions[connection.listener] {
            // Tracked before it joins: a join refused (the session full) closes what it knows of.
            // Untracked, the refused connection stayed open, uncounted, without a timeout.
            connections[connection] = .prefix(bytes: [], sinceMs: nowMs)
            join(session, client: connection, rest: [], nowMs: nowMs)
        } else {
            connections[connection] = .prefix(bytes: [], sinceMs: nowMs)
            awaitingPrefix.insert(connection)
        }
    }

    /// `bytes` arrived on `connection`.
    public func received(_ bytes: UnsafeRawBufferPointer, on connection: TunnelConnection, nowMs: UInt64) {
        self.nowMs = nowMs
        guard let state = connections[connection] else { return }
        switch state {
        case .piped(let session, let link, let fromHost, let partner):
            pipe(bytes, session: session, link: link, fromHost: fromHost, to: partner, nowMs: nowMs)
        case .answered:
            break
        case .waiting(_, let link):
            guard link.buffered.count + bytes.count <= configuration.maxBufferedBytes else {
                close(connection, .bufferOverflow)
                return
            }
            let charged = max(0, link.buffered.count + bytes.count - Self.unchargedBytesPerClient) - link.chargedBytes
            guard bufferedBytes + charged <= configuration.maxBufferedTotalBytes else {
                close(connection, .bufferBudget)
                return
            }
            link.buffered.append(contentsOf: bytes)
            bufferedBytes += charged
        case .host(let session):
            session.lastHeardMs = nowMs
            session.control.append(contentsOf: bytes)
            readControl(session, nowMs: nowMs)
        case .prefix(var held, let since):
            held.append(contentsOf: bytes)
            guard held.count >= TunnelWire.idMessageSize else {
                connections[connection] = .prefix(bytes: held, sinceMs: since)
                return
            }
            awaitingPrefix.remove(connection)
            readPrefix(held, on: connection, nowMs: nowMs)
        }
    }

    /// `connection` closed (its peer hung up, or the socket dropped it).
    public func closedByPeer(_ connection: TunnelConnection, nowMs: UInt64) {
        self.nowMs = nowMs
        forget(connection, reason: nil, closeIt: false)
    }

    /// Runs the timers: prefix and link timeouts, pings, silent hosts.
    public func tick(nowMs: UInt64) {
        self.nowMs = nowMs
        let prefixLimit = UInt64(configuration.prefixTimeoutSeconds * 1000)
        for connection in awaitingPrefix {
            if case .prefix(_, let since)? = connections[connection], nowMs >= since + prefixLimit {
                close(connection, .prefixTimeout)
            }
        }
        for connection in answered {
            if case .answered(let at, let reason)? = connections[connection], nowMs >= at { close(connection, reason) }
        }
        let linkLimit = UInt64(configuration.linkTimeoutSeconds * 1000)
        let pingEvery = UInt64(configuration.pingIntervalSeconds * 1000)
        let hostLimit = UInt64(configuration.hostTimeoutSeconds * 1000)
        for session in Array(sessions.values) {
            if nowMs >= session.lastHeardMs + hostLimit {
                close(session.host, .hostTimeout)
                continue
            }
            for link in session.links.values where link.host == nil && nowMs >= link.createdMs + linkLimit {
                close(link.client, .linkTimeout)
            }
            for (id, until) in session.abandoned where nowMs >= until {
                session.abandoned[id] = nil
                linkSessions[id] = nil
            }
            if nowMs >= session.lastPingMs + pingEvery {
                session.lastPingMs = nowMs
                if session.pingSentMs == nil { session.pingSentMs = nowMs }
                _ = send(TunnelWire.pingMessage, to: session.host)
            }
        }
    }

    /// Closes every connection (the relay stops).
    public func shutdown() {
        for session in Array(sessions.values) { close(session.host, .shutdown) }
        for connection in Array(connections.keys) { close(connection, .shutdown) }
    }

    // MARK: Reports

    /// Every session's report, by id.
    public func reports() -> [TunnelSessionReport] {
        sessions.values.map(report).sorted { $0.session.bytes.lexicographicallyPrecedes($1.session.bytes) }
    }

    private func report(_ session: TunnelSession) -> TunnelSessionReport {
        session.report(join: configuration.join(session.id),
                       directEndpoint: session.port.map { "\(configuration.advertiseHost):\($0.port)" } ?? "")
    }

    // MARK: Prefixes and control

    private func readPrefix(_ held: [UInt8], on connection: TunnelConnection, nowMs: UInt64) {
        let magic = TunnelWire.magic(held)
        let id = TunnelID(held[4..<16])!
        let rest = Array(held[16...])
        switch magic {
        case TunnelWire.session where id.isZero:
            openSession(host: connection, rest: rest, nowMs: nowMs)
        case TunnelWire.session:
            guard let session = sessions[id] else {
                close(connection, .unknownSession)
                return
            }
            join(session, client: connection, rest: rest, nowMs: nowMs)
        case TunnelWire.link:
            if let session = linkSessions[id], session.abandoned.removeValue(forKey: id) != nil {
                // The host links a client that hung up meanwhile: its pending place is free again.
                linkSessions[id] = nil
                close(connection, .partnerClosed)
                return
            }
            guard let session = linkSessions[id], let link = session.links[id], link.host == nil else {
                close(connection, .unknownLink)
                return
            }
            claim(link, in: session, host: connection, rest: rest, nowMs: nowMs)
        case TunnelWire.netplayHeader:
            // A RetroArch client that connected straight to the relay port (no session id): a
            // header with protocol 0 makes it say the server is out of date, then it hangs up.
            _ = send(TunnelWire.outdatedHeader, to: connection)
            connections[connection] = .answered(closeAtMs: nowMs + Self.answerFlushMs, reason: .notTunnel)
            answered.insert(connection)
        default:
            close(connection, .badMagic)
        }
    }

    private func openSession(host: TunnelConnection, rest: [UInt8], nowMs: UInt64) {
        let address = addresses[host] ?? []
        guard sessions.count < configuration.maxSessions,
              sessionsPerAddress[address, default: 0] < configuration.maxSessionsPerAddress else {
            close(host, .sessionLimit)
            return
        }
        sessionsPerAddress[address, default: 0] += 1
        var id = TunnelID.random(using: &generator)
        while sessions[id] != nil { id = TunnelID.random(using: &generator) }
        let session = TunnelSession(id: id, host: host, hostAddress: address, nowMs: nowMs, nowUnixMs: wallClockMs())
        sessions[id] = session
        connections[host] = .host(session)
        guard send(TunnelWire.message(TunnelWire.session, id), to: host) else {
            close(host, .slowReader)
            return
        }
        if configuration.sessionPorts != nil, let port = transport.openSessionPort(for: id) {
            session.port = port
            portSessions[port.listener] = session
        }
        transport.tunnelEvent(.sessionOpened(session: id, join: configuration.join(id), directPort: session.port?.port,
                                             hostAddress: Self.text(address)))
        if !rest.isEmpty {
            session.control = rest
            readControl(session, nowMs: nowMs)
        }
    }

    private func join(_ session: TunnelSession, client: TunnelConnection, rest: [UInt8], nowMs: UInt64) {
        guard session.links.count < configuration.maxClientsPerSession, session.pendingCount < configuration.maxPendingLinks else {
            close(client, .clientLimit)
            return
        }
        var linkId = TunnelID.random(using: &generator)
        while linkSessions[linkId] != nil { linkId = TunnelID.random(using: &generator) }
        let link = TunnelSession.Link(id: linkId, client: client, clientAddress: addresses[client] ?? [], createdMs: nowMs)
        session.links[linkId] = link
        linkSessions[linkId] = session
        connections[client] = .waiting(session, link)
        guard rest.count <= configuration.maxBufferedBytes else {
            close(client, .bufferOverflow)
            return
        }
        let charged = max(0, rest.count - Self.unchargedBytesPerClient)
        guard bufferedBytes + charged <= configuration.maxBufferedTotalBytes else {
            close(client, .bufferBudget)
            return
        }
        link.buffered = rest
        bufferedBytes += charged
        link.announced = true
        session.linksAnnounced += 1
        if !send(TunnelWire.message(TunnelWire.link, linkId), to: session.host) { close(session.host, .slowReader) }
    }

    private func claim(_ link: TunnelSession.Link, in session: TunnelSession, host: TunnelConnection, rest: [UInt8], nowMs: UInt64) {
        link.host = host
        session.clientsJoined += 1
        bufferedBytes -= link.chargedBytes
        connections[host] = .piped(session, link, fromHost: true, to: link.client)
        connections[link.client] = .piped(session, link, fromHost: false, to: host)
        let buffered = link.buffered
        link.buffered = []
        transport.tunnelEvent(.clientLinked(session: session.id, link: link.id, clientAddress: Self.text(link.clientAddress),
                                            clients: session.linkedCount))
        if !buffered.isEmpty {
            buffered.withUnsafeBytes { pipe($0, session: session, link: link, fromHost: false, to: host, nowMs: nowMs) }
        }
        if !rest.isEmpty, connections[host] != nil {
            rest.withUnsafeBytes { pipe($0, session: session, link: link, fromHost: true, to: link.client, nowMs: nowMs) }
        }
    }

    /// Reads the host's control messages: `RATA`+link id (16 bytes: it asks for a client's
    /// address) and `RATP` alone (4 bytes: the echo of the relay's ping). Anything else ends the
    /// session, as RetroArch itself treats an unknown magic on this connection as fatal.
    private func readControl(_ session: TunnelSession, nowMs: UInt64) {
        var offset = 0
        reading: while session.control.count - offset >= 4 {
            switch TunnelWire.magic(session.control[offset...]) {
            case TunnelWire.ping:
                offset += 4
                if let sent = session.pingSentMs {
                    session.hostRTTMs = UInt32(clamping: nowMs &- sent)
                    session.pingSentMs = nil
                }
            case TunnelWire.address:
                guard session.control.count - offset >= TunnelWire.idMessageSize else { break reading }
                let id = TunnelID(session.control[(offset + 4)..<(offset + TunnelWire.idMessageSize)])!
                offset += TunnelWire.idMessageSize
                // RetroArch asks once for each link it is told of; more asks are no RetroArch
                // (each costs the relay a reply and a send: a flood of them stalled the thread).
                session.addressRequests += 1
                guard session.addressRequests <= session.linksAnnounced else {
                    close(session.host, .badControlMessage)
                    return
                }
                // A link whose client went (or that the relay forgot) gets its own id with no
                // address. The official server answers zeros, which matches none of the host's
                // pending connections: each such one stayed pending for good, as a connected
                // socket is always writable and RetroArch times a pending one out only while it
                // is not, and after 8 of them the host took no client again. With its id, the
                // host links it, and the relay closes that link.
                let reply = session.links[id].map { TunnelWire.addressReply($0.id, address: $0.clientAddress) }
                    ?? TunnelWire.addressReply(id, address: [])
                if !send(reply, to: session.host) {
                    close(session.host, .slowReader)
                    return
                }
            default:
                close(session.host, .badControlMessage)
                return
            }
        }
        session.control.removeFirst(offset)
    }

    // MARK: Piping

    @inline(__always)
    private func pipe(_ bytes: UnsafeRawBufferPointer, session: TunnelSession, link: TunnelSession.Link, fromHost: Bool,
                      to partner: TunnelConnection, nowMs: UInt64) {
        if fromHost {
            link.bytesFromHost &+= UInt64(bytes.count)
            observe(bytes, link: link, session: session, fromHost: true, nowMs: nowMs)
        } else {
            link.bytesToHost &+= UInt64(bytes.count)
            observe(bytes, link: link, session: session, fromHost: false, nowMs: nowMs)
        }
        bytesPiped &+= UInt64(bytes.count)
        if !transport.send(bytes, to: partner) { close(partner, .slowReader) }
    }

    /// Feeds the stream meter and times netplay's own pings across the relay.
    @inline(__always)
    private func observe(_ bytes: UnsafeRawBufferPointer, link: TunnelSession.Link, session: TunnelSession, fromHost: Bool, nowMs: UInt64) {
        let before = fromHost ? link.fromHost.observation : link.toHost.observation
        if fromHost { link.fromHost.consume(bytes) } else { link.toHost.consume(bytes) }
        let after = fromHost ? link.fromHost.observation : link.toHost.observation
        // A ping one side sends is answered from the other side: its round trip runs from the
        // request in this direction to the response in the opposite one.
        if after.pingRequests != before.pingRequests {
            if fromHost { link.hostPingAtMs = nowMs } else { link.clientPingAtMs = nowMs }
        }
        if after.pingResponses != before.pingResponses, let at = fromHost ? link.clientPingAtMs : link.hostPingAtMs {
            link.rttMs = UInt32(clamping: nowMs &- at)
            if fromHost { link.clientPingAtMs = nil } else { link.hostPingAtMs = nil }
        }
        if !fromHost && after.resyncRequests != before.resyncRequests { session.lastResyncUnixMs = wallClockMs() }
    }

    private func send(_ bytes: [UInt8], to connection: TunnelConnection) -> Bool {
        bytes.withUnsafeBytes { transport.send($0, to: connection) }
    }

    // MARK: Closing

    /// A connection the transport closed as it accepted it, before the core saw it (the process
    /// out of file descriptors): counted and reported as the core's own `connection_limit`.
    public func shedByTransport(address: [UInt8]) {
        closes[.connectionLimit, default: 0] += 1
        transport.tunnelEvent(.refused(reason: .connectionLimit, address: Self.text(address)))
    }

    private func refuse(_ connection: TunnelConnection, _ reason: TunnelCloseReason, address: [UInt8]) {
        closes[reason, default: 0] += 1
        transport.tunnelEvent(.refused(reason: reason, address: Self.text(address)))
        transport.close(connection)
    }

    /// Closes `connection` for `reason` (counted), and whatever depends on it.
    private func close(_ connection: TunnelConnection, _ reason: TunnelCloseReason) {
        guard let state = connections[connection] else { return }
        closes[reason, default: 0] += 1
        switch state {
        case .waiting(let session, _), .piped(let session, _, _, _):
            if reason != .partnerClosed, reason != .sessionEnded, reason != .shutdown { session.refused += 1 }
        default:
            break
        }
        if reason != .partnerClosed, reason != .sessionEnded, reason != .shutdown {
            transport.tunnelEvent(.refused(reason: reason, address: Self.text(addresses[connection] ?? [])))
        }
        forget(connection, reason: reason, closeIt: true)
    }

    private func forget(_ connection: TunnelConnection, reason: TunnelCloseReason?, closeIt: Bool) {
        guard let state = connections.removeValue(forKey: connection) else { return }
        if let address = addresses.removeValue(forKey: connection) {
            let left = perAddress[address, default: 1] - 1
            perAddress[address] = left > 0 ? left : nil
        }
        awaitingPrefix.remove(connection)
        answered.remove(connection)
        if closeIt { transport.close(connection) }
        switch state {
        case .prefix, .answered:
            break
        case .waiting(let session, let link):
            bufferedBytes -= link.chargedBytes
            link.buffered = []
            drop(link, from: session)
        case .piped(let session, let link, _, let partner):
            drop(link, from: session)
            // The other end gets what was piped to it before the hang-up, then is closed.
            if connections[partner] != nil {
                connections[partner] = .answered(closeAtMs: nowMs + Self.answerFlushMs, reason: .partnerClosed)
                answered.insert(partner)
            }
        case .host(let session):
            sessions[session.id] = nil
            let left = sessionsPerAddress[session.hostAddress, default: 1] - 1
            sessionsPerAddress[session.hostAddress] = left > 0 ? left : nil
            for id in session.abandoned.keys { linkSessions[id] = nil }
            session.abandoned = [:]
            if let port = session.port {
                portSessions[port.listener] = nil
                transport.closeSessionPort(listener: port.listener)
            }
            for link in Array(session.links.values) {
                close(link.client, .sessionEnded)
                if let host = link.host { close(host, .sessionEnded) }
            }
            transport.tunnelEvent(.sessionClosed(session: session.id, reason: reason, report: report(session)))
        }
    }

    private func drop(_ link: TunnelSession.Link, from session: TunnelSession) {
        guard session.links.removeValue(forKey: link.id) != nil else { return }
        if link.host == nil, link.announced, sessions[session.id] === session {
            // Still pending at the host until it links it: counted, and recognised when it does.
            session.abandoned[link.id] = link.createdMs + UInt64(configuration.linkTimeoutSeconds * 1000)
        } else {
            linkSessions[link.id] = nil
        }
        session.closed.add(TunnelSession.counters(of: link))
        session.learn(from: link)
    }

    /// A 4- or 16-byte address as text ("" when unknown).
    static func text(_ address: [UInt8]) -> String {
        switch address.count {
        case 4: return address.map(String.init).joined(separator: ".")
        case 16:
            if address.prefix(12) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF] { return text(Array(address.suffix(4))) }
            return stride(from: 0, to: 16, by: 2).map { String(UInt16(address[$0]) << 8 | UInt16(address[$0 + 1]), radix: 16) }
                .joined(separator: ":")
        default: return ""
        }
    }
}
