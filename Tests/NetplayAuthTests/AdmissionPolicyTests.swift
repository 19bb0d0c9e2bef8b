@testable import NetplayAuth
import NetplayWire
import Testing
import NetplayTestSupport

@Suite("Admission rules shared by the coordinator and LAN hosts", .ownThread)
struct AdmissionPolicyTests {
    let content = ContentInfo(gameName: "Arena", crc32: 0xA7E7_A001, md5: Array(repeating: 7, count: 16), coreId: "arena",
                              coreVersion: "1")

    func room(play: Bool = true, spectate: Bool = false, bans: AdmissionBans = AdmissionBans()) -> AdmissionRoom {
        AdmissionRoom(sessionId: "s-1", content: content, maxPlayers: 2, takenSlots: [1], spectatorsAllowed: true, maxSpectators: 2,
                      spectators: 0, hasPlayPassword: play, hasSpectatePassword: spectate, bans: bans)
    }

    func join(_ name: String = "x", role: Role = .player, content: ContentInfo? = nil) -> JoinSessionRequest {
        JoinSessionRequest(sessionId: "s-1", role: role, name: name, content: content ?? self.content)
    }

    func denial(_ body: () throws -> Void) -> ErrorCode? {
        do {
            try body()
            return nil
        } catch let error as AdmissionDenial {
            return error.code
        } catch {
            return .internal
        }
    }

