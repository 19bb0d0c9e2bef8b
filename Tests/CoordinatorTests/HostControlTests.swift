@testable import Coordinator
import NetplayAuth
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

@Suite("Host controls at the coordinator", .ownThread)
struct HostControlTests {
    private func list(_ h: Harness, _ id: String, as who: (id: String, token: [UInt8])) throws(ServiceError) -> [PendingJoin] {
        let outcome = try h.core.pendingJoins(ListPendingJoinsRequest(sessionId: id, participantId: who.id, participantToken: who.token),
                                              at: h.time)
        guard case .listPendingJoinsResponse(let response) = outcome.reply else { return [] }
        return response.pending
    }

    private func decide(_ h: Harness, _ id: String, as who: (id: String, token: [UInt8]), _ pendingId: String,
                        approve: Bool, reason: String = "") throws(ServiceError) {
        _ = try h.core.decideJoin(DecideJoinRequest(sessionId: id, participantId: who.id, participantToken: who.token,
                                                    pendingId: pendingId, approve: approve, reason: reason), at: h.time)
    }

    /// One address filed 64 junk joins (the whole list) and kept them waiting: every real joiner
    /// was RATE_LIMITED and the host's list held the names it chose. Four per address now.
    @Test func oneAddressCannotFillTheHostsList() throws {
        let h = try Harness()
        let created = try h.create(maxPlayers: 4, approveJoiners: true)
        let id = created.session.sessionId
        for index in 0 ..< 4 {
            #expect(code { try h.join(id, name: "junk-\(index)", key: "junk-key-\(index)-abcdef", source: "10.0.0.66") } == .awaitingHost)
        }
        #expect(code { try h.join(id, name: "junk-4", key: "junk-key-4-abcdef", source: "10.0.0.66") } == .rateLimited)
        // Its filed joins are still its to ask about; another address files its own.
        #expect(code { try h.join(id, name: "junk-0", key: "junk-key-0-abcdef", source: "10.0.0.66") } == .awaitingHost)
        #expect(code { try h.join(id, name: "bob", key: "bob-approval-key-1", source: "10.0.0.7") } == .awaitingHost)
        let host = (id: created.participantId, token: created.participantToken)
        #expect(try list(h, id, as: host).map(\.name).sorted() == ["bob", "junk-0", "junk-1", "junk-2", "junk-3"])
    }

    /// Asking again about a filed join costs no join budget; the same key with another request
    /// (here another password each time) is a new join, and pays as one.
    @Test func aFiledKeyWithAnotherRequestPaysTheJoinBudget() throws {
        let h = try Harness()
        let created = try h.create(maxPlayers: 3, approveJoiners: true)
        let id = created.session.sessionId
        #expect(code { try h.join(id, name: "eve", key: "eve-approval-key-1", source: "10.0.0.9") } == .awaitingHost)
        var codes: [ErrorCode?] = []
        for attempt in 0 ..< 400 {
            codes.append(code { try h.join(id, name: "eve \(attempt)", key: "eve-approval-key-1", source: "10.0.0.9") })
        }
        let limited = codes.contains(.rateLimited)
        #expect(limited, "answers: \(Set(codes.map { String(describing: $0) }))")
        // The filed join itself is still free to ask about, however often.
        for _ in 0 ..< 400 {
            #expect(code { try h.join(id, name: "eve", key: "eve-approval-key-1", source: "10.0.0.10") } != .rateLimited)
        }
    }

    @Test func aJoinWaitsForTheHostsApproval() throws {
        let h = try Harness()
        let created = try h.create(maxPlayers: 3, approveJoiners: true)
        let id = created.session.sessionId
        let host = (id: created.participantId, token: created.participantToken)
        #expect(code { try h.join(id, name: "bob", slot: 3, key: "bob-approval-key-1") } == .awaitingHost)
        #expect(code { try h.join(id, name: "bob", slot: 3, key: "bob-approval-key-1") } == .awaitingHost, "asking again files nothing new")
        let waiting = try list(h, id, as: host)
        #expect(waiting.count == 1 && waiting.first?.name == "bob" && waiting.first?.requestedSlot == 3 && waiting.first?.role == .player)
        #expect(h.session(id).participants.count == 1, "nobody joins before the host decides")
        try decide(h, id, as: host, waiting[0].pendingId, approve: true)
        // The host approved bob in slot 3: someone who learnt his key comes in on it as no one else.
        #expect(code { try h.join(id, name: "mallory", slot: 3, key: "bob-approval-key-1") } == .alreadyExists)
        #expect(code { try h.join(id, name: "bob", role: .spectator, key: "bob-approval-key-1") } == .alreadyExists)
        #expect(code { try h.join(id, name: "bob", slot: 2, key: "bob-approval-key-1") } == .alreadyExists)
        #expect(code { try h.join(id, name: "bob", password: "guess", slot: 3, key: "bob-approval-key-1") } == .alreadyExists)
        #expect(h.session(id).participants.count == 1)
        let bob = try h.join(id, name: "bob", slot: 3, key: "bob-approval-key-1", rtts: ["sync-0": 40])  // round trips are measured anew
        #expect(bob.slot == 3 && bob.ticket?.slot == 3)
        #expect(try list(h, id, as: host).isEmpty)
        // The same key again is the same join (idempotent), not a new one to approve.
        #expect(try h.join(id, name: "bob", slot: 3, key: "bob-approval-key-1").participantId == bob.participantId)
        // A room without approval admits at once.
        let open = try h.create(maxPlayers: 2).session.sessionId
        #expect(try h.join(open, name: "carol").slot == 2)
    }

