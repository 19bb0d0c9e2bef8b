@testable import Coordinator
import Foundation
import NetplayAuth
import NetplayService
import NetplayTestSupport
import NetplayWire
import Rollback
import Testing

/// Clients and relays that lie, at random: thousands of requests with ids from other sessions,
/// wrong tokens, slots that do not exist, relay reports of sessions and participants it does not
/// hold, time jumps and restarts. Any request may fail with a ServiceError; none may trap, and
/// after each one the coordinator's books must balance (counts, slots, relay assignments), and a
/// restart must bring back exactly what memory held (nothing held only in memory, nothing lost).
@Suite("The coordinator under random and lying requests", .ownThread)
struct CoordinatorChaosTests {
    /// A participant's credentials as a client holds them.
    struct Credential { var sessionId: String; var participantId: String; var token: [UInt8] }

    @Test(arguments: 0 ..< 12)
    func randomRequestsKeepTheBooksBalanced(seed: Int) throws {
        var rng = SeededRandom(seed: UInt64(seed) &* 7919 &+ 3)
        func pick<T>(_ values: [T]) -> T { values[Int(rng.next() % UInt64(values.count))] }
        func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }
        var settings = Harness.settings()
        settings.runningIdleMs = 300_000
        settings.lobbyIdleMs = 200_000
        settings.relayTTLMs = 60_000
        let h = try Harness(settings: settings, relays: ["sync-0", "sync-1"])
        var credentials: [Credential] = []
        var sessionIds: [String] = ["s-nonexistent"]
        let sources = ["10.0.0.1", "10.0.0.2", ""]
        let relays = ["sync-0", "sync-1", "sync-unknown"]

        func credential() -> Credential {
            guard !credentials.isEmpty, !chance(10) else {
                return Credential(sessionId: pick(sessionIds), participantId: "p-forged", token: Array(repeating: 7, count: 32))
            }
            var chosen = pick(credentials)
            if chance(10) { chosen.token = Array(repeating: 1, count: 32) }
            if chance(10) { chosen.sessionId = pick(sessionIds) }
            return chosen
        }