    @Test func theAttemptIsSpentBeforeThePasswordIsVerified() throws {
        var policy = AdmissionPolicy(limits: .init(passwordAttemptsPerMinute: 3))
        // Five joins in flight at once: only three get a password check at all.
        var plans: [AdmissionPlan] = []
        var refused = 0
        for _ in 0..<5 {
            do throws(AdmissionDenial) {
                plans.append(try policy.admit(join(), source: "10.0.0.9", room: room(), now: 0))
            } catch {
                #expect(error.code == .rateLimited && error.retryAfterMs > 0)
                refused += 1
            }
        }
        #expect(plans.count == 3 && refused == 2)
        #expect(plans.allSatisfy { $0.reserved && $0.candidates == [.play] })
        // Two were wrong: their attempts stay spent. The right one gives its attempt back.
        #expect(denial { try policy.settle(plans[0], match: .none, now: 0) } == .wrongPassword)
        #expect(denial { try policy.settle(plans[1], match: .none, now: 0) } == .wrongPassword)
        #expect(try policy.settle(plans[2], match: .play, now: 0) == .play)
        let next = try policy.admit(join(), source: "10.0.0.9", room: room(), now: 0)
        #expect(next.reserved)
        // Out of attempts: the right password is refused exactly like a wrong one.
        #expect(denial { _ = try policy.admit(join(), source: "10.0.0.9", room: room(), now: 0) } == .rateLimited)
        // A released reservation (never verified) is given back; the budget refills with time.
        policy.release(next, now: 0)
        #expect(denial { _ = try policy.admit(join(), source: "10.0.0.9", room: room(), now: 0) } == nil)
        #expect(denial { _ = try policy.admit(join(), source: "10.0.0.9", room: room(), now: 0) } == .rateLimited)
        #expect(denial { _ = try policy.admit(join(), source: "10.0.0.9", room: room(), now: 20) } == nil)
        // An open room spends nothing.
        for _ in 0..<10 { #expect(!(try policy.admit(join(), source: "", room: room(play: false), now: 20)).reserved) }
    }

    @Test func aCopyOfARefusedGuessIsRefusedAgainForNothing() throws {
        var policy = AdmissionPolicy(limits: .init(passwordAttemptsPerMinute: 3))
        func keyed(_ password: String, key: String, name: String = "x") -> JoinSessionRequest {
            var request = join(name)
            request.password = password
            request.idempotencyKey = key
            return request
        }
        let guess = keyed("guess", key: "k-1")
        let first = try policy.admit(guess, source: "10.0.0.9", room: room(), now: 0)
        #expect(denial { try policy.settle(first, match: .none, now: 0) } == .wrongPassword)
        // Its copies (the answer was lost; the client sends it again) get the refusal, reserving nothing.
        for _ in 0..<5 {
            #expect(policy.isCopyOfRefusedGuess(guess, now: 9))
            #expect(denial { _ = try policy.admit(guess, source: "10.0.0.7", room: room(), now: 9) } == .wrongPassword)
        }
        // Not copies: another password or name under the key, the guess without a key, another session.
        var unkeyed = guess
        unkeyed.idempotencyKey = ""
        var elsewhere = guess
        elsewhere.sessionId = "s-2"
        #expect(!policy.isCopyOfRefusedGuess(keyed("other", key: "k-1"), now: 9))
        #expect(!policy.isCopyOfRefusedGuess(keyed("guess", key: "k-1", name: "y"), now: 9))
        #expect(!policy.isCopyOfRefusedGuess(unkeyed, now: 9))
        #expect(!policy.isCopyOfRefusedGuess(elsewhere, now: 9))
        // Two attempts of three are left: the copies spent none.
        let second = try policy.admit(keyed("other", key: "k-1"), source: "", room: room(), now: 9)
        let third = try policy.admit(unkeyed, source: "", room: room(), now: 9)
        #expect(second.reserved && third.reserved)
        #expect(denial { _ = try policy.admit(keyed("fresh", key: "k-2"), source: "", room: room(), now: 9) } == .rateLimited)
        // The right password under a refused guess's key is its own join, and gets in.
        policy.release(second, now: 9)
        let right = try policy.admit(keyed("right", key: "k-1"), source: "", room: room(), now: 9)
        #expect(try policy.settle(right, match: .play, now: 9) == .play)
        // Past the window the same guess is a new one: it reserves an attempt of its own.
        #expect(!policy.isCopyOfRefusedGuess(guess, now: 10))
        let again = try policy.admit(guess, source: "", room: room(), now: 10)
        #expect(again.reserved)
        policy.release(again, now: 10)
        policy.release(third, now: 10)
        // A forgotten session forgets its refusals.
        let late = try policy.admit(guess, source: "", room: room(), now: 60)
        #expect(denial { try policy.settle(late, match: .none, now: 60) } == .wrongPassword)
        #expect(policy.isCopyOfRefusedGuess(guess, now: 61))
        policy.forget("s-1")
        #expect(!policy.isCopyOfRefusedGuess(guess, now: 61))
    }

    @Test func copiesAreCountedBannedWinsAndOldRefusalsArePruned() throws {
        var policy = AdmissionPolicy(limits: .init(passwordAttemptsPerMinute: 100))
        var guess = join("x")
        guess.password = "guess"
        guess.idempotencyKey = "k-1"
        let first = try policy.admit(guess, source: "10.0.0.9", room: room(), now: 0)
        #expect(denial { try policy.settle(first, match: .none, now: 0) } == .wrongPassword)
        for _ in 0..<AdmissionPolicy.copiesPerRefusal {
            #expect(denial { _ = try policy.admit(guess, source: "10.0.0.9", room: room(), now: 1) } == .wrongPassword)
        }
        // Beyond its copies a resend is a new guess: it reserves an attempt and is checked again.
        #expect(!policy.isCopyOfRefusedGuess(guess, now: 1))
        let again = try policy.admit(guess, source: "10.0.0.9", room: room(), now: 1)
        #expect(again.reserved)
        #expect(denial { try policy.settle(again, match: .none, now: 1) } == .wrongPassword)
        #expect(policy.isCopyOfRefusedGuess(guess, now: 2), "its refusal is remembered afresh")
        // A ban the host set since wins over the remembered refusal.
        var bans = AdmissionBans()
        bans.ban(name: "x", source: "10.0.0.9", participantId: "p-9")
        #expect(denial { _ = try policy.admit(guess, source: "10.0.0.9", room: room(bans: bans), now: 2) } == .banned)
        // Each refusal prunes the session's refusals past the window: memory follows the budget.
        for index in 0..<20 {
            var other = guess
            other.idempotencyKey = "k-other-\(index)"
            let plan = try policy.admit(other, source: "", room: room(), now: 100 + Double(index))
            #expect(denial { try policy.settle(plan, match: .none, now: 100 + Double(index)) } == .wrongPassword)
        }
        #expect(policy.refusalsKept == 10, "the refusals of the last 10 s")
        // A join that reserves nothing (open room, budget out) keeps no guess to remember.
        let open = try policy.admit(guess, source: "", room: room(play: false), now: 200)
        #expect(open.guess == nil && !open.reserved)
    }

    @Test func whichPasswordEachRoleNeeds() {
        #expect(AdmissionPolicy.passwordCandidates(role: .player, room: room(play: false)) == [])
        #expect(AdmissionPolicy.passwordCandidates(role: .player, room: room(play: true)) == [.play])
        #expect(AdmissionPolicy.passwordCandidates(role: .player, room: room(play: false, spectate: true)) == [])
        #expect(AdmissionPolicy.passwordCandidates(role: .spectator, room: room(play: true)) == [.play],
                "a play password also guards spectating")
        #expect(AdmissionPolicy.passwordCandidates(role: .spectator, room: room(play: true, spectate: true)) == [.spectate, .play])
        #expect(AdmissionPolicy.passwordCandidates(role: .spectator, room: room(play: false, spectate: true)) == [.spectate])
        #expect(AdmissionPolicy.mayPlay(room: room(play: true), match: .spectate) == false)
        #expect(AdmissionPolicy.mayPlay(room: room(play: true), match: .play))
        #expect(AdmissionPolicy.mayPlay(room: room(play: false), match: .notNeeded))
    }

