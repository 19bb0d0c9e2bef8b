import Foundation
import NetplayService
import NetplayWire
import Testing
@testable import InputSync
import NetplayTestSupport

/// The relay's side of play on real paths: round trips measured before the start, a
/// staggered start, symmetric time-sync hints and the automatic input delay.
@Suite("Relay: synchronised start, symmetric time sync, automatic delay", .ownThread)
struct RelayStartSyncTests {
    let a = RelayRig.address("peer-a")
    let b = RelayRig.address("peer-b")

    /// Pings the relay sent to `peer` since the last take (other messages are dropped).
    func pings(_ rig: RelayRig, _ peer: PeerAddress) -> [Ping] {
        rig.transport.take(peer).compactMap { if case .ping(let ping) = $0 { ping } else { nil } }
    }

    func syncedRig(auto: Bool = false) -> RelayRig {
        let rig = RelayRig { $0.startSyncSamples = 3 }
        rig.params.frameDelayAuto = auto
        return rig
    }

    /// Answers every ping of `a` after `rttA` ms and of `b` after `rttB` ms, until the match runs
    /// (at most `forMs`).
    func answerPings(_ rig: RelayRig, rttA: UInt64, rttB: UInt64, forMs: Int = 2_000) throws -> (a: [Envelope.Body], b: [Envelope.Body]) {
        var seenA: [Envelope.Body] = [], seenB: [Envelope.Body] = []
        var due: [(at: UInt64, peer: PeerAddress, ping: Ping)] = []
        for _ in 0 ..< forMs {
            for (peer, rtt) in [(a, rttA), (b, rttB)] {
                for body in rig.transport.take(peer) {
                    if case .ping(let ping) = body { due.append((rig.now + rtt, peer, ping)) } else if peer == a { seenA.append(body) } else { seenB.append(body) }
                }
            }
            for item in due where item.at <= rig.now {
                try rig.send(.pong(Pong(nonce: item.ping.nonce, echoSentAtUs: item.ping.sentAtUs)), from: item.peer)
            }
            due.removeAll { $0.at <= rig.now }
            if seenA.contains(where: { $0.attachResponse?.running == true }) { return (seenA, seenB + rig.transport.take(b)) }
            rig.advance(ms: 1)
        }
        return (seenA, seenB)
    }

    @Test func theMatchStartsOnceEveryRoundTripIsMeasuredAndTheNearPlayerWaitsForTheFarOne() throws {
        let rig = syncedRig()
        _ = try rig.attach(a, slot: 1)
        let second = try rig.attach(b, slot: 2)
        #expect(!second.running, "the start waits for the round trips")
        let startedAt = rig.now
        let (seenA, seenB) = try answerPings(rig, rttA: 20, rttB: 100)
        let startA = try #require(seenA.compactMap(\.attachResponse).first { $0.running })
        let startB = try #require(seenB.compactMap(\.attachResponse).first { $0.running })
        // Three round trips of the far player, one at a time: about 300 ms, far below the timeout.
        #expect(rig.now - startedAt >= 300 && rig.now - startedAt < 1_000)
        // a is 40 ms closer one way (50 - 10): it waits that long, b not at all.
        #expect((38_000 ... 42_000).contains(startA.startDelayUs), "a waits \(startA.startDelayUs) µs")
        #expect(startB.startDelayUs == 0)
    }

    @Test func theStartWaitsForEveryPathAPlayerAnnouncedAndTakesEachOfThem() throws {
        let rig = syncedRig()
        let a2 = RelayRig.address("peer-a-path-2")
        _ = try rig.attach(a, slot: 1, paths: 2)
        _ = try rig.attach(b, slot: 2)
        // Every round trip is measured within ~100 ms, but a's second connection is not attached.
        let early = try answerPings(rig, rttA: 20, rttB: 20, forMs: 600)
        #expect(!early.a.contains { $0.attachResponse?.running == true }, "the start waits for a's second path")
        let path = try rig.send(.attachRequest(AttachRequest(ticket: rig.ticket(slot: 1), protocolVersion: SyncProtocol.current, additionalPath: true)), from: a2)
        #expect(path?.attachResponse?.running == false)
        rig.advance(ms: 8)
        #expect(rig.transport.take(a).contains { $0.attachResponse?.running == true })
        #expect(rig.transport.take(a2).contains { $0.attachResponse?.running == true }, "the start goes on the new path too")
    }

    @Test func theHostAloneStartsWhenItAsks() throws {
        let rig = syncedRig()
        _ = try rig.attach(a, slot: 1, participant: "h-host")
        let reply = try rig.send(.startSessionRequest(StartSessionRequest(sessionId: rig.sessionId)), from: a)
        #expect(reply.map { if case .ack = $0 { true } else { false } } == true, "\(String(describing: reply))")
        let (seenA, _) = try answerPings(rig, rttA: 20, rttB: 20, forMs: 2_100)
        #expect(seenA.contains { $0.attachResponse?.running == true })
    }

