import NetplayTestSupport
import NetplayAuth
import NetplayService
import NetplayWire
import Synchronization
import Testing
@testable import InputSync

/// A LAN host admits with the coordinator's rules (the same code), so the
/// shared cases get the same answers, and each weakness it had is gone.
@Suite("LAN admission follows the shared admission rules", .ownThread)
struct LanAdmissionPolicyTests {
    /// A clock the test moves.
    final class TestClock: Sendable {
        let ms = Mutex<UInt64>(1_000)
        func advance(_ by: UInt64) { ms.withLock { $0 += by } }
    }

    func lan(_ settings: SessionSettings, clock: TestClock = TestClock(),
             limits: AdmissionPolicy.Limits = AdmissionPolicy.Limits()) -> LanAdmission {
        let admission = LanAdmission(sessionId: "lan-1", settings: settings, relayEndpoint: "tcp://127.0.0.1:1",
                                     keyRing: TicketKeyRing.generate(), limits: limits, clock: { clock.ms.withLock { $0 } })
        _ = try? admission.hostTicket(name: "alice")
        return admission
    }



    func join(_ admission: LanAdmission, _ request: JoinSessionRequest) throws -> JoinSessionResponse {
        var request = request
        request.sessionId = "lan-1"
        guard case .joinSessionResponse(let response)? = try admission.handle(.joinSessionRequest(request)) else {
            throw ServiceError(.internal, "no join response")
        }
        return response
    }

    @Test(arguments: AdmissionCases.all)
    func theSharedAdmissionCases(_ admissionCase: AdmissionCase) {
        let admission = lan(admissionCase.room)
        #expect(code { try join(admission, admissionCase.join) } == admissionCase.expected)
    }

