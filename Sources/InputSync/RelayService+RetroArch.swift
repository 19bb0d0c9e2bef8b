import Foundation
import NetplayService
import NetplayWire
import RetroArchRelay

/// The relay's RetroArch tunnel (docs/retroarch.md): its listener on the reactor, its metrics,
/// events and logs, and its sessions in the coordinator's refreshes and telemetry's reports.
extension RelayService {
    /// Seconds between the health reports of each RetroArch session to telemetry.
    static let retroArchReportSeconds = 2.0

    func startTunnel(_ tunnelConfiguration: TunnelConfiguration, _ runtime: ServiceRuntime) throws {
        // The tunnel runs on a thread of its own; what it does comes back to the reactor.
        let service = ReactorBound(self)
        let server = try TunnelServer(configuration: tunnelConfiguration) { [handle = runtime.handle] event in
            handle.enqueue { runtime in service.value.tunnelEvent(event, runtime) }
        }
        tunnel = server
        runtime.metrics.gauge("netplay_retroarch_sessions", help: "RetroArch sessions relayed (hosts on the tunnel listener).") {
            Double(server.snapshot.sessions)
        }
        runtime.metrics.gauge("netplay_retroarch_links", help: "RetroArch clients linked to their host.") { Double(server.snapshot.links) }
        runtime.metrics.gauge("netplay_retroarch_connections", help: "TCP connections open on the RetroArch listener.") {
            Double(server.snapshot.connections)
        }
        runtime.metrics.counter("netplay_retroarch_bytes_total", help: "Bytes piped between RetroArch hosts and clients.") {
            Double(server.snapshot.bytesPiped)
        }
        for reason in TunnelCloseReason.allCases {
            runtime.metrics.counter("netplay_retroarch_closed_total", help: "RetroArch connections the relay closed, by reason.",
                                    labels: ["reason": reason.rawValue]) { Double(server.snapshot.closes[reason] ?? 0) }
        }
        runtime.every(seconds: Self.retroArchReportSeconds) { [unowned(unsafe) self] runtime in
            for report in self.retroArchReports() { runtime.pushToTelemetry(.retroarchSession(report)) }
        }
        runtime.logger.info("relaying RetroArch netplay", metadata: [
            "port": "\(server.boundPort)", "join_host": "\(tunnelConfiguration.advertiseHost)",
            "session_ports": "\(tunnelConfiguration.sessionPorts.map { "\($0.lowerBound)-\($0.upperBound)" } ?? "none")"])
    }

    /// The RetroArch sessions as the coordinator and telemetry get them.
    func retroArchReports() -> [RetroArchSession] {
        guard let tunnel else { return [] }
        return tunnel.snapshot.reports.prefix(1_000).map { $0.wire(relayId: configuration.relayId) }
    }

    func tunnelJSON(_ tunnel: TunnelServer) -> JSONValue {
        let snapshot = tunnel.snapshot
        let sessions = snapshot.reports.map { report -> JSONValue in
            .object(["session_id": .string(report.session.base64), "join": .string(report.join),
                     "direct": .string(report.directEndpoint), "host_nick": .string(report.hostNick),
                     "core": .string(report.coreName), "core_version": .string(report.coreVersion),
                     "content_crc": .number(report.contentCRC), "clients": .number(report.clients),
                     "pending_clients": .number(report.pendingClients), "bytes_from_host": .number(report.counters.bytesFromHost),
                     "bytes_to_host": .number(report.counters.bytesToHost), "inputs": .number(report.counters.inputs),
                     "crc_checks": .number(report.counters.crcChecks), "resync_requests": .number(report.counters.resyncRequests),
                     "last_frame": .number(report.lastFrame), "host_rtt_ms": .number(report.hostRTTMs),
                     "link_rtt_ms": .number(report.linkRTTMs)])
        }
        var closes: [String: JSONValue] = [:]
        for (reason, count) in snapshot.closes { closes[reason.rawValue] = .number(count) }
        return .object(["port": .number(tunnel.boundPort), "sessions": .array(sessions), "links": .number(snapshot.links),
                        "connections": .number(snapshot.connections), "closed": .object(closes)])
    }

    func tunnelEvent(_ event: TunnelEvent, _ runtime: ServiceRuntime) {
        switch event {
        case .sessionOpened(let session, let join, let port, let host):
            runtime.logger.info("RetroArch session opened", metadata: [
                "session": "\(session)", "join": "\(join)", "direct_port": "\(port.map(String.init) ?? "none")", "host": "\(host)"])
            eventsTotal?.increment()
            runtime.emit(topic: "retroarch.session_opened", severity: .info, message: "RetroArch session \(session) opened: join \(join)",
                         sessionId: session.base64, attributes: ["join": join, "host": host])
            refreshSoon(runtime)
        case .clientLinked(let session, _, let client, let clients):
            runtime.logger.info("RetroArch client linked", metadata: ["session": "\(session)", "client": "\(client)", "clients": "\(clients)"])
            eventsTotal?.increment()
            runtime.emit(topic: "retroarch.client_linked", severity: .info, message: "RetroArch client \(client) linked to session \(session)",
                         sessionId: session.base64, attributes: ["client": client])
            refreshSoon(runtime)
        case .sessionClosed(let session, let reason, let report):
            let why = reason?.rawValue ?? "host_closed"
            runtime.logger.info("RetroArch session closed", metadata: [
                "session": "\(session)", "reason": "\(why)", "clients_joined": "\(report.clientsJoined)",
                "crc_checks": "\(report.counters.crcChecks)", "resync_requests": "\(report.counters.resyncRequests)"])
            eventsTotal?.increment()
            runtime.emit(topic: "retroarch.session_closed", severity: .info, message: "RetroArch session \(session) closed (\(why))",
                         sessionId: session.base64, attributes: ["reason": why])
            runtime.pushToTelemetry(.retroarchSession(report.wire(relayId: configuration.relayId, endedBecause: why)))
            refreshSoon(runtime)
        case .refused(let reason, let address):
            // Strangers can send anything: count everything, log a line a second at most.
            let now = runtime.uptimeMs
            if now >= lastRefusalLogMs + 1_000 {
                runtime.logger.notice("RetroArch connection closed", metadata: [
                    "reason": "\(reason.rawValue)", "address": "\(address)", "unlogged_before": "\(refusalsUnlogged)"])
                lastRefusalLogMs = now
                refusalsUnlogged = 0
            } else {
                refusalsUnlogged += 1
            }
        }
    }
}
