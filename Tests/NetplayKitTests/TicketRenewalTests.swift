import Foundation
import Games
import InputSync
import NetplayAuth
import NetplayService
import NetplayTestSupport
import NetplayWire
import Synchronization
import Testing
@testable import NetplayKit

/// A stand-in coordinator: answers RenewTicketRequest with `ticket`, or, without one, never
/// answers; the first `ignoring` renewals it gets go unanswered (as if lost on the way), and the
/// `refusals` it holds answer the renewals after those, one each, before any ticket.
private final class RenewingCoordinator: Service {
    let ticket: JoinTicket?
    private var ignoring: Int
    private var refusals: [ErrorCode]
    /// Renewals received so far (reactor thread).
    private(set) var received = 0
    /// The same count, for the test's thread.
    let counted: RenewalCount

    init(ticket: JoinTicket?, ignoring: Int = 0, refusals: [ErrorCode] = [], counted: RenewalCount = RenewalCount()) {
        self.ticket = ticket
        self.ignoring = ignoring
        self.refusals = refusals
        self.counted = counted
    }

    func start(runtime: ServiceRuntime) throws {}

    func handle(_ request: Request, runtime: ServiceRuntime) throws(ServiceError) -> HandlerOutcome {
        guard case .renewTicketRequest = request.body else {
            throw ServiceError(.unknownRequest, "This stand-in only renews tickets.")
        }
        received += 1
        counted.add()
        guard received > ignoring else { return .deferred }
        if !refusals.isEmpty {
            let code = refusals.removeFirst()
            throw ServiceError(code, "The stand-in refuses this renewal (\(code.protoName)).")
        }
        guard let ticket else { return .deferred }
        return .reply(.sessionResponse(SessionResponse(session: SessionInfo(sessionId: ticket.sessionId), ticket: ticket)))
    }
}

/// Renewal requests a stand-in coordinator received, readable from any thread.
private final class RenewalCount: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func add() { count.withLock { $0 += 1 } }
}

/// An in-process relay that verifies tickets with a key ring of its own, and tickets for it.
private final class RenewalRig {
    let keyRing = TicketKeyRing.generate()
    let relayEndpoint = TestPorts.endpoint()
    private var services: [RunningService] = []

    init() throws {
        let (keyRing, endpoint) = (keyRing, relayEndpoint)
        services.append(try Self.host("sync", endpoint) {
            RelayService(configuration: RelayConfiguration(relayId: "", advertisedEndpoint: endpoint), keyRing: keyRing)
        })
    }

    deinit {
        for service in services { service.stop() }
    }

    private static func host(_ kind: String, _ endpoint: String,
                             _ makeService: @escaping @Sendable () throws -> any Service) throws -> RunningService {
        var configuration = ServiceConfiguration(kind: kind, instance: "renewal-\(kind)", endpoint: endpoint, logLevel: .warning,
                                                 dataDirectory: FileManager.default.temporaryDirectory
                                                     .appendingPathComponent("netplay-renewal-\(UUID().uuidString)"))
        configuration.metricsInterval = 3600
        return try ServiceHost.start(configuration: configuration, makeService: makeService)
    }

    /// Alice's ticket for slot 1 of a two-player session: expired a minute ago, or fresh.
    func ticket(expired: Bool) throws -> JoinTicket {
        try JoinTicketSigner(keyRing: keyRing).issue(
            sessionId: "renewal", participantId: "p-alice", role: .player, slot: 1, relayId: "",
            relayEndpoint: relayEndpoint, params: SyncParams(inputSize: 1, maxPlayers: 2, frameRateMhz: 120_000),
            name: "alice", ttlMs: expired ? 1_000 : 600_000,
            nowUnixMs: UnixTime.nowMs() - (expired ? 60_000 : 0))
    }

    /// Starts a stand-in coordinator renewing with `ticket` (nil: never answering), leaving the
    /// first `ignoring` renewals unanswered and refusing the next ones with `refusals`; its endpoint.
    func coordinator(renewingWith ticket: JoinTicket?, ignoring: Int = 0, refusals: [ErrorCode] = [],
                     counted: RenewalCount = RenewalCount()) throws -> String {
        let endpoint = TestPorts.endpoint()
        services.append(try Self.host("coordinator", endpoint) {
            RenewingCoordinator(ticket: ticket, ignoring: ignoring, refusals: refusals, counted: counted)
        })
        return endpoint
    }

