@testable import Coordinator
import Foundation
import NetplayService
import NetplayTestSupport
import NetplayWire
import Testing

/// A client on a slow or lossy path sends a create or join again when no answer came in time
/// (NetplayKit's lobby does, under the same request id and idempotency key). A copy that arrives
/// while the first is waiting for its password hash must cost nothing: no hash, no rate-limit
/// token, no attempt of the session's shared password budget; it gets the first's answer.
@Suite("Coordinator: copies of a request being hashed", .ownThread)
struct RequestCopiesTests {
    @Test func copiesWaitForTheFirstAndAreBounded() {
        var copies = RequestCopies<String, Int>(maxCopies: 2)
        #expect(!copies.isServing("a"))
        let orphan = copies.wait(1, for: "a")
        #expect(!orphan, "no first, no copy")
        copies.begin("a")
        #expect(copies.isServing("a") && copies.inFlight == 1)
        let waited = [copies.wait(1, for: "a"), copies.wait(2, for: "a"), copies.wait(3, for: "a")]
        #expect(waited == [true, true, false], "at most maxCopies wait")
        copies.begin("a")  // beginning again keeps who waits
        #expect(copies.finish("a") == [1, 2])
        #expect(!copies.isServing("a") && copies.inFlight == 0 && copies.finish("a").isEmpty)
    }

    /// A password session's budget of 3 attempts, the coordinator hashing at real cost unless
    /// `change` says otherwise.
    func fixture(_ change: (inout CoordinatorSettings) -> Void = { _ in }) throws -> (ServiceFixture, BlockingClient, String) {
        let service = try ServiceFixture(settings: AbuseLimitTests.settings {
            $0.passwordHasher = .interactive  // copies must arrive while the first is hashed
            $0.passwordAttemptsPerMinute = 3
            change(&$0)
        })
        let client = try BlockingClient(endpoint: service.endpoint, timeout: 30)
        return (service, client, try service.createLanSession(client, password: "sesame"))
    }

    func join(_ session: String, name: String, password: String, key: String) -> JoinSessionRequest {
        JoinSessionRequest(sessionId: session, role: .player, name: name, password: password, content: smb, idempotencyKey: key)
    }

    /// Sends `body` `copies` times under one request id without waiting, and collects every reply.
    func sendCopies(_ body: Envelope.Body, copies: Int, over client: BlockingClient) throws -> [Envelope.Body] {
        let frame = try Envelope(requestId: 77, body: body).encoded()
        for _ in 0..<copies { try client.sendRaw(frame) }
        return try (0..<copies).map { _ in try Envelope(decoding: try client.receiveRaw()).body }
    }

    /// Sends `request` without relay figures, then at once its retry under a new request id with
    /// figures measured again (41 ms to sync-0), as NetplayKit retries; both replies, in order.
    func sendWithARetryThatMeasured(_ request: JoinSessionRequest, over client: BlockingClient) throws -> [Envelope.Body] {
        var retry = request
        retry.relayRtts = [RelayRtt(relayId: "sync-0", rttUs: 41_000)]
        try client.sendRaw(try Envelope(requestId: 8, body: .joinSessionRequest(request)).encoded())
        try client.sendRaw(try Envelope(requestId: 9, body: .joinSessionRequest(retry)).encoded())
        return try (0..<2).map { _ in try Envelope(decoding: try client.receiveRaw()).body }
    }

    func code(_ body: Envelope.Body) -> ErrorCode? {
        if case .error(let error) = body { return error.code }
        return nil
    }