    @Test func aPathThatNeverComesDelaysTheStartOnlyUntilTheStartSyncTimeout() throws {
        let rig = syncedRig()
        _ = try rig.attach(a, slot: 1, paths: 3)
        _ = try rig.attach(b, slot: 2, paths: 99)  // more than the relay allows: counted as its limit
        let startedAt = rig.now
        let (seenA, _) = try answerPings(rig, rttA: 20, rttB: 20, forMs: 2_100)
        #expect(seenA.contains { $0.attachResponse?.running == true })
        #expect(rig.now - startedAt >= 1_990, "started after \(rig.now - startedAt) ms, before the timeout")
    }

    @Test func aPongThatEchoesNoPingInFlightCountsForNothing() throws {
        let rig = syncedRig()
        _ = try rig.attach(a, slot: 1)
        _ = try rig.attach(b, slot: 2)
        // Forged answers, sent before any ping could be seen: wrong nonces.
        for nonce in 1 ... 10 as ClosedRange<UInt64> {
            try rig.send(.pong(Pong(nonce: nonce, echoSentAtUs: rig.now * 1000)), from: a)
            try rig.send(.pong(Pong(nonce: nonce, echoSentAtUs: rig.now * 1000)), from: b)
        }
        rig.advance(ms: 1_900)
        #expect(!rig.transport.take(a).contains { $0.attachResponse?.running == true }, "no round trip was measured")
        rig.advance(ms: 200)
        // The timeout starts it anyway, without staggering.
        let start = try #require(rig.transport.take(a).compactMap(\.attachResponse).first { $0.running })
        #expect(start.startDelayUs == 0)
    }

    @Test func theAutomaticDelayHidesHalfThePathAndIsSentWithTheStart() throws {
        let rig = syncedRig(auto: true)
        _ = try rig.attach(a, slot: 1)
        _ = try rig.attach(b, slot: 2)
        // Round trips 100 and 120 ms, less half a frame each (the peer's tick): the path
        // a -> relay -> b is ~102 ms, 6.1 frames; half is 3.05.
        let (seenA, _) = try answerPings(rig, rttA: 100, rttB: 120)
        let start = try #require(seenA.compactMap(\.attachResponse).first { $0.running })
        #expect(start.params.frameDelay == 3 && start.params.frameDelayAuto)
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(session.recommendedFrameDelay() == 3)
        // Round trips grow to 300 ms: 17.5 frames of path, 8.75 -> 8 frames (the cap). A change of
        // less than 0.65 frames would keep the current delay.
        for player in session.players.compactMap({ $0 }) {
            player.smoothedRttMs = 128
            player.rttMs = 128
        }
        #expect(session.recommendedFrameDelay() == 3, "3.6 frames: not far enough from 3")
        #expect(session.recommendedFrameDelay(keepingCurrent: false) == 4)
        for player in session.players.compactMap({ $0 }) {
            player.smoothedRttMs = 300
            player.rttMs = 300
        }
        #expect(session.recommendedFrameDelay() == 8)
        // Adopted only after it was called for throughout the hold (2 s), then told in every hint.
        var frame = 0
        func play(ms: Int) throws {
            for _ in 0 ..< ms / 100 {
                try rig.batch(a, slot: 1, start: frame, [1])
                try rig.batch(b, slot: 2, start: frame, [2])
                frame += 1
                rig.advance(ms: 100)
            }
        }
        try play(ms: 1_000)
        #expect(session.params.frameDelay == 3)
        try play(ms: 1_500)
        #expect(session.params.frameDelay == 8)
        let hints = rig.transport.take(a).compactMap { if case .timeSyncHint(let hint) = $0 { hint } else { nil } }
        #expect(hints.last?.frameDelay == 8)
    }

    @Test func eachPlayerHearsItsOffsetFromTheMeanAndTheOffsetsSumToZero() throws {
        let rig = RelayRig()
        _ = try rig.attach(a, slot: 1)
        _ = try rig.attach(b, slot: 2)
        _ = rig.transport.take(a)
        _ = rig.transport.take(b)
        // a sends every frame 12 ms before b (both with no measured round trip): a is 6 ms ahead
        // of the mean, b 6 ms behind it.
        for frame in 0 ..< 120 {
            // No acknowledgements: no round trip is measured, so arrival is sending time.
            try rig.batch(a, slot: 1, start: frame, [1])
            rig.advance(ms: 12)
            try rig.batch(b, slot: 2, start: frame, [2])
            rig.advance(ms: 5)
        }
        rig.advance(ms: 400)
        func lastHint(_ peer: PeerAddress) -> TimeSyncHint? {
            rig.transport.take(peer).compactMap { if case .timeSyncHint(let hint) = $0 { hint } else { nil } }.last
        }
        let hintA = try #require(lastHint(a)), hintB = try #require(lastHint(b))
        #expect((5_000 ... 7_000).contains(hintA.aheadUs), "a: \(hintA.aheadUs) µs")
        #expect((-7_000 ... -5_000).contains(hintB.aheadUs), "b: \(hintB.aheadUs) µs")
        #expect(abs(hintA.aheadUs + hintB.aheadUs) <= 200)
        #expect(hintA.frameDelay == 0, "no automatic delay in this session")
    }
}
