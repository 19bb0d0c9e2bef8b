import NetplayAuth
import NetplayService
import NetplayWire

/// What a join needs checked before it can go ahead.
public struct JoinPlan: Sendable {
    /// Hashes the given password is tried against, in order, with what a match means.
    public var candidates: [(hash: String, match: PasswordMatch)]
    /// The shared admission rules' decision (role, reserved password attempt).
    public var admission: AdmissionPlan
    /// True when no password is needed.
    public var open: Bool { candidates.isEmpty }
}

extension SessionCoordinator {
    // MARK: Create

    /// Validates a create before its passwords are hashed (so a bad request costs nothing), and
    /// spends one create of `source`'s budget (RATE_LIMITED when it is out; an unknown source,
    /// "", is not limited). A retry of a create that went through costs nothing; another create
    /// under its key is refused (``replayedSession(_:)``).
    public func precheckCreate(_ request: CreateSessionRequest, source: String = "", at time: CoordinatorTime) throws(ServiceError) {
        if try replayedSession(request) != nil { return }
        try validateCreate(request, source: source, at: time)
        if !source.isEmpty, case .limited(let retry) = createLimiter.take(source, now: Double(time.monotonicMs) / 1000) {
            throw ServiceError(.rateLimited, "Too many sessions created from your address; retry in \(retry) ms.", retryAfterMs: retry)
        }
    }

    private func validateCreate(_ request: CreateSessionRequest, source: String, at time: CoordinatorTime) throws(ServiceError) {
        let settings = request.settings
        guard activeCount < self.settings.maxSessions else {
            throw ServiceError(.overloaded, "The coordinator holds its maximum of \(self.settings.maxSessions) sessions.",
                               retryAfterMs: 5_000)
        }
        if request.preferredSlot > settings.maxPlayers {
            throw ServiceError(.badRequest, "Slot \(request.preferredSlot) does not exist in a \(settings.maxPlayers)-player session.",
                               field: "CreateSessionRequest.preferred_slot")
        }
        if settings.transport == .lan, settings.lanEndpoint.isEmpty {
            throw ServiceError(.badRequest, "A LAN session needs the host's relay endpoint.", field: "SessionSettings.lan_endpoint")
        }
        if settings.transport != .lan, relays.pick(region: settings.region, nowMs: time.monotonicMs) == nil {
            throw ServiceError(.noRelay, "No live relay can take a new session; retry shortly.", retryAfterMs: 1_000)
        }
        guard !source.isEmpty else { return }
        let lobbyCap = self.settings.lobbySessionsPerSource
        if lobbyCap > 0, hostedBySource.lobby[source, default: 0] >= lobbyCap {
            throw ServiceError(.rateLimited, "Your address already hosts \(lobbyCap) sessions that have not started; start or end one first.",
                               retryAfterMs: 60_000)
        }
        let cap = self.settings.sessionsPerSource
        if cap > 0, hostedBySource.active[source, default: 0] >= cap, liveSessions(hostedFrom: source, at: time) >= cap {
            throw ServiceError(.rateLimited, "Your address already hosts \(cap) sessions; end one first.", retryAfterMs: 60_000)
        }
    }

    /// A running session nobody was attached to for this long no longer counts against its
    /// host's address: a relay that lost it (restarted, or never attached after a move) never
    /// reports it ended, and the address must not be locked out by sessions nobody plays.
    static let unplayedSessionMs: UInt64 = 600_000

    /// The sessions `source` hosts that count against ``CoordinatorSettings/sessionsPerSource``:
    /// those in the lobby (they expire on their own) and running ones someone was attached to
    /// within ``unplayedSessionMs``. A scan, run only for an address at its cap by the count kept.
    private func liveSessions(hostedFrom source: String, at time: CoordinatorTime) -> Int {
        sessions.values.reduce(0) { count, session in
            guard session.isActive, session.host?.source == source else { return count }
            let played = lastActivityMs[session.sessionId].map { time.monotonicMs < $0 + Self.unplayedSessionMs } ?? false
            return session.state == .lobby || played ? count + 1 : count
        }
    }