    @Test func copiesOfAWrongGuessSpendOneAttempt() throws {
        let (service, client, session) = try fixture()
        defer { service.stop() }
        let replies = try sendCopies(.joinSessionRequest(join(session, name: "m", password: "guess", key: "guess-idempotency-key")), copies: 3, over: client)
        #expect(replies.map(code) == [.wrongPassword, .wrongPassword, .wrongPassword])
        // Two attempts are left of three: two more guesses are verified, then the budget is spent.
        for guess in ["guess2", "guess3"] {
            #expect(code(try client.requestEnvelope(.joinSessionRequest(join(session, name: "m", password: guess, key: "guess-key-for-" + guess))).body)
                    == .wrongPassword)
        }
        #expect(code(try client.requestEnvelope(.joinSessionRequest(join(session, name: "m", password: "sesame", key: "right-idempotency-key"))).body)
                == .rateLimited)
    }

    @Test func copiesOfARightPasswordJoinGetTheSameSeat() throws {
        let (service, client, session) = try fixture()
        defer { service.stop() }
        let replies = try sendCopies(.joinSessionRequest(join(session, name: "bob", password: "sesame", key: "bob-idempotency-key")), copies: 3, over: client)
        let seats = replies.compactMap { body -> String? in
            if case .joinSessionResponse(let joined) = body { return joined.participantId }
            return nil
        }
        #expect(seats.count == 3 && Set(seats).count == 1, "\(replies)")
        guard case .sessionResponse(let found) = try client.request(.getSessionRequest(GetSessionRequest(sessionId: session))) else {
            Issue.record("no session")
            return
        }
        let taken = found.session.slots.filter { $0.participant != nil }
        #expect(taken.count == 2, "the host and bob, once: \(found.session.slots)")
    }

    @Test func aPlayersRetryWithFreshlyMeasuredRelaysIsACopyToo() throws {
        // NetplayKit's retry of an unanswered join: the same key and guess, a new request id, and
        // round trips to the relays measured again.
        let (service, client, session) = try fixture()
        defer { service.stop() }
        let codes = try sendWithARetryThatMeasured(join(session, name: "m", password: "guess", key: "retry-idempotency-key"), over: client).map(code)
        #expect(codes == [.wrongPassword, .wrongPassword])
        for guess in ["guess2", "guess3"] {
            #expect(code(try client.requestEnvelope(.joinSessionRequest(join(session, name: "m", password: guess, key: "guess-key-for-" + guess))).body)
                    == .wrongPassword, "the retry spent no attempt of its own")
        }
    }

    @Test func aWrongGuessResentAfterItsRefusalSpendsNoAttemptOrJoinToken() throws {
        // The refusal was lost on the way back: the player's lobby sends the join again, and it
        // arrives after the first was answered, so it is no longer in flight.
        let (service, client, session) = try fixture { $0.joinsPerMinutePerSource = 4 }
        defer { service.stop() }
        let resent = join(session, name: "m", password: "guess", key: "lost-idempotency-key")
        for _ in 0..<6 {
            #expect(code(try client.requestEnvelope(.joinSessionRequest(resent)).body) == .wrongPassword)
        }
        // Three attempts and four joins a minute: the six sends spent one of each.
        for guess in ["guess2", "guess3"] {
            #expect(code(try client.requestEnvelope(.joinSessionRequest(join(session, name: "m", password: guess, key: "guess-key-for-" + guess))).body)
                    == .wrongPassword, "the resent copies spent no attempt")
        }
        let right = try client.requestEnvelope(.joinSessionRequest(join(session, name: "m", password: "sesame", key: "right-idempotency-key"))).body
        #expect(code(right) == .rateLimited)
        if case .error(let error) = right { #expect(error.message.contains("password attempts"), "\(error.message)") }
    }

    @Test func aCopysFreshRelayFiguresAreItsSendersOnceTheFirstSeatedThem() throws {
        // The first try measured nothing (the same trouble that lost its answer); the copy did.
        let (service, client, session) = try fixture()
        defer { service.stop() }
        let replies = try sendWithARetryThatMeasured(join(session, name: "bob", password: "sesame", key: "bob-idempotency-key"), over: client)
        guard case .joinSessionResponse(let bob) = replies[0], case .joinSessionResponse(let again) = replies[1] else {
            Issue.record("\(replies)")
            return
        }
        #expect(again.participantId == bob.participantId, "the copy waited for the first's seat")
        let figures = service.onReactor { core in core?.measuredRtts[session]?[bob.participantId] }
        #expect(figures == ["sync-0": 41_000])
    }

    @Test func copiesFromAnotherAddressOrWithAnotherPasswordAreServedOnTheirOwn() throws {
        // Only a copy to the byte from the same address waits: a different password is a different
        // guess (its own attempt), even under the same idempotency key.
        let (service, client, session) = try fixture()
        defer { service.stop() }
        let first = try Envelope(requestId: 5, body: .joinSessionRequest(join(session, name: "m", password: "one", key: "same-idempotency-key"))).encoded()
        let second = try Envelope(requestId: 6, body: .joinSessionRequest(join(session, name: "m", password: "two", key: "same-idempotency-key"))).encoded()
        try client.sendRaw(first)
        try client.sendRaw(second)
        let codes = try (0..<2).map { _ in code(try Envelope(decoding: try client.receiveRaw()).body) }
        #expect(codes == [.wrongPassword, .wrongPassword])
        #expect(code(try client.requestEnvelope(.joinSessionRequest(join(session, name: "m", password: "three", key: "guess-key-for-three"))).body)
                == .wrongPassword)
        #expect(code(try client.requestEnvelope(.joinSessionRequest(join(session, name: "m", password: "four", key: "guess-key-for-four"))).body)
                == .rateLimited, "the two different guesses spent two attempts")
    }

    @Test func copiesOfAPasswordCreateMakeOneSession() throws {
        let service = try ServiceFixture(settings: AbuseLimitTests.settings { $0.passwordHasher = .interactive })
        defer { service.stop() }
        let client = try BlockingClient(endpoint: service.endpoint, timeout: 30)
        let room = SessionSettings(roomName: "room", content: smb, transport: .lan, lanEndpoint: "tcp://10.0.0.2:7300", maxPlayers: 2,
                                   playPassword: "sesame")
        let replies = try sendCopies(.createSessionRequest(CreateSessionRequest(settings: room, hostName: "alice", idempotencyKey: "create-idempotency-key")),
                                     copies: 3, over: client)
        let sessions = replies.compactMap { body -> String? in
            if case .createSessionResponse(let created) = body { return created.session.sessionId }
            return nil
        }
        #expect(sessions.count == 3 && Set(sessions).count == 1, "\(replies)")
    }
}
