import Foundation
import NetplayAuth
import NetplayService
import NetplayWire
import Testing
@testable import InputSync
import NetplayTestSupport

/// Additional paths (`AttachRequest.additional_path`): several connections of one participant
/// carrying the same inputs, so one lost TCP segment does not hold back every later input.
@Suite("Relay: additional paths of a participant", .ownThread)
struct RelayPathTests {
    let a = RelayRig.address("peer-a")
    let a2 = RelayRig.address("peer-a-path-2")
    let a3 = RelayRig.address("peer-a-path-3")
    let b = RelayRig.address("peer-b")

    func running(maxPaths: Int = 4) throws -> RelayRig {
        let rig = RelayRig(lagTolerance: 600) { $0.maxPathsPerParticipant = maxPaths }
        _ = try rig.attach(a, slot: 1)
        _ = try rig.attach(b, slot: 2)
        _ = rig.transport.take(a)
        _ = rig.transport.take(b)
        return rig
    }

    @discardableResult
    func attachPath(_ rig: RelayRig, _ peer: PeerAddress, slot: Int, role: Role = .player,
                    participant: String? = nil) throws(ServiceError) -> AttachResponse? {
        try rig.send(.attachRequest(AttachRequest(ticket: rig.ticket(slot: slot, role: role, participant: participant),
                                                  protocolVersion: SyncProtocol.current, additionalPath: true)), from: peer)?.attachResponse
    }

    func code(_ body: () throws -> Void) -> ErrorCode? {
        do { try body(); return nil } catch { return (error as? ServiceError)?.code }
    }

    func kinds(_ bodies: [Envelope.Body]) -> [String] { bodies.map(\.name) }

    /// Three players, a on two paths; b and c on one.
    func threePlayers(holdMs: Int = 8) throws -> (RelayRig, c: PeerAddress) {
        let c = RelayRig.address("peer-c")
        let rig = RelayRig(players: 3, lagTolerance: 600) { $0.partnerHoldMs = holdMs }
        for (peer, slot) in [(a, 1), (b, 2), (c, 3)] { _ = try rig.attach(peer, slot: slot) }
        _ = try #require(try attachPath(rig, a2, slot: 1))
        for peer in [a, a2, b, c] { _ = rig.transport.take(peer) }
        return (rig, c)
    }

    /// The slots whose inputs `broadcast` carries (confirmed or forwarded).
    func slots(_ broadcast: InputBroadcast?) -> Set<UInt32> {
        Set((broadcast?.players ?? []).map(\.slot) + (broadcast?.forwarded ?? []).map(\.slot))
    }

    @Test func aPlayerOnSeveralPathsGetsAFramesPartnerInputsInOneMessage() throws {
        let (rig, c) = try threePlayers()
        try rig.batch(b, slot: 2, start: 0, [7])
        #expect(rig.transport.broadcasts(a).isEmpty, "b's input waits for c's of the same frame")
        #expect(rig.transport.broadcasts(c).count == 1, "a player on one path gets it at once")
        try rig.batch(c, slot: 3, start: 0, [9])
        let toA = rig.transport.broadcasts(a), toA2 = rig.transport.broadcasts(a2)
        #expect(toA.count == 1 && toA == toA2)
        #expect(slots(toA.first) == [2, 3])

        // c is late with frame 1: b's input goes after the hold (8 ms, checked by the timers).
        try rig.batch(b, slot: 2, start: 1, [7])
        rig.advance(ms: 4)
        #expect(rig.transport.broadcasts(a).isEmpty)
        rig.advance(ms: 8)
        let late = rig.transport.broadcasts(a)
        #expect(late.count == 1 && slots(late.first) == [2])
        // c's frame 1 then goes alone, at once.
        try rig.batch(c, slot: 3, start: 1, [9])
        #expect(slots(rig.transport.broadcasts(a).first) == [3])
    }

    @Test func withoutAHoldOrWithOnePartnerEveryInputIsForwardedAsItComes() throws {
        let (rig, _) = try threePlayers(holdMs: 0)
        try rig.batch(b, slot: 2, start: 0, [7])
        #expect(rig.transport.broadcasts(a).count == 1)
        let two = try running()
        _ = try #require(try attachPath(two, a2, slot: 1))
        try two.batch(b, slot: 2, start: 0, [7])
        #expect(two.transport.broadcasts(a).count == 1, "one partner: nothing to wait for")
    }

