@testable import Coordinator
import Foundation
import NetplayTestSupport
import NetplayService
import NetplayWire
import Testing

/// Where sessions run: the relay nearest their players by measured round trips (load between
/// equals, a load cap), a lobby moved when a joiner's figures show a nearer relay, failover when
/// a relay stops refreshing.
@Suite("Relay placement: latency, load and failover", .ownThread)
struct RelayPlacementTests {
    private func registry(_ relays: [(id: String, sessions: UInt32, capacity: UInt32, region: String)],
                          policy: RelayChoicePolicy = RelayChoicePolicy()) -> RelayRegistry {
        let registry = RelayRegistry(ttlMs: 5_000, refreshIntervalMs: 1_000)
        registry.choice = policy
        for relay in relays {
            registry.register(RelayInfo(relayId: relay.id, endpoint: "tcp://\(relay.id):7300", region: relay.region,
                                        load: RelayLoad(sessions: relay.sessions, capacitySessions: relay.capacity)),
                              nowMs: 100, nowUnixMs: 1)
        }
        return registry
    }

    private func us(_ ms: [String: UInt32]) -> [String: UInt32] { ms.mapValues { $0 * 1000 } }

    @Test func theRelayWithTheSmallestWorstRoundTripWinsOverLoadAndId() {
        let relays = registry([("a", 0, 0, ""), ("b", 5, 0, ""), ("c", 0, 0, "")])
        // Without figures: the least loaded, then the first id.
        #expect(relays.pick(region: "", nowMs: 200)?.relayId == "a")
        // Player 1 is nearest a, player 2 is far from it: b has the smallest worst (40 ms).
        let players = [us(["a": 10, "b": 30, "c": 55]), us(["a": 90, "b": 40, "c": 60])]
        #expect(relays.pick(region: "", rtts: players, nowMs: 200)?.relayId == "b")
        #expect(RelayRegistry.worstRtt(to: "b", among: players) == 40_000)
        // A relay some player did not measure ranks after those everyone measured.
        #expect(relays.pick(region: "", rtts: [us(["c": 5]), us(["a": 60, "c": 70])], nowMs: 200)?.relayId == "c")
        #expect(relays.pick(region: "", rtts: [us(["a": 5]), us(["c": 7])], nowMs: 200)?.relayId == "a",
                "nobody measured both: they rank alike, load and id decide")
    }

    @Test func withinTheToleranceLoadDecidesAndTheRegionFirst() {
        let relays = registry([("a", 9, 0, "eu"), ("b", 1, 0, "us"), ("c", 0, 0, "eu")], policy: RelayChoicePolicy(rttToleranceUs: 10_000))
        let players = [us(["a": 30, "b": 36, "c": 80])]
        #expect(relays.pick(region: "", rtts: players, nowMs: 200)?.relayId == "b", "a and b are within 10 ms: the less loaded")
        #expect(relays.pick(region: "eu", rtts: players, nowMs: 200)?.relayId == "a", "between equals the session's region first")
        let strict = registry([("a", 9, 0, ""), ("b", 1, 0, "")], policy: RelayChoicePolicy(rttToleranceUs: 0))
        #expect(strict.pick(region: "", rtts: players, nowMs: 200)?.relayId == "a", "no tolerance: the nearest, however loaded")
    }

    @Test func aRelayOverTheLoadCapIsTakenOnlyWhenAllAre() {
        let policy = RelayChoicePolicy(rttToleranceUs: 0, loadCapPercent: 80)
        let players = [us(["near": 10, "far": 60])]
        let busy = registry([("near", 8, 10, ""), ("far", 1, 10, "")], policy: policy)
        #expect(busy.pick(region: "", rtts: players, nowMs: 200)?.relayId == "far", "near holds 80 % of its capacity")
        let allBusy = registry([("near", 9, 10, ""), ("far", 8, 10, "")], policy: policy)
        #expect(allBusy.pick(region: "", rtts: players, nowMs: 200)?.relayId == "near", "every relay is over the cap: nearness decides")
        let full = registry([("near", 10, 10, ""), ("far", 9, 10, "")], policy: policy)
        #expect(full.pick(region: "", rtts: players, nowMs: 200)?.relayId == "far", "a full relay is never taken")
    }

    @Test func aSessionStartsOnTheRelayNearestItsHost() throws {
        let h = try Harness(relays: ["sync-a", "sync-b"])
        let host = try h.create(rtts: ["sync-a": 80, "sync-b": 20])
        #expect(host.session.relayId == "sync-b")
        #expect(host.ticket?.relayEndpoint == Harness.endpoint(of: "sync-b"))
        let unmeasured = try h.create()
        #expect(unmeasured.session.relayId == "sync-a", "no figures: load, then id")
    }

    @Test func aJoinersFiguresMoveTheLobbyToANearerRelayAndTheOldOneIsTold() throws {
        let h = try Harness(relays: ["sync-a", "sync-b"])
        let host = try h.create()  // an old client: no figures, sync-a
        let id = host.session.sessionId
        #expect(h.session(id).relayId == "sync-a")
        let (bob, outcome) = try h.joinOutcome(id, name: "bob", rtts: ["sync-a": 90, "sync-b": 25])
        #expect(h.session(id).relayId == "sync-b")
        #expect(bob.ticket?.relayEndpoint == Harness.endpoint(of: "sync-b"), "the joiner's ticket names the new relay")
        #expect(outcome.events.contains { $0.kind == .relayAssigned && $0.reason.contains("nearer") })
        #expect(outcome.detach == [RelayNotice(endpoint: Harness.endpoint(of: "sync-a"), body: .closeRelaySessionRequest(
            CloseRelaySessionRequest(sessionId: id, reason: .sessionMoved, message: "moved to relay sync-b, nearer to its players")))])
        let closes = h.core.relays.takeCloses(for: "sync-a")
        #expect(closes.close == [id] && closes.moved == [id], "repeated in sync-a's next refresh reply, as moved")
        #expect(h.core.relays.assigned["sync-a", default: 0] == 0 && h.core.relays.assigned["sync-b"] == 1)
        // The host renews and is sent to the new relay.
        let renewed = try h.core.renew(RenewTicketRequest(sessionId: id, participantId: host.participantId,
                                                          participantToken: host.participantToken), at: h.time)
        guard case .sessionResponse(let response) = renewed.reply else { throw HarnessFailure("no renew reply") }
        #expect(response.ticket?.relayEndpoint == Harness.endpoint(of: "sync-b"))
    }

    @Test func aCopysFreshFiguresCountForThePlayerItSeated() throws {
        // Bob's join was sent again while the first was being served (a password join waits for its
        // hash); only the copy carried figures (the first try's measurement was lost to the same
        // trouble). The copy got the first's seat, and its figures are bob's.
        let h = try Harness(relays: ["sync-a", "sync-b"])
        let id = try h.create(maxPlayers: 3).session.sessionId
        let (bob, _) = try h.joinOutcome(id, name: "bob", key: "bob-idempotency-key")
        let copy = JoinSessionRequest(sessionId: id, role: .player, name: "bob", content: smb, idempotencyKey: "bob-idempotency-key",
                                      relayRtts: Harness.rtts(["sync-a": 200, "sync-b": 20]))
        h.core.noteCopyRtts(.joinSessionRequest(copy), answer: .joinSessionResponse(bob))
        // Carol alone is 5 ms nearer sync-b (within the tolerance); with bob's figures sync-b wins by far.
        _ = try h.join(id, name: "carol", rtts: ["sync-a": 30, "sync-b": 25])
        #expect(h.session(id).relayId == "sync-b", "bob's figures from his copy moved the lobby")
        // A refusal or a spectator's seat notes nothing.
        let watcher = try h.join(id, name: "watcher", role: .spectator)
        var watching = copy
        watching.role = .spectator
        h.core.noteCopyRtts(.joinSessionRequest(watching), answer: .joinSessionResponse(watcher))
        h.core.noteCopyRtts(.joinSessionRequest(copy), answer: .error(ErrorReply()))
        #expect(h.core.measuredRtts[id]?[watcher.participantId] == nil)
        #expect(h.core.measuredRtts[id]?.count == 2, "bob's and carol's")
    }

    /// A participant's figures go with it: each join is a new participant, and a session that
    /// lives long (a running LAN match never idles out) kept every figure of everyone who ever
    /// joined and left it, about 4 KB a join.
    @Test func theFiguresOfAParticipantThatLeftOrWasKickedAreForgotten() throws {
        let h = try Harness(relays: ["sync-a", "sync-b"])
        let host = try h.create(maxPlayers: 3)
        let id = host.session.sessionId
        let bob = try h.join(id, name: "bob", rtts: ["sync-a": 30, "sync-b": 25])
        let carol = try h.join(id, name: "carol", rtts: ["sync-a": 40, "sync-b": 35])
        #expect(h.core.measuredRtts[id]?[bob.participantId] != nil && h.core.measuredRtts[id]?[carol.participantId] != nil)
        _ = try h.core.leave(LeaveSessionRequest(sessionId: id, participantId: bob.participantId, participantToken: bob.participantToken),
                             at: h.time)
        #expect(h.core.measuredRtts[id]?[bob.participantId] == nil)
        _ = try h.core.kick(KickParticipantRequest(sessionId: id, participantId: host.participantId, participantToken: host.participantToken,
                                                   targetParticipantId: carol.participantId), at: h.time)
        #expect(h.core.measuredRtts[id]?[carol.participantId] == nil)
        // The sweep forgets any left behind (a participant removed some other way).
        h.core.measuredRtts[id, default: [:]]["gone"] = ["sync-a": 1]
        h.core.pruneMeasuredRtts()
        #expect(h.core.measuredRtts[id]?["gone"] == nil)
    }

    @Test func smallGainsAndRunningMatchesDoNotMove() throws {
        let h = try Harness(relays: ["sync-a", "sync-b"])
        let id = try h.create(maxPlayers: 3, rtts: ["sync-a": 30, "sync-b": 35]).session.sessionId
        let (_, small) = try h.joinOutcome(id, name: "bob", rtts: ["sync-a": 40, "sync-b": 32])
        #expect(h.session(id).relayId == "sync-a" && small.detach.isEmpty, "8 ms better: within the tolerance")
        _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-a", load: RelayLoad(), startedSessionIds: [id]), at: h.time)
        #expect(h.session(id).state == .running)
        let (_, late) = try h.joinOutcome(id, name: "carol", rtts: ["sync-a": 200, "sync-b": 20])
        #expect(h.session(id).relayId == "sync-a" && late.detach.isEmpty, "a running match stays where it is")
    }

    /// A lobby that moves to another relay and back before the first relay's next refresh: the
    /// close queued for the first move went out with that refresh and ended the session where it
    /// now runs (its players told SESSION_MOVED, to the relay they were on).
    @Test func aSessionMovedBackToARelayIsNotClosedThereByTheEarlierMove() throws {
        let h = try Harness(relays: ["sync-a", "sync-b"])
        let id = try h.create(maxPlayers: 4, rtts: ["sync-a": 20, "sync-b": 90]).session.sessionId
        #expect(h.session(id).relayId == "sync-a")
        _ = try h.join(id, name: "bob", rtts: ["sync-a": 400, "sync-b": 20])
        #expect(h.session(id).relayId == "sync-b")
        _ = try h.join(id, name: "carol", rtts: ["sync-a": 20, "sync-b": 900])
        #expect(h.session(id).relayId == "sync-a")
        let refreshed = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-a", load: RelayLoad()), at: h.time)
        guard case .refreshRelayResponse(let reply) = refreshed.reply else { throw HarnessFailure("no refresh reply") }
        #expect(!reply.closeSessionIds.contains(id), "sync-a serves the session again")
        #expect(h.core.relays.takeCloses(for: "sync-b").moved == [id], "the relay it left closes it")
    }

    @Test func sessionsOfARelayThatStoppedRefreshingFailOverToTheNearestLiveOne() throws {
        let h = try Harness(relays: ["sync-a", "sync-b", "sync-c"])
        let id = try h.create(rtts: ["sync-a": 20, "sync-b": 90, "sync-c": 40]).session.sessionId
        _ = try h.join(id, name: "bob", rtts: ["sync-a": 25, "sync-b": 95, "sync-c": 45])
        _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-a", load: RelayLoad(), startedSessionIds: [id]), at: h.time)
        #expect(h.session(id).relayId == "sync-a" && h.session(id).state == .running)
        // sync-b and sync-c keep refreshing; sync-a falls silent past its TTL.
        h.now += 2_000
        for relay in ["sync-b", "sync-c"] { _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: relay, load: RelayLoad()), at: h.time) }
        h.now += 1_500
        let swept = h.core.maintain(at: h.time)
        #expect(swept.relayEvents.map(\.kind) == [.dropped])
        #expect(h.session(id).relayId == "sync-c", "the nearest live relay for both players")
        #expect(h.session(id).state == .running, "the match goes on")
        #expect(swept.events.contains { $0.kind == .relayAssigned && $0.reason.contains("failover") } && swept.touched == [id])
        #expect(h.core.relays.assigned["sync-a", default: 0] == 0 && h.core.relays.assigned["sync-c"] == 1)
        // It is stored: a restarted coordinator has the session on sync-c.
        try h.restart()
        #expect(h.session(id).relayId == "sync-c")
    }

    @Test func aDrainingRelaysSessionsMoveWhenTheirPeersAskAgain() throws {
        let h = try Harness(relays: ["sync-a", "sync-b"])
        let host = try h.create()
        let id = host.session.sessionId
        #expect(h.session(id).relayId == "sync-a")
        _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-a", load: RelayLoad(), draining: true), at: h.time)
        let renewed = try h.core.renew(RenewTicketRequest(sessionId: id, participantId: host.participantId,
                                                          participantToken: host.participantToken), at: h.time)
        guard case .sessionResponse(let response) = renewed.reply else { throw HarnessFailure("no renew reply") }
        #expect(response.ticket?.relayEndpoint == Harness.endpoint(of: "sync-b"), "the draining relay ends what it serves")
        #expect(h.core.relays.takeCloses(for: "sync-a").moved == [id])
    }

    @Test func figuresAreTheReportersOwnBusinessAndBadOnesAreRefused() throws {
        let h = try Harness(relays: ["sync-a", "sync-b"])
        let other = try h.create(rtts: ["sync-a": 20, "sync-b": 90]).session.sessionId
        let id = try h.create(maxPlayers: 2, rtts: ["sync-a": 20, "sync-b": 90]).session.sessionId
        // A spectator's figures do not count; a lying player moves only its own lobby.
        let (_, watching) = try h.joinOutcome(id, name: "watcher", role: .spectator, rtts: ["sync-a": 900, "sync-b": 1])
        #expect(h.session(id).relayId == "sync-a" && watching.detach.isEmpty)
        _ = try h.join(id, name: "liar", rtts: ["sync-a": 60_000, "sync-b": 1])
        #expect(h.session(id).relayId == "sync-b")
        #expect(h.session(other).relayId == "sync-a", "another session never moves for it")
        // Out-of-range figures and too many of them are refused before the coordinator sees them.
        for rtts in [[RelayRtt(relayId: "sync-a", rttUs: 0)],
                     (0 ..< 33).map { RelayRtt(relayId: "r\($0)", rttUs: 1_000) }] {
            let request = JoinSessionRequest(sessionId: other, role: .player, name: "x", content: smb, relayRtts: rtts)
            #expect(throws: WireError.self) { try Envelope(requestId: 1, body: .joinSessionRequest(request)).encoded() }
        }
    }
}

