import Foundation
import NetplayAuth
import NetplayService
import NetplayWire
@testable import InputSync

/// Records what a relay core sends, publishes and pushes.
final class RecordingTransport: RelayTransport {
    var sent: [(peer: PeerAddress, body: Envelope.Body)] = []
    var published: [(topic: String, body: Envelope.Body, severity: Severity)] = []
    var stats: [SessionStats] = []

    func send(_ body: Envelope.Body, to peer: PeerAddress) { sent.append((peer, body)) }
    /// Hand-encoded messages must decode with NetplayWire (validation included).
    func sendEncoded(_ envelope: UnsafeRawBufferPointer, to peer: PeerAddress) {
        do {
            sent.append((peer, try Envelope(decoding: envelope).body))
        } catch {
            fatalError("the relay encoded an invalid envelope: \(error) \(Array(envelope))")
        }
    }
    func publish(topic: String, _ body: Envelope.Body, severity: Severity, message: String, sessionId: String) {
        published.append((topic, body, severity))
    }
    func pushStats(_ stats: SessionStats) { self.stats.append(stats) }

    /// Everything sent to `peer` since the last call (drained).
    func take(_ peer: PeerAddress) -> [Envelope.Body] {
        let mine = sent.filter { $0.peer == peer }.map(\.body)
        sent.removeAll { $0.peer == peer }
        return mine
    }

    func broadcasts(_ peer: PeerAddress, authoritative: Bool? = nil) -> [InputBroadcast] {
        take(peer).compactMap { body in
            if case .inputBroadcast(let broadcast) = body, authoritative == nil || broadcast.authoritative == authoritative {
                return broadcast
            }
            return nil
        }
    }
}

/// A relay service (no coordinator) running on its own reactor on a free loopback port, with
/// the key ring its tickets must be signed with.
func startRelayService(id: String, configure: (inout RelayConfiguration) -> Void = { _ in })
    throws -> (service: RunningService, keyRing: TicketKeyRing) {
    let keyRing = TicketKeyRing.generate()
    var configured = RelayConfiguration(relayId: id, advertisedEndpoint: "")
    configure(&configured)
    let configuration = configured
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("\(id)-\(UUID().uuidString)")
    var service = ServiceConfiguration(kind: "sync", instance: id, endpoint: "tcp://127.0.0.1:*", logLevel: .critical,
                                       dataDirectory: root.appendingPathComponent(id))
    service.trustStore = root.appendingPathComponent("keys")  // the operator's introspection
    service.control = "tcp://127.0.0.1:*"
    let running = try ServiceHost.start(configuration: service) {
        RelayService(configuration: configuration, keyRing: keyRing)
    }
    return (running, keyRing)
}

/// A relay core with a ticket issuer, a fake clock and named peers.
final class RelayRig {
    let keyRing: TicketKeyRing
    let transport = RecordingTransport()
    let core: RelayCore
    var now: UInt64 = 1_000
    var params: SyncParams
    let sessionId: String
    let replayDirectory: URL

    /// A fresh relay in place of `dead` (same secret, session and data directory), as after
    /// the relay process was killed and started again.
    init(restarting dead: RelayRig) {
        keyRing = dead.keyRing
        params = dead.params
        sessionId = dead.sessionId
        replayDirectory = dead.replayDirectory
        var configuration = RelayConfiguration(relayId: "sync-test", advertisedEndpoint: "tcp://127.0.0.1:1")
        configuration.replayDirectory = replayDirectory
        configuration.revocationsFile = Self.revocationsFile(beside: replayDirectory)
        configuration.startSyncSamples = 0
        core = RelayCore(configuration: configuration, verifier: JoinTicketVerifier(keyRing: keyRing), transport: transport)
    }

    init(players: Int = 2, inputSize: Int = 1, lagTolerance: Int = 12, spectatorDelay: Int = 0,
         checksumInterval: Int = 60, maxSpectators: Int = 4, configure: (inout RelayConfiguration) -> Void = { _ in }) {
        params = SyncParams(inputSize: UInt32(inputSize), maxPlayers: UInt32(players), frameDelay: 2, frameRateMhz: 60_000,
                            predictionWindow: 8, lagToleranceFrames: UInt32(lagTolerance),
                            spectatorDelayFrames: UInt32(spectatorDelay), checksumIntervalFrames: UInt32(checksumInterval),
                            maxSpectators: UInt32(maxSpectators))
        keyRing = TicketKeyRing.generate()
        sessionId = "s-\(UInt32.random(in: 1 ... .max))"
        replayDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-tests-\(UUID().uuidString)")
        var configuration = RelayConfiguration(relayId: "sync-test", advertisedEndpoint: "tcp://127.0.0.1:1")
        configuration.replayDirectory = replayDirectory
        configuration.revocationsFile = Self.revocationsFile(beside: replayDirectory)
        // The fake peers answer no pings: matches start at once unless a test asks otherwise.
        configuration.startSyncSamples = 0
        configure(&configuration)
        core = RelayCore(configuration: configuration, verifier: JoinTicketVerifier(keyRing: keyRing), transport: transport)
    }