    @Test func anAdditionalPathJoinsTheParticipantAndGetsEveryInputBroadcastButNothingElse() throws {
        let rig = try running()
        let response = try #require(try attachPath(rig, a2, slot: 1))
        #expect(response.slot == 1 && response.running && !response.stateFollows)
        #expect(rig.core.participant(at: a2) === rig.core.participant(at: a))
        #expect(rig.core.peerCount == 3)
        // Nobody hears of it: it is no new participant.
        #expect(rig.transport.take(b).isEmpty)
        #expect(rig.transport.take(a).isEmpty)

        // b's input is forwarded to a on both paths.
        try rig.batch(b, slot: 2, start: 0, [7])
        let forwardedA = rig.transport.broadcasts(a), forwardedA2 = rig.transport.broadcasts(a2)
        #expect(forwardedA.count == 1 && forwardedA == forwardedA2)
        // a's input from its additional path is taken; the confirmation goes on both paths.
        try rig.batch(a2, slot: 1, start: 0, [5], awaited: 1)
        rig.advance(ms: 40)  // a's confirmation waits a frame and a half for a message to it
        let toA = rig.transport.broadcasts(a, authoritative: true), toA2 = rig.transport.broadcasts(a2, authoritative: true)
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 1)
        #expect(!toA.isEmpty && toA == toA2)
        #expect(toA.last?.confirmedFrames == 1)
        // The same input again on the primary is a duplicate: ignored.
        try rig.batch(a, slot: 1, start: 0, [5], awaited: 1)
        #expect(rig.core.confirmedFrames(of: rig.sessionId) == 1)

