import Foundation
import NetplayAuth
import NetplayService
import NetplayWire
import Synchronization

/// Admission for a LAN host's in-process relay, which has no coordinator: it answers
/// `JoinSessionRequest` and `GetSessionRequest` itself and signs join tickets with the host's own
/// secret (for relay id ""). The rules are the coordinator's, from the same code
/// (``AdmissionPolicy``): content and core match (an empty joiner content does not skip it),
/// which password each role needs (a spectator of a play-password room needs a password), the
/// places, bans, and the password attempt budget. A place handed to a joiner that never attaches
/// is freed after ``AdmissionPolicy/Limits/pendingJoinTimeoutMs`` (its ticket expires first). A
/// join asked again under its idempotency key (same name and role) while its place is held and
/// before its joiner attached gets that place again, as the coordinator's replay does; a copy of
/// a join refused for its password gets that refusal again without spending an attempt (the
/// policy's rule, as at the coordinator).
///
/// Each place comes with a participant token (the host's too), as the coordinator's do: with it,
/// a participant that attached renews its ticket here (`RenewTicketRequest`) while it holds the
/// place, so a long match can still reconnect after the ticket and the relay's resume grace ran
/// out (``renew(_:)``).
///
/// Thread-safe: the host's thread issues its own ticket while the relay's reactor admits joiners.
public final class LanAdmission: Sendable {
    struct State {
        var players: [Int: (participantId: String, name: String)] = [:]
        var spectators: [String: String] = [:]
        var nextParticipant = 1
        var started = false
        /// Participants the relay has seen in the session (a place is freed only once its holder
        /// attached and then left, or never attached in time).
        var attached: Set<String> = []
        var policy: AdmissionPolicy
        var pending: PendingJoins
        var bans = AdmissionBans()
        /// Where each participant joined from (what a ban binds to).
        var sources: [String: String] = [:]
        /// Each participant's token, which renews its ticket (``LanAdmission/renew(_:)``).
        var tokens: [String: [UInt8]] = [:]
        /// Forgets a participant whose place was freed: what a joiner coming and going for the
        /// room's whole life would otherwise grow without bound (a ban already copied its source).
        mutating func forget(_ participantId: String) {
            attached.remove(participantId)
            sources[participantId] = nil
            tokens[participantId] = nil
            away[participantId] = nil
        }

        /// A fresh token for `participantId`.
        mutating func issueToken(for participantId: String) -> [UInt8] {
            let token = Sodium.randomBytes(LanAdmission.participantTokenBytes)
            tokens[participantId] = token
            return token
        }

        /// Joins per sender address (``LanAdmission/joinsPerMinutePerSource``).
        var joins = RateLimiter<String>(ratePerSecond: LanAdmission.joinsPerMinutePerSource / 60,
                                        burst: LanAdmission.joinsPerMinutePerSource / 4, maxKeys: 10_000)

        /// Joins waiting for the host's decision (``SessionSettings/approveJoiners``).
        var approvals = HostApprovals()
        /// The host's commands for the relay, run on its next tick (``takeHostCommands()``).
        var commands: [Envelope.Body] = []
        /// Why the room is over (the host ended it, or the relay ended its match): every join and
        /// renewal is refused SESSION_ENDED with it; nil while it is open.
        var ended: String?
        /// Whether the relay has served the room's session (its host attached): once it no longer
        /// does, the room is over.
        var served = false
        /// Spectators gone from the relay's session, since when (monotonic ms): each keeps its
        /// place and token for the pending-join timeout, to come back.
        var away: [String: UInt64] = [:]
        /// The place each join took, by its idempotency key, while the place is held: a joiner
        /// asking again under the key (its answer was lost) gets the same place.
        var admittedByKey: [String: Admitted] = [:]
    }

    /// A place handed to a joiner.
    struct Admitted {
        let participantId: String
        let name: String
        let role: Role

        /// The slot the place is in now (0 for a spectator; the host may have moved a player),
        /// or nil once it is no longer this joiner's.
        func heldSlot(in state: State) -> UInt32? {
            if role == .spectator { return state.spectators[participantId] != nil ? 0 : nil }
            return state.players.first { $0.value.participantId == participantId }.map { UInt32($0.key) }
        }

