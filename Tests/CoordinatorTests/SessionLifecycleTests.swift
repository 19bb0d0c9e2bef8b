@testable import Coordinator
import NetplayAuth
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

@Suite("Session lifecycle", .ownThread)
struct SessionLifecycleTests {
    @Test func hostJoinSpectateLeave() throws {
        let h = try Harness()
        let created = try h.create(maxPlayers: 3, spectators: 1)
        let id = created.session.sessionId
        #expect(created.session.state == .lobby && created.session.relayId == "sync-0")
        #expect(created.session.slots.count == 3 && created.session.slots[0].participant?.isHost == true)
        let ticket = try #require(created.ticket)
        try JoinTicketVerifier(keyRing: testKeys).verify(ticket, relayId: "sync-0", nowUnixMs: h.time.unixMs)
        #expect(ticket.role == .player && ticket.slot == 1 && ticket.params.maxPlayers == 3)

        let bob = try h.join(id, name: "bob")
        #expect(bob.slot == 2 && bob.ticket?.slot == 2 && bob.session.slots[1].participant?.name == "bob")
        let carol = try h.join(id, name: "carol", slot: 3)
        #expect(carol.slot == 3)
        let dave = try h.join(id, name: "dave", role: .spectator)
        #expect(dave.slot == 0 && dave.ticket?.role == .spectator && dave.session.spectators.map(\.name) == ["dave"])
        try JoinTicketVerifier(keyRing: testKeys).verify(dave.ticket!, relayId: "sync-0", nowUnixMs: h.time.unixMs)

        let left = try h.core.leave(LeaveSessionRequest(sessionId: id, participantId: bob.participantId,
                                                        participantToken: bob.participantToken), at: h.time)
        #expect(left.events.map(\.kind) == [.left])
        #expect(h.session(id).players.map(\.name) == ["alice", "carol"])
        // Bob's slot is free again.
        #expect(try h.join(id, name: "erin").slot == 2)
        // The host leaving ends the session.
        let ended = try h.core.leave(LeaveSessionRequest(sessionId: id, participantId: created.participantId,
                                                         participantToken: created.participantToken), at: h.time)
        #expect(ended.events.map(\.kind) == [.ended] && h.session(id).state == .ended)
        #expect(ended.detach.count == 1)
        #expect(code { try h.join(id, name: "late") } == .sessionEnded)
    }

    @Test func everyJoinCheckHasItsError() throws {
        let h = try Harness()
        let id = try h.create(maxPlayers: 2, spectators: 1).session.sessionId
        #expect(code { try h.join("s-nope", name: "x") } == .notFound)
        var other = smb
        other.crc32 = 1
        #expect(code { try h.join(id, name: "x", content: other) } == .contentMismatch)
        other = smb
        other.md5 = Array(repeating: 0x22, count: 16)
        #expect(code { try h.join(id, name: "x", content: other) } == .contentMismatch)
        other = smb
        other.coreId = "fceumm"
        #expect(code { try h.join(id, name: "x", content: other) } == .coreMismatch)
        other = smb
        other.coreVersion = "1.51"
        #expect(code { try h.join(id, name: "x", content: other) } == .coreVersionMismatch)
        #expect(code { try h.join(id, name: "x", slot: 1) } == .slotTaken)
        #expect(code { try h.join(id, name: "x", slot: 5) } == .badRequest)
        _ = try h.join(id, name: "bob")
        #expect(code { try h.join(id, name: "x") } == .roomFull)
        _ = try h.join(id, name: "watcher", role: .spectator)
        #expect(code { try h.join(id, name: "y", role: .spectator) } == .spectatorsFull)
        let closed = try h.create(spectators: 0).session.sessionId
        #expect(code { try h.join(closed, name: "y", role: .spectator) } == .spectatorsNotAllowed)
    }

