@testable import Coordinator
import Foundation
import NetplayTestSupport
import NetplayAuth
import NetplayService
import NetplayWire
import Testing

@Suite("Durable state and the relay registry", .ownThread)
struct PersistenceAndRelayTests {
    @Test func aReopenedStoreServesTheSameSessionsAndTokens() throws {
        let h = try Harness()
        let host = try h.create(maxPlayers: 3, spectators: 2, password: "pw", key: "create-idempotency-1")
        let id = host.session.sessionId
        let bob = try h.join(id, name: "bob", password: "pw")
        let carol = try h.join(id, name: "carol", role: .spectator, password: "pw")
        let kick = try h.create()
        _ = try h.core.kick(KickParticipantRequest(sessionId: id, participantId: host.participantId,
                                                   participantToken: host.participantToken,
                                                   targetParticipantId: carol.participantId, ban: true), at: h.time)
        _ = try h.core.start(StartSessionRequest(sessionId: id, participantId: host.participantId,
                                                 participantToken: host.participantToken), at: h.time)
        let before = h.core.sessions
        try h.restart()
        #expect(h.core.sessions == before)
        #expect(h.core.sessions[kick.session.sessionId] != nil)
        // Tokens minted before the restart still work; bans, passwords and idempotency keys survive.
        _ = try h.core.renew(RenewTicketRequest(sessionId: id, participantId: bob.participantId,
                                                participantToken: bob.participantToken), at: h.time)
        #expect(code { try h.join(id, name: "carol", password: "pw") } == .banned)
        #expect(code { try h.join(id, name: "dave", password: "nope") } == .wrongPassword)
        #expect(try h.create(maxPlayers: 3, spectators: 2, password: "pw", key: "create-idempotency-1").session.sessionId == id)
        #expect(try h.store.database.integrityCheck() == "ok")
        // Each participant's newest ticket: the two hosts' and bob's (renewed); carol's went with her.
        #expect(try h.store.liveTicketCount(nowUnixMs: h.time.unixMs) == 3)
    }

    @Test func theDatabaseRefusesTwoHoldersOfOneSlot() throws {
        let h = try Harness()
        let id = try h.create().session.sessionId
        let intruder = ParticipantRecord(participantId: "p-x", name: "x", role: .player, slot: 1, joinedAtUnixMs: 1)
        #expect(throws: StorageError.self) { try h.store.apply([.saveParticipant(sessionId: id, intruder)]) }
        // The failed transaction left nothing behind.
        try h.restart()
        #expect(h.session(id).participants.count == 1)
    }

    @Test func aFailedWriteLeavesMemoryUnchanged() throws {
        let h = try Harness()
        let id = try h.create(maxPlayers: 4).session.sessionId
        let before = h.session(id)
        try h.store.database.execute("CREATE TRIGGER refuse BEFORE INSERT ON participants BEGIN SELECT RAISE(ABORT, 'disk full'); END;")
        #expect(code { try h.join(id, name: "bob") } == .internal)
        #expect(h.session(id) == before)
        try h.store.database.execute("DROP TRIGGER refuse")
        _ = try h.join(id, name: "bob")
    }

    /// A session leaving a draining relay: the old relay is told to close it only once the move
    /// is stored. It used to be told before the write, so a failed write (INTERNAL) still closed
    /// the session on the relay the coordinator kept it on.
    @Test func aMoveThatFailsToStoreLeavesTheOldRelayServing() throws {
        let h = try Harness(relays: ["sync-0"])
        let host = try h.create()
        let id = host.session.sessionId
        try h.register("sync-1")
        func refresh(_ relay: String, draining: Bool = false) throws -> RefreshRelayResponse {
            let outcome = try h.core.refreshRelay(RefreshRelayRequest(relayId: relay, load: RelayLoad(), draining: draining), at: h.time)
            guard case .refreshRelayResponse(let reply) = outcome.reply else { throw HarnessFailure("no refresh reply") }
            return reply
        }
        _ = try refresh("sync-0", draining: true)
        let renew = RenewTicketRequest(sessionId: id, participantId: host.participantId, participantToken: host.participantToken)
        try h.store.database.execute("CREATE TRIGGER refuse BEFORE UPDATE ON sessions BEGIN SELECT RAISE(ABORT, 'disk full'); END;")
        #expect(code { try h.core.renew(renew, at: h.time) } == .internal)
        #expect(h.session(id).relayId == "sync-0")
        #expect(try refresh("sync-0", draining: true).closeSessionIds.isEmpty, "the relay still holding it was told to close it")
        try h.store.database.execute("DROP TRIGGER refuse")
        _ = try h.core.renew(renew, at: h.time)
        #expect(h.session(id).relayId == "sync-1")
        let told = try refresh("sync-0", draining: true)
        #expect(told.closeSessionIds == [id] && told.movedSessionIds == [id])
    }

