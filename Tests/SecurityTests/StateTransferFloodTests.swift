import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing
import ZeroMQ

/// The attack a hostile-client probe found: a stranger's own session, its host answering the
/// relay's state request with a large state, and many spectators that attach but never read
/// their sockets. A relay that sent every target the whole state at once left a copy queued in
/// libzmq for each (33 targets and 64 MiB took it to 2 GiB); paced by the targets'
/// acknowledgements, each silent one costs a window. Targets of sync protocol 1 (no
/// acknowledgements), served one after another by a host answering every request, each took a
/// whole copy too; they are sent only states of at most a window.
@Suite("Attack: a state transfer to targets that never read", .ownThread)
struct StateTransferFloodTests {
    static let stateBytes = 32 << 20
    static let chunkBytes = 65536
    static let silentSpectators = 12

    /// Who the silent targets are.
    enum Targets: Sendable, CustomTestStringConvertible {
        /// Clients of this sync protocol that read nothing and say nothing of the transfer.
        case silent(protocolVersion: UInt32)
        /// Clients of the current protocol that read nothing and acknowledge every byte all the
        /// same (transfer ids are sequential: they need not read one to name it).
        case forgingAcknowledgements

        var protocolVersion: UInt32 {
            if case .silent(let version) = self { version } else { SyncProtocol.current }
        }

        var testDescription: String {
            switch self {
            case .silent(let version): "silent, protocol \(version)"
            case .forgingAcknowledgements: "forging acknowledgements"
            }
        }
    }

    @Test(.timeLimit(.minutes(2)), arguments: [Targets.silent(protocolVersion: SyncProtocol.current), .silent(protocolVersion: 1),
                                                .forgingAcknowledgements])
    func silentTargetsOfALargeStateCostTheRelayAWindowEachNotACopy(targets: Targets) throws {
        let protocolVersion = targets.protocolVersion
        var options = TestCluster.Options(secret: String(repeating: "5c", count: 32))
        options.name = "flood"
        options.discovery = false
        options.coordinatorArguments = ["--password-cost", "minimum", "--discovery", "none"]
        let cluster = try TestCluster(options)
        let relayPid = try #require(cluster.relay?.pid)
        let coordinator = try BlockingClient(endpoint: cluster.coordinatorEndpoint, timeout: 5, serverKey: cluster.serverKey)
        let content = ContentInfo(gameName: "Flood", crc32: 0x0BAD_F00D, coreId: "nestopia", coreVersion: "1.52.0", system: "nes")
        let settings = SessionSettings(roomName: "flood", content: content, transport: .relay, maxPlayers: 2,
                                       spectatorsAllowed: true, maxSpectators: UInt32(Self.silentSpectators))
        let (created, hostTicket) = try coordinator.createSession(settings, hostName: "mallory")
        func ticket(_ role: Role, _ name: String) throws -> JoinTicket {
            try coordinator.ticket(session: created.session.sessionId, role, name, content: content)
        }
        func attach(_ ticket: JoinTicket, startFromHostState: Bool = false) throws -> [UInt8] {
            try Envelope(requestId: 1, body: .attachRequest(AttachRequest(
                ticket: ticket, protocolVersion: startFromHostState ? SyncProtocol.current : protocolVersion, content: content,
                startFromHostState: startFromHostState))).encoded()
        }
        // The host asks that the match start from its state: before frame 0 the relay asks it
        // for the state, for everyone else.
        let host = try BlockingClient(endpoint: hostTicket.relayEndpoint, timeout: 0.2, serverKey: cluster.serverKey)
        try host.sendRaw(attach(hostTicket, startFromHostState: true))
        // Spectators whose sockets hold one message and are never read.
        var silent: [Socket] = []
        for index in 0 ..< Self.silentSpectators {
            let socket = try SocketDefaults.connectedClient(.dealer, to: hostTicket.relayEndpoint, serverKey: cluster.serverKey) {
                try $0.set(.receiveHighWaterMark(1))
            }
            _ = try socket.send(attach(try ticket(.spectator, "silent \(index)")))
            silent.append(socket)
        }
        // A second player (also never read) completes the match: the start asks for the state.
        let second = try BlockingClient(endpoint: hostTicket.relayEndpoint, timeout: 0.2, serverKey: cluster.serverKey)
        try second.sendRaw(attach(try ticket(.player, "mallory too")))
        // Everyone keeps talking (a silent peer would be dropped for silence), never reading.
        let keepalive = try Envelope(body: .peerStats(PeerStats())).encoded()
        let forged = try (1 ... 3).map { id in
            try Envelope(body: .stateTransferAck(StateTransferAck(transferId: UInt32(id), receivedBytes: .max))).encoded()
        }
        func keepAlive() throws {
            for socket in silent { _ = try socket.send(keepalive) }
            if case .forgingAcknowledgements = targets {
                for socket in silent { for ack in forged { _ = try socket.send(ack) } }
            }
            try second.sendRaw(keepalive)
            try host.sendRaw(keepalive)
        }
        func requests() -> [StateRequest] {
            var asked: [StateRequest] = []
            while let frame = try? host.receiveRaw() {
                if case .stateRequest(let request)? = (try? Envelope(decoding: frame))?.body { asked.append(request) }
            }
            return asked
        }
        var request: StateRequest?
        let deadline = Date().addingTimeInterval(15)
        while request == nil, Date() < deadline {
            try keepAlive()
            request = requests().first
        }
        let asked = try #require(request, "the relay never asked the host for its state")
        #expect(asked.reason == .matchStart)
        let before = residentBytes(relayPid)

        // The host sends 32 MiB at once, for every request.
        func serve(_ asked: StateRequest) throws {
            let chunk = min(Int(asked.maxChunkBytes), Self.chunkBytes)
            var offset = 0
            while offset < Self.stateBytes {
                let end = min(offset + chunk, Self.stateBytes)
                try host.sendRaw(try Envelope(body: .stateChunk(StateChunk(
                    transferId: asked.transferId, frame: 0, offset: UInt64(offset), totalSize: UInt64(Self.stateBytes),
                    data: [UInt8](repeating: UInt8(truncatingIfNeeded: offset >> 16), count: end - offset),
                    last: end == Self.stateBytes, reason: .matchStart))).encoded())
                offset = end
            }
        }
        try serve(asked)
        // The relay's memory over the next 4 seconds (well within the transfer timeout).
        var peak = before
        var served = 1
        for _ in 0 ..< 40 {
            try keepAlive()
            for again in requests() {
                try serve(again)
                served += 1
            }
            peak = max(peak, residentBytes(relayPid))
            Thread.sleep(forTimeInterval: 0.1)
        }
        let grew = peak - before
        // Sent whole to each of 13 targets, the state would stay queued many times over (about
        // 300 MiB here); paced, the relay holds it once plus a window per target.
        let bound = Self.stateBytes * 3
        #expect(grew < bound, "the relay grew by \(grew >> 20) MiB (from \(before >> 20) MiB) for \(Self.silentSpectators + 1) targets (\(targets.testDescription)) and a \(Self.stateBytes >> 20) MiB state, served \(served) times")
        #expect(cluster.relay?.waitForExit(seconds: 0) == nil, "the relay exited")
        // The relay still serves: the coordinator still lists it.
        #expect(ClusterLaunchPlan.listsRelay(coordinator, relayId: "sync-0"))
    }
}
