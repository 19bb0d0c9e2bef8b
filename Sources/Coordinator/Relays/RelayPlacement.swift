import NetplayService
import NetplayWire

// SessionCoordinator: where a session runs. Players' measured round trips to relays, the move
// of a lobby to a relay nearer its players, and failover when a relay is gone.
extension SessionCoordinator {
    /// Records the round trips `participantId` measured (a player's; at most 32 relays, one
    /// figure each, zero and unnamed ones skipped). Nothing reported changes nothing.
    func noteRtts(_ rtts: [RelayRtt], session sessionId: String, participant participantId: String) {
        var measured: [String: UInt32] = [:]
        for rtt in rtts.prefix(32) where !rtt.relayId.isEmpty && rtt.rttUs > 0 { measured[rtt.relayId] = rtt.rttUs }
        guard !measured.isEmpty else { return }
        measuredRtts[sessionId, default: [:]][participantId] = measured
    }

    /// Records the round trips a copy of a create or join measured (it waited for the first's
    /// answer, ``RequestCopies``, and a client's retry measures its relays again): when `answer`
    /// seated its sender as the host or a player, the copy's figures are theirs, the newest.
    func noteCopyRtts(_ copy: Envelope.Body, answer: Envelope.Body) {
        switch (copy, answer) {
        case (.createSessionRequest(let create), .createSessionResponse(let created)):
            noteRtts(create.relayRtts, session: created.session.sessionId, participant: created.participantId)
        case (.joinSessionRequest(let join), .joinSessionResponse(let joined)) where joined.slot != 0:
            noteRtts(join.relayRtts, session: joined.session.sessionId, participant: joined.participantId)
        default:
            break
        }
    }

    /// The measurements of the session's players (one map a player who reported any).
    func playerRtts(_ session: SessionRecord) -> [[String: UInt32]] {
        guard let bySession = measuredRtts[session.sessionId] else { return [] }
        return session.participants.filter { $0.role == .player }.compactMap { bySession[$0.participantId] }
    }

    /// While `session` is in the lobby on a live relay: moves it to the relay nearest its players
    /// when that one's worst round trip beats the current relay's by more than the tolerance.
    /// Returns the relay it left, or nil. Once the move is stored, ``closeMoved(_:from:)`` tells
    /// the old relay (its attached peers are told SESSION_MOVED, ask for a fresh ticket and
    /// attach to the new one).
    func moveNearer(_ session: inout SessionRecord, at time: CoordinatorTime) -> RelayInfo? {
        guard session.state == .lobby, session.settings.transport != .lan, !session.relayId.isEmpty,
              relays.isLive(session.relayId, nowMs: time.monotonicMs) else { return nil }
        let rtts = playerRtts(session)
        guard !rtts.isEmpty,
              let nearest = relays.pick(region: session.settings.region, rtts: rtts, nowMs: time.monotonicMs),
              nearest.relayId != session.relayId else { return nil }
        let current = RelayRegistry.worstRtt(to: session.relayId, among: rtts)
        let better = RelayRegistry.worstRtt(to: nearest.relayId, among: rtts)
        guard better < current, current - better > UInt64(relays.choice.rttToleranceUs) else { return nil }
        let old = RelayInfo(relayId: session.relayId, endpoint: session.relayEndpoint)
        session.relayId = nearest.relayId
        session.relayEndpoint = nearest.endpoint
        return old
    }

    /// After a stored move of `session` away from `old`: the notice that closes it there at once
    /// (the old relay's next refresh reply repeats it, should the notice not arrive).
    func closeMoved(_ session: SessionRecord, from old: RelayInfo) -> [RelayNotice] {
        relays.scheduleClose(session.sessionId, on: old.relayId, moved: true)
        guard !old.endpoint.isEmpty else { return [] }
        return [RelayNotice(endpoint: old.endpoint, body: .closeRelaySessionRequest(CloseRelaySessionRequest(
            sessionId: session.sessionId, reason: .sessionMoved, message: "moved to relay \(session.relayId), nearer to its players")))]
    }

    /// Failover: every active session of `relayId` (dropped: it stopped refreshing) moves to the
    /// live relay nearest its players. Its peers, whose relay went silent, ask the coordinator
    /// for a fresh ticket, attach there and rebuild the match from what they hold. A session no
    /// relay can take stays until one can (its peers' renewals answer NO_RELAY meanwhile).
    func failOver(from relayId: String, at time: CoordinatorTime) -> Outcome {
        var outcome = Outcome(reply: .ack(Ack()))
        for sessionId in sessionIds(on: relayId) {
            guard var session = sessions[sessionId], (try? ensureRelay(&session, at: time)) == true else { continue }
            session.version += 1
            guard (try? commit(session, [.updateSession(session)], at: time)) != nil else { continue }
            outcome.events.append(event(.relayAssigned, session, reason: "failover: relay \(relayId) stopped answering", at: time))
            outcome.touched.append(sessionId)
        }
        return outcome
    }

    /// Forgets the measurements of sessions that ended (or never got stored), and of
    /// participants no longer in their session (each join is a new participant: a session that
    /// lives long would otherwise keep every figure of everyone who ever joined it).
    func pruneMeasuredRtts() {
        for (sessionId, byParticipant) in measuredRtts {
            guard let session = sessions[sessionId], session.isActive else {
                measuredRtts[sessionId] = nil
                continue
            }
            let present = byParticipant.filter { session.participant($0.key) != nil }
            if present.count != byParticipant.count { measuredRtts[sessionId] = present }
        }
    }

    /// Forgets what `participantId` measured: it left the session.
    func forgetRtts(of participantId: String, in sessionId: String) {
        measuredRtts[sessionId]?[participantId] = nil
    }
}
