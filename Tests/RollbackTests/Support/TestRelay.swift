import Rollback

/// A minimal relay for tests (the real one is netplay-sync): it collects every player's
/// inputs and fixes a frame's final inputs once all arrived, or once the most advanced
/// player is `lateness` frames past it (then a late player's input is substituted by its
/// last final input). It sends every player's final inputs to every client, marked
/// authoritative or substituted.
final class TestRelay {
    let id: PeerID
    let playerCount: Int
    let clients: [PeerID]
    /// How far the leading player may be past a frame before late inputs are substituted.
    let lateness: Int
    /// The most advanced player's current frame, as reported.
    private(set) var leadingFrame: Frame = nullFrame
    /// Each player's current frame, as reported.
    private var clientFrames: [Frame]
    private var lastReportMs: UInt64 = 0
    private(set) var received: [[GameInput?]]
    private(set) var final: [[GameInput]] = []
    private(set) var substituted: [[Bool]] = []
    private(set) var substitutions = 0
    private var clientAck: [Frame]
    private var receivedThrough: [Frame]
    private var synced: Set<PeerID> = []
    var outbox: [OutgoingMessage] = []

    init(id: PeerID, clients: [PeerID], lateness: Int) {
        self.id = id
        self.playerCount = clients.count
        self.clients = clients
        self.lateness = lateness
        received = Array(repeating: [], count: clients.count)
        clientAck = Array(repeating: nullFrame, count: clients.count)
        receivedThrough = Array(repeating: nullFrame, count: clients.count)
        clientFrames = Array(repeating: nullFrame, count: clients.count)
    }

    /// The slowest player's frame: what everyone should keep pace with.
    var slowestFrame: Frame { clientFrames.min() ?? nullFrame }

    var finalFrame: Frame { final.count - 1 }

    func handle(_ message: RollbackMessage, from peer: PeerID, now: UInt64) {
        guard let client = clients.firstIndex(of: peer) else { return }
        switch message {
        case .syncRequest(let request):
            outbox.append(OutgoingMessage(peer: peer, message: .syncReply(SyncReply(nonce: request.nonce))))
        case .qualityReport(let report):
            outbox.append(OutgoingMessage(peer: peer, message: .qualityReply(QualityReply(echoedSentAtMs: report.sentAtMs))))
        case .input(let input):
            guard input.player == client else { return }
            if input.ackFrame > clientAck[client] { clientAck[client] = input.ackFrame }
            leadingFrame = max(leadingFrame, input.senderFrame)
            clientFrames[client] = max(clientFrames[client], input.senderFrame)
            for (offset, value) in input.inputs.enumerated() {
                let frame = input.startFrame + offset
                while received[client].count <= frame { received[client].append(nil) }
                if received[client][frame] == nil { received[client][frame] = value }
            }
            while receivedThrough[client] + 1 < received[client].count,
                  received[client][receivedThrough[client] + 1] != nil {
                receivedThrough[client] += 1
            }
        case .inputAck(let ack):
            if ack.ackFrame > clientAck[client] { clientAck[client] = ack.ackFrame }
            leadingFrame = max(leadingFrame, ack.senderFrame)
            clientFrames[client] = max(clientFrames[client], ack.senderFrame)
        default:
            break
        }
    }

    /// Fixes frames whose deadline passed and sends every unacknowledged final input.
    func poll(now: UInt64) {
        // Time sync: tell each player how far it runs ahead of the slowest one.
        if now >= lastReportMs + 200 {
            lastReportMs = now
            for (client, peer) in clients.enumerated() where clientFrames[client] >= 0 {
                outbox.append(OutgoingMessage(peer: peer, message: .qualityReport(QualityReport(
                    sentAtMs: now, frame: slowestFrame, frameAdvantage: clientFrames[client] - slowestFrame))))
            }
        }
        while true {
            let frame = finalFrame + 1
            let allArrived = (0 ..< playerCount).allSatisfy { frame < received[$0].count && received[$0][frame] != nil }
            guard allArrived || leadingFrame - frame >= lateness else { break }
            var row = [GameInput]()
            var subs = [Bool]()
            for player in 0 ..< playerCount {
                if frame < received[player].count, let value = received[player][frame] {
                    row.append(value)
                    subs.append(false)
                } else {
                    row.append(frame > 0 ? final[frame - 1][player] : .zero)
                    subs.append(true)
                    substitutions += 1
                }
            }
            final.append(row)
            substituted.append(subs)
        }
        for (client, peer) in clients.enumerated() {
            let from = clientAck[client] + 1
            guard from <= finalFrame else {
                sendAck(to: peer, client: client)
                continue
            }
            let through = min(finalFrame, from + 63)
            for player in 0 ..< playerCount {
                var runStart = from
                var runSub = substituted[from][player]
                var run: [GameInput] = []
                for frame in from ... through {
                    if substituted[frame][player] != runSub {
                        emit(peer, player, runStart, run, runSub, client)
                        run = []
                        runStart = frame
                        runSub = substituted[frame][player]
                    }
                    run.append(final[frame][player])
                }
                emit(peer, player, runStart, run, runSub, client)
            }
        }
    }

    private func sendAck(to peer: PeerID, client: Int) {
        outbox.append(OutgoingMessage(peer: peer, message: .inputAck(InputAck(
            ackFrame: receivedThrough[client], confirmedFrame: finalFrame, senderFrame: slowestFrame))))
    }

    private func emit(_ peer: PeerID, _ player: Int, _ start: Frame, _ run: [GameInput], _ sub: Bool, _ client: Int) {
        guard !run.isEmpty else { return }
        outbox.append(OutgoingMessage(peer: peer, message: .input(InputMessage(
            player: player, origin: sub ? .substituted : .authoritative, startFrame: start, inputs: run,
            ackFrame: receivedThrough[client], confirmedFrame: finalFrame, senderFrame: slowestFrame))))
    }

    func drain() -> [OutgoingMessage] {
        defer { outbox.removeAll() }
        return outbox
    }
}
