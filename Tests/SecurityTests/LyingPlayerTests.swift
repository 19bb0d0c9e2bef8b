import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing
import ZeroMQ

/// A player who holds a genuine ticket (anyone can host a room) and then lies to a real
/// netplay-sync process: garbage frames, batches for another player's slot, batches that run its
/// own slot far ahead again and again, impossible frame numbers, checksum reports of frames that
/// never happened, state chunks nobody asked for, server-to-client messages, and a spectator that
/// resumes claiming frames the match never reached. The relay's own logic is tested in process
/// (RelayRig); this is the process itself, parsing what a socket delivers. It must survive all of
/// it: the honest player in the liar's session keeps playing on the liar's real inputs only, and
/// an honest match of two netplay-peer processes on the same relay ends with equal checksums.
@Suite("Attack: a player that lies to a real relay", .ownThread)
struct LyingPlayerTests {
    static let content = ContentInfo(gameName: "Liar", crc32: 0x0DEC_E1FE, coreId: "nestopia", coreVersion: "1.52.0", system: "nes")
    static let honestValue: UInt8 = 0x42
    static let forgedValue: UInt8 = 0x66

    /// A raw player on the relay: its ticket and socket.
    struct RawPlayer {
        let ticket: JoinTicket
        let socket: BlockingClient
        var slot: UInt32 { ticket.slot }
        var inputSize: Int { Int(ticket.params.inputSize) }

        func send(_ body: Envelope.Body) throws { try socket.sendRaw(try Envelope(body: body).encoded()) }

        /// Inputs of `count` frames from `start`, every byte `value`.
        func batch(slot: UInt32? = nil, start: UInt32, count: Int, value: UInt8, inputSize: Int? = nil,
                   awaited: UInt32 = 0, current: UInt32? = nil) -> Envelope.Body {
            let size = inputSize ?? self.inputSize
            return .inputBatch(InputBatch(slot: slot ?? self.slot, startFrame: start, inputSize: UInt32(size),
                                          inputs: [UInt8](repeating: value, count: size * count), awaitedFrame: awaited,
                                          currentFrame: current ?? start &+ UInt32(count)))
        }