    /// Creates a session (the caller ran ``precheckCreate(_:source:at:)`` and hashed the
    /// passwords, off the reactor thread).
    public func create(_ request: CreateSessionRequest, source: String = "", playHash: String?, spectateHash: String?,
                       at time: CoordinatorTime) throws(ServiceError) -> Outcome {
        if let existing = try replayedSession(request), let host = existing.host {
            // A retry of a create that went through: the same session, token and a fresh ticket.
            let reply = CreateSessionResponse(session: existing.info, participantId: host.participantId,
                                              participantToken: tokens.token(sessionId: existing.sessionId, participantId: host.participantId),
                                              ticket: try ticket(existing, host, at: time))
            return Outcome(reply: .createSessionResponse(reply))
        }
        try validateCreate(request, source: source, at: time)
        var settings = request.settings
        settings.playPassword = ""
        settings.spectatePassword = ""
        if settings.transport == .unspecified { settings.transport = .relay }
        if !settings.spectatorsAllowed { settings.maxSpectators = 0 }
        let sessionId = Self.randomId(prefix: "s-", bytes: 8)
        let hostId = Self.randomId(prefix: JoinTicket.hostParticipantIdPrefix, bytes: 6)  // the relay knows the host by it
        let host = ParticipantRecord(participantId: hostId, name: request.hostName, role: .player,
                                     slot: request.preferredSlot == 0 ? 1 : request.preferredSlot, isHost: true, mayPlay: true,
                                     joinedAtUnixMs: time.unixMs, source: source)
        var session = SessionRecord(sessionId: sessionId, state: .lobby, settings: settings, playPasswordHash: playHash,
                                    spectatePasswordHash: spectateHash, hostParticipantId: hostId, relayId: "", relayEndpoint: "",
                                    createdAtUnixMs: time.unixMs, idempotencyKey: request.idempotencyKey, participants: [host])
        session.requestFingerprint = try fingerprints.of(request)
        noteRtts(request.relayRtts, session: sessionId, participant: hostId)
        _ = try ensureRelay(&session, at: time)
        let ticket = try ticket(session, host, at: time)
        var changes: [StoreChange] = [.saveSession(session), .saveParticipant(sessionId: sessionId, host)]
        if let ticket { changes.append(.saveTicket(ticket)) }
        try commit(session, changes, at: time)
        var outcome = Outcome(reply: .createSessionResponse(CreateSessionResponse(
            session: session.info, participantId: hostId,
            participantToken: tokens.token(sessionId: sessionId, participantId: hostId), ticket: ticket)))
        outcome.events = [event(.created, session, participant: hostId, at: time)]
        outcome.touched = [sessionId]
        return outcome
    }

    /// The session an earlier create of this same request made (a retry whose answer was lost),
    /// nil when its key is unset or names no active session. BAD_REQUEST for a key too short to be
    /// unguessable; ALREADY_EXISTS when the key names a session another request made (the key is
    /// not a credential: the host's token goes to the same request only).
    func replayedSession(_ request: CreateSessionRequest) throws(ServiceError) -> SessionRecord? {
        let field = "CreateSessionRequest.idempotency_key"
        try RequestFingerprints.checkKey(request.idempotencyKey, field: field)
        guard let session = existingSession(forCreateKey: request.idempotencyKey) else { return nil }
        try RequestFingerprints.requireSame(session.requestFingerprint, as: fingerprints.of(request), field: field)
        return session
    }

    // MARK: Join

    /// Checks a join up to its password: RATE_LIMITED (too many joins from `source`; an unknown
    /// source, "", is not limited), NOT_FOUND, SESSION_ENDED, then the shared admission rules
    /// (``AdmissionPolicy``): BANNED (name or source address), content, places, and RATE_LIMITED
    /// when the session's password attempts are spent. When a password is needed, one attempt is
    /// reserved here, before any hash is computed; ``settleJoin(_:source:plan:match:at:)`` settles it.
    /// A copy of a keyed join refused for its password moments ago (its answer was lost) gets
    /// that refusal again and costs no join token, attempt or hash.
    public func planJoin(_ request: JoinSessionRequest, source: String = "", at time: CoordinatorTime) throws(ServiceError) -> JoinPlan {
        // Asking again about a join waiting for its host, or resending a refused guess, costs
        // nothing more.
        let now = Double(time.monotonicMs) / 1000
        if !source.isEmpty, !isFiledJoin(request), !admission.isCopyOfRefusedGuess(request, now: now),
           case .limited(let retry) = joinLimiter.take(source, now: now) {
            throw ServiceError(.rateLimited, "Too many joins from your address; retry in \(retry) ms.", retryAfterMs: retry)
        }
        return try checkJoin(request, source: source, reserve: true, at: time)
    }