        /// Whether `request` is this join asked again: its name and role, any slot or its own, and
        /// only before the joiner attached (the answer of a join that attached was not lost; a LAN
        /// link is plain, and a key seen on it must not fetch a ticket for a seated player).
        func isAskedAgain(by request: JoinSessionRequest, in state: State) -> Bool {
            let role = request.admittedRole
            guard request.name == name, role == self.role, !state.attached.contains(participantId),
                  let slot = heldSlot(in: state) else { return false }
            return request.preferredSlot == 0 || request.preferredSlot == slot
        }
    }

    /// The session id the room announces.
    public let sessionId: String
    /// The room's settings (passwords included; never sent back).
    public let settings: SessionSettings
    /// The relay endpoint joiners attach to.
    public let relayEndpoint: String
    /// The admission limits in force.
    public let limits: AdmissionPolicy.Limits
    private let signer: JoinTicketSigner
    /// How long the host's own ticket and every renewed ticket live.
    let ticketTtlMs: UInt64
    let clock: @Sendable () -> UInt64
    let state: Mutex<State>

    /// Creates the admission for a LAN room hosted with `settings`, signing with `keyRing`. The
    /// host's own ticket lives `ticketTtlMs`; a joiner's lives the pending-join timeout (it must
    /// attach within it). `clock` is monotonic milliseconds (tests pass their own).
    public init(sessionId: String, settings: SessionSettings, relayEndpoint: String, keyRing: TicketKeyRing,
                ticketTtlMs: UInt64 = 600_000, limits: AdmissionPolicy.Limits = AdmissionPolicy.Limits(),
                clock: (@Sendable () -> UInt64)? = nil) {
        self.sessionId = sessionId
        self.settings = settings
        self.relayEndpoint = relayEndpoint
        self.signer = JoinTicketSigner(keyRing: keyRing)
        self.ticketTtlMs = ticketTtlMs
        self.limits = limits
        let origin = ContinuousClock.now
        self.clock = clock ?? {
            let elapsed = ContinuousClock.now - origin
            return UInt64(elapsed.components.seconds) * 1000 + UInt64(elapsed.components.attoseconds / 1_000_000_000_000_000)
        }
        // The place outlives the joiner's ticket by a margin, so nobody attaches after it is freed.
        state = Mutex(State(policy: AdmissionPolicy(limits: limits),
                            pending: PendingJoins(timeoutMs: limits.pendingJoinTimeoutMs + 5_000)))
    }

    /// The room name.
    public var roomName: String { settings.roomName }

    /// The sync parameters every ticket carries.
    public var params: SyncParams {
        SyncParams(settings: settings, maxSpectators: settings.spectatorsAllowed ? max(settings.maxSpectators, 1) : 0)
    }

    /// Players and spectators holding a place now.
    public var occupancy: (players: Int, spectators: Int) {
        state.withLock { ($0.players.count, $0.spectators.count) }
    }

    /// Joins one address may send a minute (a quarter of them at once), as the coordinator's
    /// `--join-rate` limits its own: one LAN stranger could otherwise hold every open place with
    /// joins it never attaches (each place is held for the pending-join timeout), or fill the
    /// host's approval book, and real joiners were refused.
    public static let joinsPerMinutePerSource = 60.0

    /// Whether the match has started.
    public var inProgress: Bool { state.withLock { $0.started } }

    /// Participants the admission remembers having seen or where they joined from (tests:
    /// bounded by the places, however many joiners came and went).
    var rememberedParticipants: Int { state.withLock { $0.attached.union($0.sources.keys).union($0.tokens.keys).count } }

    /// What the relay's session holds now: whether the match runs, and the participants in it
    /// (attached, or away but still holding their place). Places of participants that were in
    /// it and are gone (left, kicked, timed out), or that never attached within the pending-join
    /// timeout, are free for the next joiner. A spectator is gone from the relay's session as
    /// soon as its link falls quiet (a player stays, away): it keeps its place and token for the
    /// pending-join timeout, so it can come back, renewing its ticket if that ran out.
    public func sessionChanged(running: Bool, present: Set<String>) {
        let now = clock()
        let awayMs = limits.pendingJoinTimeoutMs
        state.withLock { state in
            state.started = state.started || running
            state.served = true
            for id in present { state.away[id] = nil }
            // Gone from the session after being in it: its place (if the host did not already
            // take it away) and everything kept about it (a ban already copied its source).
            for id in state.attached.subtracting(present) {
                if state.spectators[id] != nil {
                    let since = state.away[id] ?? now
                    state.away[id] = since
                    if now &- since < awayMs { continue }
                }
                for (slot, holder) in state.players where holder.participantId == id { state.players[slot] = nil }
                state.spectators[id] = nil
                state.forget(id)
            }
            state.attached.formUnion(present)
            for id in present { state.pending.settled(id) }
            Self.expirePending(&state, now: now)
        }
    }

