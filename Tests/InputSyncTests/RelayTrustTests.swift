import Foundation
import NetplayAuth
import NetplayService
import NetplayWire
import Testing
@testable import InputSync
import NetplayTestSupport

/// What a player can do to the others through the relay by lying, and what a removed player
/// can do with the ticket it still holds: checksum ties, kicks.
@Suite("Relay: lying players and removed ones", .ownThread)
struct RelayTrustTests {
    let a = RelayRig.address("peer-a")
    let b = RelayRig.address("peer-b")
    let c = RelayRig.address("peer-c")

    /// Two players, `first` in slot 1 (from `a`) and `second` in slot 2 (from `b`), play frames 0 ..< 11.
    func pairAtFrame11(_ rig: RelayRig, first: String, second: String) throws {
        _ = try rig.attach(a, slot: 1, participant: first)
        _ = try rig.attach(b, slot: 2, participant: second)
        for frame in 0 ..< 11 {
            try rig.batch(a, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        _ = rig.transport.take(a)
        _ = rig.transport.take(b)
        rig.transport.sent.removeAll()
    }

    // MARK: - Superseded tickets

    /// `participant`'s ticket for `slot`, issued `offsetMs` after now (before, when negative; the
    /// relay takes tickets up to 30 s ahead of its clock).
    func ticket(_ rig: RelayRig, slot: Int, _ participant: String, at offsetMs: Int64, role: Role = .player) -> JoinTicket {
        rig.ticket(slot: slot, role: role, participant: participant, issuedAt: UInt64(Int64(UnixTime.nowMs()) + offsetMs))
    }

    func attach(_ rig: RelayRig, _ ticket: JoinTicket, from peer: PeerAddress) throws(ServiceError) {
        _ = try rig.send(.attachRequest(AttachRequest(ticket: ticket, protocolVersion: SyncProtocol.current)), from: peer)
    }

    /// A player who moved to spectating (or another slot) mid-match keeps its old ticket until it
    /// expires. With it, it took its old slot back from whoever had it since (and could go on
    /// doing so for the ticket's life and the resume grace). A ticket issued before the slot's
    /// newest is refused as expired (an honest client renews it).
    @Test func aPlayersOldTicketDoesNotTakeItsSlotBackFromItsNewHolder() throws {
        let rig = RelayRig(checksumInterval: 10)
        try pairAtFrame11(rig, first: "h-host", second: "p-pat")
        // Pat moves to spectating; Quinn takes slot 2 with a ticket issued since.
        try attach(rig, ticket(rig, slot: 0, "p-pat", at: 100, role: .spectator), from: RelayRig.address("pat-watching"))
        try attach(rig, ticket(rig, slot: 2, "p-quinn", at: 200), from: c)
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(session.players[1]?.participantId == "p-quinn")
        // Pat's player ticket is older than Quinn's.
        let refused = #expect(throws: ServiceError.self) { try attach(rig, ticket(rig, slot: 2, "p-pat", at: -45_000), from: b) }
        #expect(refused?.code == .ticketExpired, "\(String(describing: refused))")
        #expect(session.players[1]?.participantId == "p-quinn")
        // A ticket for Pat issued after Quinn's is the coordinator's newer word: it seats Pat.
        try attach(rig, ticket(rig, slot: 2, "p-pat", at: 300), from: b)
        #expect(session.players[1]?.participantId == "p-pat")
        // Quinn's reconnect with its older ticket no longer takes it back either.
        #expect(throws: ServiceError.self) { try attach(rig, ticket(rig, slot: 2, "p-quinn", at: 200), from: c) }
    }

    /// A session the coordinator closed here (ended, or moved to another relay) was opened again
    /// by any ticket still alive, and its former players played on, on this relay's capacity.
    /// A ticket issued before the end (less the 30 s the relay allows between clocks) is refused
    /// as expired; a newer one (the session moved back) opens it.
    @Test func aTicketIssuedBeforeASessionEndedDoesNotOpenItAgain() throws {
        let rig = RelayRig(checksumInterval: 10)
        try pairAtFrame11(rig, first: "h-host", second: "p-pat")
        _ = try rig.core.control(.closeRelaySessionRequest(CloseRelaySessionRequest(sessionId: rig.sessionId, reason: .sessionEnded)),
                                 now: rig.now)
        rig.advance(ms: 20)
        #expect(rig.core.sessions[rig.sessionId] == nil)
        for (participant, slot) in [("h-host", 1), ("p-pat", 2)] {
            let refused = #expect(throws: ServiceError.self) { try attach(rig, ticket(rig, slot: slot, participant, at: -45_000), from: c) }
            #expect(refused?.code == .ticketExpired, "\(String(describing: refused))")
            let resumed = #expect(throws: ServiceError.self) {
                _ = try rig.send(.attachRequest(AttachRequest(ticket: ticket(rig, slot: slot, participant, at: -45_000),
                                                              protocolVersion: SyncProtocol.current, resume: true, confirmedFrames: 10)), from: c)
            }
            #expect(resumed?.code == .ticketExpired)
        }
        #expect(rig.core.sessions[rig.sessionId] == nil)
        try attach(rig, ticket(rig, slot: 1, "h-host", at: 1_000), from: a)
        #expect(rig.core.sessions[rig.sessionId] != nil)
    }

    /// The host took slot 2 and has not attached yet: the joiner in slot 1 stood in for it and
    /// could start the match, or ask for a start from its own state, before the host came.
    @Test func aJoinerInSlotOneDoesNotActAsTheHostBeforeTheHostComes() throws {
        let rig = RelayRig(players: 3)
        _ = try rig.attach(a, slot: 1, participant: "p-joiner")
        let start = #expect(throws: ServiceError.self) {
            _ = try rig.send(.startSessionRequest(StartSessionRequest(sessionId: rig.sessionId)), from: a)
        }
        #expect(start?.code == .permissionDenied, "\(String(describing: start))")
        let session = try #require(rig.core.sessions[rig.sessionId])
        #expect(!session.running)
        // The host, in slot 2, starts it.
        _ = try rig.attach(b, slot: 2, participant: "h-host")
        _ = try rig.send(.startSessionRequest(StartSessionRequest(sessionId: rig.sessionId)), from: b)
        rig.advance(ms: 3_000)
        #expect(session.running)
    }

