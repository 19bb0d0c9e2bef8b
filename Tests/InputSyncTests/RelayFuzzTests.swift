import Foundation
import NetplayService
import NetplayWire
import Rollback
import Testing
@testable import InputSync
import NetplayTestSupport

@Suite("The relay under hostile input", .ownThread)
struct RelayFuzzTests {
    /// Mutated frames (bit flips, truncation, extension) of every message a peer may send, from
    /// attached players, a spectator and strangers, through the hot path and the generic path,
    /// in read batches of random length (as the runtime reads them; forwarding is queued within
    /// one, and every message sent must decode): the relay never crashes, answers with errors,
    /// and the match goes on afterwards.
    @Test func mutatedFramesNeverCrashTheRelayNorStopTheMatch() throws {
        let rig = RelayRig(checksumInterval: 10)
        let a = RelayRig.address("a"), b = RelayRig.address("b"), watcher = RelayRig.address("w")
        _ = try rig.attach(a, slot: 1)
        _ = try rig.attach(b, slot: 2)
        _ = try rig.attach(watcher, slot: 0, role: .spectator)
        let samples: [Envelope.Body] = [
            .inputBatch(InputBatch(slot: 1, startFrame: 0, inputSize: 1, inputs: [1, 2, 3], awaitedFrame: 2, currentFrame: 3)),
            .inputBatch(InputBatch(slot: 2, startFrame: 4_000_000_000, inputSize: 1, inputs: [9])),
            .checksumReport(NetplayWire.ChecksumReport(slot: 1, checksums: [FrameChecksum(frame: 10, checksum: 5)])),
            .stateChunk(StateChunk(transferId: 1, frame: 3, offset: 0, totalSize: 200_000_000, data: Array(repeating: 7, count: 64))),
            .stateTransferAck(StateTransferAck(transferId: 1, loaded: true)),
            .inputBroadcast(InputBroadcast(authoritative: true, inputSize: 1, players: [PlayerInputs(slot: 1, inputs: [1])])),
            .chatMessage(ChatMessage(text: "hi")),
            .peerStats(NetplayWire.PeerStats(slot: 1, pingMs: 50)),
            .startSessionRequest(StartSessionRequest(sessionId: rig.sessionId, participantId: "p1", participantToken: [1])),
            .attachRequest(AttachRequest(ticket: rig.ticket(slot: 2), protocolVersion: SyncProtocol.current)),
        ]
        var random = SeededRandom(seed: 0xF022)
        var errors = 0
        var batchLeft = 0
        for round in 0 ..< 3_000 {
            if batchLeft == 0 {
                rig.core.beginBatch()
                batchLeft = 1 + Int(random.below(64))
            }
            var bytes = try Envelope(body: samples[round % samples.count]).encoded()
            switch random.below(4) {
            case 0: for _ in 0 ... random.below(4) where !bytes.isEmpty { bytes[Int(random.below(UInt64(bytes.count)))] ^= UInt8(1 << random.below(8)) }
            case 1: bytes = Array(bytes.prefix(Int(random.below(UInt64(bytes.count + 1)))))
            case 2: bytes += (0 ..< random.below(16)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            default: break
            }
            let peer = [a, b, watcher, RelayRig.address("stranger")][Int(random.below(4))]
            let handled = bytes.withUnsafeBytes { raw -> Bool in
                switch rig.core.handleFast(raw, from: peer, now: rig.now) {
                case .handled: return true
                case .failed: errors += 1; return true
                case .declined: return false
                }
            }
            if !handled, let envelope = try? Envelope(decoding: bytes) {
                do { _ = try rig.core.handle(envelope, from: peer, now: rig.now) } catch { errors += 1 }
            }
            batchLeft -= 1
            if batchLeft == 0 || round % 50 == 0 {
                // The runtime closes its batch before any timer runs.
                rig.core.endBatch(now: rig.now)
                batchLeft = 0
            }
            if round % 50 == 0 { rig.advance(ms: 8) }
        }
        if batchLeft > 0 { rig.core.endBatch(now: rig.now) }
        #expect(errors > 100, "broken messages should get errors")
        // The session still works: both players (re-attached if a fuzzed attach replaced them) play on.
        let a2 = RelayRig.address("a2"), b2 = RelayRig.address("b2")
        _ = try rig.attach(a2, slot: 1, resume: true)
        _ = try rig.attach(b2, slot: 2, resume: true)
        let before = rig.core.confirmedFrames(of: rig.sessionId) ?? 0
        for frame in 0 ..< 700 {
            try? rig.batch(a2, slot: 1, start: frame, [1])
            try? rig.batch(b2, slot: 2, start: frame, [2])
        }
        rig.advance(ms: 50)
        let after = rig.core.confirmedFrames(of: rig.sessionId) ?? 0
        #expect(after > before, "the match did not go on: \(before) -> \(after)")
    }
}