        // Resends (no acknowledgement from a for a while) go on every path too.
        try rig.batch(b, slot: 2, start: 1, [7], awaited: 1)
        try rig.batch(a, slot: 1, start: 1, [5], awaited: 1)
        _ = rig.transport.take(a)
        _ = rig.transport.take(a2)
        rig.advance(ms: 400)
        let resentA = rig.transport.take(a).filter { if case .inputBroadcast(let x) = $0 { x.authoritative } else { false } }
        let resentA2 = rig.transport.take(a2)
        #expect(!resentA.isEmpty)
        #expect(resentA2.allSatisfy { if case .inputBroadcast = $0 { true } else { false } },
                "only input broadcasts on an additional path: \(kinds(resentA2))")
        #expect(resentA2.count == resentA.count)

        // Chat (and every other message) only on the primary.
        try rig.send(.chatMessage(ChatMessage(text: "hi")), from: b)
        #expect(rig.transport.take(a).contains { if case .chatMessage = $0 { true } else { false } })
        #expect(rig.transport.take(a2).isEmpty)
    }

    @Test func theHotPathTakesInputsFromAnAdditionalPath() throws {
        let rig = try running()
        try attachPath(rig, a2, slot: 1)
        let bytes = try Envelope(body: .inputBatch(InputBatch(slot: 1, startFrame: 0, inputSize: 1, inputs: [3],
                                                              awaitedFrame: 0, currentFrame: 0))).encoded()
        let outcome = bytes.withUnsafeBytes { rig.core.handleFast($0, from: a2, now: rig.now) }
        guard case .handled = outcome else {
            Issue.record("the hot path did not take the batch: \(outcome)")
            return
        }
        #expect(rig.transport.broadcasts(b).contains { $0.forwarded.contains { $0.slot == 1 } || $0.players.contains { $0.slot == 1 } })
    }

    @Test func refusedAdditionalPathsChangeNothing() throws {
        // No session yet: nothing is created.
        let empty = RelayRig()
        #expect(code { try attachPath(empty, a2, slot: 1) } == .invalidState)
        #expect(empty.core.sessionCount == 0 && empty.core.peerCount == 0)

        let rig = RelayRig(lagTolerance: 600) { $0.maxPathsPerParticipant = 2 }
        _ = try rig.attach(a, slot: 1)
        _ = rig.transport.take(a)
        // Slot 2's player has not attached: no path for it.
        #expect(code { try attachPath(rig, b, slot: 2) } == .invalidState)
        #expect(rig.core.peerCount == 1)
        // The primary's own connection is not another path.
        #expect(code { try attachPath(rig, a, slot: 1) } == .badRequest)
        // The cap (2 in all here).
        try attachPath(rig, a2, slot: 1)
        #expect(code { try attachPath(rig, a3, slot: 1) } == .badRequest)
        #expect(rig.core.peerCount == 2 && rig.core.participant(at: a3) == nil)
        // The same path again (its reply was lost) is answered and changes nothing.
        #expect(try attachPath(rig, a2, slot: 1)?.slot == 1)
        #expect(rig.core.peerCount == 2)
        // A connection that is already another participant's path.
        _ = try rig.attach(b, slot: 2)
        #expect(code { try attachPath(rig, b, slot: 1) } == .badRequest)
        #expect(rig.core.participant(at: b)?.slot == 2)
        // An additional path carries inputs only.
        #expect(code { try rig.send(.chatMessage(ChatMessage(text: "x")), from: a2) } == .badRequest)
        // A player's ticket for another slot than the participant's: not attached there.
        #expect(code { try attachPath(rig, a3, slot: 2, participant: "p1") } == .invalidState)
        // A removed participant's ticket is refused before anything else.
        try rig.send(.disconnectPeerRequest(DisconnectPeerRequest(sessionId: rig.sessionId, participantId: "p2", reason: .kicked)), from: RelayRig.address("coordinator"))
        #expect(code { try attachPath(rig, a3, slot: 2) } == .permissionDenied)
    }

    @Test func pathsAreForgottenWhenTheyDetachOrTheParticipantMovesOrGoes() throws {
        let rig = try running()
        try attachPath(rig, a2, slot: 1)
        try attachPath(rig, a3, slot: 1)
        #expect(rig.core.peerCount == 4 && rig.core.introspectedPaths(slot: 1) == 3)

        // A path's own detach ends only it.
        try rig.send(.detach(Detach(reason: .leaving)), from: a3)
        #expect(rig.core.peerCount == 3 && rig.core.participant(at: a3) == nil)
        #expect(rig.core.participant(at: a)?.isConnected == true)
        #expect(code { try rig.batch(a3, slot: 1, start: 0, [1]) } == .unauthenticated)
        #expect(rig.transport.take(b).allSatisfy { if case .peerEvent = $0 { false } else { true } }, "nobody left")

        // A fresh primary attach (reconnect) drops the old paths.
        let moved = RelayRig.address("peer-a-moved")
        _ = try rig.attach(moved, slot: 1, resume: true)
        #expect(rig.core.participant(at: a2) == nil && rig.core.participant(at: a) == nil)
        #expect(code { try rig.batch(a2, slot: 1, start: 0, [1]) } == .unauthenticated)
        #expect(rig.core.peerCount == 2)

        // Leaving ends every path.
        try attachPath(rig, a2, slot: 1)
        try rig.send(.detach(Detach(reason: .leaving)), from: moved)
        #expect(rig.core.participant(at: a2) == nil && rig.core.peerCount == 1)
    }

    @Test func aSilentParticipantsPathsAreDroppedAndTheirRoutesPruned() throws {
        let rig = try running()
        try attachPath(rig, a2, slot: 1)
        try attachPath(rig, a3, slot: 1)
        // b keeps talking; a (every path) goes silent past the timeout.
        for step in 0 ..< 40 {
            rig.advance(ms: 100)
            try rig.batch(b, slot: 2, start: step, [2])
        }
        #expect(rig.core.participant(at: a) == nil || rig.core.participant(at: a)?.isConnected == false)
        #expect(code { try rig.batch(a2, slot: 1, start: 0, [1]) } == .unauthenticated)
        rig.advance(ms: 1_100)
        #expect(rig.core.peerCount <= 2, "stale path routes should be pruned: \(rig.core.peerCount)")
        // It comes back with its primary; the old paths stay gone, new ones attach.
        _ = try rig.attach(a, slot: 1, resume: true)
        #expect(rig.core.introspectedPaths(slot: 1) == 1)
        try attachPath(rig, a2, slot: 1)
        #expect(rig.core.introspectedPaths(slot: 1) == 2)
    }

    @Test func aSpectatorMayHoldPathsToo() throws {
        let rig = try running()
        let watcher = RelayRig.address("watcher"), watcher2 = RelayRig.address("watcher-2")
        _ = try rig.attach(watcher, slot: 0, role: .spectator, participant: "w")
        try attachPath(rig, watcher2, slot: 0, role: .spectator, participant: "w")
        _ = rig.transport.take(watcher)
        try rig.batch(a, slot: 1, start: 0, [1])
        try rig.batch(b, slot: 2, start: 0, [2])
        let primary = rig.transport.broadcasts(watcher), extra = rig.transport.broadcasts(watcher2)
        #expect(!primary.isEmpty && primary == extra)
    }
}

extension RelayCore {
    /// The paths the player of `slot` holds, as `introspect()` reports them.
    func introspectedPaths(slot: Int) -> Int? {
        guard case .object(let root) = introspect(), case .array(let sessions)? = root["sessions"],
              case .object(let session)? = sessions.first, case .array(let players)? = session["players"],
              players.count >= slot, case .object(let player) = players[slot - 1],
              case .int(let paths)? = player["paths"] else { return nil }
        return Int(paths)
    }
}