    /// A relay remembers a kick for the longest a ticket lives (10 minutes): a ticket issued to
    /// live an hour would admit a player kicked before it first attached, once the relay forgot.
    /// The last player's leave ends the session at once, and the relay drops it at its next
    /// tick: an attach pipelined behind the leave (one write, one batch of messages) went into
    /// the dead session, which no tick served again and whose routes pinned it for good, history
    /// and transfers and all. It is refused as any attach after the end is.
    @Test func anAttachBehindTheLastPlayersLeaveFindsTheSessionEnded() throws {
        let rig = RelayRig(players: 2, maxSpectators: 2)
        _ = try rig.attach(a, slot: 1, participant: "h-a")
        try rig.send(.detach(Detach(reason: .leaving)), from: a)
        let early = rig.ticket(slot: 2, participant: "p-b", ttlMs: 300_000, issuedAt: UnixTime.nowMs() - 45_000)
        let refused = #expect(throws: ServiceError.self) { try attach(rig, early, from: b) }
        #expect(refused?.code == .ticketExpired)
        rig.advance(ms: 50)
        #expect(rig.core.sessions[rig.sessionId] == nil && rig.core.peerCount == 0)
    }

    @Test func aTicketLivingLongerThanTheRelayRemembersAKickIsRefused() throws {
        let rig = RelayRig()
        let long = rig.ticket(slot: 1, participant: "h-host", ttlMs: 3_600_000)
        let refused = #expect(throws: ServiceError.self) { try attach(rig, long, from: a) }
        #expect(refused?.code == .ticketInvalid && refused?.message.contains("at most 600 s") == true, "\(String(describing: refused))")
        try attach(rig, rig.ticket(slot: 1, participant: "h-host", ttlMs: 600_000), from: a)
    }

    /// In the lobby the coordinator's slot map is the word since its arrival: a slot it gives to
    /// another participant, or leaves free, refuses tickets issued before it; the participant it
    /// gives a slot to attaches there with the ticket it holds.
    @Test func theCoordinatorsSlotMapSupersedesOlderTicketsForItsSlots() throws {
        let rig = RelayRig(players: 3)
        _ = try rig.attach(a, slot: 1, participant: "h-host")
        let session = try #require(rig.core.sessions[rig.sessionId])
        // Pat held slot 2 and moved to spectating before attaching; Quinn got slot 2, slot 3 is free.
        try session.assign(AssignSlotsRequest(sessionId: rig.sessionId, assignments: [
            SlotAssignment(participantId: "h-host", slot: 1), SlotAssignment(participantId: "p-quinn", slot: 2)]),
                           routes: PeerRoutes(), now: rig.now)
        for slot in [2, 3] {
            let refused = #expect(throws: ServiceError.self) { try attach(rig, ticket(rig, slot: slot, "p-pat", at: -45_000), from: b) }
            #expect(refused?.code == .ticketExpired)
        }
        try attach(rig, ticket(rig, slot: 2, "p-quinn", at: -45_000), from: c)
        #expect(session.players[1]?.participantId == "p-quinn")
        // A ticket for the free slot issued after the map seats its holder.
        try attach(rig, ticket(rig, slot: 3, "p-rae", at: 100), from: RelayRig.address("rae"))
        #expect(session.players[2]?.participantId == "p-rae")
    }