    @Test func emptyContentDoesNotSkipTheContentCheck() {
        var policy = AdmissionPolicy()
        let open = room(play: false)
        #expect(denial { _ = try policy.admit(join(content: ContentInfo()), source: "", room: open, now: 0) } == .contentMismatch)
        var other = content
        other.coreVersion = "2"
        #expect(denial { _ = try policy.admit(join(content: other), source: "", room: open, now: 0) } == .coreVersionMismatch)
        // A spectator that names no content affects nobody; one naming other content is refused.
        #expect(denial { _ = try policy.admit(join(role: .spectator, content: ContentInfo()), source: "", room: open, now: 0) } == nil)
        other = content
        other.crc32 = 1
        #expect(denial { _ = try policy.admit(join(role: .spectator, content: other), source: "", room: open, now: 0) } == .contentMismatch)
    }

    @Test func aBanSticksToTheAddressWhateverTheName() {
        var bans = AdmissionBans()
        bans.ban(name: "mallory", source: "10.0.0.9", participantId: "p-1")
        #expect(bans.refuses(name: "mallory", source: "10.0.0.7"))
        #expect(bans.refuses(name: "not-mallory", source: "10.0.0.9"), "renaming does not pass a ban")
        #expect(!bans.refuses(name: "bob", source: "10.0.0.7"))
        #expect(!bans.refuses(name: "bob", source: ""), "an unknown address is never a banned one")
        var policy = AdmissionPolicy()
        #expect(denial { _ = try policy.admit(join("renamed"), source: "10.0.0.9", room: room(bans: bans), now: 0) } == .banned)
        var unknown = AdmissionBans()
        unknown.ban(name: "eve", source: "", participantId: "p-2")
        #expect(unknown.sources.isEmpty && unknown.participantIds == ["p-2"])
    }

    @Test func pendingJoinsExpireUnlessSettled() {
        var pending = PendingJoins(timeoutMs: 1_000)
        pending.issued("a", nowMs: 0)
        pending.issued("b", nowMs: 500)
        pending.issued("c", nowMs: 600)
        pending.settled("c")
        #expect(pending.expire(nowMs: 999) == [])
        #expect(pending.expire(nowMs: 1_000) == ["a"])
        #expect(pending.waiting == ["b"])
        #expect(pending.expire(nowMs: 10_000) == ["b"])
    }

    @Test func rateLimiterRefundsUpToItsBurst() {
        var limiter = RateLimiter<String>(ratePerSecond: 1, burst: 2)
        #expect(limiter.take("k", now: 0) == .allowed)
        #expect(limiter.take("k", now: 0) == .allowed)
        #expect(limiter.take("k", now: 0) != .allowed)
        limiter.refund("k", now: 0)
        limiter.refund("k", now: 0)
        limiter.refund("k", now: 0)
        #expect(limiter.take("k", now: 0) == .allowed)
        #expect(limiter.take("k", now: 0) == .allowed)
        #expect(limiter.take("k", now: 0) != .allowed, "a refund never exceeds the burst")
        limiter.remove("k")
        #expect(limiter.trackedKeys == 0)
    }
}