    /// A relay whose registration could not be stored is not offered to sessions.
    @Test func aRelayRegistrationThatFailsToStoreRegistersNothing() throws {
        let h = try Harness(relays: [])
        try h.store.database.execute("CREATE TRIGGER refuse BEFORE INSERT ON relays BEGIN SELECT RAISE(ABORT, 'disk full'); END;")
        #expect(code { try h.register("sync-0") } == .internal)
        #expect(code { try h.create() } == .noRelay)
        guard case .listRelaysResponse(let listed) = h.core.listRelays(ListRelaysRequest(includeStale: true), at: h.time).reply else {
            throw HarnessFailure("no list reply")
        }
        #expect(listed.relays.isEmpty)
        try h.store.database.execute("DROP TRIGGER refuse")
        try h.register("sync-0")
        _ = try h.create()
    }

    @Test func newSessionsGoToTheLeastLoadedLiveRelay() throws {
        let h = try Harness(relays: [])
        try h.register("a", load: RelayLoad(sessions: 5))
        try h.register("b", load: RelayLoad(sessions: 1))
        try h.register("c", load: RelayLoad(sessions: 1, peers: 0, capacitySessions: 2))
        // c: 1 of 2 is 50% full, which outweighs raw counts; b wins.
        #expect(try h.create().session.relayId == "b")
        // b now has 2 by our own count; a reports 5; c is half full: b again (2 < 5).
        #expect(try h.create().session.relayId == "b")
        #expect(try h.create().session.relayId == "b")
        _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: "b", load: RelayLoad(sessions: 3), draining: true), at: h.time)
        #expect(try h.create().session.relayId == "a", "a draining relay takes no new sessions")
        _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: "a", load: RelayLoad(sessions: 5, capacitySessions: 5)), at: h.time)
        #expect(try h.create().session.relayId == "c")
        #expect(try h.create().session.relayId == "c", "c reported 1 of 2 (ours included): room for one more")
        #expect(code { try h.create() } == .noRelay, "every relay is full or draining")
    }

    @Test func participantsAreConnectedAsTheirRelayLastReported() throws {
        let h = try Harness(relays: ["sync-0"])
        let host = try h.create()
        let id = host.session.sessionId
        let bob = try h.join(id, name: "bob")
        func connected() -> [String: Bool] {
            Dictionary(uniqueKeysWithValues: h.session(id).participants.map { ($0.participantId, $0.info.connected) })
        }
        #expect(connected() == [host.participantId: false, bob.participantId: false], "nobody attached yet")
        func refresh(_ presence: [SessionPresence]) throws {
            _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-0", load: RelayLoad(), presence: presence), at: h.time)
        }
        try refresh([SessionPresence(sessionId: id, connectedParticipantIds: [host.participantId, bob.participantId]),
                     SessionPresence(sessionId: "s-not-here", connectedParticipantIds: ["ghost"])])
        #expect(connected() == [host.participantId: true, bob.participantId: true])
        guard case .sessionResponse(let shown) = try h.core.get(GetSessionRequest(sessionId: id)).reply else {
            Issue.record("no session")
            return
        }
        let shownPlayers = shown.session.slots.compactMap { $0.participant }
        #expect(shownPlayers.count == 2 && shownPlayers.allSatisfy { $0.connected })
        // Bob drops: the relay's next report leaves him out.
        try refresh([SessionPresence(sessionId: id, connectedParticipantIds: [host.participantId])])
        #expect(connected() == [host.participantId: true, bob.participantId: false])
        // Another relay's report says nothing about this session.
        try h.register("sync-1")
        _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-1", load: RelayLoad()), at: h.time)
        #expect(connected()[host.participantId] == true)
        // A restarted coordinator knows nobody attached until the relay reports again.
        try h.restart()
        #expect(connected() == [host.participantId: false, bob.participantId: false])
        // The relay goes silent past its TTL: nobody is attached any more.
        try refresh([SessionPresence(sessionId: id, connectedParticipantIds: [host.participantId])])
        #expect(connected()[host.participantId] == true)
        h.now += 4_000
        _ = h.core.maintain(at: h.time)
        #expect(connected()[host.participantId] == false)
    }

    @Test func aRelayReportOfWhoAttachedIsASessionEventWithThemConnected() throws {
        let h = try Harness(relays: ["sync-0"])
        let host = try h.create()
        let id = host.session.sessionId
        let bob = try h.join(id, name: "bob")
        func refresh(_ attached: [String]) throws -> [SessionEvent] {
            try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-0", load: RelayLoad(), presence: attached.isEmpty ? [] : [
                SessionPresence(sessionId: id, connectedParticipantIds: attached)]), at: h.time).events
        }
        func connected(_ event: SessionEvent?) -> [String: Bool] {
            let everyone = (event?.session.slots.compactMap(\.participant) ?? []) + (event?.session.spectators ?? [])
            return Dictionary(uniqueKeysWithValues: everyone.map { ($0.participantId, $0.connected) })
        }
        let attached = try refresh([host.participantId, bob.participantId])
        #expect(attached.count == 1 && attached.first?.kind == .slotsChanged && attached.first?.session.sessionId == id)
        #expect(connected(attached.first) == [host.participantId: true, bob.participantId: true])
        // The match starts: its event shows both players attached.
        let started = try h.core.start(StartSessionRequest(sessionId: id, participantId: host.participantId,
                                                           participantToken: host.participantToken), at: h.time).events
        #expect(connected(started.first { $0.kind == .started }) == [host.participantId: true, bob.participantId: true])
        #expect(try refresh([host.participantId, bob.participantId]).isEmpty, "nothing changed: no event")
        let dropped = try refresh([host.participantId])
        #expect(dropped.count == 1 && dropped.first?.session.state == .running)
        #expect(connected(dropped.first) == [host.participantId: true, bob.participantId: false])
    }

    @Test func regionalRelaysArePreferred() throws {
        let h = try Harness(relays: [])
        try h.register("us-1", load: RelayLoad(sessions: 0), region: "us")
        try h.register("eu-1", load: RelayLoad(sessions: 9), region: "eu")
        #expect(try h.create(region: "eu").session.relayId == "eu-1")
        #expect(try h.create(region: "asia").session.relayId == "us-1")
    }

    @Test func aStaleRelayIsDroppedAndItsSessionsFailOver() throws {
        let h = try Harness(relays: ["old"])
        let host = try h.create()
        let id = host.session.sessionId
        try h.register("fresh")
        h.now += 2_000
        _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: "fresh", load: RelayLoad()), at: h.time)
        h.now += 1_500  // "old" last refreshed 3.5 s ago, past its 3 s TTL
        let swept = h.core.maintain(at: h.time)
        #expect(swept.relayEvents.map(\.kind) == [.dropped])
        #expect(swept.relayEvents.first?.relay.relayId == "old" && swept.relayEvents.first?.sessionIds == [id])
        #expect(h.core.relays.entry("old") == nil)
        #expect(swept.events.map(\.kind) == [.relayAssigned] && h.session(id).relayId == "fresh", "moved at once")
        #expect(code { try h.core.refreshRelay(RefreshRelayRequest(relayId: "old", load: RelayLoad()), at: h.time) } == .notFound)
        let renewed = try h.core.renew(RenewTicketRequest(sessionId: id, participantId: host.participantId,
                                                          participantToken: host.participantToken), at: h.time)
        guard case .sessionResponse(let response) = renewed.reply else { Issue.record("no reply"); return }
        #expect(response.session.relayId == "fresh" && response.ticket?.relayId == "fresh")
        #expect(renewed.events.isEmpty, "the session moved when the relay was dropped")
        // The old relay comes back claiming the session: it is told to close it.
        try h.register("old", sessions: [id, "s-unknown"])
        guard case .refreshRelayResponse(let refresh) = try h.core.refreshRelay(
            RefreshRelayRequest(relayId: "old", load: RelayLoad()), at: h.time).reply else { return }
        #expect(Set(refresh.closeSessionIds) == [id, "s-unknown"])
        #expect(refresh.movedSessionIds == [id], "its peers are told the session moved, not that it ended")
        guard case .listRelaysResponse(let list) = h.core.listRelays(ListRelaysRequest(), at: h.time).reply else { return }
        #expect(list.relays.map(\.relayId) == ["fresh", "old"])
    }

    @Test func relaysSurviveARestartWithAFreshTTL() throws {
        let h = try Harness(relays: ["sync-0", "sync-1"])
        try h.restart()
        #expect(h.core.relays.relays.map(\.info.relayId) == ["sync-0", "sync-1"])
        #expect(h.core.relays.isLive("sync-0", nowMs: h.now))
        #expect(try h.create().session.relayId.hasPrefix("sync-"))
    }

    @Test func endedSessionsAreDeletedAfterTheRetention() throws {
        var settings = Harness.settings()
        settings.endedRetentionMs = 1_000
        let h = try Harness(settings: settings)
        let host = try h.create()
        _ = try h.core.end(EndSessionRequest(sessionId: host.session.sessionId, participantId: host.participantId,
                                             participantToken: host.participantToken), at: h.time)
        h.now += 500
        _ = h.core.maintain(at: h.time, housekeeping: true)
        #expect(h.core.sessions[host.session.sessionId] != nil)
        h.now += 600
        _ = h.core.maintain(at: h.time, housekeeping: true)
        #expect(h.core.sessions[host.session.sessionId] == nil)
        try h.restart()
        #expect(h.core.sessions.isEmpty)
    }

    @Test func optionsResolveWithEnvironmentFallbacks() throws {
        let configuration = try CoordinatorOptions.parse(["--ticket-ttl", "30", "--relay-rtt-tolerance", "25"]).resolve(environment: [
            "NETPLAY_RELAY_LOAD_CAP": "60",
            "NETPLAY_DISCOVERY": "none", "NETPLAY_RELAY_TTL": "3", "NETPLAY_CLUSTER_SECRET": String(repeating: "ab", count: 32),
            "NETPLAY_PASSWORD_COST": "minimum", "NETPLAY_DURABILITY": "full",
        ])
        #expect(configuration.discovery == nil && configuration.settings.ticketTTLMs == 30_000)
        #expect(configuration.settings.relayTTLMs == 3_000 && configuration.settings.relayRefreshIntervalMs == 1_000)
        #expect(configuration.keyRing?.keys[1]?.count == 32 && configuration.durability == .full)
        #expect(configuration.settings.passwordHasher.memLimit == PasswordHasher.testing.memLimit)
        #expect(configuration.settings.relayChoice == RelayChoicePolicy(rttToleranceUs: 25_000, loadCapPercent: 60))
        #expect(try CoordinatorOptions.parse([]).resolve(environment: [:]).settings.relayChoice == RelayChoicePolicy())
        for (arguments, environment) in [(["--discovery", "nope"], [:]), (["--cluster-secret", "xyz"], [:]),
                                         (["--relay-ttl", "1", "--relay-refresh-interval", "2"], [:]),
                                         ([], ["NETPLAY_DURABILITY": "maybe"]), (["--ticket-ttl", "0"], [:]), (["--ticket-ttl", "601"], [:]),
                                         (["--relay-load-cap", "0"], [:]), ([], ["NETPLAY_RELAY_RTT_TOLERANCE": "-1"])] as [([String], [String: String])] {
            #expect(throws: (any Error).self, "\(arguments) \(environment)") {
                try CoordinatorOptions.parse(arguments).resolve(environment: environment)
            }
        }
    }
}