    /// A started match attaching with an expired ticket, renewed at `coordinator`.
    func expiredMatch(coordinator: String, options: NetplayMatchOptions = NetplayMatchOptions()) throws -> NetplayMatch<Arena> {
        try startedMatch(ticket: try ticket(expired: true), coordinator: coordinator, options: options)
    }

    /// A started match attaching with a fresh ticket, renewed at `coordinator`.
    func freshMatch(coordinator: String) throws -> NetplayMatch<Arena> {
        try startedMatch(ticket: try ticket(expired: false), coordinator: coordinator)
    }

    private func startedMatch(ticket: JoinTicket, coordinator: String,
                              options: NetplayMatchOptions = NetplayMatchOptions()) throws -> NetplayMatch<Arena> {
        let admission = Admission(ticket: ticket, relayEndpoint: relayEndpoint,
                                  participantToken: Array("alice's token".utf8), coordinatorEndpoint: coordinator)
        let match = try NetplayMatch(game: Arena(playerCount: 2), admission: admission, options: options)
        match.start()
        return match
    }
}

/// Ticks `match` at 120 Hz until `done` holds (at most `seconds`); returns whether it held, the
/// longest single tick in milliseconds, and how many ticks ran while a ticket renewal was in flight.
private func tickTimed(_ match: NetplayMatch<Arena>, seconds: Double,
                       until done: () -> Bool) -> (done: Bool, longestTickMs: Double, ticksWhileRenewing: Int) {
    let deadline = Date().addingTimeInterval(seconds)
    var longest = 0.0
    var whileRenewing = 0
    while Date() < deadline {
        let started = Date()
        match.tick()
        longest = max(longest, Date().timeIntervalSince(started) * 1000)
        if case .renewingTicket = match.phase { whileRenewing += 1 }
        if done() { return (true, longest, whileRenewing) }
        usleep(8_000)
    }
    return (false, longest, whileRenewing)
}

@Suite("NetplayKit: ticket renewal off the game loop", .serialized, .ownThread)
struct TicketRenewalTests {
    @Test func aRenewalAtACoordinatorThatNeverAnswersDoesNotHoldUpTick() throws {
        let rig = try RenewalRig()
        let counted = RenewalCount()
        var options = NetplayMatchOptions()
        options.backoff = Backoff(baseMs: 100, capMs: 200, maxAttempts: 2, seed: 7)
        let match = try rig.expiredMatch(coordinator: try rig.coordinator(renewingWith: nil, counted: counted), options: options)
        let run = tickTimed(match, seconds: 14) { if case .disconnected = match.state { return true }; return false }
        #expect(run.done, "\(match.state) \(match.events)")
        // Each renewal waits three seconds for the coordinator (a blocking call took a tick that
        // long); tick never waits with it.
        #expect(run.longestTickMs < 500, "a tick took \(run.longestTickMs) ms")
        #expect(run.ticksWhileRenewing >= 20, "only \(run.ticksWhileRenewing) ticks ran during the renewal")
        // A coordinator that did not answer is asked again after the backoff (a restart, a lost
        // connection: it used to end the match at once), as often as the backoff's attempts allow.
        #expect(counted.value >= 4, "\(counted.value) renewal requests: the coordinator was not asked again")
        guard case .disconnected(.refused(.ticketExpired, let why)) = match.state, why.contains("gave up after 2 renewals") else {
            Issue.record("a renewal that never gets an answer should end the match refused (ticket expired): \(match.state)")
            return
        }
    }

    /// A coordinator that refuses for a passing reason (restarting, overloaded) is asked again,
    /// and its ticket, once it issues one, attaches.
    @Test func aRenewalRefusedForAPassingReasonIsAskedAgain() throws {
        let rig = try RenewalRig()
        let fresh = try rig.ticket(expired: false)
        let match = try rig.expiredMatch(coordinator: try rig.coordinator(renewingWith: fresh, refusals: [.unavailable, .shuttingDown]))
        let run = tickTimed(match, seconds: 10) {
            switch match.state {
            case .hosting, .connected, .disconnected: return true
            default: return false
            }
        }
        #expect(run.done, "\(match.state) \(match.events)")
        #expect(match.admission.ticket == fresh, "\(match.state)")
    }

