import ArgumentParser
import Foundation
import InputSync
import NetplayAuth
import NetplayService
import NetplayWire

/// A relay rebuilding a session after a restart, from the replay the dead relay left of a long
/// match: the first resumed attach on a fresh ``RelayCore`` (finding the file, reading what the
/// rebuild seeds from it, seeding the timeline), beside reading the same file's bytes (the
/// floor) and decoding the whole file (what a rebuild read before it read only the file's tail).
/// Runs alternate; the figures are medians.
enum RebuildBenchmark {
    struct Timing {
        /// Frames in the replay.
        var frames: Int
        /// Its size in bytes.
        var fileBytes: Int
        /// The resumed attach that rebuilds the session.
        var rebuildMs: Double
        /// Reading the file's bytes.
        var rawReadMs: Double
        /// Decoding the whole file.
        var wholeDecodeMs: Double
        /// Signing one progress proof (the relay's added cost per session per statistics interval).
        var proofNs: Double
    }

    static func measure(frames: Int, runs: Int = 7) throws -> Timing {
        let keyRing = TicketKeyRing.generate()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netplay-bench-rebuild-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = RelayConfiguration(relayId: "bench-rebuild", advertisedEndpoint: "tcp://127.0.0.1:1")
        configuration.replayDirectory = directory
        configuration.startSyncSamples = 0
        let params = SyncParams(inputSize: 8, maxPlayers: 2, frameDelay: 0, frameRateMhz: 60_000, predictionWindow: 8,
                                lagToleranceFrames: 60, checksumIntervalFrames: 0)
        let signer = JoinTicketSigner(keyRing: keyRing)
        let sessionId = "rebuild-1"
        let tickets = try (1 ... 2).map { slot in
            try signer.issue(sessionId: sessionId, participantId: "p\(slot)", role: .player, slot: UInt32(slot),
                             relayId: "bench-rebuild", relayEndpoint: "", params: params, name: "p", ttlMs: 600_000)
        }
        let peers = (1 ... 2).map { PeerAddress(routingId: Array("p\($0)".utf8)) }

        // The match, played on the relay that will die: every frame's two batches, and its timers.
        let transport = CoreBenchmark.CountingTransport()  // a relay core does not own its transport
        let dead = RelayCore(configuration: configuration, verifier: JoinTicketVerifier(keyRing: keyRing), transport: transport)
        var now: UInt64 = 1_000
        for slot in 0 ..< 2 {
            _ = try dead.handle(Envelope(body: .attachRequest(AttachRequest(ticket: tickets[slot], protocolVersion: SyncProtocol.current))),
                                from: peers[slot], now: now)
        }
        for frame in 0 ..< frames {
            for slot in 0 ..< 2 {
                let batch = try Envelope(body: .inputBatch(InputBatch(slot: UInt32(slot + 1), startFrame: UInt32(frame), inputSize: 8,
                                                                      inputs: Array(repeating: UInt8(frame & 0xFF), count: 8),
                                                                      awaitedFrame: UInt32(frame), currentFrame: UInt32(frame)))).encoded()
                batch.withUnsafeBytes { raw in _ = dead.handleFast(raw, from: peers[slot], now: now) }
            }
            if frame % 4 == 0 {
                now += 67
                dead.tick(now: now)
            }
        }
        guard let url = dead.replayURL(of: sessionId) else { throw ValidationError("the relay wrote no replay") }
        let fileBytes = (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0
        let proof = ProgressProofs(keyRing: keyRing).proof(sessionId: sessionId, confirmedFrames: UInt32(frames))

        func milliseconds(_ work: () throws -> Void) rethrows -> Double {
            let started = DispatchTime.now().uptimeNanoseconds
            try work()
            return Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
        }
        var rebuild: [Double] = [], raw: [Double] = [], whole: [Double] = []
        for _ in 0 ..< runs {
            let restarted = RelayCore(configuration: configuration, verifier: JoinTicketVerifier(keyRing: keyRing), transport: transport)
            let resume = Envelope(body: .attachRequest(AttachRequest(
                ticket: tickets[0], protocolVersion: SyncProtocol.current, resume: true, confirmedFrames: UInt32(frames),
                historyFromFrame: 0, progress: proof)))
            rebuild.append(try milliseconds {
                guard case .attachResponse(let response)? = try restarted.handle(resume, from: peers[0], now: now),
                      response.recovering else { throw ValidationError("the restarted relay did not rebuild the session") }
            })
            raw.append(try milliseconds { _ = try Data(contentsOf: url) })
            whole.append(try milliseconds { _ = try ReplayFile(contentsOf: url) })
        }
        let proofs = ProgressProofs(keyRing: keyRing)
        var signed = 0
        let proofMs = milliseconds {
            for frame in 0 ..< 100_000 { signed &+= proofs.proof(sessionId: sessionId, confirmedFrames: UInt32(frame)).macs[0].mac.count }
        }
        guard signed == 100_000 * 32 else { throw ValidationError("a progress proof is not 32 bytes") }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        return Timing(frames: frames, fileBytes: fileBytes, rebuildMs: median(rebuild), rawReadMs: median(raw),
                      wholeDecodeMs: median(whole), proofNs: proofMs * 1e6 / 100_000)
    }
}
