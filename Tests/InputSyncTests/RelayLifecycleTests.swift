import Foundation
import NetplayAuth
import NetplayService
import NetplayWire
import Testing
@testable import InputSync
import NetplayTestSupport

@Suite("Relay lifecycle facts for the coordinator", .ownThread)
struct RelayLifecycleTests {
    let a = RelayRig.address("peer-a")
    let b = RelayRig.address("peer-b")

    @Test func aMatchThatStartsLosesItsPlayersAndEndsIsReportedInOrder() throws {
        let rig = RelayRig()
        let facts = rig.core.lifecycle
        _ = try rig.attach(a, slot: 1)
        #expect(facts.count == 0, "nothing happened yet")
        _ = try rig.attach(b, slot: 2)
        try rig.send(.detach(Detach(reason: .leaving)), from: b)
        try rig.send(.detach(Detach(reason: .leaving)), from: a)
        #expect(rig.core.sessionCount == 0 || rig.core.presence(of: rig.sessionId) == nil, "every player left: the session ended")
        let taken = facts.take()
        #expect(taken.started == [rig.sessionId])
        #expect(taken.gone == [ParticipantGone(sessionId: rig.sessionId, participantId: "p2"),
                               ParticipantGone(sessionId: rig.sessionId, participantId: "p1")])
        #expect(taken.ended == [RelaySessionEnd(sessionId: rig.sessionId, reason: "every player left")])
        // Not acknowledged (the refresh failed): the same facts go again.
        let again = facts.take()
        #expect(again.started == taken.started && again.gone == taken.gone && again.ended == taken.ended)
        facts.acknowledge(through: taken.through)
        #expect(facts.count == 0)
        let empty = facts.take()
        #expect(empty.started.isEmpty && empty.gone.isEmpty && empty.ended.isEmpty && empty.through == 0)
    }

    @Test func factsRecordedDuringARefreshWaitForTheNextOne() throws {
        let rig = RelayRig()
        let facts = rig.core.lifecycle
        _ = try rig.attach(a, slot: 1)
        _ = try rig.attach(b, slot: 2)
        let inFlight = facts.take()
        try rig.send(.detach(Detach(reason: .leaving)), from: b)
        facts.acknowledge(through: inFlight.through)
        let next = facts.take()
        #expect(next.started.isEmpty)
        #expect(next.gone == [ParticipantGone(sessionId: rig.sessionId, participantId: "p2")])
    }

    @Test func aPlayerNotBackWithinTheGraceIsGoneAndAnIdleSessionEnds() throws {
        let rig = RelayRig { configuration in
            configuration.silenceTimeoutMs = 200
            configuration.disconnectGraceMs = 300
            configuration.sessionIdleTimeoutMs = 2_000
        }
        let facts = rig.core.lifecycle
        _ = try rig.attach(a, slot: 1)
        _ = try rig.attach(b, slot: 2)
        facts.acknowledge(through: facts.take().through)
        // Player 2 goes silent; player 1 keeps sending.
        for frame in 0 ..< 150 {
            try rig.batch(a, slot: 1, start: frame, [1])
            rig.advance(ms: 4)
        }
        #expect(facts.take().gone == [ParticipantGone(sessionId: rig.sessionId, participantId: "p2", timedOut: true)])
        facts.acknowledge(through: facts.take().through)
        // Then nobody: the session ends once idle.
        rig.advance(ms: 3_000)
        #expect(facts.take().ended.map(\.sessionId) == [rig.sessionId])
        #expect(facts.take().ended.first?.reason.hasPrefix("nobody attached") == true)
    }

    @Test func aCloseTheCoordinatorAskedForIsNotReportedBack() throws {
        let rig = RelayRig()
        _ = try rig.attach(a, slot: 1)
        rig.core.lifecycle.acknowledge(through: rig.core.lifecycle.take().through)
        rig.core.close(sessionIds: [rig.sessionId], now: rig.now)
        #expect(rig.core.lifecycle.count == 0)
    }

    @Test func aSessionTheCoordinatorMovedTellsItsPeersSoAndOneThatEndedSaysThat() throws {
        let rig = RelayRig()
        _ = try rig.attach(a, slot: 1)
        _ = rig.transport.take(a)
        rig.core.close(sessionIds: [rig.sessionId], moved: [rig.sessionId], now: rig.now)
        #expect(rig.transport.take(a).contains { if case .detach(let d) = $0 { d.reason == .sessionMoved } else { false } },
                "its peers ask the coordinator where it went")
        #expect(rig.core.lifecycle.count == 0 || rig.core.lifecycle.take().ended.isEmpty, "not reported back as ended")
        let again = RelayRig()
        _ = try again.attach(a, slot: 1)
        _ = again.transport.take(a)
        again.core.close(sessionIds: [again.sessionId], now: again.now)
        #expect(again.transport.take(a).contains { if case .detach(let d) = $0 { d.reason == .sessionEnded } else { false } })
    }

    @Test func aRelayWithoutACoordinatorKeepsNoFacts() throws {
        let facts = LifecycleFacts(enabled: false)
        facts.started("s-1")
        facts.ended("s-1", reason: "over")
        #expect(facts.count == 0)
        let bounded = LifecycleFacts(capacity: 2)
        for index in 0 ..< 5 { bounded.started("s-\(index)") }
        #expect(bounded.take().started == ["s-3", "s-4"], "the oldest go first when the coordinator is away too long")
    }
}