    /// A session that ended while the ticket was out of date ends the match as ended, not as a
    /// refused ticket; another refusal for good ends it with the coordinator's own reason.
    @Test func aRenewalRefusedForGoodEndsTheMatchWithTheCoordinatorsReason() throws {
        let rig = try RenewalRig()
        let ended = try rig.expiredMatch(coordinator: try rig.coordinator(renewingWith: nil, refusals: [.sessionEnded]))
        let kicked = try rig.expiredMatch(coordinator: try rig.coordinator(renewingWith: nil, refusals: [.banned]))
        let run = tickTimed(ended, seconds: 8) {
            kicked.tick()
            if case .disconnected = ended.state, case .disconnected = kicked.state { return true }
            return false
        }
        #expect(run.done, "\(ended.state) \(kicked.state)")
        if case .disconnected(.sessionEnded) = ended.state {} else { Issue.record("\(ended.state)") }
        if case .disconnected(.refused(.banned, _)) = kicked.state {} else { Issue.record("\(kicked.state)") }
    }

    /// A relay that finds each renewed ticket expired again (its clock or the coordinator's far
    /// off) used to send the match back and forth between them for ever, a renewal a round trip.
    @Test func renewedTicketsTheRelayRefusesAsExpiredEndTheMatchAfterAFew() throws {
        let rig = try RenewalRig()
        let counted = RenewalCount()
        let stale = try rig.ticket(expired: true)
        let match = try rig.expiredMatch(coordinator: try rig.coordinator(renewingWith: stale, counted: counted))
        let run = tickTimed(match, seconds: 10) { if case .disconnected = match.state { return true }; return false }
        #expect(run.done, "\(match.state) \(counted.value) renewals")
        guard case .disconnected(.refused(.ticketExpired, let why)) = match.state, why.contains("clock") else {
            Issue.record("\(match.state)")
            return
        }
        #expect(counted.value == NetplayMatch<Arena>.expiryRenewalsAllowed, "\(counted.value) renewals")
    }

    @Test func aRenewedTicketIsPickedUpOnALaterTickAndAttaches() throws {
        let rig = try RenewalRig()
        let fresh = try rig.ticket(expired: false)
        let match = try rig.expiredMatch(coordinator: try rig.coordinator(renewingWith: fresh))
        // Attached again: the stand-in's ticket names no host, so slot 1 shows as connected.
        let run = tickTimed(match, seconds: 8) {
            switch match.state {
            case .hosting, .connected: return true
            default: return false
            }
        }
        #expect(run.done, "\(match.state) \(match.events)")
        #expect(run.longestTickMs < 500, "a tick took \(run.longestTickMs) ms")
        #expect(run.ticksWhileRenewing >= 1)
        #expect(match.admission.ticket == fresh)
        #expect(match.events.contains { if case .error(.ticketExpired, _) = $0 { return true }; return false })
    }

    /// A relay (or a stranger on its endpoint) that says Detach again and again: each one used
    /// to start another renewal, with its own thread, socket and requests, until the process ran
    /// out of sockets. One renewal answers them all.
    @Test func aRelayRepeatingDetachStartsOneRenewal() throws {
        let rig = try RenewalRig()
        let counted = RenewalCount()
        let coordinator = try rig.coordinator(renewingWith: nil, counted: counted)
        let match = try rig.freshMatch(coordinator: coordinator)
        for reason in Array(repeating: DetachReason.sessionMoved, count: 60) + Array(repeating: .relayShutdown, count: 60) {
            match.receive(Envelope(body: .detach(Detach(reason: reason, message: "again"))), now: 1_000)
        }
        #expect(eventually(within: 5) { counted.value >= 1 })
        Thread.sleep(forTimeInterval: 1.5)
        #expect(counted.value <= 3, "\(counted.value) renewal requests for one lookup")
        if case .renewingTicket = match.phase {} else { Issue.record("\(match.phase)") }
    }

