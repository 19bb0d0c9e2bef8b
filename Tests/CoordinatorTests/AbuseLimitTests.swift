@testable import Coordinator
import Foundation
import NetplayTestSupport
import NetplayAuth
import NetplayService
import NetplayWire
import Testing

/// The abuse limits on the coordinator's side: password guesses cannot
/// outrun their budget, sessions cannot be created or joined without bound, idle lobbies end,
/// bans stick, and the token key is private.
@Suite("Coordinator abuse limits", .ownThread)
struct AbuseLimitTests {
    static func settings(_ change: (inout CoordinatorSettings) -> Void = { _ in }) -> CoordinatorSettings {
        var settings = Harness.settings()
        change(&settings)
        return settings
    }

    /// Creates a session with `room` (hashing its passwords as the service does).
    func create(_ h: Harness, _ room: SessionSettings, source: String = "") throws -> CreateSessionResponse {
        let request = CreateSessionRequest(settings: room, hostName: "alice")
        try h.core.precheckCreate(request, source: source, at: h.time)
        let hasher = h.core.settings.passwordHasher
        let outcome = try h.core.create(request, source: source,
                                        playHash: room.playPassword.isEmpty ? nil : hasher.hash(room.playPassword),
                                        spectateHash: room.spectatePassword.isEmpty ? nil : hasher.hash(room.spectatePassword),
                                        at: h.time)
        guard case .createSessionResponse(let response) = outcome.reply else { throw HarnessFailure("no create reply") }
        return response
    }

    // MARK: Shared admission: the same cases as the LAN host

