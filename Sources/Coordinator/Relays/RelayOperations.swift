import NetplayService
import NetplayWire

extension SessionCoordinator {
    /// A relay joins (or rejoins) the registry. Sessions it claims that this coordinator has
    /// ended or moved elsewhere are queued for closing in its next refresh reply.
    public func registerRelay(_ request: RegisterRelayRequest, at time: CoordinatorTime) throws(ServiceError) -> Outcome {
        let info = request.relay
        guard !info.endpoint.isEmpty else {
            throw ServiceError(.badRequest, "A relay needs its peer endpoint.", field: "RelayInfo.endpoint")
        }
        // Stored first: a relay whose registration failed is not offered to sessions.
        let stored = relays.registration(of: info, nowUnixMs: time.unixMs)
        do { try store.apply([.saveRelay(stored)]) } catch {
            throw ServiceError(.internal, "The coordinator could not store the relay: \(error).")
        }
        relays.register(info, nowMs: time.monotonicMs, nowUnixMs: time.unixMs)
        for sessionId in request.sessionIds {
            let session = sessions[sessionId]
            if session == nil || !session!.isActive || session!.relayId != info.relayId {
                relays.scheduleClose(sessionId, on: info.relayId, moved: session?.isActive == true)
            }
        }
        var outcome = Outcome(reply: .registerRelayResponse(RegisterRelayResponse(
            relayId: info.relayId, refreshIntervalMs: relays.refreshIntervalMs, ttlMs: relays.ttlMs)))
        outcome.relayEvents = [relayEvent(.registered, stored, sessions: sessionIds(on: info.relayId), at: time)]
        return outcome
    }

    /// A relay's keep-alive with its load. NOT_FOUND when it was dropped (register again).
    public func refreshRelay(_ request: RefreshRelayRequest, at time: CoordinatorTime) throws(ServiceError) -> Outcome {
        let (info, drainingChanged) = try relays.refresh(request, nowMs: time.monotonicMs, nowUnixMs: time.unixMs)
        let attachChanged = notePresence(on: request.relayId, attached: Dictionary(
            request.presence.map { ($0.sessionId, Set($0.connectedParticipantIds)) }, uniquingKeysWith: { first, _ in first }), nowMs: time.monotonicMs)
        var outcome = applyRelayFacts(request, at: time)
        outcome.touched += attachChanged  // the lobby room shows who is connected in each slot
        outcome.detach += strayAttachments(request.presence, on: request.relayId)
        let closes = relays.takeCloses(for: request.relayId)
        outcome.reply = .refreshRelayResponse(RefreshRelayResponse(closeSessionIds: closes.close, movedSessionIds: closes.moved))
        // Who is attached shows in the session's events too, not only in requests for it.
        outcome.events += attachChanged.compactMap { id in
            sessions[id].flatMap { $0.isActive ? event(.slotsChanged, $0, reason: "presence", at: time) : nil }
        }
        outcome.retroArchRooms = retroArch.update(relayId: request.relayId, region: info.region, sessions: request.retroarchSessions)
        if drainingChanged {
            try? store.apply([.saveRelay(info)])
            if info.draining { outcome.relayEvents = [relayEvent(.draining, info, sessions: sessionIds(on: info.relayId), at: time)] }
        }
        return outcome
    }

    /// A kick or a leave reaches the relay as one best-effort `DisconnectPeerRequest`; lost (the
    /// relay restarting, a dropped connection), the participant stayed attached for good and its
    /// ticket kept admitting it. So every refresh that shows attached someone the relay was told
    /// to disconnect (``toldToDisconnect``) tells it again (KICKED for a banned participant,
    /// LEAVING otherwise: either revokes its tickets there), 256 at most per refresh. A player the
    /// relay timed out is not one of them: back, it plays on.
    func strayAttachments(_ presence: [SessionPresence], on relayId: String) -> [RelayNotice] {
        var notices: [RelayNotice] = []
        for entry in presence {
            guard let told = toldToDisconnect[entry.sessionId] else { continue }
            guard let session = sessions[entry.sessionId], session.isActive, session.relayId == relayId else {
                toldToDisconnect[entry.sessionId] = nil
                continue
            }
            let attached = Set(entry.connectedParticipantIds)
            let still = told.intersection(attached)
            toldToDisconnect[entry.sessionId] = still.isEmpty ? nil : still
            for id in still.sorted() where session.index(of: id) == nil && notices.count < 256 {
                let banned = session.bans.participantIds.contains(id)
                notices += notice(session, disconnect: id, reason: banned ? .kicked : .leaving,
                                  message: banned ? "banned by the host" : "no longer in this session")
            }
        }
        // A session of this relay it shows nobody attached in has let them all go.
        let shown = Set(presence.map(\.sessionId))
        for id in Array(toldToDisconnect.keys) where !shown.contains(id) && sessions[id].map({ !$0.isActive || $0.relayId == relayId }) != false {
            toldToDisconnect[id] = nil
        }
        return notices
    }

    /// The registry (stale relays too with `include_stale`, until the next sweep drops them).
    public func listRelays(_ request: ListRelaysRequest, at time: CoordinatorTime) -> Outcome {
        let entries = relays.relays.filter { request.includeStale || relays.isLive($0.info.relayId, nowMs: time.monotonicMs) }
        return Outcome(reply: .listRelaysResponse(ListRelaysResponse(relays: entries.prefix(256).map(\.info))))
    }

    /// The RetroArch sessions relays pipe (of one relay with `relay_id`).
    public func listRetroArchSessions(_ request: ListRetroArchSessionsRequest) -> Outcome {
        let all = retroArch.list(relayId: request.relayId)
        return Outcome(reply: .listRetroarchSessionsResponse(ListRetroArchSessionsResponse(
            sessions: Array(all.prefix(1_000)), truncated: all.count > 1_000)))
    }

    /// Active sessions assigned to `relayId`.
    public func sessionIds(on relayId: String) -> [String] {
        orderedIds.filter { sessions[$0].map { $0.isActive && $0.relayId == relayId } ?? false }
    }

    /// Periodic upkeep: drops stale relays (their sessions fail over to the live relay nearest
    /// their players, ``failOver(from:at:)``);
    /// with `housekeeping`, also deletes sessions ended longer ago than the retention and forgets
    /// expired tickets (both scan more, so the service does them less often).
    public func maintain(at time: CoordinatorTime, housekeeping: Bool = false) -> Outcome {
        var outcome = Outcome(reply: .ack(Ack()))
        for dropped in relays.sweep(nowMs: time.monotonicMs) {
            try? store.apply([.deleteRelay(dropped.relayId)])
            notePresence(on: dropped.relayId, attached: [:], nowMs: time.monotonicMs)  // nobody can be attached to a relay that is gone
            outcome.relayEvents.append(relayEvent(.dropped, dropped, sessions: sessionIds(on: dropped.relayId), at: time))
            for room in retroArch.drop(relayId: dropped.relayId) { outcome.retroArchRooms[room] = .some(nil) }
            let moved = failOver(from: dropped.relayId, at: time)
            outcome.events += moved.events
            outcome.touched += moved.touched
        }
        guard housekeeping else { return outcome }
        let cutoff = time.unixMs > settings.endedRetentionMs ? time.unixMs - settings.endedRetentionMs : 0
        let expired = sessions.values.filter { $0.state == .ended && $0.endedAtUnixMs < cutoff }.map(\.sessionId)
        for sessionId in expired { try? forget(sessionId) }
        pruneMeasuredRtts()
        try? store.apply([.deleteTickets(expiredBeforeUnixMs: time.unixMs)])
        return outcome
    }
}
