import Foundation
import NetplayAuth
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing
@testable import InputSync

/// A relay's periodic per-session work (statistics every second, time-sync hints) is spread
/// over the interval: sessions that started in the same moment must not all send in one timer
/// tick (at 1,000 sessions that stalled the reactor for milliseconds once a second).
@Suite("Relay timer spread", .ownThread)
struct RelayTimerSpreadTests {
    @Test func sessionsStartedTogetherGetTheirOwnPhase() {
        // 1,000 sessions, 200 ticks of 5 ms in a 1,000 ms interval: 5 per tick on average.
        var perTick = [Int](repeating: 0, count: 200)
        for index in 0 ..< 1000 {
            let phase = RelaySession.phase(of: "s-\(index)") % 1000
            perTick[Int(phase) / 5] += 1
        }
        #expect(perTick.max()! <= 20, "\(perTick.max()!) sessions share one tick")
        #expect(perTick.filter { $0 == 0 }.count < 20)
        #expect(RelaySession.phase(of: "s-1") == RelaySession.phase(of: "s-1"), "stable for a session id")
    }

    @Test func aPeriodicJobKeepsItsPhaseAndCatchesUpAfterAStall() {
        var last: UInt64 = 1_000 - 337  // a phase of 337 ms into a 1,000 ms interval
        var fired: [UInt64] = []
        // Ticks every 5 ms with a millisecond of jitter: the job stays on 663 + k * 1000.
        var now: UInt64 = 1_000
        while now < 6_000 {
            if RelaySession.due(&last, every: 1_000, now: now) { fired.append(now) }
            now += 5 + (now % 3 == 0 ? 1 : 0)
        }
        #expect(fired.count == 5)
        for (index, time) in fired.enumerated() {
            let target: UInt64 = 1_663 + UInt64(index) * 1_000
            #expect(time >= target && time < target + 7, "run \(index) at \(time), due at \(target)")
        }
        // After a stall of more than an interval it runs once and restarts its phase there.
        var stalled: UInt64 = 0
        #expect(RelaySession.due(&stalled, every: 1_000, now: 5_500))
        #expect(stalled == 5_500)
        #expect(!RelaySession.due(&stalled, every: 1_000, now: 6_499))
        #expect(RelaySession.due(&stalled, every: 1_000, now: 6_500))
    }
}

/// The relay service runs session timers in slices (one per timer run): each slice takes its
/// share of the sessions, and a full round of slices runs every session once.
@Suite("Relay timer slices", .ownThread)
struct RelayTimerSliceTests {
    @Test func eachSliceRunsItsShareAndARoundRunsEverySessionOnce() throws {
        let rig = RelayRig()
        let signer = JoinTicketSigner(keyRing: rig.keyRing)
        var peers: [PeerAddress] = []
        for index in 0 ..< 10 {
            let ticket = try signer.issue(sessionId: "slice-\(index)", participantId: "p1", role: .player, slot: 1,
                                          relayId: "sync-test", relayEndpoint: "tcp://127.0.0.1:1", params: rig.params,
                                          name: "p1", ttlMs: 60_000)
            let peer = RelayRig.address("slice-peer-\(index)")
            _ = try rig.core.handle(Envelope(body: .attachRequest(AttachRequest(ticket: ticket, protocolVersion: SyncProtocol.current))),
                                    from: peer, now: rig.now)
            peers.append(peer)
        }
        rig.transport.sent.removeAll()
        // Everyone has been silent past the timeout: a session's timer tells its player so.
        let now = rig.now + UInt64(rig.core.configuration.silenceTimeoutMs) + 100
        func timedOut() -> Set<PeerAddress> {
            Set(rig.transport.sent.compactMap { sent in
                if case .detach(let detach) = sent.body, detach.reason == .timeout { return sent.peer }
                return nil
            })
        }
        rig.core.tick(now: now, slice: 0, of: 5)
        #expect(timedOut().count == 2, "slice 0 of 5 runs 2 of 10 sessions")
        for slice in 1 ..< 5 { rig.core.tick(now: now, slice: slice, of: 5) }
        #expect(timedOut() == Set(peers), "a round of slices runs every session")
        #expect(rig.transport.sent.count(where: { if case .detach = $0.body { true } else { false } }) == 10, "and each once")
    }
}

/// The relay service runs its session timers in as many slices as its sessions need: a relay
/// with few sessions (a LAN host's, often on a battery) wakes once per 5 ms period, not once
/// per millisecond.
@Suite("Relay timer slices follow the load", .ownThread)
struct RelayTimerSlicingTests {
    @Test func slicesGrowWithTheSessionsServed() {
        let counts = [0, 1, 199, 200, 399, 400, 999, 1_000, 5_000]
        #expect(counts.map(RelayService.tickSlices(forSessions:)) == [1, 1, 1, 1, 1, 2, 4, 5, 5])
    }

    @Test func aRunningRelayWakesOncePerPeriodUntilItServesManySessions() throws {
        let (service, keyRing) = try startRelayService(id: "sync-slices")
        defer { service.stop() }
        let client = try TestKeys(directory: try #require(service.trustStore)).operatorClient(endpoint: service.endpoint)
        func introspection() throws -> [String: Any] {
            guard case .introspectResponse(let dump) = try client.request(.introspectRequest(IntrospectRequest(section: "all"))),
                  let json = try JSONSerialization.jsonObject(with: Data(dump.json.utf8)) as? [String: Any],
                  let state = json["state"] as? [String: Any] else {
                throw HarnessError("no state in the relay's introspection")
            }
            return state
        }
        func timers() throws -> (slices: Int, intervalMs: Double) {
            let state = try introspection()
            guard let slices = state["timer_slices"] as? Int, let interval = state["timer_interval_ms"] as? Double else {
                throw HarnessError("no timer figures in the relay's introspection: \(state)")
            }
            return (slices, interval)
        }
        let idle = try timers()
        #expect(idle.slices == 1 && idle.intervalMs == 5)
        let state = try introspection()
        #expect(state["cpu_percent"] is Double && state["inputs_per_second"] as? Int == 0, "\(state)")
        // 400 sessions (one player each attaches, then the next session's takes its place).
        let params = SyncParams(inputSize: 1, maxPlayers: 2, frameDelay: 2, frameRateMhz: 60_000, predictionWindow: 8,
                                lagToleranceFrames: 12, checksumIntervalFrames: 60)
        let signer = JoinTicketSigner(keyRing: keyRing)
        for index in 0 ..< 400 {
            let ticket = try signer.issue(sessionId: "s-\(index)", participantId: "p1", role: .player, slot: 1,
                                          relayId: "sync-slices", relayEndpoint: service.endpoint, params: params,
                                          name: "player", ttlMs: 60_000)
            guard case .attachResponse = try client.request(.attachRequest(AttachRequest(ticket: ticket, protocolVersion: SyncProtocol.current))) else {
                Issue.record("attach \(index) refused")
                return
            }
        }
        #expect(eventually(within: 2) { (try? timers())?.slices == 2 })
        #expect(try timers().intervalMs == 2.5)
        // Health says the same in its details.
        guard case .healthResponse(let health) = try client.request(.healthRequest(HealthRequest())) else {
            Issue.record("no health response")
            return
        }
        let details = Dictionary(health.details.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
        #expect(details["sessions"] == "400" && details["coordinator"] == "none" && details["cpu_percent"] != nil, "\(details)")
    }
}