    func ticket(slot: Int, role: Role = .player, participant: String? = nil, ttlMs: UInt64 = 60_000,
                relay: String = "sync-test", issuedAt: UInt64 = UnixTime.nowMs()) -> JoinTicket {
        try! JoinTicketSigner(keyRing: keyRing).issue(
            sessionId: sessionId, participantId: participant ?? (role == .player ? "p\(slot)" : "spectator-\(UUID().uuidString.prefix(6))"),
            role: role, slot: UInt32(slot), relayId: relay, relayEndpoint: "tcp://127.0.0.1:1", params: params,
            name: participant ?? "player \(slot)", ttlMs: ttlMs, nowUnixMs: issuedAt)
    }

    static func address(_ name: String) -> PeerAddress { PeerAddress(routingId: Array(name.utf8)) }

    /// The rig's revocation journal, in its data directory (beside the replays).
    static func revocationsFile(beside replays: URL) -> URL { replays.appendingPathExtension("revocations") }

    @discardableResult
    func send(_ body: Envelope.Body, from peer: PeerAddress) throws(ServiceError) -> Envelope.Body? {
        try core.handle(Envelope(body: body), from: peer, now: now)
    }

    /// The progress proof a resumed attach presents.
    enum Proof {
        /// A genuine proof of the frames claimed (an honest peer that saw the last statistics).
        case ofClaim
        /// A genuine proof of these frames.
        case of(Int)
        /// None.
        case none
        /// This one.
        case given(ProgressProof)
    }

    /// A genuine progress proof of `frames` in the rig's session, as a relay with its key signs.
    func proof(_ frames: Int) -> ProgressProof {
        ProgressProofs(keyRing: keyRing).proof(sessionId: sessionId, confirmedFrames: UInt32(frames))
    }

    @discardableResult
    /// Attaches `peer` (speaking `protocolVersion`); with `resume`, it holds confirmed frames
    /// `historyFrom ..< confirmed` (by default none it could resend) and presents `proof`.
    func attach(_ peer: PeerAddress, slot: Int, role: Role = .player, resume: Bool = false, confirmed: Int = 0,
                historyFrom: Int? = nil, participant: String? = nil, paths: Int = 1,
                protocolVersion: UInt32 = SyncProtocol.current, proof: Proof = .ofClaim) throws(ServiceError) -> AttachResponse {
        var progress: ProgressProof?
        switch proof {
        case .ofClaim: progress = resume ? self.proof(confirmed) : nil
        case .of(let frames): progress = self.proof(frames)
        case .none: progress = nil
        case .given(let given): progress = given
        }
        let body = try send(.attachRequest(AttachRequest(ticket: ticket(slot: slot, role: role, participant: participant),
                                                         protocolVersion: protocolVersion, resume: resume,
                                                         confirmedFrames: UInt32(confirmed),
                                                         historyFromFrame: UInt32(historyFrom ?? confirmed),
                                                         paths: UInt32(paths), progress: progress)), from: peer)
        guard case .attachResponse(let response)? = body else { fatalError("no attach response") }
        return response
    }

    /// Sends a batch of one-byte inputs `values` from `start`.
    func batch(_ peer: PeerAddress, slot: Int, start: Int, _ values: [UInt8], awaited: Int = 0, current: Int? = nil) throws(ServiceError) {
        try send(.inputBatch(InputBatch(slot: UInt32(slot), startFrame: UInt32(start), inputSize: params.inputSize,
                                        inputs: values, awaitedFrame: UInt32(awaited),
                                        currentFrame: UInt32(current ?? (start + values.count)))), from: peer)
    }

    func advance(ms: UInt64) {
        let target = now + ms
        while now < target {
            now = min(target, now + 4)
            core.tick(now: now)
        }
    }
}

extension Envelope.Body {
    var attachResponse: AttachResponse? {
        if case .attachResponse(let response) = self { return response }
        return nil
    }
}

/// The state requests among `bodies`.
func stateRequests(_ bodies: [Envelope.Body]) -> [StateRequest] {
    bodies.compactMap { if case .stateRequest(let request) = $0 { request } else { nil } }
}

/// The state chunks among `bodies`.
func stateChunks(_ bodies: [Envelope.Body]) -> [StateChunk] {
    bodies.compactMap { if case .stateChunk(let chunk) = $0 { chunk } else { nil } }
}

/// Every desync notice the relay of `rig` sent, to anyone.
func notices(_ rig: RelayRig) -> [DesyncNotice] {
    rig.transport.sent.compactMap { if case .desyncNotice(let notice) = $0.body { notice } else { nil } }
}