    @Test(arguments: AdmissionCases.all)
    func theSharedAdmissionCases(_ admissionCase: AdmissionCase) throws {
        let h = try Harness()
        let id = try create(h, admissionCase.room).session.sessionId
        let join = admissionCase.join
        #expect(code {
            try h.join(id, name: join.name, role: join.role, password: join.password, content: join.content,
                       slot: join.preferredSlot)
        } == admissionCase.expected)
    }

    @Test func theSharedPasswordBudget() throws {
        let h = try Harness(settings: Self.settings { $0.passwordAttemptsPerMinute = Double(AdmissionCases.attemptsPerMinute) })
        let id = try create(h, AdmissionCases.room(play: "pw")).session.sessionId
        for _ in 0..<AdmissionCases.attemptsPerMinute {
            #expect(code { try h.join(id, name: "m", password: "guess", content: AdmissionCases.content) } == .wrongPassword)
        }
        #expect(code { try h.join(id, name: "m", password: "pw", content: AdmissionCases.content) } == .rateLimited,
                "once the budget is out the right password is refused like the others")
    }

    // MARK: Password budget under concurrency

    @Test func reservedAttemptsBoundConcurrentGuessesInTheCore() throws {
        let h = try Harness()  // 3 attempts a minute
        let id = try h.create(password: "right").session.sessionId
        let wrong = JoinSessionRequest(sessionId: id, role: .player, name: "m", password: "guess", content: smb)
        // Every guess is planned before any is verified, as concurrent requests are.
        var plans: [JoinPlan] = []
        var limited = 0
        for _ in 0..<40 {
            do { plans.append(try h.core.planJoin(wrong, at: h.time)) } catch { #expect(error.code == .rateLimited); limited += 1 }
        }
        let right = JoinSessionRequest(sessionId: id, role: .player, name: "friend", password: "right", content: smb)
        #expect(code { try h.core.planJoin(right, at: h.time) } == .rateLimited, "the right one is not singled out")
        #expect(plans.count == 3 && limited == 37)
        for plan in plans {
            #expect(code { try h.core.settleJoin(wrong, plan: plan, match: .none, at: h.time) } == .wrongPassword)
        }
    }

    @Test func concurrentGuessesAgainstTheServiceGetNoMoreThanTheBudget() throws {
        let service = try ServiceFixture(settings: Self.settings {
            $0.passwordAttemptsPerMinute = 10
            $0.joinsPerMinutePerSource = 0
        })
        defer { service.stop() }
        let client = try BlockingClient(endpoint: service.endpoint, timeout: 10)
        let id = try service.createLanSession(client, password: "right")
        var bodies: [Envelope.Body] = (0..<40).map { index in
            .joinSessionRequest(JoinSessionRequest(sessionId: id, role: .player, name: "m\(index)", password: "guess\(index)",
                                                   content: smb))
        }
        bodies.append(.joinSessionRequest(JoinSessionRequest(sessionId: id, role: .player, name: "friend", password: "right",
                                                             content: smb)))
        for (index, body) in bodies.enumerated() {
            try client.sendRaw(try Envelope(requestId: UInt64(1_000 + index), body: body).encoded())
        }
        var replies: [UInt64: Envelope.Body] = [:]
        while replies.count < bodies.count {
            let envelope = try Envelope(decoding: try client.receiveRaw())
            replies[envelope.requestId] = envelope.body
        }
        func errorCode(_ body: Envelope.Body?) -> ErrorCode? {
            if case .error(let error)? = body { return error.code }
            return nil
        }
        let wrongCodes = (0..<40).map { errorCode(replies[UInt64(1_000 + $0)]) }
        let wrongPasswords = wrongCodes.filter { $0 == .wrongPassword }.count
        #expect(wrongPasswords <= 10, "\(wrongPasswords) guesses were verified; the budget is 10")
        #expect(wrongCodes.allSatisfy { $0 == .wrongPassword || $0 == .rateLimited })
        let right = replies[1_040]
        if case .joinSessionResponse? = right {
            // Verified within the budget: a real join, not an oracle.
        } else {
            #expect(errorCode(right) == .rateLimited && wrongCodes.contains(.rateLimited),
                    "the right password must get what the refused guesses got, not \(String(describing: right))")
        }
    }

    @Test func aFloodOfGuessesDoesNotHoldUpAnotherSessionsJoin() throws {
        let service = try ServiceFixture(settings: Self.settings {
            $0.passwordHasher = .interactive  // real cost: a serial queue of 150 would take seconds
            $0.passwordAttemptsPerMinute = 100_000
            $0.joinsPerMinutePerSource = 0
            $0.pendingHashesPerSource = 1_000  // both clients share 127.0.0.1: isolate the per-session bound
        })
        defer { service.stop() }
        let attacker = try BlockingClient(endpoint: service.endpoint, timeout: 60)
        let friend = try BlockingClient(endpoint: service.endpoint, timeout: 60)
        let target = try service.createLanSession(attacker, password: "secret")
        let other = try service.createLanSession(friend, password: "ours")
        for index in 0..<150 {
            try attacker.sendRaw(try Envelope(requestId: UInt64(index + 1), body: .joinSessionRequest(JoinSessionRequest(
                sessionId: target, role: .player, name: "m\(index)", password: "guess\(index)", content: smb))).encoded())
        }
        let started = ContinuousClock.now
        let reply = try friend.request(.joinSessionRequest(JoinSessionRequest(sessionId: other, role: .player, name: "bob",
                                                                              password: "ours", content: smb)))
        let waited = ContinuousClock.now - started
        guard case .joinSessionResponse = reply else {
            Issue.record("the friend's join failed: \(reply)")
            return
        }
        #expect(waited < .seconds(3), "the friend waited \(waited) behind the flood")
        var codes: [ErrorCode] = []
        for _ in 0..<150 {
            if case .error(let error) = try Envelope(decoding: try attacker.receiveRaw()).body { codes.append(error.code) }
        }
        #expect(codes.filter { $0 == .rateLimited }.count > 100, "most of the flood is refused before hashing")
    }

    @Test func theHashingQueueIsBoundedAndFair() {
        var queue = HashingQueue<Int>(width: 2, perSession: 4, perSource: 6)
        var accepted: [Bool] = []
        for job in 0..<4 { accepted.append(queue.enqueue(job, session: "A", source: "1.1.1.1")) }
        accepted.append(queue.enqueue(99, session: "A", source: "2.2.2.2"))  // a session's share is full
        accepted.append(queue.enqueue(10, session: "B", source: "1.1.1.1"))
        accepted.append(queue.enqueue(11, session: "C", source: "1.1.1.1"))
        #expect(accepted == [true, true, true, true, false, true, true])
        #expect(!queue.admits(session: "D", source: "1.1.1.1"), "a source's share is full")
        #expect(queue.admits(session: "D", source: ""), "an unknown source is bounded per session only")
        let addedE = queue.enqueue(20, session: "E", source: "3.3.3.3")
        #expect(addedE)
        // Round robin across sessions: A, B, then (once workers are free) C and E before A's second job.
        var order: [Int?] = [queue.next()?.job, queue.next()?.job, queue.next()?.job]
        #expect(order == [0, 10, nil], "two workers")
        queue.finished(session: "A", source: "1.1.1.1")
        queue.finished(session: "B", source: "1.1.1.1")
        order = [queue.next()?.job, queue.next()?.job]
        #expect(order == [11, 20])
        #expect(queue.waitingCount == 3 && queue.running == 2)
        queue.finished(session: "C", source: "1.1.1.1")
        queue.finished(session: "E", source: "3.3.3.3")
        order = [queue.next()?.job, queue.next()?.job, queue.next()?.job]
        #expect(order == [1, 2, nil])
    }

    // MARK: Creates, joins, lobbies

    @Test func createsArePerSourceRateLimited() throws {
        let h = try Harness(settings: Self.settings { $0.createsPerMinutePerSource = 3; $0.relayTTLMs = 600_000 })
        for _ in 0..<3 { _ = try h.create(source: "10.0.0.1") }
        #expect(code { try h.create(source: "10.0.0.1") } == .rateLimited)
        _ = try h.create(source: "10.0.0.2")
        for _ in 0..<5 { _ = try h.create() }  // unknown source (in-process): not limited per source
        h.now += 20_000
        _ = try h.create(source: "10.0.0.1")
        #expect(code { try h.create(source: "10.0.0.1") } == .rateLimited)
    }

    @Test func joinsArePerSourceRateLimited() throws {
        let h = try Harness(settings: Self.settings { $0.joinsPerMinutePerSource = 3 })
        let id = try h.create(maxPlayers: 8, spectators: 8).session.sessionId
        for index in 0..<3 { _ = try h.join(id, name: "p\(index)", source: "10.0.0.1") }
        #expect(code { try h.join(id, name: "x", source: "10.0.0.1") } == .rateLimited)
        #expect(code { try h.join("s-nope", name: "x", source: "10.0.0.1") } == .rateLimited, "limited before anything is looked up")
        _ = try h.join(id, name: "other", source: "10.0.0.2")
    }

    @Test func runningSessionsPerSourceAreCappedToo() throws {
        // Starting a session frees its lobby place, not its place among all an address hosts: each
        // running one holds memory on a relay, so a stranger cannot start them without bound.
        let h = try Harness(settings: Self.settings {
            $0.createsPerMinutePerSource = 0
            $0.lobbySessionsPerSource = 2
            $0.sessionsPerSource = 3
        })
        var hosted: [CreateSessionResponse] = []
        for _ in 0..<3 {
            let created = try h.create(source: "10.0.0.1")
            _ = try h.core.start(StartSessionRequest(sessionId: created.session.sessionId, participantId: created.participantId,
                                                     participantToken: created.participantToken), at: h.time)
            hosted.append(created)
        }
        let refused = #expect(throws: ServiceError.self) { try h.create(source: "10.0.0.1") }
        #expect(refused?.code == .rateLimited && refused?.message.contains("already hosts 3 sessions") == true)
        _ = try h.create(source: "10.0.0.2")
        // Ending one frees a place; the count survives a restart.
        _ = try h.core.end(EndSessionRequest(sessionId: hosted[0].session.sessionId, participantId: hosted[0].participantId,
                                             participantToken: hosted[0].participantToken), at: h.time)
        _ = try h.create(source: "10.0.0.1")
        try h.restart()
        #expect(code { try h.create(source: "10.0.0.1") } == .rateLimited)
        #expect(h.core.hostedBySource.active["10.0.0.1"] == 3 && h.core.hostedBySource.lobby["10.0.0.1"] == 1)
        // A running session nobody has been attached to for 10 minutes may never be reported
        // ended (its relay lost it): it stops counting, and the address is not locked out.
        h.now += SessionCoordinator.unplayedSessionMs
        try h.register("sync-1")  // a live relay for the new session
        _ = try h.create(source: "10.0.0.1")
        #expect(h.core.hostedBySource.active["10.0.0.1"] == 4, "still counted, no longer held against it")
    }

    @Test func liveLobbySessionsPerSourceAreCapped() throws {
        let h = try Harness(settings: Self.settings {
            $0.createsPerMinutePerSource = 0
            $0.lobbySessionsPerSource = 2
        })
        let first = try h.create(source: "10.0.0.1")
        _ = try h.create(source: "10.0.0.1")
        #expect(code { try h.create(source: "10.0.0.1") } == .rateLimited)
        _ = try h.create(source: "10.0.0.2")
        // Starting one frees a lobby place; ending one too.
        _ = try h.core.start(StartSessionRequest(sessionId: first.session.sessionId, participantId: first.participantId,
                                                 participantToken: first.participantToken), at: h.time)
        let third = try h.create(source: "10.0.0.1")
        #expect(code { try h.create(source: "10.0.0.1") } == .rateLimited)
        _ = try h.core.end(EndSessionRequest(sessionId: third.session.sessionId, participantId: third.participantId,
                                             participantToken: third.participantToken), at: h.time)
        _ = try h.create(source: "10.0.0.1")
        // The count survives a restart (the host's address is stored).
        try h.restart()
        #expect(code { try h.create(source: "10.0.0.1") } == .rateLimited)
    }

    @Test func idleLobbiesExpireAndTheirRoomsAreWithdrawn() throws {
        let h = try Harness(settings: Self.settings { $0.lobbyIdleMs = 60_000; $0.relayTTLMs = 600_000 })
        let idle = try h.create().session.sessionId
        let busy = try h.create().session.sessionId
        let watched = try h.create().session.sessionId
        let running = try h.create()
        _ = try h.core.start(StartSessionRequest(sessionId: running.session.sessionId, participantId: running.participantId,
                                                 participantToken: running.participantToken), at: h.time)
        h.now += 40_000
        _ = try h.join(busy, name: "bob")  // activity
        let host = h.session(watched).hostParticipantId
        _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-0", load: RelayLoad(),
                                                        presence: [SessionPresence(sessionId: watched, connectedParticipantIds: [host])]),
                                    at: h.time)  // someone attached: activity
        h.now += 25_000
        let outcome = h.core.expireIdleSessions(at: h.time)
        #expect(outcome.events.map(\.kind) == [.ended] && outcome.events.first?.session.sessionId == idle)
        #expect(outcome.events.first?.reason.contains("expired") == true)
        #expect(outcome.touched == [idle])
        #expect(h.session(idle).state == .ended && h.session(idle).room(hostVersion: "t") == nil, "its room is withdrawn")
        #expect(outcome.detach.first.map { if case .closeRelaySessionRequest = $0.body { true } else { false } } == true)
        #expect(h.session(busy).state == .lobby && h.session(watched).state == .lobby)
        #expect(h.session(running.session.sessionId).state == .running, "started sessions never expire as lobbies")
        h.now += 60_000
        let later = h.core.expireIdleSessions(at: h.time)
        #expect(Set(later.events.map(\.session.sessionId)) == [busy, watched])
        #expect(h.core.expireIdleSessions(at: h.time).events.isEmpty)
    }

    /// A started session nobody plays (a LAN host that never came, a relay that lost it) used to
    /// run for good: it held its place under `maxSessions` until creates were refused. It now
    /// ends after `runningIdleMs` without activity; one someone is attached to, or whose
    /// players renew their tickets, goes on.
    @Test func runningSessionsNobodyPlaysExpireAndFreeTheirPlace() throws {
        let h = try Harness(settings: Self.settings { $0.runningIdleMs = 120_000; $0.lobbyIdleMs = 0; $0.maxSessions = 3
                                                      $0.relayTTLMs = 6_000_000 })
        func started(_ transport: Transport = .relay) throws -> CreateSessionResponse {
            let created = try h.create(transport: transport)
            _ = try h.core.start(StartSessionRequest(sessionId: created.session.sessionId, participantId: created.participantId,
                                                     participantToken: created.participantToken), at: h.time)
            return created
        }
        let abandoned = try started(.lan)
        let played = try started()
        let renewing = try started(.lan)
        #expect(code { try h.create() } == .overloaded)
        var ended: [(String, String)] = []
        for _ in 0 ..< 5 {
            h.now += 30_000
            let host = h.session(played.session.sessionId).hostParticipantId
            _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-0", load: RelayLoad(), presence: [
                SessionPresence(sessionId: played.session.sessionId, connectedParticipantIds: [host])]), at: h.time)
            _ = try h.core.renew(RenewTicketRequest(sessionId: renewing.session.sessionId, participantId: renewing.participantId,
                                                    participantToken: renewing.participantToken), at: h.time)
            ended += h.core.expireIdleSessions(at: h.time).events.map { ($0.session.sessionId, $0.reason) }
        }
        #expect(h.session(abandoned.session.sessionId).state == .ended)
        #expect(ended.count == 1 && ended.first?.0 == abandoned.session.sessionId && ended.first?.1.contains("nobody played") == true)
        #expect(h.session(played.session.sessionId).state == .running)
        #expect(h.session(renewing.session.sessionId).state == .running)
        // Its place is free again.
        _ = try h.create()
        // With 0, running sessions never expire.
        let never = try Harness(settings: Self.settings { $0.runningIdleMs = 0; $0.relayTTLMs = 6_000_000 })
        let created = try never.create()
        _ = try never.core.start(StartSessionRequest(sessionId: created.session.sessionId, participantId: created.participantId,
                                                     participantToken: created.participantToken), at: never.time)
        never.now += 86_400_000
        #expect(never.core.expireIdleSessions(at: never.time).events.isEmpty)
    }

    // MARK: Bans and revoked tickets

    /// A kick reached the relay once, best-effort: lost (the relay restarting), the kicked
    /// player stayed attached for good. Every refresh that shows it attached tells the relay again.
    @Test func aKickTheRelayMissedIsToldAgainWhileItShowsThePlayerAttached() throws {
        let h = try Harness()
        let host = try h.create(maxPlayers: 4)
        let id = host.session.sessionId
        let bob = try h.join(id, name: "bob", source: "10.0.0.5")
        let carol = try h.join(id, name: "carol", source: "10.0.0.6")
        _ = try h.core.kick(KickParticipantRequest(sessionId: id, participantId: host.participantId, participantToken: host.participantToken,
                                                   targetParticipantId: bob.participantId, ban: true), at: h.time)
        _ = try h.core.kick(KickParticipantRequest(sessionId: id, participantId: host.participantId, participantToken: host.participantToken,
                                                   targetParticipantId: carol.participantId), at: h.time)
        func refresh(_ attached: [String], relay: String = "sync-0") throws -> [DisconnectPeerRequest] {
            let outcome = try h.core.refreshRelay(RefreshRelayRequest(relayId: relay, load: RelayLoad(), presence: [
                SessionPresence(sessionId: id, connectedParticipantIds: attached)]), at: h.time)
            return outcome.detach.compactMap { if case .disconnectPeerRequest(let notice) = $0.body { notice } else { nil } }
        }
        // The relay never heard: its refreshes show both still attached.
        for _ in 0 ..< 2 {
            let told = try refresh([host.participantId, bob.participantId, carol.participantId])
            #expect(told.map(\.participantId).sorted() == [bob.participantId, carol.participantId].sorted())
            #expect(told.first { $0.participantId == bob.participantId }?.reason == .kicked, "bob is banned")
            #expect(told.first { $0.participantId == carol.participantId }?.reason == .leaving)
            #expect(told.allSatisfy { $0.sessionId == id })
        }
        // Once the relay lets them go, nothing more; another relay's word about the session is not taken.
        #expect(try refresh([host.participantId]).isEmpty)
        _ = try h.register("sync-9")
        #expect(try refresh([bob.participantId], relay: "sync-9").isEmpty)
    }

    /// A player the relay timed out (gone past the disconnect grace, its place freed here) that
    /// comes back plays on: the relay still holds it. Refreshes showing it attached again must
    /// not tell the relay it left (that revoked it and ended its match).
    @Test func aPlayerTheRelayTimedOutIsNotToldToLeaveWhenItComesBack() throws {
        let h = try Harness()
        let host = try h.create(maxPlayers: 4)
        let id = host.session.sessionId
        let bob = try h.join(id, name: "bob", source: "10.0.0.5")
        _ = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-0", load: RelayLoad(), participantsGone: [
            ParticipantGone(sessionId: id, participantId: bob.participantId, timedOut: true)]), at: h.time)
        #expect(h.session(id).index(of: bob.participantId) == nil, "its place is freed")
        let outcome = try h.core.refreshRelay(RefreshRelayRequest(relayId: "sync-0", load: RelayLoad(), presence: [
            SessionPresence(sessionId: id, connectedParticipantIds: [host.participantId, bob.participantId])]), at: h.time)
        #expect(!outcome.detach.contains { if case .disconnectPeerRequest = $0.body { true } else { false } })
    }

    @Test func aBanBindsToTheAddressAndTheParticipant() throws {
        let h = try Harness()
        let host = try h.create(maxPlayers: 4)
        let id = host.session.sessionId
        let bob = try h.join(id, name: "bob", source: "10.0.0.5")
        #expect(try h.store.liveTicketCount(nowUnixMs: h.time.unixMs) == 2)
        let kicked = try h.core.kick(KickParticipantRequest(sessionId: id, participantId: host.participantId,
                                                            participantToken: host.participantToken,
                                                            targetParticipantId: bob.participantId, ban: true), at: h.time)
        guard case .disconnectPeerRequest(let notice)? = kicked.detach.first?.body else {
            Issue.record("the relay was not told")
            return
        }
        #expect(notice.participantId == bob.participantId && notice.reason == .kicked)
        #expect(try h.store.liveTicketCount(nowUnixMs: h.time.unixMs) == 1, "bob's ticket is revoked")
        #expect(code { try h.join(id, name: "bob", source: "10.0.0.7") } == .banned)
        #expect(code { try h.join(id, name: "b0b", source: "10.0.0.5") } == .banned, "renaming does not pass the ban")
        let renew = RenewTicketRequest(sessionId: id, participantId: bob.participantId, participantToken: bob.participantToken)
        #expect(code { try h.core.renew(renew, at: h.time) } == .banned)
        _ = try h.join(id, name: "carol", source: "10.0.0.6")
        try h.restart()
        #expect(code { try h.join(id, name: "b0b", source: "10.0.0.5") } == .banned, "bans survive a restart")
        #expect(code { try h.core.renew(renew, at: h.time) } == .banned)
    }

    /// A participant renewing (or choosing its slot) in a loop keeps one ticket row: each
    /// renewal signs a fresh nonce, and every one was a row until it expired (300 s by default):
    /// the database grew with the request rate.
    @Test func renewingInALoopKeepsOneTicketRowAParticipant() throws {
        let h = try Harness()
        let host = try h.create(maxPlayers: 4)
        let id = host.session.sessionId
        let bob = try h.join(id, name: "bob", source: "10.0.0.5")
        #expect(try h.store.liveTicketCount(nowUnixMs: h.time.unixMs) == 2)
        var nonces: Set<[UInt8]> = []
        for _ in 0 ..< 200 {
            let renewed = try h.core.renew(RenewTicketRequest(sessionId: id, participantId: bob.participantId,
                                                              participantToken: bob.participantToken), at: h.time)
            if case .sessionResponse(let response) = renewed.reply, let ticket = response.ticket { nonces.insert(ticket.nonce) }
            _ = try h.core.chooseSlot(ChooseSlotRequest(sessionId: id, participantId: bob.participantId,
                                                        participantToken: bob.participantToken, slot: 2), at: h.time)
        }
        #expect(nonces.count == 200, "each renewal is a fresh ticket")
        #expect(try h.store.liveTicketCount(nowUnixMs: h.time.unixMs) == 2)
    }

    @Test func aKickedParticipantCannotRenewItsTicket() throws {
        let h = try Harness()
        let host = try h.create(maxPlayers: 4)
        let id = host.session.sessionId
        let bob = try h.join(id, name: "bob", source: "10.0.0.5")
        _ = try h.core.kick(KickParticipantRequest(sessionId: id, participantId: host.participantId,
                                                   participantToken: host.participantToken,
                                                   targetParticipantId: bob.participantId), at: h.time)
        #expect(code { try h.core.renew(RenewTicketRequest(sessionId: id, participantId: bob.participantId,
                                                           participantToken: bob.participantToken), at: h.time) } == .unauthenticated)
        #expect(try h.store.liveTicketCount(nowUnixMs: h.time.unixMs) == 1)
        _ = try h.join(id, name: "bob", source: "10.0.0.5")  // a kick without ban lets them join again
    }

    // MARK: The token key

    static func mode(_ path: String) -> Int {
        var info = stat()
        guard stat(path, &info) == 0 else { return -1 }
        return Int(info.st_mode & 0o777)
    }

    @Test func theDatabaseAndTheTokenKeyAreOwnerOnly() throws {
        let h = try Harness()
        _ = try h.create()
        let database = h.directory + "/c.sqlite"
        let key = h.directory + "/participant-token.key"
        #expect(Self.mode(database) == 0o600)
        #expect(Self.mode(database + "-wal") == 0o600)
        #expect(Self.mode(key) == 0o600)
        #expect(FileManager.default.contents(atPath: key)?.count == 32)
        #expect(try h.store.meta("participant_token_key") == nil, "the key is not in the database")
        // A database made world-readable is tightened on open.
        h.store.close()
        chmod(database, 0o644)
        h.store = try SessionStore(path: database)
        #expect(Self.mode(database) == 0o600)
        // A token key others can read is refused, as every key file is: it may have leaked,
        // and quietly tightening it would hide that.
        chmod(key, 0o644)
        let refusal = #expect(throws: (any Error).self) { try h.store.participantTokenKey() }
        #expect("\(refusal.map { "\($0)" } ?? "")".contains("open to others"), "\(String(describing: refusal))")
        #expect(FileManager.default.contents(atPath: key)?.count == 32, "the key is left as it was")
    }

    @Test func aKeyKeptInTheDatabaseMovesToItsFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("coordinator-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = directory + "/coordinator.sqlite"
        // An older coordinator's database: the key in meta, no key file.
        let old = try SessionStore(path: database)
        let legacy = Array(repeating: UInt8(0x5A), count: 32)
        try old.setMeta("participant_token_key", legacy)
        old.close()
        let store = try SessionStore(path: database)
        let core = try SessionCoordinator(store: store, keyRing: testKeys, settings: Harness.settings(), at: t(1_000))
        #expect(core.tokens.token(sessionId: "s-1", participantId: "p-1")
                == ParticipantTokens(key: legacy).token(sessionId: "s-1", participantId: "p-1"), "old tokens stay valid")
        #expect(try store.meta("participant_token_key") == nil)
        #expect(FileManager.default.contents(atPath: directory + "/participant-token.key").map { [UInt8]($0) } == legacy)
        #expect(Self.mode(directory + "/participant-token.key") == 0o600)
        store.close()
        // Reopened: the file is used; nothing goes back to the database.
        let again = try SessionStore(path: database)
        #expect(try again.participantTokenKey() == legacy && again.meta("participant_token_key") == nil)
        again.close()
    }
}
