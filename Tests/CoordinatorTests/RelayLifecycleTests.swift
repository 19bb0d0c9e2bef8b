@testable import Coordinator
import Foundation
import NetplayTestSupport
import NetplayAuth
import NetplayService
import NetplayWire
import Testing

@Suite("Relays report how sessions live and end", .ownThread)
struct RelayLifecycleTests {
    private func refresh(_ h: Harness, relay: String = "sync-0", started: [String] = [], gone: [ParticipantGone] = [],
                         ended: [RelaySessionEnd] = []) throws -> Outcome {
        try h.core.refreshRelay(RefreshRelayRequest(relayId: relay, load: RelayLoad(), startedSessionIds: started,
                                                    participantsGone: gone, sessionsEnded: ended), at: h.time)
    }

    @Test func aStartedMatchRunsAndAnEndedOneEndsWithTheRelaysReason() throws {
        let h = try Harness()
        let host = try h.create()
        let id = host.session.sessionId
        _ = try h.join(id, name: "bob")
        #expect(h.core.relays.assigned["sync-0"] == 1)
        let started = try refresh(h, started: [id])
        #expect(h.session(id).state == .running)
        #expect(started.events.map(\.kind) == [.started] && started.touched == [id])
        let ended = try refresh(h, ended: [RelaySessionEnd(sessionId: id, reason: "every player left")])
        #expect(h.session(id).state == .ended)
        #expect(ended.events.map(\.kind) == [.ended])
        #expect(ended.events.first?.reason.contains("every player left") == true)
        #expect(ended.touched == [id], "its room is withdrawn")
        #expect(ended.detach.isEmpty, "the relay ended it: nothing to tell it back")
        #expect(h.core.relays.assigned["sync-0", default: 0] == 0, "the relay's load drops")
        #expect(h.core.activeCount == 0)
        guard case .refreshRelayResponse(let reply) = ended.reply else {
            Issue.record("no refresh reply")
            return
        }
        #expect(reply.closeSessionIds.isEmpty)
    }

    @Test func aPlayerGoneForGoodFreesThePlaceAndTheHostGoneEndsTheSession() throws {
        let h = try Harness()
        let host = try h.create(maxPlayers: 3)
        let id = host.session.sessionId
        let bob = try h.join(id, name: "bob")
        let carol = try h.join(id, name: "carol")
        let left = try refresh(h, gone: [ParticipantGone(sessionId: id, participantId: bob.participantId)])
        #expect(h.session(id).participant(bob.participantId) == nil)
        #expect(left.events.map(\.kind) == [.left] && left.touched == [id])
        _ = try refresh(h, gone: [ParticipantGone(sessionId: id, participantId: carol.participantId, timedOut: true)])
        #expect(h.session(id).participants.map(\.participantId) == [host.participantId])
        #expect(h.session(id).isActive)
        let hostGone = try refresh(h, gone: [ParticipantGone(sessionId: id, participantId: host.participantId)])
        #expect(h.session(id).state == .ended)
        #expect(hostGone.events.map(\.kind) == [.ended])
    }

    @Test func factsApplyOnceAndRepeatsChangeNothing() throws {
        let h = try Harness()
        let host = try h.create()
        let id = host.session.sessionId
        let bob = try h.join(id, name: "bob")
        let gone = [ParticipantGone(sessionId: id, participantId: bob.participantId)]
        _ = try refresh(h, started: [id], gone: gone)
        let version = h.session(id).version
        // The same facts again (a refresh whose reply was lost is resent with them).
        let again = try refresh(h, started: [id], gone: gone)
        #expect(again.events.isEmpty && again.touched.isEmpty)
        #expect(h.session(id).version == version && h.session(id).state == .running)
        let end = [RelaySessionEnd(sessionId: id, reason: "nobody attached for 60 s")]
        _ = try refresh(h, ended: end)
        let endedAt = h.session(id).endedAtUnixMs
        h.now += 1_000
        let repeated = try refresh(h, started: [id], gone: gone, ended: end)
        #expect(repeated.events.isEmpty && repeated.touched.isEmpty)
        #expect(h.session(id).state == .ended && h.session(id).endedAtUnixMs == endedAt)
    }

    @Test func aRelaySpeaksOnlyForItsOwnSessions() throws {
        let h = try Harness(relays: ["sync-0", "sync-1"])
        let host = try h.create()
        let id = host.session.sessionId
        let bob = try h.join(id, name: "bob")
        let owner = h.session(id).relayId
        let other = owner == "sync-0" ? "sync-1" : "sync-0"
        let foreign = try refresh(h, relay: other, started: [id, "s-unknown"],
                                  gone: [ParticipantGone(sessionId: id, participantId: bob.participantId),
                                         ParticipantGone(sessionId: "s-unknown", participantId: "p-x")],
                                  ended: [RelaySessionEnd(sessionId: id, reason: "forged"), RelaySessionEnd(sessionId: "s-unknown")])
        #expect(foreign.events.isEmpty && foreign.touched.isEmpty)
        #expect(h.session(id).state == .lobby && h.session(id).participant(bob.participantId) != nil)
        #expect(h.core.relays.assigned[owner] == 1)
    }
}
