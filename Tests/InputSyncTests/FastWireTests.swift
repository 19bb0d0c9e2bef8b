import Foundation
import NetplayService
import NetplayWire
import Testing
@testable import InputSync

@Suite("The relay's hand-written wire for per-frame traffic")
struct FastWireTests {
    @Test func inputBatchesAreReadExactlyAsNetplayWireWritesThem() throws {
        let samples = [
            InputBatch(slot: 1, startFrame: 0, inputSize: 1, inputs: [7], awaitedFrame: 0, currentFrame: 0),
            InputBatch(slot: 8, startFrame: 4_000_000_000, inputSize: 64, inputs: Array(repeating: 0xAB, count: 8192),
                       awaitedFrame: 123_456, currentFrame: 4_000_000_000),
            InputBatch(slot: 0, startFrame: 0, inputSize: 2, inputs: [], awaitedFrame: 300, currentFrame: 301),
        ]
        for (index, sample) in samples.enumerated() {
            let bytes = try Envelope(requestId: UInt64(index * 1000), body: .inputBatch(sample)).encoded()
            let parsed = try #require(bytes.withUnsafeBytes { raw in FastWire.inputBatch(raw).map { batch in
                (batch.requestId, batch.slot, batch.startFrame, batch.inputSize, Array(batch.inputs), batch.awaitedFrame, batch.currentFrame)
            } })
            #expect(parsed.0 == UInt64(index * 1000))
            #expect(parsed.1 == sample.slot && parsed.2 == sample.startFrame && parsed.3 == sample.inputSize)
            #expect(parsed.4 == sample.inputs && parsed.5 == sample.awaitedFrame && parsed.6 == sample.currentFrame)
        }
    }

    @Test func anythingUnusualIsLeftToTheValidatingPath() throws {
        let other = try Envelope(body: .ping(Ping(nonce: 1))).encoded()
        let valid = try Envelope(body: .inputBatch(InputBatch(slot: 1, inputSize: 1, inputs: [1]))).encoded()
        let zeroInputSize: [UInt8] = [0x2A, 0x04, 0x08, 0x01, 0x18, 0x00]  // input_size 0: out of range
        let slotNine: [UInt8] = [0x2A, 0x04, 0x08, 0x09, 0x18, 0x01]  // slot 9: out of range
        let truncated: [UInt8] = [0x2A, 0x09, 0x08, 0x01]
        let unknownField: [UInt8] = [0x2A, 0x02, 0x38, 0x01]
        for frame in [other, zeroInputSize, slotNine, truncated, unknownField, [0xFF, 0xFF, 0xFF]] {
            #expect(frame.withUnsafeBytes { FastWire.inputBatch($0) } == nil, "\(frame)")
        }
        #expect(valid.withUnsafeBytes { FastWire.inputBatch($0) } != nil)
    }

    @Test func theHotPathAndTheGenericPathAgree() throws {
        let fast = RelayRig()
        let slow = RelayRig()
        let a = RelayRig.address("a"), b = RelayRig.address("b")
        for rig in [fast, slow] {
            _ = try rig.attach(a, slot: 1)
            _ = try rig.attach(b, slot: 2)
            _ = rig.transport.take(a)
            _ = rig.transport.take(b)
        }
        func send(_ rig: RelayRig, _ peer: PeerAddress, slot: Int, start: Int, _ values: [UInt8], viaHotPath: Bool) throws {
            let batch = InputBatch(slot: UInt32(slot), startFrame: UInt32(start), inputSize: 1, inputs: values,
                                   awaitedFrame: UInt32(start), currentFrame: UInt32(start))
            if viaHotPath {
                let bytes = try Envelope(body: .inputBatch(batch)).encoded()
                let outcome = bytes.withUnsafeBytes { rig.core.handleFast($0, from: peer, now: rig.now) }
                guard case .handled = outcome else {
                    Issue.record("hot path did not handle a batch: \(outcome)")
                    return
                }
            } else {
                try rig.send(.inputBatch(batch), from: peer)
            }
        }
        for frame in 0 ..< 50 {
            for (rig, hot) in [(fast, true), (slow, false)] {
                try send(rig, a, slot: 1, start: frame, [UInt8(frame)], viaHotPath: hot)
                try send(rig, b, slot: 2, start: frame, [UInt8(frame * 3 & 0xFF)], viaHotPath: hot)
                rig.advance(ms: 16)
            }
        }
        for peer in [a, b] {
            let viaHot = fast.transport.broadcasts(peer), viaGeneric = slow.transport.broadcasts(peer)
            #expect(viaHot.count == viaGeneric.count && viaHot == viaGeneric, "the two paths sent different inputs")
        }
        #expect(fast.core.confirmedFrames(of: fast.sessionId) == 50)
        // A broken rule on the hot path is refused with the request's id, nothing stored.
        let wrongSlot = try Envelope(requestId: 99, body: .inputBatch(InputBatch(slot: 2, startFrame: 50, inputSize: 1, inputs: [1]))).encoded()
        let outcome = wrongSlot.withUnsafeBytes { fast.core.handleFast($0, from: a, now: fast.now) }
        guard case .failed(let error, let requestId) = outcome else {
            Issue.record("a batch for another slot was not refused")
            return
        }
        #expect(error.code == .permissionDenied && requestId == 99)
        // Frames of unattached peers go to the generic path (which answers UNAUTHENTICATED).
        let stranger = try Envelope(body: .inputBatch(InputBatch(slot: 1, inputSize: 1, inputs: [1]))).encoded()
        guard case .declined = stranger.withUnsafeBytes({ fast.core.handleFast($0, from: RelayRig.address("x"), now: fast.now) }) else {
            Issue.record("an unattached peer's batch was handled")
            return
        }
    }
}
