import Foundation
import NetplayService
import NetplayWire
import Testing
@testable import InputSync
import NetplayTestSupport

/// A player's self-reported ping cannot stretch how long the relay waits for it: the relay's own
/// round-trip measurement sets the deadline, up to its cap.
@Suite("Relay: measured round trips, not reported ones", .ownThread)
struct RelayRoundTripTests {
    let a = RelayRig.address("peer-a")
    let b = RelayRig.address("peer-b")

    /// Plays `frames` at 60 Hz: A acknowledges what it got at once, B what it got `bAckDelayMs`
    /// ago and reports `bPing` as its ping every frame; B sends no inputs when `bSilent`.
    final class Match {
        let rig: RelayRig
        let a: PeerAddress, b: PeerAddress
        var aHolds = 0
        var bReceived: [(at: UInt64, frames: Int)] = []

        init(_ rig: RelayRig, a: PeerAddress, b: PeerAddress) throws {
            self.rig = rig
            self.a = a
            self.b = b
            _ = try rig.attach(a, slot: 1, participant: "h-a")
            _ = try rig.attach(b, slot: 2, participant: "p-b")
        }

        static func held(_ broadcasts: [InputBroadcast]) -> Int? {
            broadcasts.flatMap { $0.players.map { Int($0.startFrame) + $0.inputs.count } }.max()
        }

        func play(_ frames: Range<Int>, bAckDelayMs: UInt64, bPing: UInt32, bSilent: Bool = false) throws {
            for frame in frames {
                rig.advance(ms: 16)
                aHolds = max(aHolds, Self.held(rig.transport.broadcasts(a, authoritative: true)) ?? 0)
                try rig.batch(a, slot: 1, start: frame, [1], awaited: aHolds, current: frame)
                if let held = Self.held(rig.transport.broadcasts(b, authoritative: true)) { bReceived.append((rig.now, held)) }
                // Its statistics keep coming, inputs or not (a lagging liar still claims its ping).
                try rig.send(.peerStats(PeerStats(slot: 2, pingMs: bPing)), from: b)
                guard !bSilent else { continue }
                let acknowledged = bReceived.filter { rig.now - $0.at >= bAckDelayMs }.map(\.frames).max() ?? 0
                try rig.batch(b, slot: 2, start: frame, [2], awaited: acknowledged, current: frame)
            }
        }

        /// The half trip (ms) the relay waited for B when it began substituting it.
        func substitutionHalfTrip() -> Int? {
            for entry in rig.transport.published where entry.topic == "sync.substituted" {
                guard case .peerEvent(let event) = entry.body, event.kind == .substituting, event.peer.slot == 2,
                      let range = event.detail.range(of: "half trip ") else { continue }
                return Int(event.detail[range.upperBound...].prefix { $0.isNumber })
            }
            return nil
        }
    }

    @Test func aReportedPingStretchesNoDeadline() throws {
        let rig = RelayRig(lagTolerance: 6)
        let match = try Match(rig, a: a, b: b)
        // B answers at once but claims a ping of 10 s.
        try match.play(0 ..< 60, bAckDelayMs: 0, bPing: 10_000)
        let measured = try #require(rig.core.participant(at: b)).rttMs
        #expect(measured < 40, "measured \(measured) ms")
        let confirmedBefore = rig.core.confirmedFrames(of: rig.sessionId) ?? 0
        // B goes quiet: it is substituted after the lag tolerance, not 5 s later.
        try match.play(60 ..< 90, bAckDelayMs: 0, bPing: 10_000, bSilent: true)
        let halfTrip = try #require(match.substitutionHalfTrip(), "B was never substituted")
        #expect(halfTrip == measured / 2)
        #expect((rig.core.confirmedFrames(of: rig.sessionId) ?? 0) >= confirmedBefore + 15)
        #expect(rig.core.stats(of: rig.sessionId)?.peers.first { $0.slot == 2 }?.pingMs == 10_000)  // shown on the HUD only
    }

    @Test func theRelaysOwnMeasurementSetsTheDeadlineUpToTheCap() throws {
        let rig = RelayRig(lagTolerance: 6)
        let match = try Match(rig, a: a, b: b)
        // B's acknowledgements take 200 ms; it claims 1 ms.
        try match.play(0 ..< 240, bAckDelayMs: 200, bPing: 1)
        let measured = try #require(rig.core.participant(at: b)).rttMs
        #expect((190 ... 240).contains(measured), "measured \(measured) ms")
        try match.play(240 ..< 280, bAckDelayMs: 200, bPing: 1, bSilent: true)
        let halfTrip = try #require(match.substitutionHalfTrip(), "B was never substituted")
        #expect(halfTrip == measured / 2)

        // A relay that counts round trips up to 100 ms waits 50 ms for B, whatever it measures.
        let capped = RelayRig(lagTolerance: 6) { $0.maxCountedRttMs = 100 }
        let slow = try Match(capped, a: a, b: b)
        try slow.play(0 ..< 240, bAckDelayMs: 200, bPing: 1)
        #expect(capped.core.participant(at: b)?.rttMs == 100)
        try slow.play(240 ..< 280, bAckDelayMs: 200, bPing: 1, bSilent: true)
        #expect(slow.substitutionHalfTrip() == 50)
    }
}