    private func checkJoin(_ request: JoinSessionRequest, source: String, reserve: Bool, at time: CoordinatorTime) throws(ServiceError) -> JoinPlan {
        let session = try activeSession(request.sessionId, field: "JoinSessionRequest.session_id")
        let replay = try replayedParticipant(session, request) != nil
        let plan: AdmissionPlan
        do {
            plan = try admission.admit(request, source: source, room: session.admissionRoom, now: Double(time.monotonicMs) / 1000,
                                       replay: replay, reserve: reserve)
        } catch {
            throw error
        }
        var candidates: [(hash: String, match: PasswordMatch)] = []
        for match in plan.candidates {
            if match == .play, let hash = session.playPasswordHash { candidates.append((hash, .play)) }
            if match == .spectate, let hash = session.spectatePasswordHash { candidates.append((hash, .spectate)) }
        }
        return JoinPlan(candidates: candidates, admission: plan)
    }

    /// Settles a planned join once its password was verified (`match`: what it matched,
    /// `.none` for nothing): a wrong password keeps its attempt spent and answers
    /// WRONG_PASSWORD; a right one gives it back and joins (every check runs again: the session
    /// may have changed while the password was being verified).
    public func settleJoin(_ request: JoinSessionRequest, source: String = "", plan: JoinPlan, match: PasswordMatch,
                           at time: CoordinatorTime) throws(ServiceError) -> Outcome {
        do {
            try admission.settle(plan.admission, match: match, now: Double(time.monotonicMs) / 1000)
        } catch {
            throw error
        }
        return try join(request, source: source, password: plan.open ? .notNeeded : match, at: time)
    }

    /// Gives back a planned join's reserved password attempt when its password is never
    /// verified (the hashing queue refused it).
    public func releaseJoin(_ plan: JoinPlan, at time: CoordinatorTime) {
        admission.release(plan.admission, now: Double(time.monotonicMs) / 1000)
    }

    /// Joins with the password already checked (`password`: what it matched). Every check of
    /// ``planJoin(_:source:at:)`` but the rate limits runs again.
    func join(_ request: JoinSessionRequest, source: String, password: PasswordMatch, at time: CoordinatorTime) throws(ServiceError) -> Outcome {
        let plan = try checkJoin(request, source: source, reserve: false, at: time)
        if !plan.open {
            guard plan.candidates.contains(where: { $0.match == password }) else {
                let what = plan.admission.role == .spectator ? "spectate" : "play"
                throw ServiceError(.wrongPassword, "Wrong password to \(what) in this session.", field: "JoinSessionRequest.password")
            }
        }
        var session = sessions[request.sessionId]!
        let role = plan.admission.role
        let replayed = try replayedParticipant(session, request)
        if replayed == nil { try awaitHost(request, source: source, session: session, at: time) }
        var changes: [StoreChange] = []
        var outcome = Outcome(reply: .ack(Ack()))
        let participant: ParticipantRecord
        if let replay = replayed {
            participant = replay
        } else {
            let slot: UInt32 = role == .player ? (request.preferredSlot != 0 ? request.preferredSlot : session.firstFreeSlot!) : 0
            participant = ParticipantRecord(participantId: Self.randomId(prefix: "p-", bytes: 6), name: request.name, role: role,
                                            slot: slot, mayPlay: AdmissionPolicy.mayPlay(room: session.admissionRoom, match: password),
                                            joinedAtUnixMs: time.unixMs, idempotencyKey: request.idempotencyKey,
                                            requestFingerprint: try fingerprints.of(request), source: source)
            session.participants.append(participant)
            session.version += 1
            changes.append(.saveParticipant(sessionId: session.sessionId, participant))
            outcome.events.append(event(role == .player ? .playerJoined : .spectatorJoined, session,
                                        participant: participant.participantId, at: time))
        }
        if role == .player { noteRtts(request.relayRtts, session: session.sessionId, participant: participant.participantId) }
        if try ensureRelay(&session, at: time) {
            session.version += 1
            outcome.events.append(event(.relayAssigned, session, at: time))
        }
        let movedFrom = moveNearer(&session, at: time)
        if movedFrom != nil {
            session.version += 1
            outcome.events.append(event(.relayAssigned, session, reason: "moved to relay \(session.relayId), nearer to its players", at: time))
        }
        changes.insert(.updateSession(session), at: 0)
        let ticket = try ticket(session, participant, at: time)
        if let ticket { changes.append(.saveTicket(ticket)) }
        try commit(session, changes, at: time)
        if replayed == nil { admittedAfterApproval(session.sessionId, key: request.idempotencyKey) }
        if let movedFrom { outcome.detach += closeMoved(session, from: movedFrom) }
        outcome.reply = .joinSessionResponse(JoinSessionResponse(
            session: session.info, participantId: participant.participantId,
            participantToken: tokens.token(sessionId: session.sessionId, participantId: participant.participantId),
            ticket: ticket, slot: participant.role == .player ? participant.slot : 0))
        outcome.touched = [session.sessionId]
        return outcome
    }