    @Test func aRefusalReachesTheJoinerOnce() throws {
        let h = try Harness()
        let created = try h.create(approveJoiners: true)
        let id = created.session.sessionId
        let host = (id: created.participantId, token: created.participantToken)
        #expect(code { try h.join(id, name: "mallory", key: "mallory-idempotency-key") } == .awaitingHost)
        try decide(h, id, as: host, try list(h, id, as: host)[0].pendingId, approve: false, reason: "not tonight")
        do {
            _ = try h.join(id, name: "mallory", key: "mallory-idempotency-key")
            Issue.record("a refused join went through")
        } catch {
            #expect(error.code == .refusedByHost && error.message.contains("not tonight"))
        }
        #expect(h.session(id).participants.count == 1)
        // Asking again files a new join for the host to decide on.
        #expect(code { try h.join(id, name: "mallory", key: "mallory-idempotency-key") } == .awaitingHost)
        #expect(try list(h, id, as: host).count == 1)
        // A join without an idempotency key cannot be asked about again: refused outright.
        #expect(code { try h.join(id, name: "nokey") } == .badRequest)
    }

    @Test func onlyTheHostDecidesAndForgedTokensAreRefused() throws {
        let h = try Harness()
        let created = try h.create(maxPlayers: 3, approveJoiners: true)
        let id = created.session.sessionId
        let host = (id: created.participantId, token: created.participantToken)
        #expect(code { try h.join(id, name: "bob", key: "bob-idempotency-key") } == .awaitingHost)
        try decide(h, id, as: host, try list(h, id, as: host)[0].pendingId, approve: true)
        let bob = try h.join(id, name: "bob", key: "bob-idempotency-key")
        #expect(code { try h.join(id, name: "carol", key: "carol-idempotency-key") } == .awaitingHost)
        let pendingId = try list(h, id, as: host)[0].pendingId
        let asBob = (id: bob.participantId, token: bob.participantToken)
        #expect(code { _ = try list(h, id, as: asBob) } == .permissionDenied)
        #expect(code { try decide(h, id, as: asBob, pendingId, approve: true) } == .permissionDenied)
        var forged = host.token
        forged[0] ^= 1
        #expect(code { try decide(h, id, as: (host.id, forged), pendingId, approve: true) } == .unauthenticated)
        #expect(code { _ = try list(h, id, as: (host.id, forged)) } == .unauthenticated)
        #expect(code { try decide(h, id, as: host, "j-999-00000000", approve: true) } == .notFound)
        // Carol still waits: nothing above decided for her.
        #expect(code { try h.join(id, name: "carol", key: "carol-idempotency-key") } == .awaitingHost)
    }

    @Test func joinsNobodyAsksAboutExpire() throws {
        let h = try Harness()
        let created = try h.create(approveJoiners: true)
        let id = created.session.sessionId
        let host = (id: created.participantId, token: created.participantToken)
        #expect(code { try h.join(id, name: "bob", key: "bob-idempotency-key") } == .awaitingHost)
        let pendingId = try list(h, id, as: host)[0].pendingId
        h.now += h.core.settings.pendingJoinAskTimeoutMs + 1
        #expect(try list(h, id, as: host).isEmpty, "the joiner gave up")
        #expect(code { try decide(h, id, as: host, pendingId, approve: true) } == .notFound)
        // A joiner that keeps asking still waits at most the longest wait: then its join is filed anew.
        #expect(code { try h.join(id, name: "carol", key: "carol-idempotency-key") } == .awaitingHost)
        let first = try list(h, id, as: host)[0].pendingId
        var waited: UInt64 = 0
        while waited <= h.core.settings.pendingJoinMaxWaitMs {
            h.now += 5_000
            waited += 5_000
            #expect(code { try h.join(id, name: "carol", key: "carol-idempotency-key") } == .awaitingHost)
        }
        let again = try list(h, id, as: host)
        #expect(again.count == 1 && again[0].pendingId != first)
        // Housekeeping forgets the waiting joins of a session once nobody asks.
        h.now += h.core.settings.pendingJoinAskTimeoutMs + 1
        h.core.expireWaitingJoins(at: h.time)
        #expect(h.core.approvals[id] == nil)
    }

    @Test func aSwapIsPushedToTheRelayBeforeTheStartOnly() throws {
        let h = try Harness()
        let created = try h.create(maxPlayers: 3)
        let id = created.session.sessionId
        let bob = try h.join(id, name: "bob")
        let swapped = try h.core.swapSlots(SwapSlotsRequest(sessionId: id, participantId: created.participantId,
                                                            participantToken: created.participantToken, slotA: 1, slotB: 2), at: h.time)
        let pushes = swapped.detach.compactMap { notice -> AssignSlotsRequest? in
            guard case .assignSlotsRequest(let request) = notice.body else { return nil }
            return request
        }
        #expect(swapped.detach.first?.endpoint == Harness.endpoint(of: "sync-0"))
        let push = try #require(pushes.first)
        #expect(push.sessionId == id && push.hostParticipantId == created.participantId)
        #expect(Set(push.assignments.map { "\($0.participantId)=\($0.slot)" })
                == ["\(created.participantId)=2", "\(bob.participantId)=1"])
        // A participant moving to a free slot is pushed too.
        let moved = try h.core.chooseSlot(ChooseSlotRequest(sessionId: id, participantId: bob.participantId,
                                                            participantToken: bob.participantToken, slot: 3), at: h.time)
        #expect(moved.detach.contains { if case .assignSlotsRequest = $0.body { true } else { false } })
        _ = try h.core.start(StartSessionRequest(sessionId: id, participantId: created.participantId,
                                                 participantToken: created.participantToken), at: h.time)
        #expect(code { try h.core.swapSlots(SwapSlotsRequest(sessionId: id, participantId: created.participantId,
                                                             participantToken: created.participantToken, slotA: 2, slotB: 3), at: h.time) }
                == .invalidState)
    }
}
