import NetplayAuth
import NetplayTestSupport
import NetplayWire
import Testing

@Suite("Passwords, tokens and rate limits", .ownThread)
struct PasswordAndTokenTests {
    @Test func passwordsHashSaltedAndVerify() throws {
        let hasher = PasswordHasher.testing
        let first = try #require(hasher.hash("hunter2"))
        let second = try #require(hasher.hash("hunter2"))
        #expect(first.hasPrefix("$argon2id$"))
        #expect(first != second, "each hash has its own salt")
        #expect(PasswordHasher.verify("hunter2", against: first))
        #expect(PasswordHasher.verify("hunter2", against: second))
        #expect(!PasswordHasher.verify("hunter3", against: first))
        #expect(!PasswordHasher.verify("", against: first))
        #expect(!PasswordHasher.verify("hunter2", against: "not a hash"))
        #expect(!PasswordHasher.verify("hunter2", against: String(repeating: "x", count: 500)))
        let empty = try #require(hasher.hash(""))
        #expect(PasswordHasher.verify("", against: empty))
        let unicode = try #require(hasher.hash("pässwörd 🎮"))
        #expect(PasswordHasher.verify("pässwörd 🎮", against: unicode))
    }

    @Test func participantTokensAreDeterministicPerParticipant() {
        let tokens = ParticipantTokens(key: Array(repeating: 1, count: 32))
        let token = tokens.token(sessionId: "s-1", participantId: "p-1")
        #expect(token.count == 32)
        #expect(token == tokens.token(sessionId: "s-1", participantId: "p-1"))
        #expect(tokens.check(token, sessionId: "s-1", participantId: "p-1"))
        #expect(!tokens.check(token, sessionId: "s-1", participantId: "p-2"))
        #expect(!tokens.check(token, sessionId: "s-2", participantId: "p-1"))
        #expect(!tokens.check(Array(token.dropLast()), sessionId: "s-1", participantId: "p-1"))
        #expect(!tokens.check([], sessionId: "s-1", participantId: "p-1"))
        // The separator keeps ("s-1", "p") and ("s-1p", "") apart.
        #expect(tokens.token(sessionId: "ab", participantId: "c") != tokens.token(sessionId: "a", participantId: "bc"))
        let other = ParticipantTokens(key: Array(repeating: 2, count: 32))
        #expect(!other.check(token, sessionId: "s-1", participantId: "p-1"))
    }

    @Test func constantTimeEqualsAndHex() {
        #expect(Sodium.constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!Sodium.constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!Sodium.constantTimeEquals([1, 2, 3], [1, 2]))
        #expect(Sodium.constantTimeEquals([], []))
        #expect(Hex.encode([0x00, 0xAB, 0xFF]) == "00abff")
        #expect(Hex.decode("00AbfF") == [0x00, 0xAB, 0xFF])
        #expect(Hex.decode("abc") == nil)
        #expect(Hex.decode("zz") == nil)
        #expect(Sodium.randomBytes(16) != Sodium.randomBytes(16))
    }

    /// A LAN room's plain-text passwords: equal only when equal, whatever the lengths (compared
    /// as HMACs, so a wrong guess's length tells nothing).
    @Test func secretsOfAnyLengthCompareAsEqualOnlyWhenEqual() {
        #expect(Sodium.secretsEqual(Array("hunter2".utf8), Array("hunter2".utf8)))
        #expect(!Sodium.secretsEqual(Array("hunter2".utf8), Array("hunter".utf8)))
        #expect(!Sodium.secretsEqual(Array("hunter2".utf8), Array("hunter3".utf8)))
        #expect(!Sodium.secretsEqual([], Array("x".utf8)))
        #expect(Sodium.secretsEqual([], []))
    }

    @Test func hmacMatchesRFC4231() {
        // RFC 4231 test case 2.
        let mac = Sodium.hmacSHA256(key: Array("Jefe".utf8), Array("what do ya want ".utf8), Array("for nothing?".utf8))
        #expect(Hex.encode(mac) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test func rateLimiterSpendsAndRefills() {
        var limiter = RateLimiter<String>(ratePerSecond: 2, burst: 3)
        #expect(limiter.take("a", now: 0) == .allowed)
        #expect(limiter.take("a", now: 0) == .allowed)
        #expect(limiter.take("a", now: 0) == .allowed)
        #expect(limiter.take("a", now: 0) == .limited(retryAfterMs: 500))
        #expect(limiter.take("b", now: 0) == .allowed, "keys are independent")
        #expect(limiter.check("a", now: 0.5) == .allowed)
        #expect(limiter.take("a", now: 0.5) == .allowed)
        #expect(limiter.take("a", now: 0.5) == .limited(retryAfterMs: 500))
        #expect(limiter.take("a", now: 100) == .allowed)
        limiter.prune(now: 1000)
        #expect(limiter.trackedKeys == 0)
        var unlimited = RateLimiter<Int>(ratePerSecond: 0, burst: 1)
        for _ in 0..<100 { #expect(unlimited.take(1, now: 0) == .allowed) }
    }

    @Test func rateLimiterBoundsItsMemory() {
        var limiter = RateLimiter<Int>(ratePerSecond: 1, burst: 1, maxKeys: 10)
        for key in 0..<10 { #expect(limiter.take(key, now: 0) == .allowed) }
        #expect(limiter.take(99, now: 0) == .limited(retryAfterMs: 1000))
        #expect(limiter.take(99, now: 5) == .allowed, "full buckets are pruned to make room")
    }
}