    /// A relay's TICKET_EXPIRED for an attach the match already gave up on, arriving while a
    /// relay lookup runs: it took the lookup over as an expiry renewal, uncounted, and reset the
    /// reattach count, so a slow relay with a far-off clock could keep the match going round.
    @Test func aLateExpiryRefusalDuringARelayLookupIsLeftToTheLookup() throws {
        let rig = try RenewalRig()
        let coordinator = try rig.coordinator(renewingWith: nil)
        let match = try rig.freshMatch(coordinator: coordinator)
        #expect(eventually(within: 5) { match.tick(); return match.attachRequestId != 0 }, "no attach sent")
        match.receive(Envelope(body: .detach(Detach(reason: .sessionMoved, message: "moved"))), now: 1_000)
        guard case .renewingTicket(nil, _) = match.phase else {
            Issue.record("no lookup: \(match.phase)")
            return
        }
        match.receive(Envelope(requestId: match.attachRequestId, body: .error(ErrorReply(code: .ticketExpired, message: "late"))),
                      now: 1_001)
        guard case .renewingTicket(nil, _) = match.phase else {
            Issue.record("the late refusal took the lookup over: \(match.phase)")
            return
        }
        #expect(match.expiryRenewalsSinceAttach == 0)
    }

    /// A relay lookup whose answer came while the match had gone back to attaching (a Detach
    /// with another reason) was kept, and the next lookup or expiry took that old answer at once.
    @Test func aRenewalThatFinishedUnwatchedIsNotTakenLater() throws {
        let rig = try RenewalRig()
        let fresh = try rig.ticket(expired: false)
        let coordinator = try rig.coordinator(renewingWith: fresh)
        let match = try rig.freshMatch(coordinator: coordinator)
        match.receive(Envelope(body: .detach(Detach(reason: .sessionMoved, message: "moved"))), now: 1_000)
        #expect(eventually(within: 5) { match.ticketRenewal?.outcome != nil })
        match.receive(Envelope(body: .detach(Detach(reason: .timeout, message: "quiet"))), now: 1_100)
        #expect(match.ticketRenewal == nil, "a finished renewal nobody picked up is dropped")
        if case .attaching = match.phase {} else { Issue.record("\(match.phase)") }
    }

    /// A coordinator (or something on its endpoint) renewing with a ticket for another seat: it
    /// was taken as it came, and the match's session, participant and role changed under its
    /// running engine. The match ends instead, its ticket as it was.
    @Test func aRenewedTicketForAnotherSeatIsRefused() throws {
        let rig = try RenewalRig()
        let expired = try rig.ticket(expired: true)
        let foreign = try JoinTicketSigner(keyRing: rig.keyRing).issue(
            sessionId: "someone-elses", participantId: "p-alice", role: .player, slot: 1, relayId: "",
            relayEndpoint: rig.relayEndpoint, params: expired.params, name: "alice", ttlMs: 600_000, nowUnixMs: UnixTime.nowMs())
        let match = try rig.expiredMatch(coordinator: try rig.coordinator(renewingWith: foreign))
        let run = tickTimed(match, seconds: 8) { if case .disconnected = match.state { return true }; return false }
        #expect(run.done, "\(match.state) \(match.events)")
        guard case .disconnected(.failed(let why)) = match.state, why.contains("another seat") else {
            Issue.record("\(match.state)")
            return
        }
        #expect(match.admission.ticket.sessionId == "renewal")
    }

    @Test func aRenewalWhoseFirstCopyGoesUnansweredIsAskedAgain() throws {
        // On a lossy path a request can be lost with a broken connection: the renewal asks again
        // after a second without an answer instead of ending the match refused.
        let rig = try RenewalRig()
        let fresh = try rig.ticket(expired: false)
        let match = try rig.expiredMatch(coordinator: try rig.coordinator(renewingWith: fresh, ignoring: 1))
        let run = tickTimed(match, seconds: 8) {
            switch match.state {
            case .hosting, .connected: return true
            default: return false
            }
        }
        #expect(run.done, "\(match.state) \(match.events)")
        #expect(match.admission.ticket == fresh)
    }
}