    @Test func passwordsAreCheckedAndAttemptsLimited() throws {
        let h = try Harness()
        let created = try h.create(maxPlayers: 4, spectators: 4, password: "play", spectatePassword: "watch")
        let id = created.session.sessionId
        #expect(created.session.hasPassword && created.session.hasSpectatePassword)
        #expect(created.session.settings?.playPassword == "" && created.session.settings?.spectatePassword == "")
        #expect(h.session(id).playPasswordHash?.hasPrefix("$argon2id$") == true)
        #expect(code { try h.join(id, name: "x") } == .wrongPassword)
        #expect(code { try h.join(id, name: "x", password: "watch") } == .wrongPassword, "the spectate password does not let you play")
        let player = try h.join(id, name: "bob", password: "play")
        #expect(player.slot == 2)
        let spectator = try h.join(id, name: "carol", role: .spectator, password: "watch")
        #expect(!h.session(id).participant(spectator.participantId)!.mayPlay)
        let both = try h.join(id, name: "dave", role: .spectator, password: "play")
        #expect(h.session(id).participant(both.participantId)!.mayPlay)
        // A spectator who came in with the spectate password may not take a slot.
        #expect(code { try h.core.chooseSlot(ChooseSlotRequest(sessionId: id, participantId: spectator.participantId,
                                                               participantToken: spectator.participantToken, slot: 3), at: h.time) }
                == .permissionDenied)
        _ = try h.core.chooseSlot(ChooseSlotRequest(sessionId: id, participantId: both.participantId,
                                                    participantToken: both.participantToken, slot: 3), at: h.time)
        #expect(h.session(id).holder(of: 3)?.name == "dave")
        // Three wrong passwords per minute (test settings), then RATE_LIMITED even for the right one.
        #expect(code { try h.join(id, name: "m1", password: "guess") } == .wrongPassword)
        #expect(code { try h.join(id, name: "m1", password: "guess") } == .rateLimited)
        h.now += 60_000
        _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-0", load: RelayLoad()), at: h.time)
        #expect(try h.join(id, name: "erin", password: "play").slot == 4)
    }

    @Test func onlyAPlayPasswordAlsoGuardsSpectating() throws {
        let h = try Harness()
        let id = try h.create(spectators: 2, password: "pw").session.sessionId
        #expect(code { try h.join(id, name: "x", role: .spectator) } == .wrongPassword)
        _ = try h.join(id, name: "y", role: .spectator, password: "pw")
    }

    @Test func hostOnlyActionsNeedTheHostAndTheRightToken() throws {
        let h = try Harness()
        let host = try h.create(maxPlayers: 4)
        let id = host.session.sessionId
        let bob = try h.join(id, name: "bob")
        let carol = try h.join(id, name: "carol")
        let kickByBob = KickParticipantRequest(sessionId: id, participantId: bob.participantId, participantToken: bob.participantToken,
                                               targetParticipantId: carol.participantId)
        #expect(code { try h.core.kick(kickByBob, at: h.time) } == .permissionDenied)
        let forged = KickParticipantRequest(sessionId: id, participantId: host.participantId, participantToken: bob.participantToken,
                                            targetParticipantId: carol.participantId)
        #expect(code { try h.core.kick(forged, at: h.time) } == .unauthenticated)
        let unknown = StartSessionRequest(sessionId: id, participantId: "p-nobody", participantToken: host.participantToken)
        #expect(code { try h.core.start(unknown, at: h.time) } == .unauthenticated)
        // The wire lets a start carry no token (a relay does not read it); the coordinator does.
        let tokenless = StartSessionRequest(sessionId: id, participantId: host.participantId)
        #expect(throws: Never.self) { _ = try Envelope(body: .startSessionRequest(tokenless)).encoded() }
        #expect(code { try h.core.start(tokenless, at: h.time) } == .unauthenticated)
        let selfKick = KickParticipantRequest(sessionId: id, participantId: host.participantId, participantToken: host.participantToken,
                                              targetParticipantId: host.participantId)
        #expect(code { try h.core.kick(selfKick, at: h.time) } == .invalidState)
        let missing = KickParticipantRequest(sessionId: id, participantId: host.participantId, participantToken: host.participantToken,
                                             targetParticipantId: "p-ghost")
        #expect(code { try h.core.kick(missing, at: h.time) } == .notFound)
        let kick = KickParticipantRequest(sessionId: id, participantId: host.participantId, participantToken: host.participantToken,
                                          targetParticipantId: carol.participantId, reason: "rude", ban: true)
        let kicked = try h.core.kick(kick, at: h.time)
        #expect(kicked.events.first?.kind == .kicked && kicked.events.first?.reason == "rude")
        #expect(kicked.detach.first?.body == .disconnectPeerRequest(DisconnectPeerRequest(
            sessionId: id, participantId: carol.participantId, reason: .kicked, message: "rude")))
        #expect(code { try h.join(id, name: "carol") } == .banned)
        let start = StartSessionRequest(sessionId: id, participantId: host.participantId, participantToken: host.participantToken)
        #expect(code { try h.core.start(StartSessionRequest(sessionId: id, participantId: bob.participantId,
                                                            participantToken: bob.participantToken), at: h.time) } == .permissionDenied)
        let started = try h.core.start(start, at: h.time)
        #expect(started.events.map(\.kind) == [.started] && h.session(id).state == .running)
        #expect(code { try h.core.start(start, at: h.time) } == .invalidState)
        // Late joiners are welcome while running.
        #expect(try h.join(id, name: "late").slot == 3)
        let end = EndSessionRequest(sessionId: id, participantId: host.participantId, participantToken: host.participantToken)
        _ = try h.core.end(end, at: h.time)
        #expect(code { try h.core.end(end, at: h.time) } == .sessionEnded)
        #expect(h.core.relays.takeCloses(for: "sync-0").close == [id])
    }

    @Test func slotsSwapAndChoose() throws {
        let h = try Harness()
        let host = try h.create(maxPlayers: 4, spectators: 2)
        let id = host.session.sessionId
        let bob = try h.join(id, name: "bob", slot: 3)
        let swap = SwapSlotsRequest(sessionId: id, participantId: host.participantId, participantToken: host.participantToken,
                                    slotA: 1, slotB: 3)
        _ = try h.core.swapSlots(swap, at: h.time)
        #expect(h.session(id).holder(of: 1)?.name == "bob" && h.session(id).holder(of: 3)?.name == "alice")
        _ = try h.core.swapSlots(SwapSlotsRequest(sessionId: id, participantId: host.participantId,
                                                  participantToken: host.participantToken, slotA: 3, slotB: 4), at: h.time)
        #expect(h.session(id).holder(of: 4)?.name == "alice" && h.session(id).holder(of: 3) == nil)
        #expect(code { try h.core.swapSlots(SwapSlotsRequest(sessionId: id, participantId: host.participantId,
                                                             participantToken: host.participantToken, slotA: 1, slotB: 5), at: h.time) }
                == .badRequest)
        // Bob moves to a free slot, then to spectating, with a fresh ticket each time.
        let moved = try h.core.chooseSlot(ChooseSlotRequest(sessionId: id, participantId: bob.participantId,
                                                            participantToken: bob.participantToken, slot: 2), at: h.time)
        guard case .sessionResponse(let response) = moved.reply else { Issue.record("no reply"); return }
        #expect(response.ticket?.slot == 2 && h.session(id).holder(of: 2)?.name == "bob")
        #expect(code { try h.core.chooseSlot(ChooseSlotRequest(sessionId: id, participantId: bob.participantId,
                                                               participantToken: bob.participantToken, slot: 4), at: h.time) }
                == .slotTaken)
        let spectating = try h.core.chooseSlot(ChooseSlotRequest(sessionId: id, participantId: bob.participantId,
                                                                 participantToken: bob.participantToken, slot: 0), at: h.time)
        guard case .sessionResponse(let asSpectator) = spectating.reply else { Issue.record("no reply"); return }
        #expect(asSpectator.ticket?.role == .spectator && h.session(id).spectators.map(\.name) == ["bob"])
        #expect(try h.store.database.integrityCheck() == "ok")
    }

    @Test func retriedCreatesAndJoinsAreIdempotent() throws {
        let h = try Harness()
        let first = try h.create(key: "create-idempotency-1")
        let again = try h.create(key: "create-idempotency-1")
        #expect(first.session.sessionId == again.session.sessionId && first.participantToken == again.participantToken)
        #expect(h.core.activeCount == 1)
        let join1 = try h.join(first.session.sessionId, name: "bob", key: "join-idempotency-1")
        let join2 = try h.join(first.session.sessionId, name: "bob", key: "join-idempotency-1")
        #expect(join1.participantId == join2.participantId && join1.participantToken == join2.participantToken)
        #expect(h.session(first.session.sessionId).players.count == 2)
    }

    @Test func aRetriedCreateOfASessionThatHasSinceEndedMakesANewOne() throws {
        // The player's first create went through but its answer was lost; by the time the player
        // tries again (with the same key) the session has ended: idled out, or ended by an operator.
        let h = try Harness()
        let first = try h.create(key: "create-idempotency-1")
        _ = try h.core.end(EndSessionRequest(sessionId: first.session.sessionId, participantId: first.participantId,
                                             participantToken: first.participantToken), at: h.time)
        let again = try h.create(key: "create-idempotency-1")
        #expect(again.session.sessionId != first.session.sessionId && again.ticket != nil, "a new room, with a ticket to it")
        #expect(h.core.activeCount == 1)
        #expect(try h.create(key: "create-idempotency-1").session.sessionId == again.session.sessionId, "and the key now names the new one")
        try h.restart()
        #expect(try h.create(key: "create-idempotency-1").session.sessionId == again.session.sessionId, "after a restart too")
        // The ended one is deleted after its retention; the key still names the new one.
        h.now += h.core.settings.endedRetentionMs + 1_000
        _ = h.core.maintain(at: h.time, housekeeping: true)
        #expect(try h.create(key: "create-idempotency-1").session.sessionId == again.session.sessionId)
        #expect(h.core.activeCount == 1)
    }

    @Test func lanSessionsNeedNoRelayAndGetNoTicket() throws {
        let h = try Harness(relays: [])
        #expect(code { try h.create() } == .noRelay)
        let lan = try h.create(transport: .lan)
        #expect(lan.ticket == nil && lan.session.relayId.isEmpty)
        #expect(try h.join(lan.session.sessionId, name: "bob").ticket == nil)
        let room = try #require(h.session(lan.session.sessionId).room(hostVersion: "1"))
        #expect(room.transport == .lan && room.hostEndpoint == "tcp://10.0.0.2:7300" && room.currentPlayers == 2)
    }

    @Test func listingFiltersAndPages() throws {
        let h = try Harness()
        var ids: [String] = []
        for _ in 0..<7 { ids.append(try h.create().session.sessionId) }
        let host = try h.create()
        _ = try h.core.end(EndSessionRequest(sessionId: host.session.sessionId, participantId: host.participantId,
                                             participantToken: host.participantToken), at: h.time)
        guard case .listSessionsResponse(let page) = try h.core.list(ListSessionsRequest(pageSize: 5)).reply else { return }
        #expect(page.sessions.count == 5 && page.totalMatching == 7 && !page.nextPageToken.isEmpty)
        guard case .listSessionsResponse(let rest) = try h.core.list(ListSessionsRequest(pageSize: 5, pageToken: page.nextPageToken)).reply else { return }
        #expect(rest.sessions.count == 2 && rest.nextPageToken.isEmpty)
        #expect(Set((page.sessions + rest.sessions).map(\.sessionId)) == Set(ids))
        guard case .listSessionsResponse(let ended) = try h.core.list(ListSessionsRequest(state: .ended)).reply else { return }
        #expect(ended.sessions.map(\.sessionId) == [host.session.sessionId])
        guard case .listSessionsResponse(let mario) = try h.core.list(ListSessionsRequest(gameName: "MARIO")).reply else { return }
        #expect(mario.totalMatching == 7)
        #expect(code { try h.core.list(ListSessionsRequest(pageToken: "bogus")) } == .badRequest)
        #expect(code { try h.core.get(GetSessionRequest(sessionId: "nope")) } == .notFound)
    }
}