        var succeeded: [UInt64: Int] = [:], refused: [String: Int] = [:]
        for step in 0 ..< 700 {
            h.now += rng.next() % 4_000
            let kind = rng.next() % 16
            let time = h.time
            let core = h.core
            do {
                switch kind {
                case 0, 1:
                    let created = try h.create(maxPlayers: UInt32(rng.next() % 8) + 1, spectators: UInt32(rng.next() % 3),
                                               password: chance(30) ? "pw" : "", transport: chance(30) ? .lan : .relay,
                                               key: chance(20) ? "create-key-\(rng.next() % 3)-0123456789abcdef" : "",
                                               source: pick(sources), approveJoiners: chance(15))
                    sessionIds.append(created.session.sessionId)
                    credentials.append(Credential(sessionId: created.session.sessionId, participantId: created.participantId,
                                                  token: created.participantToken))
                case 2, 3:
                    let joined = try h.join(pick(sessionIds), name: "n\(rng.next() % 5)", role: chance(25) ? .spectator : .player,
                                            password: pick(["", "pw", "wrong"]), slot: UInt32(rng.next() % 11),
                                            key: chance(15) ? "join-key-\(rng.next() % 3)-0123456789abcdef" : "", source: pick(sources))
                    credentials.append(Credential(sessionId: joined.session.sessionId, participantId: joined.participantId,
                                                  token: joined.participantToken))
                case 4:
                    let who = credential()
                    _ = try core.chooseSlot(ChooseSlotRequest(sessionId: who.sessionId, participantId: who.participantId,
                                                              participantToken: who.token, slot: UInt32(rng.next() % 11)), at: time)
                case 5:
                    let who = credential()
                    _ = try core.swapSlots(SwapSlotsRequest(sessionId: who.sessionId, participantId: who.participantId,
                                                            participantToken: who.token, slotA: UInt32(rng.next() % 10),
                                                            slotB: UInt32(rng.next() % 10)), at: time)
                case 6:
                    let who = credential()
                    let target = credentials.isEmpty ? "p-none" : pick(credentials).participantId
                    _ = try core.kick(KickParticipantRequest(sessionId: who.sessionId, participantId: who.participantId,
                                                             participantToken: who.token, targetParticipantId: target,
                                                             reason: "r", ban: chance(50)), at: time)
                case 7:
                    let who = credential()
                    _ = try core.start(StartSessionRequest(sessionId: who.sessionId, participantId: who.participantId,
                                                           participantToken: who.token), at: time)
                case 8:
                    let who = credential()
                    if chance(50) {
                        _ = try core.end(EndSessionRequest(sessionId: who.sessionId, participantId: who.participantId,
                                                           participantToken: who.token), at: time)
                    } else {
                        _ = try core.leave(LeaveSessionRequest(sessionId: who.sessionId, participantId: who.participantId,
                                                               participantToken: who.token), at: time)
                    }
                case 9:
                    let who = credential()
                    _ = try core.renew(RenewTicketRequest(sessionId: who.sessionId, participantId: who.participantId,
                                                          participantToken: who.token), at: time)
                case 10, 11:
                    // A relay's report: who is attached, which sessions started, who left, which ended; true or not.
                    let relay = pick(relays)
                    var request = RefreshRelayRequest(relayId: relay, load: RelayLoad(sessions: UInt32(rng.next() % 5)),
                                                      draining: chance(10))
                    for _ in 0 ..< Int(rng.next() % 3) {
                        let who = credential()
                        request.presence.append(SessionPresence(sessionId: who.sessionId, connectedParticipantIds: [who.participantId]))
                    }
                    if chance(30) { request.startedSessionIds = [pick(sessionIds)] }
                    if chance(20) {
                        let who = credential()
                        request.participantsGone = [ParticipantGone(sessionId: who.sessionId, participantId: who.participantId,
                                                                    timedOut: chance(50))]
                    }
                    if chance(15) { request.sessionsEnded = [RelaySessionEnd(sessionId: pick(sessionIds), reason: "over")] }
                    _ = try core.refreshRelay(request, at: time)
                case 12:
                    try h.register(pick(relays), sessions: chance(50) ? [pick(sessionIds)] : [])
                case 13:
                    let who = credential()
                    if chance(50) {
                        _ = try core.pendingJoins(ListPendingJoinsRequest(sessionId: who.sessionId, participantId: who.participantId,
                                                                          participantToken: who.token), at: time)
                    } else {
                        _ = try core.decideJoin(DecideJoinRequest(sessionId: who.sessionId, participantId: who.participantId,
                                                                  participantToken: who.token, pendingId: "pj-\(rng.next() % 4)",
                                                                  approve: chance(50)), at: time)
                    }
                case 14:
                    _ = core.maintain(at: time, housekeeping: chance(50))
                    core.expireWaitingJoins(at: time)
                    _ = core.expireIdleSessions(at: time)
                default:
                    if chance(25) {
                        // Who is attached is what relays report, not stored: it comes back with their next refresh.
                        let before = Self.withoutPresence(core.sessions)
                        try h.restart()
                        let after = Self.withoutPresence(h.core.sessions)
                        #expect(after == before, "seed \(seed) step \(step): a restart changed \(Self.differences(before, after))")
                    } else {
                        _ = try core.list(ListSessionsRequest(includeUnlisted: true, pageSize: 50))
                    }
                }
                succeeded[kind, default: 0] += 1
            } catch let error as ServiceError {
                // Refusals are what lying requests earn.
                refused["\(kind):\(error.code)", default: 0] += 1
                #expect(error.code != .internal, "seed \(seed) step \(step): \(error)")
            }
            Self.checkBooks(h.core, context: "seed \(seed) step \(step)")
        }
        // The requests reached the coordinator's logic, not only its refusals: sessions were made,
        // joined, started and renewed, and relays reported.
        for kind: UInt64 in [0, 2, 7, 9, 10] {
            #expect(succeeded[kind, default: 0] + succeeded[kind + 1, default: 0] > 0, "seed \(seed): no request of kind \(kind) went through; \(refused)")
        }
    }

    /// The sessions with nobody marked attached.
    static func withoutPresence(_ sessions: [String: SessionRecord]) -> [String: SessionRecord] {
        sessions.mapValues { session in
            var session = session
            for index in session.participants.indices { session.participants[index].connected = false }
            return session
        }
    }

    /// What differs between two sets of sessions, field by field.
    static func differences(_ a: [String: SessionRecord], _ b: [String: SessionRecord]) -> [String] {
        var out: [String] = []
        for id in Set(a.keys).union(b.keys).sorted() {
            guard let x = a[id], let y = b[id] else { out.append("\(id): only \(a[id] == nil ? "after" : "before")"); continue }
            guard x != y else { continue }
            for (left, right) in zip(Mirror(reflecting: x).children, Mirror(reflecting: y).children)
            where "\(left.value)" != "\(right.value)" {
                out.append("\(id).\(left.label ?? "?"): \(left.value) -> \(right.value)")
            }
        }
        return out
    }

    /// The coordinator's counts agree with its sessions, and every active session's slots are
    /// its own, in range and held once.
    static func checkBooks(_ core: SessionCoordinator, context: String) {
        let active = core.sessions.values.filter(\.isActive)
        #expect(core.activeCount == active.count, "\(context): activeCount")
        var assigned: [String: Int] = [:]
        for session in active {
            if !session.relayId.isEmpty { assigned[session.relayId, default: 0] += 1 }
            let players = session.participants.filter { $0.role == .player }
            let slots = players.map(\.slot).filter { $0 > 0 }
            #expect(Set(slots).count == slots.count, "\(context): \(session.sessionId) holds a slot twice: \(slots)")
            #expect(slots.allSatisfy { $0 <= session.settings.maxPlayers }, "\(context): \(session.sessionId) slots \(slots)")
            #expect(session.participant(session.hostParticipantId) != nil || session.state != .lobby,
                    "\(context): \(session.sessionId) lost its host in the lobby")
        }
        #expect(core.relays.assigned.filter { $0.value != 0 } == assigned, "\(context): relay assignments")
    }
}