    /// The participant an earlier join of this same request made (a retry whose answer was lost),
    /// nil when its key is unset or new in the session. BAD_REQUEST for a key too short to be
    /// unguessable; ALREADY_EXISTS when the key names a participant another join made (another
    /// name, role, password, ...: the key is not a credential).
    private func replayedParticipant(_ session: SessionRecord, _ request: JoinSessionRequest) throws(ServiceError) -> ParticipantRecord? {
        let field = "JoinSessionRequest.idempotency_key"
        try RequestFingerprints.checkKey(request.idempotencyKey, field: field)
        guard !request.idempotencyKey.isEmpty,
              let participant = session.participants.first(where: { $0.idempotencyKey == request.idempotencyKey }) else { return nil }
        try RequestFingerprints.requireSame(participant.requestFingerprint, as: fingerprints.of(request), field: field)
        return participant
    }

    // MARK: Leave, kick

    /// A participant leaves; the host leaving ends the session.
    public func leave(_ request: LeaveSessionRequest, at time: CoordinatorTime) throws(ServiceError) -> Outcome {
        var session = try self.session(request.sessionId, field: "LeaveSessionRequest.session_id")
        let participant = try authenticate(session, request.participantId, request.participantToken,
                                           field: "LeaveSessionRequest.participant_token")
        guard session.isActive else { return Outcome(reply: .sessionResponse(SessionResponse(session: session.info))) }
        if participant.isHost {
            return try end(&session, reason: "The host left.", by: participant.participantId, at: time)
        }
        session.participants.removeAll { $0.participantId == participant.participantId }
        session.version += 1
        try commit(session, [.updateSession(session), .deleteParticipant(sessionId: session.sessionId, participantId: participant.participantId)], at: time)
        forgetRtts(of: participant.participantId, in: session.sessionId)
        var outcome = Outcome(reply: .sessionResponse(SessionResponse(session: session.info)))
        outcome.events = [event(.left, session, participant: participant.participantId, at: time)]
        outcome.touched = [session.sessionId]
        outcome.detach = notice(session, disconnect: participant.participantId, reason: .leaving, message: "left the session")
        return outcome
    }

    /// The host removes a participant, optionally banning their name.
    public func kick(_ request: KickParticipantRequest, at time: CoordinatorTime) throws(ServiceError) -> Outcome {
        var session = try hostedSession(request.sessionId, request.participantId, request.participantToken,
                                        what: "kick participants", request: "KickParticipantRequest")
        guard let target = session.participant(request.targetParticipantId) else {
            throw ServiceError(.notFound, "No participant '\(request.targetParticipantId)' in this session.",
                               field: "KickParticipantRequest.target_participant_id")
        }
        guard !target.isHost else {
            throw ServiceError(.invalidState, "The host cannot kick themselves; end the session instead.",
                               field: "KickParticipantRequest.target_participant_id")
        }
        session.participants.removeAll { $0.participantId == target.participantId }
        // The kicked participant's tickets are revoked: deleted here (renew answers
        // UNAUTHENTICATED, or BANNED), and the relay is told to disconnect them (reason KICKED).
        var changes: [StoreChange] = [.deleteParticipant(sessionId: session.sessionId, participantId: target.participantId),
                                      .deleteParticipantTickets(sessionId: session.sessionId, participantId: target.participantId)]
        if request.ban {
            // Bound to what renaming cannot change: the address they joined from and their id.
            session.bans.ban(name: target.name, source: target.source, participantId: target.participantId)
            changes.append(.addBan(sessionId: session.sessionId, name: target.name, source: target.source,
                                   participantId: target.participantId))
        }
        session.version += 1
        changes.insert(.updateSession(session), at: 0)
        try commit(session, changes, at: time)
        forgetRtts(of: target.participantId, in: session.sessionId)
        var outcome = Outcome(reply: .sessionResponse(SessionResponse(session: session.info)))
        outcome.events = [event(.kicked, session, participant: target.participantId,
                                reason: request.reason.isEmpty ? "kicked by the host" : request.reason, at: time)]
        outcome.touched = [session.sessionId]
        outcome.detach = notice(session, disconnect: target.participantId, reason: .kicked,
                                message: request.reason.isEmpty ? (request.ban ? "banned by the host" : "kicked by the host") : request.reason)
        return outcome
    }

