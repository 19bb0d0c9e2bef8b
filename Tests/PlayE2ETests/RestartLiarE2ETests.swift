import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

/// A relay killed mid-match with a lying player in it: real relay, coordinator and an honest
/// netplay-peer host, and Mallory, a raw ZeroMQ client that plays the match honestly until the
/// relay dies, then comes back claiming fewer confirmed frames than her genuine progress proof
/// says the match had, and sends her own inputs from there slowly enough to hold the match.
@Suite("A liar in a rebuilt match", .ownThread)
struct RestartLiarE2ETests {
    /// Found in the last note's review, on the relay core alone: moving her held frames a
    /// quarter second a second kept the rebuilt match crawling through every frame she said
    /// she lacked. Here on real processes: below what her own proof says was confirmed, she
    /// forfeits those frames to the host's history, and the host plays the match to its end.
    @Test(.timeLimit(.minutes(4)))
    func aPlayerTricklingTheFramesHerProofSaysWereConfirmedForfeitsThem() throws {
        let cluster = try PlayCluster()
        let host = try cluster.host(room: "restart-liar", players: 2, seed: 41)
        let sessionId = try #require(host.log.firstMatch(of: /session (s-[A-Za-z0-9_-]+)/).map { String($0.1) },
                                     "no session in the host's log: \(host.log)")
        let coordinator = try BlockingClient(endpoint: cluster.coordinatorEndpoint, timeout: 5)
        let arena = ContentInfo(gameName: "Arena", crc32: 0xA7E7_A001, coreId: "netplay.games.arena", coreVersion: "1", system: "netplay")
        guard case .joinSessionResponse(let joined) = try coordinator.request(.joinSessionRequest(JoinSessionRequest(
            sessionId: sessionId, role: .player, name: "mallory", content: arena))), let ticket = joined.ticket else {
            Issue.record("mallory could not join")
            return
        }
        let mallory = try LyingPlayer(ticket: ticket, endpoint: cluster.relayEndpoint, content: arena)
        try mallory.attach(resume: nil)
        #expect(host.waitFor("match running", within: 60), "the match did not start: \(host.log)")
        mallory.play(seconds: 8)
        let proof = try #require(mallory.proof, "no progress proof reached her")
        #expect(proof.confirmedFrames > 600, "the match came to \(proof.confirmedFrames) frames")

        // Restarted without the dead relay's replay (a replica taking the session over): the
        // rebuild goes by the claims and the proofs.
        try cluster.restartRelayAfterCrash(extraArguments: ["--no-replays"])
        let events = try cluster.keys.operatorSubscriber(events: cluster.relayEvents, prefixes: ["sync."])
        // 400 frames short: at her pace still short of her proof once the wait for returning
        // players and its grace (5 s) are over, and above where the host's claim starts the
        // rebuild should it be back first (600 frames before its own).
        let claim = Int(proof.confirmedFrames) - 400
        try mallory.attach(resume: (claim: claim, proof: proof))
        // Five frames every 100 ms, 40 % of the match's 120 frames per second: a match moving
        // that fast is not held by the relay's first measure.
        var forfeited: String?
        var seen: [String] = []
        let deadline = Date().addingTimeInterval(20)
        var next = claim
        while Date() < deadline, forfeited == nil {
            mallory.send(frames: next ..< next + 5)
            next += 5
            mallory.drain(for: 0.1)
            while let event = try events.next(timeout: 0) {
                seen.append(event.topic)
                if event.topic == "sync.history_forfeited", case .success(let envelope) = event.envelope,
                   case .eventRecord(let record) = envelope.body {
                    forfeited = record.message
                }
            }
        }
        #expect(forfeited?.contains("slot 2") == true, "no forfeit in \(seen); relay:\n\(cluster.relay?.log.suffix(4000) ?? "")")
        let result = host.result(within: 150)
        #expect(result?.frames == Match.frames, "the host did not finish: \(host.log.suffix(3000))")
    }
}