        /// What arrived since the last call, decoded (undecodable frames are a failure); the
        /// relay's pings are answered, as a client does.
        func drain() -> [Envelope.Body] {
            var bodies: [Envelope.Body] = []
            while let frame = try? socket.receiveRaw() {
                guard let envelope = try? Envelope(decoding: frame) else {
                    Issue.record("the relay sent an undecodable frame of \(frame.count) bytes")
                    continue
                }
                if case .ping(let ping) = envelope.body {
                    try? send(.pong(Pong(nonce: ping.nonce, echoSentAtUs: ping.sentAtUs)))
                }
                bodies.append(envelope.body)
            }
            return bodies
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aLyingPlayerStopsNeitherItsPartnerNorAnotherMatchOnTheRelay() throws {
        var options = TestCluster.Options(secret: String(repeating: "4c", count: 32))
        options.name = "liar"
        options.coordinatorArguments = ["--password-cost", "minimum"]
        let cluster = try TestCluster(options)
        let relay = try #require(cluster.relay)

        // An honest match of two real peers on the same relay, played while the liar lies.
        let frames = 1_200
        let honestArguments = ["--room", "honest", "--frames", "\(frames)", "--timeout", "150"]
        let honestHost = try cluster.peer("host", ["--players", "2", "--frame-rate", "120", "--input-seed", "1"] + honestArguments)
        #expect(honestHost.waitFor("session s-", within: 30), "the honest host got no session: \(honestHost.log)")
        let honestJoin = try cluster.peer("join", ["--input-seed", "2"] + honestArguments)

        // The liar hosts its own room; bob, honest, joins it; a spectator place is for the liar too.
        let coordinator = try BlockingClient(endpoint: cluster.coordinatorEndpoint, timeout: 5, serverKey: cluster.serverKey)
        let settings = SessionSettings(roomName: "liar", content: Self.content, transport: .relay, maxPlayers: 2,
                                       spectatorsAllowed: true, maxSpectators: 2)
        let (created, malloryTicket) = try coordinator.createSession(settings, hostName: "mallory")
        func ticket(_ role: Role, _ name: String) throws -> JoinTicket {
            try coordinator.ticket(session: created.session.sessionId, role, name, content: Self.content)
        }
        func attached(_ ticket: JoinTicket, resume: Bool = false, claiming confirmed: UInt32 = 0) throws -> RawPlayer {
            let socket = try BlockingClient(endpoint: ticket.relayEndpoint, timeout: 0.05, serverKey: cluster.serverKey)
            socket.timeout = 5
            guard case .attachResponse = try socket.request(.attachRequest(AttachRequest(
                ticket: ticket, protocolVersion: SyncProtocol.current, resume: resume, confirmedFrames: confirmed,
                content: Self.content, historyFromFrame: confirmed))) else { throw HarnessError("\(ticket.name) could not attach") }
            socket.timeout = 0.01
            return RawPlayer(ticket: ticket, socket: socket)
        }
        let mallory = try attached(malloryTicket)
        let bob = try attached(try ticket(.player, "bob"))
        #expect(mallory.slot != bob.slot)

        let lies = try Self.lies(of: mallory, about: bob, in: created.session.sessionId)
        // A spectator resuming with a claim of frames the match never reached (no proof).
        let lyingSpectator = try? attached(try ticket(.spectator, "eve"), resume: true, claiming: UInt32(Int32.max) - 1)

        // The match starts once the relay measured both players' round trips.
        var started = Set<UInt32>()
        let startDeadline = Date().addingTimeInterval(20)
        while started.count < 2, Date() < startDeadline {
            for player in [mallory, bob] {
                for body in player.drain() { if case .attachResponse(let welcome) = body, welcome.running { started.insert(player.slot) } }
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
        #expect(started.count == 2, "the liar's match never started")

        // Bob plays frame after frame; mallory plays her own frames honestly in between the lies,
        // and also runs her slot ahead, batch after batch.
        var bobNext: UInt32 = 0, malloryNext: UInt32 = 0, runAhead: UInt32 = 0
        var bobConfirmed: UInt32 = 0
        var forgedSeen = false, bobSeenByMallory = false
        let deadline = Date().addingTimeInterval(30)
        var round = 0
        while Date() < deadline, bobConfirmed < 900 {
            try bob.send(bob.batch(start: bobNext, count: 4, value: Self.honestValue))
            bobNext += 4
            if malloryNext + 8 <= bobNext {
                try mallory.send(mallory.batch(start: malloryNext, count: 8, value: 1))
                malloryNext += 8
            }
            try mallory.socket.sendRaw(lies[round % lies.count])
            if round % 5 == 0 {  // each batch picks up where the last one ended: past the history in a second
                runAhead = max(runAhead, malloryNext)
                for _ in 0 ..< 5 {
                    try mallory.send(mallory.batch(start: runAhead, count: 120, value: 1))
                    runAhead += 120
                }
            }
            if round % 25 == 0 { try mallory.socket.sendRawMultipart([[1, 2], [3]]) }
            for body in bob.drain() {
                if case .inputBroadcast(let broadcast) = body { bobConfirmed = max(bobConfirmed, broadcast.confirmedFrames) }
            }
            for body in mallory.drain() {
                guard case .inputBroadcast(let broadcast) = body else { continue }
                for inputs in broadcast.players + broadcast.forwarded where inputs.slot == bob.slot && !inputs.inputs.isEmpty {
                    if inputs.inputs.contains(Self.forgedValue) { forgedSeen = true }
                    if inputs.inputs.contains(Self.honestValue) { bobSeenByMallory = true }
                }
            }
            _ = lyingSpectator?.drain()
            round += 1
            Thread.sleep(forTimeInterval: 0.01)
        }

        // Last, a frame over the size limit: libzmq drops the liar's connection.
        try mallory.socket.sendRaw([UInt8](repeating: 0xAB, count: Int(SocketDefaults.maxMessageBytes) + 1))
        Thread.sleep(forTimeInterval: 0.2)

        #expect(relay.waitForExit(seconds: 0) == nil, "the relay died:\n\(relay.log.suffix(3000))")
        #expect(bobConfirmed >= 900, "bob's match stalled at \(bobConfirmed) confirmed frames after \(round) rounds")
        #expect(bobSeenByMallory, "mallory never got bob's inputs")
        #expect(!forgedSeen, "inputs forged for bob's slot reached the match")
        let probe = try BlockingClient(endpoint: cluster.relayEndpoint, timeout: 2, serverKey: cluster.serverKey)
        #expect(ClusterLaunchPlan.answersHealth(probe), "the relay no longer answers")

        // The honest match on the same relay was not touched.
        let results = [honestHost, honestJoin].map { $0.result(within: 120) }
        for (process, result) in zip([honestHost, honestJoin], results) {
            #expect(result?.frames == frames, "\(process.name) failed:\n\(process.log.suffix(3000))")
        }
        #expect(Set(results.compactMap { $0?.checksum }).count == 1, "\(results)")
        #expect(relay.waitForExit(seconds: 0) == nil, "the relay died:\n\(relay.log.suffix(3000))")
    }

    /// The lies that are not about the liar's own frames, one frame each: each must be refused or
    /// dropped, and none may be fatal.
    static func lies(of mallory: RawPlayer, about bob: RawPlayer, in sessionId: String) throws -> [[UInt8]] {
        func frame(_ body: Envelope.Body) throws -> [UInt8] { try Envelope(body: body).encoded() }
        var random = SystemRandomNumberGenerator()
        var lies: [[UInt8]] = [[], [0xFF], (0 ..< 2_000).map { _ in UInt8.random(in: 0 ... 255, using: &random) }]
        lies.append(Array(try frame(mallory.batch(start: 0, count: 8, value: 1)).dropLast(3)))
        lies.append(try frame(mallory.batch(slot: bob.slot, start: 0, count: 300, value: forgedValue)))
        lies.append(try frame(mallory.batch(start: 0, count: 4, value: 1, inputSize: mallory.inputSize + 1)))
        lies.append(try frame(mallory.batch(start: UInt32.max - 1, count: 4, value: 1)))
        lies.append(try frame(mallory.batch(start: 0, count: 1, value: 1, awaited: UInt32.max, current: UInt32.max)))
        // What the Swift API refuses to encode: a slot past the range, inputs that are not whole
        // frames, a checksum report over the 16 a report may hold.
        let inputSize = UInt64(mallory.inputSize), slot = UInt64(mallory.slot)
        lies.append(ProtobufWriter.envelope(requestId: 0, body: 5) {
            $0.varintField(1, 99); $0.varintField(2, 0); $0.varintField(3, inputSize); $0.bytesField(4, [1, 1])
        })
        lies.append(ProtobufWriter.envelope(requestId: 0, body: 5) {
            $0.varintField(1, slot); $0.varintField(2, 0); $0.varintField(3, 3); $0.bytesField(4, [1, 1, 1, 1])
        })
        lies.append(ProtobufWriter.envelope(requestId: 0, body: 7) { report in
            report.varintField(1, slot)
            for index in 0 ..< 400 { report.messageField(2) { $0.varintField(1, UInt64(40 + 2 * index)); $0.varintField(2, 9) } }
        })
        // Within the limit, hundreds of frames that never happened, and another player's report.
        for report in 0 ..< 25 {
            let checksums = (0 ..< 16).map { FrameChecksum(frame: UInt32(40 + 32 * report + 2 * $0), checksum: 9) }
            lies.append(try frame(.checksumReport(ChecksumReport(slot: mallory.slot, checksums: checksums))))
        }
        lies.append(try frame(.checksumReport(ChecksumReport(slot: bob.slot, checksums: [
            FrameChecksum(frame: 60, checksum: 1), FrameChecksum(frame: UInt32.max, checksum: 2)]))))
        // A state nobody asked for, an acknowledgement of a transfer that never was.
        lies.append(try frame(.stateChunk(StateChunk(transferId: 7, frame: UInt32.max, offset: 256 << 20 - 3,
                                                     totalSize: 256 << 20, data: [1, 2, 3], last: true))))
        lies.append(ProtobufWriter.envelope(requestId: 0, body: 9) {
            $0.varintField(1, 7); $0.varintField(3, UInt64.max - 1); $0.varintField(4, UInt64.max); $0.bytesField(5, [1, 2, 3])
        })
        lies.append(try frame(.stateTransferAck(StateTransferAck(transferId: 7, receivedBytes: UInt64.max, loaded: true))))
        // What only the relay sends; a restart from a frame that never was; bob's ticket again.
        lies.append(try frame(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, confirmedFrames: UInt32.max))))
        lies.append(try frame(.timeSyncHint(TimeSyncHint(framesAhead: -600, recommendedWaitFrames: 600))))
        lies.append(try frame(.startSessionRequest(StartSessionRequest(sessionId: sessionId, participantId: mallory.ticket.participantId,
                                                                       restart: true, restartFrame: UInt32.max))))
        lies.append(try frame(.attachRequest(AttachRequest(ticket: bob.ticket, protocolVersion: UInt32.max))))
        return lies
    }
}
