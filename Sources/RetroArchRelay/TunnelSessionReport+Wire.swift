import NetplayWire

extension TunnelSessionReport {
    /// The report as the relay sends it to the coordinator and telemetry; `endedBecause` marks
    /// the last report of a session that ended.
    public func wire(relayId: String, endedBecause endReason: String? = nil) -> RetroArchSession {
        var session = RetroArchSession()
        session.sessionId = self.session.base64
        session.relayId = relayId
        session.join = join
        session.directEndpoint = directEndpoint
        session.hostNick = String(hostNick.prefix(32))
        session.coreName = String(coreName.prefix(32))
        session.coreVersion = String(coreVersion.prefix(32))
        session.contentCrc = contentCRC
        session.clients = UInt32(min(clients, 64))
        session.pendingClients = UInt32(min(pendingClients, 64))
        session.bytesFromHost = counters.bytesFromHost
        session.bytesToHost = counters.bytesToHost
        session.inputs = counters.inputs
        session.crcChecks = counters.crcChecks
        session.resyncRequests = counters.resyncRequests
        session.savestates = counters.savestates
        session.lastFrame = lastFrame
        session.hostRttMs = hostRTTMs
        session.linkRttMs = linkRTTMs
        session.openedAtUnixMs = openedAtUnixMs
        session.lastResyncAtUnixMs = lastResyncAtUnixMs
        session.clientsJoined = clientsJoined
        session.refusedConnections = refusedConnections
        if let endReason {
            session.ended = true
            session.endReason = String(endReason.prefix(32))
        }
        return session
    }
}