    @Test func theSharedPasswordBudget() {
        let admission = lan(AdmissionCases.room(play: "pw"),
                            limits: .init(passwordAttemptsPerMinute: Double(AdmissionCases.attemptsPerMinute)))
        for _ in 0..<AdmissionCases.attemptsPerMinute {
            #expect(code { try join(admission, AdmissionCases.join(password: "guess")) } == .wrongPassword)
        }
        #expect(code { try join(admission, AdmissionCases.join(password: "pw")) } == .rateLimited,
                "once the budget is out the right password is refused like the others")
    }

    @Test func copiesOfAWrongGuessSpendOneAttempt() {
        // A lobby resends a join whose answer did not come; a wrong guess's copies are its answer
        // again, not new guesses.
        let clock = TestClock()
        let admission = lan(AdmissionCases.room(play: "pw"), clock: clock,
                            limits: .init(passwordAttemptsPerMinute: Double(AdmissionCases.attemptsPerMinute)))
        var guess = AdmissionCases.join(password: "guess")
        guess.idempotencyKey = "k-guess"
        for _ in 0..<3 { #expect(code { try join(admission, guess) } == .wrongPassword) }
        var other = guess
        other.password = "guess2"
        #expect(code { try join(admission, other) } == .wrongPassword, "another guess under the key is its own attempt")
        for index in 0..<(AdmissionCases.attemptsPerMinute - 2) {
            var fresh = AdmissionCases.join(password: "fresh\(index)")
            fresh.idempotencyKey = "k-\(index)"
            #expect(code { try join(admission, fresh) } == .wrongPassword)
        }
        #expect(code { try join(admission, AdmissionCases.join(password: "pw")) } == .rateLimited, "the budget counted each guess once")
        // Past the copy window the same request is a new guess again (here: one the budget refuses).
        clock.advance(UInt64(admission.limits.copyWindowSeconds * 1000))
        #expect(code { try join(admission, guess) } == .rateLimited)
    }

    @Test func twoThousandGuessesGetTenAnswers() {
        let clock = TestClock()
        let admission = lan(AdmissionCases.room(play: "sesame"), clock: clock)
        var codes: [ErrorCode: Int] = [:]
        for index in 0..<2_000 {
            codes[code { try join(admission, AdmissionCases.join(password: "guess\(index)")) } ?? .unspecified, default: 0] += 1
        }
        #expect(codes[.wrongPassword] == 10 && codes[.rateLimited] == 1_990)
        #expect(code { try join(admission, AdmissionCases.join(password: "sesame")) } == .rateLimited)
        clock.advance(60_000)
        #expect(code { try join(admission, AdmissionCases.join(password: "sesame")) } == nil, "the budget refills")
    }

    @Test func spectatorsOfAPlayPasswordRoomNeedAPassword() {
        let admission = lan(AdmissionCases.room(play: "sesame"))
        #expect(code { try join(admission, AdmissionCases.join(.spectator)) } == .wrongPassword)
        #expect(code { try join(admission, AdmissionCases.join(.spectator, password: "sesame")) } == nil)
    }

    @Test func emptyContentIsRefused() {
        let admission = lan(AdmissionCases.room())
        #expect(code { try join(admission, AdmissionCases.join(content: ContentInfo())) } == .contentMismatch)
        var zeroCrc = AdmissionCases.content
        zeroCrc.crc32 = 0
        #expect(code { try join(admission, AdmissionCases.join(content: zeroCrc)) } == .contentMismatch)
    }

    @Test func aJoinThatNeverAttachesGivesItsPlaceBack() throws {
        let clock = TestClock()
        let admission = lan(AdmissionCases.room(players: 2), clock: clock)
        let bob = try join(admission, AdmissionCases.join())
        let ticket = try #require(bob.ticket)
        #expect(ticket.expiresAtUnixMs - ticket.issuedAtUnixMs == 60_000, "a joiner's ticket lives as long as its place waits")
        #expect(code { try join(admission, AdmissionCases.join()) } == .roomFull)
        clock.advance(30_000)
        admission.sessionChanged(running: false, present: ["h-lan-1"])
        #expect(code { try join(admission, AdmissionCases.join()) } == .roomFull, "still within the wait")
        clock.advance(40_000)
        admission.sessionChanged(running: false, present: ["h-lan-1"])
        #expect(admission.occupancy.players == 1)
        #expect(try join(admission, AdmissionCases.join()).slot == 2)
    }

    @Test func aJoinAskedAgainUnderItsKeyGetsItsPlaceAgain() throws {
        // The joiner's first answer was lost; its lobby asks again under the same key.
        let clock = TestClock()
        let admission = lan(AdmissionCases.room(players: 2, play: "pw"), clock: clock)
        var request = AdmissionCases.join(password: "pw")
        request.idempotencyKey = "k-bob"
        let first = try join(admission, request)
        clock.advance(50_000)
        let again = try join(admission, request)
        #expect(again.participantId == first.participantId && again.slot == first.slot && admission.occupancy.players == 2)
        #expect(again.ticket?.participantId == first.participantId)
        // The retry's fresh ticket gets a fresh wait: the place is held past the first's.
        clock.advance(30_000)
        admission.sessionChanged(running: false, present: ["h-lan-1"])
        #expect(admission.occupancy.players == 2, "freed on the first ticket's clock")

        var wrong = request
        wrong.password = "guess"
        #expect(code { try join(admission, wrong) } == .wrongPassword, "the key does not stand in for the password")
        var other = request
        other.name = "mallory"
        #expect(code { try join(admission, other) } == .roomFull, "nor for the name")
        var fresh = request
        fresh.idempotencyKey = "k-other"
        #expect(code { try join(admission, fresh) } == .roomFull, "another key is another join")

        var asSpectator = request
        asSpectator.role = .spectator
        #expect(try join(admission, asSpectator).participantId != first.participantId, "nor for the role: a new place")

        // Once the place is freed, the key takes a new one like any join.
        clock.advance(70_000)
        admission.sessionChanged(running: false, present: ["h-lan-1"])
        #expect(admission.occupancy.players == 1)
        let later = try join(admission, request)
        #expect(later.participantId != first.participantId && later.slot == 2)
    }

    @Test func aReplayFollowsAMovedPlayerAndEndsWhenTheJoinerAttaches() throws {
        let admission = lan(AdmissionCases.room(players: 3))
        var request = AdmissionCases.join()
        request.idempotencyKey = "k-bob"
        let first = try join(admission, request)
        #expect(first.slot == 2)
        try admission.swap(2, 3)
        let again = try join(admission, request)
        #expect(again.participantId == first.participantId && again.slot == 3, "the seat where the host put it")
        // Attached: a join's answer that was used was not lost, and a LAN link is plain; the key
        // seen on it fetches no ticket for the seated player.
        admission.sessionChanged(running: false, present: ["h-lan-1", first.participantId])
        let later = try join(admission, request)
        #expect(later.participantId != first.participantId && later.slot == 2)
    }

    @Test func anAttachedJoinerKeepsItsPlace() throws {
        let clock = TestClock()
        let admission = lan(AdmissionCases.room(players: 2), clock: clock)
        let bob = try join(admission, AdmissionCases.join())
        clock.advance(10_000)
        admission.sessionChanged(running: true, present: ["h-lan-1", bob.participantId])
        clock.advance(600_000)
        admission.sessionChanged(running: true, present: ["h-lan-1", bob.participantId])
        #expect(code { try join(admission, AdmissionCases.join()) } == .roomFull)
    }

    @Test func notFoundDoesNotTellTheSessionId() {
        let admission = lan(AdmissionCases.room())
        for body in [Envelope.Body.joinSessionRequest(JoinSessionRequest(sessionId: "guess", name: "x")),
                     .getSessionRequest(GetSessionRequest(sessionId: "guess"))] {
            do {
                _ = try admission.handle(body)
                Issue.record("a wrong session id was answered")
            } catch {
                #expect(error.code == .notFound && !error.message.contains("lan-1"), "\(error.message)")
            }
        }
    }
}