/// A player speaking the relay's protocol by hand (a raw DEALER), to lie where NetplayKit would
/// not: it attaches, answers the relay's pings, sends one zero input per frame some frames ahead
/// of the confirmed ones, and keeps the newest progress proof the relay's statistics carry.
final class LyingPlayer {
    let ticket: JoinTicket
    let client: BlockingClient
    let content: ContentInfo
    /// The newest progress proof received.
    private(set) var proof: ProgressProof?
    /// The relay's confirmed frames, and the first of her frames it still awaits.
    private var confirmed = 0
    private var awaited = 0

    init(ticket: JoinTicket, endpoint: String, content: ContentInfo) throws {
        self.ticket = ticket
        self.content = content
        client = try BlockingClient(endpoint: endpoint, timeout: 5)
    }

    /// Attaches: fresh, or resuming with `resume`'s claim (saying she holds her inputs from
    /// there) and proof. Retries for 20 s while the relay is not up or not ready.
    func attach(resume: (claim: Int, proof: ProgressProof)?) throws {
        let request = AttachRequest(ticket: ticket, protocolVersion: SyncProtocol.current, clientVersion: "mallory",
                                    resume: resume != nil, confirmedFrames: UInt32(resume?.claim ?? 0),
                                    firstUnackedFrame: UInt32(resume?.claim ?? 0), content: content,
                                    historyFromFrame: UInt32(resume?.claim ?? 0), paths: 1, progress: resume?.proof)
        let deadline = Date().addingTimeInterval(20)
        while true {
            if case .attachResponse(let response)? = try? client.requestEnvelope(.attachRequest(request)).body {
                awaited = Int(response.awaitedInputFrame)
                confirmed = Int(response.confirmedFrames)
                return
            }
            guard Date() < deadline else { throw HarnessError("the relay did not take Mallory's attach") }
            Thread.sleep(forTimeInterval: 0.2)
        }
    }

    /// Plays honestly for `seconds`: her inputs up to 20 frames past the confirmed ones.
    func play(seconds: Double) {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            send(frames: awaited ..< max(awaited, confirmed + 20))
            drain(for: 0.008)
        }
    }

    /// Sends her zero inputs for `frames`.
    func send(frames: Range<Int>) {
        guard !frames.isEmpty else { return }
        let size = Int(ticket.params.inputSize)
        let batch = InputBatch(slot: ticket.slot, startFrame: UInt32(frames.lowerBound), inputSize: UInt32(size),
                               inputs: Array(repeating: 0, count: frames.count * size), awaitedFrame: UInt32(confirmed),
                               currentFrame: UInt32(frames.upperBound - 1))
        if let bytes = try? Envelope(body: .inputBatch(batch)).encoded() { try? client.sendRaw(bytes) }
    }

    /// Reads what the relay sends for `seconds`: answers pings, notes the confirmed frames,
    /// what it awaits of hers, and progress proofs.
    func drain(for seconds: Double) {
        let end = Date().addingTimeInterval(seconds)
        client.timeout = 0.002
        defer { client.timeout = 5 }
        while Date() < end {
            guard let frame = try? client.receiveRaw(), let envelope = try? Envelope(decoding: frame) else { continue }
            switch envelope.body {
            case .ping(let ping):
                if let bytes = try? Envelope(body: .pong(Pong(nonce: ping.nonce, echoSentAtUs: ping.sentAtUs))).encoded() {
                    try? client.sendRaw(bytes)
                }
            case .inputBroadcast(let broadcast):
                confirmed = max(confirmed, Int(broadcast.confirmedFrames))
                awaited = max(awaited, Int(broadcast.awaitedInputFrame))
            case .sessionStats(let stats):
                if let progress = stats.progress, progress.confirmedFrames >= proof?.confirmedFrames ?? 0 { proof = progress }
            default:
                break
            }
        }
    }
}