    // MARK: - Checksum ties

    @Test func aLiarInSlotOneCannotHaveItsStateLoadedIntoTheHost() throws {
        let rig = RelayRig(checksumInterval: 10)
        // The host holds slot 2 (slots were swapped); the player in slot 1 lies.
        try pairAtFrame11(rig, first: "p-liar", second: "h-host")
        try rig.send(.checksumReport(ChecksumReport(slot: 1, checksums: [FrameChecksum(frame: 10, checksum: 666)])), from: a)
        try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: [FrameChecksum(frame: 10, checksum: 111)])), from: b)
        let notice = try #require(notices(rig).first)
        #expect(notice.divergedSlots == [1] && notice.referenceSlot == 2 && notice.resyncStarted)
        let toLiar = rig.transport.take(a)
        let toHost = rig.transport.take(b)
        #expect(stateRequests(toLiar).isEmpty, "the liar was asked for its state")
        let request = try #require(stateRequests(toHost).first, "the host was not asked for its state")
        // The liar serves "its state" anyway, under the transfer's id and any other: refused,
        // and nothing reaches the host.
        for id in [request.transferId, request.transferId &+ 1, 0] {
            do {
                try rig.send(.stateChunk(StateChunk(transferId: id, frame: 10, offset: 0, totalSize: 4, data: [6, 6, 6, 6],
                                                    last: true)), from: a)
                Issue.record("a chunk from the liar was accepted (transfer \(id))")
            } catch {
                #expect(error.code == .invalidState)
            }
        }
        // It claims it could not load the host's state, over and over: every retry is served
        // by the host again, never by the liar. Past its retries it plays on as it was, its
        // checksums counted again.
        try rig.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 10, offset: 0, totalSize: 4,
                                            data: [1, 1, 1, 1], last: true)), from: b)
        var served = request.transferId
        for _ in 0 ..< 4 {
            rig.send(ackFailure: served, from: a)
            rig.advance(ms: 20)
            #expect(stateRequests(rig.transport.take(a)).isEmpty)
            if let retry = stateRequests(rig.transport.take(b)).first {
                served = retry.transferId
                try rig.send(.stateChunk(StateChunk(transferId: retry.transferId, frame: 10, offset: 0, totalSize: 4,
                                                    data: [1, 1, 1, 1], last: true)), from: b)
            }
        }
        // Later ties go the same way.
        for frame in 11 ..< 21 {
            try rig.batch(a, slot: 1, start: frame, [1])
            try rig.batch(b, slot: 2, start: frame, [2])
        }
        try rig.send(.checksumReport(ChecksumReport(slot: 1, checksums: [FrameChecksum(frame: 20, checksum: 667)])), from: a)
        try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: [FrameChecksum(frame: 20, checksum: 222)])), from: b)
        #expect(notices(rig).last?.referenceSlot == 2)
        #expect(stateChunks(rig.transport.take(b)).isEmpty, "state bytes were sent to the honest host")
        #expect(stateRequests(rig.transport.take(a)).isEmpty)
    }

    @Test func theHostInSlotOneStillResyncsADivergedPartner() throws {
        let rig = RelayRig(checksumInterval: 10)
        try pairAtFrame11(rig, first: "h-host", second: "p-guest")
        try rig.send(.checksumReport(ChecksumReport(slot: 1, checksums: [FrameChecksum(frame: 10, checksum: 111)])), from: a)
        try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: [FrameChecksum(frame: 10, checksum: 222)])), from: b)
        #expect(notices(rig).first?.divergedSlots == [2] && notices(rig).first?.referenceSlot == 1)
        #expect(stateRequests(rig.transport.take(a)).count == 1)
        #expect(stateRequests(rig.transport.take(b)).isEmpty)
    }

    @Test func aTieWithoutTheHostMovesNoState() throws {
        // Neither ticket names the host: the relay cannot tell who is right, so nobody's state moves.
        let rig = RelayRig(checksumInterval: 10)
        try pairAtFrame11(rig, first: "p-one", second: "p-two")
        try rig.send(.checksumReport(ChecksumReport(slot: 1, checksums: [FrameChecksum(frame: 10, checksum: 666)])), from: a)
        try rig.send(.checksumReport(ChecksumReport(slot: 2, checksums: [FrameChecksum(frame: 10, checksum: 111)])), from: b)
        let notice = try #require(notices(rig).first)
        #expect(notice.divergedSlots == [1, 2] && notice.referenceSlot == 0 && !notice.resyncStarted)
        #expect(stateRequests(rig.transport.take(a)).isEmpty && stateRequests(rig.transport.take(b)).isEmpty)
        #expect(rig.core.stats(of: rig.sessionId)?.desyncs == 1)
        #expect(rig.transport.published.contains { $0.topic == "sync.desync" && $0.severity == .warning })
    }

    @Test func theWinnerIsAStrictMajorityOrTheHostsGroup() {
        #expect(RelaySession.winner(of: [1: [0, 2], 2: [1]], hostSlot: 1) == 1)
        #expect(RelaySession.winner(of: [1: [0], 2: [1]], hostSlot: 1) == 2)
        #expect(RelaySession.winner(of: [1: [0], 2: [1]], hostSlot: nil) == nil)
        #expect(RelaySession.winner(of: [1: [0], 2: [1], 3: [2]], hostSlot: 2) == 3)
        #expect(RelaySession.winner(of: [1: [0, 3], 2: [1, 2]], hostSlot: 2) == 2)
        #expect(RelaySession.winner(of: [1: [0], 2: [1]], hostSlot: 5) == nil)
    }

    @Test func onlyTheHostStartsTheMatchEarly() throws {
        let rig = RelayRig(players: 3)
        _ = try rig.attach(a, slot: 1, participant: "p-first")
        _ = try rig.attach(b, slot: 2, participant: "h-host")
        do {
            try rig.send(.startSessionRequest(StartSessionRequest(sessionId: rig.sessionId)), from: a)
            Issue.record("a non-host in slot 1 started the match")
        } catch {
            #expect(error.code == .permissionDenied)
        }
        let reply = try rig.send(.startSessionRequest(StartSessionRequest(sessionId: rig.sessionId)), from: b)
        guard case .ack? = reply else { Issue.record("the host could not start: \(String(describing: reply))"); return }
    }

    // MARK: - Kicks and bans

    @Test func aParticipantThatLeftCannotTakeItsSlotBackWithItsOldTicket() throws {
        // Mallory keeps her ticket and leaves: at the coordinator (it tells the relay), or by
        // detaching from the relay herself. The slot goes to someone else, who attaches; her old
        // ticket must not take it back from them.
        for leavesAtTheCoordinator in [true, false] {
            let rig = RelayRig()
            let mallorysTicket = rig.ticket(slot: 2, participant: "p-mallory")
            _ = try rig.attach(a, slot: 1, participant: "h-host")
            _ = try rig.send(.attachRequest(AttachRequest(ticket: mallorysTicket, protocolVersion: SyncProtocol.current)), from: b)
            if leavesAtTheCoordinator {
                try rig.send(.disconnectPeerRequest(DisconnectPeerRequest(sessionId: rig.sessionId, participantId: "p-mallory",
                                                                          reason: .leaving, message: "left the session")),
                             from: RelayRig.address("coordinator"))
            } else {
                try rig.send(.detach(Detach(reason: .leaving, message: "left")), from: b)
            }
            let victim = try rig.attach(c, slot: 2, participant: "p-victim")
            #expect(victim.slot == 2)
            for resume in [false, true] {
                do {
                    try rig.send(.attachRequest(AttachRequest(ticket: mallorysTicket, protocolVersion: SyncProtocol.current, resume: resume)), from: b)
                    Issue.record("the old ticket took the slot back (resume \(resume), left at the coordinator \(leavesAtTheCoordinator))")
                } catch {
                    #expect(error.code == .permissionDenied && error.message.contains("You left this session"))
                }
            }
            #expect(rig.core.presence(of: rig.sessionId)?.participants == ["h-host", "p-victim"])
            #expect(!rig.transport.take(c).contains { if case .detach = $0 { true } else { false } }, "the victim was not replaced")
        }
        // A leave pushed for a participant that never attached here revokes its ticket all the same.
        let rig = RelayRig()
        _ = try rig.attach(a, slot: 1, participant: "h-host")
        let reply = try rig.send(.disconnectPeerRequest(DisconnectPeerRequest(sessionId: rig.sessionId, participantId: "p-never",
                                                                              reason: .leaving)),
                                 from: RelayRig.address("coordinator"))
        #expect(reply == .ack(Ack(detail: "revoked")))
        #expect(throws: ServiceError.self) {
            try rig.send(.attachRequest(AttachRequest(ticket: rig.ticket(slot: 2, participant: "p-never"), protocolVersion: SyncProtocol.current)), from: b)
        }
        // Another reason for a participant this relay does not know is still NOT_FOUND.
        let unknown = #expect(throws: ServiceError.self) {
            try rig.send(.disconnectPeerRequest(DisconnectPeerRequest(sessionId: rig.sessionId, participantId: "p-other", reason: .timeout)),
                         from: RelayRig.address("coordinator"))
        }
        #expect(unknown?.code == .notFound)
    }

    @Test func aKickedParticipantCannotAttachAgainWithItsTicket() throws {
        let rig = RelayRig()
        let kickedTicket = rig.ticket(slot: 2, participant: "p-kicked")
        _ = try rig.attach(a, slot: 1, participant: "h-host")
        _ = try rig.send(.attachRequest(AttachRequest(ticket: kickedTicket, protocolVersion: SyncProtocol.current)), from: b)
        let coordinator = RelayRig.address("coordinator")
        try rig.send(.disconnectPeerRequest(DisconnectPeerRequest(sessionId: rig.sessionId, participantId: "p-kicked",
                                                                  reason: .kicked, message: "banned by the host")),
                     from: coordinator)
        #expect(rig.transport.take(b).contains { if case .detach(let detach) = $0 { detach.reason == .kicked } else { false } })
        // Back with the old ticket, fresh or resuming, from the old or a new connection: refused.
        for (peer, resume) in [(b, false), (b, true), (c, false), (c, true)] {
            do {
                try rig.send(.attachRequest(AttachRequest(ticket: kickedTicket, protocolVersion: SyncProtocol.current, resume: resume)), from: peer)
                Issue.record("the kicked participant attached again (resume \(resume))")
            } catch {
                #expect(error.code == .permissionDenied)
                #expect(error.message.contains("the host removed you"))
            }
        }
        #expect(rig.core.presence(of: rig.sessionId)?.participants == ["h-host"])
        // Another participant's ticket for the same slot still works, and so does the host's.
        let newcomer = try rig.attach(c, slot: 2, participant: "p-newcomer")
        #expect(newcomer.slot == 2)
        _ = try rig.attach(RelayRig.address("host-again"), slot: 1, participant: "h-host")
        #expect(rig.core.presence(of: rig.sessionId)?.participants == ["h-host", "p-newcomer"])
        // The session ending does not forget it: the old ticket cannot open a new one either.
        try rig.send(.closeRelaySessionRequest(CloseRelaySessionRequest(sessionId: rig.sessionId)), from: coordinator)
        rig.advance(ms: 8)
        do {
            try rig.send(.attachRequest(AttachRequest(ticket: kickedTicket, protocolVersion: SyncProtocol.current)), from: b)
            Issue.record("the kicked participant opened the session again")
        } catch {
            #expect(error.code == .permissionDenied)
        }
    }

    @Test func aParticipantRemovedBeforeItEverAttachedIsRefusedToo() throws {
        let rig = RelayRig()
        _ = try rig.attach(a, slot: 1, participant: "h-host")
        rig.core.revoke(sessionId: rig.sessionId, participantId: "p-early")
        do {
            _ = try rig.attach(b, slot: 2, participant: "p-early")
            Issue.record("a participant removed before attaching was admitted")
        } catch {
            #expect(error.code == .permissionDenied)
        }
        _ = try rig.attach(b, slot: 2, participant: "p-other")
    }

    @Test func aPlayerWhoLeftComesBackThroughANewJoin() throws {
        // Leaving is for good for that participant and its tickets; joining again (the
        // coordinator seats a new participant, with a ticket of its own) is not barred.
        let rig = RelayRig()
        _ = try rig.attach(a, slot: 1, participant: "h-host")
        _ = try rig.send(.attachRequest(AttachRequest(ticket: rig.ticket(slot: 2, participant: "p-guest"), protocolVersion: SyncProtocol.current)), from: b)
        try rig.send(.detach(Detach(reason: .leaving)), from: b)
        let back = try rig.attach(b, slot: 2, participant: "p-guest-again")
        #expect(back.slot == 2)
    }
}

extension RelayRig {
    /// `peer` reports it could not load transfer `id`.
    func send(ackFailure id: UInt32, from peer: PeerAddress) {
        _ = try? send(.stateTransferAck(StateTransferAck(transferId: id, loaded: false, error: "could not load")), from: peer)
    }
}