    /// The relay no longer serves the room's session after it did: it ended the match (every
    /// player left, or nobody was attached for its idle time), so the room is over, as if its
    /// host ended it: joins and renewals are refused SESSION_ENDED.
    public func sessionGone() {
        state.withLock { state in
            guard state.served, state.ended == nil else { return }
            state.ended = "This room's match is over."
        }
    }

    private static func expirePending(_ state: inout State, now: UInt64) {
        for id in state.pending.expire(nowMs: now) where !state.attached.contains(id) {
            for (slot, holder) in state.players where holder.participantId == id { state.players[slot] = nil }
            state.spectators[id] = nil
            state.forget(id)
        }
    }

    /// Bytes of a participant token.
    static let participantTokenBytes = 32

    /// The host's own ticket, for `slot` (1 by default), and its participant token.
    public func hostTicket(name: String, slot: Int = 1) throws(ServiceError) -> (ticket: JoinTicket, participantToken: [UInt8]) {
        guard (1 ... Int(settings.maxPlayers)).contains(slot) else {
            throw ServiceError(.badRequest, "Slot \(slot) does not exist in a \(settings.maxPlayers)-player room.")
        }
        let seat = state.withLock { state -> (id: String, token: [UInt8])? in
            guard state.players[slot] == nil else { return nil }
            // The host's id carries the host mark, so the relay trusts its state in checksum ties.
            let id = "\(JoinTicket.hostParticipantIdPrefix)lan-\(state.nextParticipant)"
            state.nextParticipant += 1
            state.players[slot] = (id, name)
            return (id, state.issueToken(for: id))
        }
        guard let seat else { throw ServiceError(.slotTaken, "Slot \(slot) is taken.") }
        return (try sign(participantId: seat.id, role: .player, slot: UInt32(slot), name: name, ttlMs: ticketTtlMs), seat.token)
    }

    /// Handles the requests a LAN relay answers for the coordinator; nil for anything else.
    /// `source` is the sender's address (what a ban binds to).
    public func handle(_ body: Envelope.Body, source: String = "") throws(ServiceError) -> Envelope.Body? {
        switch body {
        case .joinSessionRequest(let request):
            guard request.sessionId == sessionId else {
                throw ServiceError(.notFound, "No such session on this LAN host.", field: "JoinSessionRequest.session_id")
            }
            let seat = try admit(request, source: source)
            let ticket = try sign(participantId: seat.participantId, role: seat.role, slot: seat.slot, name: request.name,
                                  ttlMs: limits.pendingJoinTimeoutMs)
            return .joinSessionResponse(JoinSessionResponse(session: info(), participantId: seat.participantId,
                                                            participantToken: seat.token, ticket: ticket, slot: seat.slot))
        case .getSessionRequest(let request):
            guard request.sessionId == sessionId else {
                throw ServiceError(.notFound, "No such session on this LAN host.", field: "GetSessionRequest.session_id")
            }
            return .sessionResponse(SessionResponse(session: info()))
        case .renewTicketRequest(let request):
            return try renew(request)
        default:
            return nil
        }
    }

    /// The room as the shared admission rules see it.
    private func room(_ state: State) -> AdmissionRoom {
        AdmissionRoom(sessionId: sessionId, content: settings.content, maxPlayers: settings.maxPlayers,
                      takenSlots: Set(state.players.keys.map { UInt32($0) }), spectatorsAllowed: settings.spectatorsAllowed,
                      maxSpectators: params.maxSpectators, spectators: state.spectators.count,
                      hasPlayPassword: !settings.playPassword.isEmpty, hasSpectatePassword: !settings.spectatePassword.isEmpty,
                      bans: state.bans)
    }

    /// A place a join took: who, in which role and slot (0 for a spectator), and its token.
    private struct Seat {
        let participantId: String
        let role: Role
        let slot: UInt32
        let token: [UInt8]
    }

