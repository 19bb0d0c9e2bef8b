import NetplayAuth
import NetplayService
import NetplayWire

/// What relays report about the sessions they serve (matches started, participants gone for good,
/// sessions they ended), applied to the coordinator's state.
extension SessionCoordinator {
    /// Applies the lifecycle facts in a relay's refresh (docs/coordinator.md, "Lifecycle"), in
    /// the order they can happen: matches started (a lobby session turns running), participants
    /// gone for good (their place is freed; the host's departure ends the session, as its leave
    /// does), sessions the relay ended (ended with its reason). Each applies once: a fact about
    /// a session already in that state changes nothing, so a relay may resend it. Facts about a
    /// session not assigned to `relayId` (another relay's, moved, unknown) are ignored. A fact
    /// whose write fails is skipped (the relay's next report, or the lobby expiry, catches up).
    public func applyRelayFacts(_ request: RefreshRelayRequest, at time: CoordinatorTime) -> Outcome {
        var outcome = Outcome(reply: .ack(Ack()))
        func assigned(_ sessionId: String) -> SessionRecord? {
            guard let session = sessions[sessionId], session.isActive, session.relayId == request.relayId else { return nil }
            return session
        }
        func merge(_ other: Outcome) {
            outcome.events += other.events
            outcome.touched += other.touched
            outcome.detach += other.detach
        }
        for sessionId in request.startedSessionIds {
            guard var session = assigned(sessionId), session.state == .lobby else { continue }
            session.state = .running
            session.startedAtUnixMs = time.unixMs
            session.version += 1
            guard (try? commit(session, [.updateSession(session)], at: time)) != nil else { continue }
            outcome.events.append(event(.started, session, reason: "the match started on relay \(request.relayId)", at: time))
            outcome.touched.append(sessionId)
        }
        for gone in request.participantsGone {
            guard var session = assigned(gone.sessionId), let participant = session.participant(gone.participantId) else { continue }
            let why = gone.timedOut ? "did not come back within the relay's disconnect grace" : "left the match"
            if participant.isHost {
                if let ended = try? end(&session, reason: gone.timedOut ? "The host \(why)." : "The host left.",
                                        by: participant.participantId, at: time) { merge(ended) }
                continue
            }
            session.participants.removeAll { $0.participantId == participant.participantId }
            session.version += 1
            guard (try? commit(session, [.updateSession(session), .deleteParticipant(sessionId: session.sessionId,
                                                                                     participantId: participant.participantId)],
                               at: time)) != nil else { continue }
            forgetRtts(of: participant.participantId, in: session.sessionId)
            outcome.events.append(event(.left, session, participant: participant.participantId, reason: why, at: time))
            outcome.touched.append(session.sessionId)
        }
        for ended in request.sessionsEnded {
            guard var session = assigned(ended.sessionId) else { continue }
            let reason = "The relay ended the session: " + (ended.reason.isEmpty ? "its match is over" : ended.reason) + "."
            // The relay no longer serves it: nothing to tell it back.
            if let result = try? end(&session, reason: reason, by: "", at: time, tellRelay: false) { merge(result) }
        }
        return outcome
    }

    /// Ends every session with no activity — no change, nobody attached, no ticket renewed — for
    /// its state's idle time: `settings.lobbyIdleMs` in the lobby, `settings.runningIdleMs`
    /// once started (a relay that lost a session never reports it over, and a LAN session's
    /// players renew their tickets while they play). Its room is withdrawn, its relay told, and
    /// `sessions.ended` says why.
    public func expireIdleSessions(at time: CoordinatorTime) -> Outcome {
        var outcome = Outcome(reply: .ack(Ack()))
        let shortest: UInt64 = [settings.lobbyIdleMs, settings.runningIdleMs].filter { $0 > 0 }.min() ?? 0
        guard shortest > 0, time.monotonicMs > shortest else { return outcome }
        let stale = lastActivityMs.filter { $0.value <= time.monotonicMs - shortest }.map(\.key).sorted()
        for sessionId in stale {
            guard var session = sessions[sessionId], let lastMs = lastActivityMs[sessionId] else { continue }
            let idle: UInt64, what: String
            switch session.state {
            case .lobby: (idle, what) = (settings.lobbyIdleMs, "The lobby expired")
            case .running: (idle, what) = (settings.runningIdleMs, "The match expired: nobody played")
            default: continue
            }
            guard idle > 0, time.monotonicMs - lastMs >= idle else { continue }
            guard let ended = try? end(&session, reason: "\(what): nothing happened in it for \(idle / 1000) s.",
                                       by: "", at: time) else { continue }
            outcome.events += ended.events
            outcome.touched += ended.touched
            outcome.detach += ended.detach
        }
        return outcome
    }

    /// A fresh ticket for a participant (reconnect, expiry, relay reassigned).
    public func renew(_ request: RenewTicketRequest, at time: CoordinatorTime) throws(ServiceError) -> Outcome {
        var session = try activeSession(request.sessionId, field: "RenewTicketRequest.session_id")
        if session.bans.participantIds.contains(request.participantId) {
            throw ServiceError(.banned, "You were banned from this session by the host.", field: "RenewTicketRequest.participant_id")
        }
        let participant = try authenticate(session, request.participantId, request.participantToken,
                                           field: "RenewTicketRequest.participant_token")
        var outcome = Outcome(reply: .ack(Ack()))
        var changes: [StoreChange] = []
        if try ensureRelay(&session, at: time) {
            session.version += 1
            changes.append(.updateSession(session))
            outcome.events.append(event(.relayAssigned, session, at: time))
            outcome.touched = [session.sessionId]
        }
        let ticket = try ticket(session, participant, at: time)
        if let ticket { changes.append(.saveTicket(ticket)) }
        try commit(session, changes, at: time)
        outcome.reply = .sessionResponse(SessionResponse(session: session.info, ticket: ticket))
        return outcome
    }

    /// One session.
    public func get(_ request: GetSessionRequest) throws(ServiceError) -> Outcome {
        Outcome(reply: .sessionResponse(SessionResponse(session: try session(request.sessionId, field: "GetSessionRequest.session_id").info)))
    }

    /// A page of sessions in id order.
    public func list(_ request: ListSessionsRequest) throws(ServiceError) -> Outcome {
        let after = try PageToken.decode(request.pageToken, field: "ListSessionsRequest.page_token")
        let size = request.pageSize == 0 ? 50 : Int(request.pageSize)
        let needle = Array(request.gameName.lowercased().utf8)
        var page: [SessionInfo] = []
        var total = 0
        var more = false
        for id in orderedIds {
            guard let session = sessions[id] else { continue }
            if request.state == .unspecified ? !session.isActive : session.state != request.state { continue }
            if session.settings.unlisted && !request.includeUnlisted { continue }
            if !request.relayId.isEmpty && session.relayId != request.relayId { continue }
            if !needle.isEmpty && !session.settings.content.gameName.lowercased().utf8.elementsEqualContains(needle) { continue }
            total += 1
            if after.isEmpty || id > after {
                if page.count < size { page.append(session.info) } else { more = true }
            }
        }
        return Outcome(reply: .listSessionsResponse(ListSessionsResponse(
            sessions: page, nextPageToken: more ? PageToken.after(page.last!.sessionId) : "", totalMatching: UInt32(clamping: total))))
    }
}