    // MARK: Slots

    /// The host exchanges two slots (either may be free).
    public func swapSlots(_ request: SwapSlotsRequest, at time: CoordinatorTime) throws(ServiceError) -> Outcome {
        var session = try hostedSession(request.sessionId, request.participantId, request.participantToken,
                                        what: "swap slots", request: "SwapSlotsRequest")
        let max = session.settings.maxPlayers
        for (slot, field) in [(request.slotA, "slot_a"), (request.slotB, "slot_b")] where slot < 1 || slot > max {
            throw ServiceError(.badRequest, "Slot \(slot) does not exist in a \(max)-player session.", field: "SwapSlotsRequest.\(field)")
        }
        guard session.state == .lobby else {
            // A running match's rollback engines hold each player's slot: slots move before the start.
            throw ServiceError(.invalidState, "Slots can be swapped only before the match starts.", field: "SwapSlotsRequest.slot_a")
        }
        guard request.slotA != request.slotB else { return Outcome(reply: .sessionResponse(SessionResponse(session: session.info))) }
        let a = session.holder(of: request.slotA), b = session.holder(of: request.slotB)
        var changes: [StoreChange] = []
        if let a, let index = session.index(of: a.participantId) {
            // Free slot A first, so the unique slot index never sees two holders.
            var parked = a
            parked.slot = 0
            changes.append(.saveParticipant(sessionId: session.sessionId, parked))
            session.participants[index].slot = request.slotB
        }
        if let b, let index = session.index(of: b.participantId) {
            session.participants[index].slot = request.slotA
            changes.append(.saveParticipant(sessionId: session.sessionId, session.participants[index]))
        }
        if let a, let moved = session.participant(a.participantId) {
            changes.append(.saveParticipant(sessionId: session.sessionId, moved))
        }
        session.version += 1
        changes.insert(.updateSession(session), at: 0)
        try commit(session, changes, at: time)
        var outcome = Outcome(reply: .sessionResponse(SessionResponse(session: session.info)))
        outcome.events = [event(.slotsChanged, session, participant: request.participantId, at: time)]
        outcome.touched = [session.sessionId]
        outcome.detach = slotNotice(session)
        return outcome
    }

    /// A participant takes a free slot, or (slot 0) becomes a spectator; replied with a new ticket.
    public func chooseSlot(_ request: ChooseSlotRequest, at time: CoordinatorTime) throws(ServiceError) -> Outcome {
        var session = try activeSession(request.sessionId, field: "ChooseSlotRequest.session_id")
        let participant = try authenticate(session, request.participantId, request.participantToken,
                                           field: "ChooseSlotRequest.participant_token")
        let index = session.index(of: participant.participantId)!
        if request.slot == 0 {
            if participant.role != .spectator {
                guard session.settings.spectatorsAllowed else {
                    throw ServiceError(.spectatorsNotAllowed, "This session does not allow spectators.", field: "ChooseSlotRequest.slot")
                }
                guard session.spectators.count < Int(session.settings.maxSpectators) else {
                    throw ServiceError(.spectatorsFull, "All \(session.settings.maxSpectators) spectator places are taken.")
                }
            }
            session.participants[index].role = .spectator
            session.participants[index].slot = 0
        } else {
            guard request.slot <= session.settings.maxPlayers else {
                throw ServiceError(.badRequest, "Slot \(request.slot) does not exist in a \(session.settings.maxPlayers)-player session.",
                                   field: "ChooseSlotRequest.slot")
            }
            guard participant.mayPlay else {
                throw ServiceError(.permissionDenied, "Join again with the play password to take a controller slot.",
                                   field: "ChooseSlotRequest.slot")
            }
            if let holder = session.holder(of: request.slot), holder.participantId != participant.participantId {
                throw ServiceError(.slotTaken, "Slot \(request.slot) is taken.", field: "ChooseSlotRequest.slot")
            }
            session.participants[index].role = .player
            session.participants[index].slot = request.slot
        }
        var changes: [StoreChange] = []
        var outcome = Outcome(reply: .ack(Ack()))
        if session.participants[index] != participant {
            session.version += 1
            changes.append(.saveParticipant(sessionId: session.sessionId, session.participants[index]))
            outcome.events.append(event(.slotsChanged, session, participant: participant.participantId, at: time))
        }
        if try ensureRelay(&session, at: time) {
            session.version += 1
            outcome.events.append(event(.relayAssigned, session, at: time))
        }
        let ticket = try ticket(session, session.participants[index], at: time)
        changes.insert(.updateSession(session), at: 0)
        if let ticket { changes.append(.saveTicket(ticket)) }
        try commit(session, changes, at: time)
        outcome.reply = .sessionResponse(SessionResponse(session: session.info, ticket: ticket))
        outcome.touched = [session.sessionId]
        if session.state == .lobby, session.participants[index] != participant { outcome.detach = slotNotice(session) }
        return outcome
    }