    /// Runs the shared rules, checks the password (plaintext, constant-time) and takes a place.
    private func admit(_ request: JoinSessionRequest, source: String) throws(ServiceError) -> Seat {
        let now = clock()
        let settings = self.settings
        let result = state.withLock { state -> Result<Seat, AdmissionDenial> in
            do throws(AdmissionDenial) {
                Self.expirePending(&state, now: now)
                state.admittedByKey = state.admittedByKey.filter { _, admitted in
                    admitted.heldSlot(in: state) != nil && !state.attached.contains(admitted.participantId)
                }
                let replayed = request.idempotencyKey.isEmpty ? nil
                    : state.admittedByKey[request.idempotencyKey].flatMap { $0.isAskedAgain(by: request, in: state) ? $0 : nil }
                // A join asked again (its answer lost, or waiting for the host) costs nothing more.
                if replayed == nil, !source.isEmpty, !(settings.approveJoiners && state.approvals.isFiled(request)),
                   case .limited(let retry) = state.joins.take(source, now: Double(now) / 1000) {
                    throw AdmissionDenial(.rateLimited, "Too many joins from your address; retry in \(retry) ms.", retryAfterMs: retry)
                }
                let room = room(state)
                let plan = try state.policy.admit(request, source: source, room: room, now: Double(now) / 1000,
                                                  replay: replayed != nil)
                var match = PasswordMatch.none
                for candidate in plan.candidates {
                    let expected = candidate == .play ? settings.playPassword : settings.spectatePassword
                    if Sodium.secretsEqual(Array(request.password.utf8), Array(expected.utf8)) {
                        match = candidate
                        break
                    }
                }
                try state.policy.settle(plan, match: match, now: Double(now) / 1000)
                if let ended = state.ended { throw AdmissionDenial(.sessionEnded, ended) }
                if let replayed {
                    // The same join again (its answer was lost): its place, and a fresh ticket's time
                    // to attach.
                    state.pending.issued(replayed.participantId, nowMs: now)
                    return .success(Seat(participantId: replayed.participantId, role: replayed.role,
                                         slot: replayed.heldSlot(in: state) ?? 0, token: state.tokens[replayed.participantId] ?? []))
                }
                if settings.approveJoiners {
                    try state.approvals.ask(request, source: source, nowMs: now, unixMs: UnixTime.nowMs())
                    state.approvals.admitted(key: request.idempotencyKey)
                }
                let id = "lan-\(state.nextParticipant)"
                state.nextParticipant += 1
                var slot: UInt32 = 0
                if plan.role == .spectator {
                    state.spectators[id] = request.name
                } else {
                    slot = request.preferredSlot != 0 ? request.preferredSlot : room.firstFreeSlot!
                    state.players[Int(slot)] = (id, request.name)
                }
                state.pending.issued(id, nowMs: now)
                state.sources[id] = source
                if !request.idempotencyKey.isEmpty {
                    state.admittedByKey[request.idempotencyKey] = Admitted(participantId: id, name: request.name, role: plan.role)
                }
                return .success(Seat(participantId: id, role: plan.role, slot: slot, token: state.issueToken(for: id)))
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case .success(let admitted): return admitted
        case .failure(let denial): throw denial
        }
    }

    func sign(participantId: String, role: Role, slot: UInt32, name: String, ttlMs: UInt64) throws(ServiceError) -> JoinTicket {
        do {
            return try signer.issue(sessionId: sessionId, participantId: participantId, role: role, slot: slot,
                                    relayId: "", relayEndpoint: relayEndpoint, params: params,
                                    name: String(name.prefix(64)), ttlMs: ttlMs)
        } catch {
            throw ServiceError(.internal, "The ticket could not be signed: \(error)")
        }
    }

    /// The session as a coordinator would describe it.
    public func info() -> SessionInfo {
        var blanked = settings
        blanked.playPassword = ""
        blanked.spectatePassword = ""
        let (players, spectators, started) = state.withLock { ($0.players, $0.spectators, $0.started) }
        let slots = (1 ... Int(settings.maxPlayers)).map { slot in
            Slot(slot: UInt32(slot), participant: players[slot].map {
                Participant(participantId: $0.participantId, name: $0.name, role: .player, slot: UInt32(slot),
                            isHost: $0.participantId.hasPrefix(JoinTicket.hostParticipantIdPrefix))
            })
        }
        return SessionInfo(sessionId: sessionId, state: started ? .running : .lobby, settings: blanked,
                           hasPassword: !settings.playPassword.isEmpty,
                           hasSpectatePassword: !settings.spectatePassword.isEmpty, slots: slots,
                           spectators: spectators.map { Participant(participantId: $0.key, name: $0.value, role: .spectator) },
                           hostParticipantId: players.values.first { $0.participantId.hasPrefix(JoinTicket.hostParticipantIdPrefix) }?
                               .participantId ?? "", relayEndpoint: relayEndpoint)
    }
}
