import Foundation
import NetplayService
import NetplayWire
import Testing
@testable import InputSync
import NetplayTestSupport

@Suite("The relay's protobuf-c hot path for per-frame traffic", .ownThread)
struct RelayHotPathTests {
    @Test func broadcastsFromTheTimelineAreWhatTheGenericEncoderWrites() throws {
        let timeline = InputTimeline(slotCount: 3, inputSize: 2, capacity: 64)
        for frame in 0 ..< 20 {
            for slot in 0 ..< 3 {
                if slot == 2 && frame % 5 == 0 {
                    timeline.appendSubstitute(slot: slot)
                } else {
                    let bytes: [UInt8] = [UInt8(frame), UInt8(slot)]
                    bytes.withUnsafeBytes { timeline.append(slot: slot, from: $0, status: .received) }
                }
            }
        }
        _ = timeline.updateConfirmed()
        let packer = InputBroadcastPacker(initialBytes: 16)
        let frame = try #require(RelayWire.inputBroadcast(packer, authoritative: true, timeline: timeline, players: 4 ..< 12,
                                                          provisional: [], forwarded: [RelayWire.Run(slot: 1, from: 12, to: 15)],
                                                          confirmedFrames: 20, awaitedInputFrame: 19))
        let players = (0 ..< 3).map { slot in
            PlayerInputs(slot: UInt32(slot + 1), startFrame: 4, inputs: timeline.inputs(slot: slot, from: 4, to: 12),
                         status: timeline.statusRun(slot: slot, from: 4, to: 12))
        }
        #expect(players[2].status.contains(.substituted) && players[0].status.isEmpty)
        let expected = try Envelope(body: .inputBroadcast(InputBroadcast(
            authoritative: true, inputSize: 2, players: players, confirmedFrames: 20, awaitedInputFrame: 19,
            forwarded: [PlayerInputs(slot: 2, startFrame: 12, inputs: timeline.inputs(slot: 1, from: 12, to: 15))]))).encoded()
        #expect(Array(frame) == expected)
        let provisional = try #require(RelayWire.inputBroadcast(packer, authoritative: false, timeline: timeline, players: nil,
                                                                provisional: [RelayWire.Run(slot: 0, from: 18, to: 20)],
                                                                forwarded: [], confirmedFrames: 17, awaitedInputFrame: 0))
        let expectedProvisional = try Envelope(body: .inputBroadcast(InputBroadcast(
            authoritative: false, inputSize: 2, players: [PlayerInputs(slot: 1, startFrame: 18, inputs: timeline.inputs(slot: 0, from: 18, to: 20))],
            confirmedFrames: 17, awaitedInputFrame: 0))).encoded()
        #expect(Array(provisional) == expectedProvisional)
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