    // MARK: Start, end, renew, get

    /// The host starts the match (LOBBY → RUNNING).
    public func start(_ request: StartSessionRequest, at time: CoordinatorTime) throws(ServiceError) -> Outcome {
        var session = try hostedSession(request.sessionId, request.participantId, request.participantToken,
                                        what: "start the session", request: "StartSessionRequest")
        guard session.state == .lobby else {
            throw ServiceError(.invalidState, "Session \(session.sessionId) is already running.")
        }
        var outcome = Outcome(reply: .ack(Ack()))
        if try ensureRelay(&session, at: time) { outcome.events.append(event(.relayAssigned, session, at: time)) }
        session.state = .running
        session.startedAtUnixMs = time.unixMs
        session.version += 1
        try commit(session, [.updateSession(session)], at: time)
        outcome.events.append(event(.started, session, participant: request.participantId, at: time))
        outcome.reply = .sessionResponse(SessionResponse(session: session.info))
        outcome.touched = [session.sessionId]
        return outcome
    }

    /// The host ends the session for everyone.
    public func end(_ request: EndSessionRequest, at time: CoordinatorTime) throws(ServiceError) -> Outcome {
        var session = try hostedSession(request.sessionId, request.participantId, request.participantToken,
                                        what: "end the session", request: "EndSessionRequest")
        return try end(&session, reason: request.reason.isEmpty ? "Ended by the host." : request.reason,
                       by: request.participantId, at: time)
    }

    func end(_ session: inout SessionRecord, reason: String, by participantId: String,
                     at time: CoordinatorTime, tellRelay: Bool = true) throws(ServiceError) -> Outcome {
        session.state = .ended
        session.endedAtUnixMs = time.unixMs
        session.version += 1
        try commit(session, [.updateSession(session)], at: time)
        var outcome = Outcome(reply: .sessionResponse(SessionResponse(session: session.info)))
        outcome.events = [event(.ended, session, participant: participantId, reason: reason, at: time)]
        outcome.touched = [session.sessionId]
        guard tellRelay else { return outcome }
        relays.scheduleClose(session.sessionId, on: session.relayId)
        if !session.relayEndpoint.isEmpty {
            outcome.detach = [RelayNotice(endpoint: session.relayEndpoint, body: .closeRelaySessionRequest(CloseRelaySessionRequest(
                sessionId: session.sessionId, reason: .sessionEnded, message: String(reason.prefix(256)))))]
        }
        return outcome
    }

    func notice(_ session: SessionRecord, disconnect participantId: String, reason: DetachReason,
                        message: String) -> [RelayNotice] {
        guard !session.relayEndpoint.isEmpty else { return [] }
        if toldToDisconnect.values.reduce(0, { $0 + $1.count }) < 10_000 {
            toldToDisconnect[session.sessionId, default: []].insert(participantId)
        }
        return [RelayNotice(endpoint: session.relayEndpoint, body: .disconnectPeerRequest(DisconnectPeerRequest(
            sessionId: session.sessionId, participantId: participantId, reason: reason, message: String(message.prefix(256)))))]
    }

}

extension String.UTF8View {
    /// True when `needle` occurs in these bytes.
    func elementsEqualContains(_ needle: [UInt8]) -> Bool {
        let haystack = Array(self)
        guard needle.count <= haystack.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start..<start + needle.count].elementsEqual(needle) {
            return true
        }
        return false
    }
}
