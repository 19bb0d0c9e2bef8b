import NetplayAuth
import NetplayService
import NetplayWire

// SessionCoordinator: what a host controls beyond kick and end: joins waiting for its decision
// (SessionSettings.approve_joiners) and the slot map pushed to the relay after a swap or move.
extension SessionCoordinator {
    // MARK: Joins waiting for the host

    /// A join to a room whose host approves joiners (checked up to its password): goes on when
    /// the host approved it, else throws AWAITING_HOST (filed, or still waiting) or
    /// REFUSED_BY_HOST (see ``HostApprovals/ask(_:source:nowMs:unixMs:)``). Nothing for other rooms.
    func awaitHost(_ request: JoinSessionRequest, source: String, session: SessionRecord, at time: CoordinatorTime) throws(ServiceError) {
        guard session.settings.approveJoiners else { return }
        var book = approvals[session.sessionId]
            ?? HostApprovals(askTimeoutMs: settings.pendingJoinAskTimeoutMs, maxWaitMs: settings.pendingJoinMaxWaitMs)
        defer { approvals[session.sessionId] = book.isEmpty ? nil : book }
        try book.ask(request, source: source, nowMs: time.monotonicMs, unixMs: time.unixMs)
    }

    /// The approved join with `key` went through in `sessionId`.
    func admittedAfterApproval(_ sessionId: String, key: String) {
        guard var book = approvals[sessionId] else { return }
        book.admitted(key: key)
        approvals[sessionId] = book.isEmpty ? nil : book
    }

    /// Whether an ask of `request` is about a join already filed (it costs no join budget).
    func isFiledJoin(_ request: JoinSessionRequest) -> Bool {
        approvals[request.sessionId]?.isFiled(request) == true
    }

    /// Host only: the joins waiting for its decision.
    public func pendingJoins(_ request: ListPendingJoinsRequest, at time: CoordinatorTime) throws(ServiceError) -> Outcome {
        let session = try hostedSession(request.sessionId, request.participantId, request.participantToken,
                                        what: "see the joins waiting for a decision", request: "ListPendingJoinsRequest")
        return Outcome(reply: .listPendingJoinsResponse(ListPendingJoinsResponse(pending: waitingJoins(session.sessionId, at: time))))
    }

    /// Host only: admits or refuses a waiting join; replied with the joins still waiting.
    public func decideJoin(_ request: DecideJoinRequest, at time: CoordinatorTime) throws(ServiceError) -> Outcome {
        let session = try hostedSession(request.sessionId, request.participantId, request.participantToken,
                                        what: "admit or refuse joiners", request: "DecideJoinRequest")
        guard var book = approvals[session.sessionId] else {
            throw ServiceError(.notFound, "No join '\(request.pendingId)' waits for a decision.", field: "DecideJoinRequest.pending_id")
        }
        defer { approvals[session.sessionId] = book.isEmpty ? nil : book }
        try book.decide(request.pendingId, approve: request.approve, reason: request.reason, nowMs: time.monotonicMs)
        return Outcome(reply: .listPendingJoinsResponse(ListPendingJoinsResponse(
            pending: book.waiting(nowMs: time.monotonicMs))))
    }

    private func waitingJoins(_ sessionId: String, at time: CoordinatorTime) -> [PendingJoin] {
        guard var book = approvals[sessionId] else { return [] }
        defer { approvals[sessionId] = book.isEmpty ? nil : book }
        return book.waiting(nowMs: time.monotonicMs)
    }

    /// Forgets the waiting joins of sessions that ended, and joins their joiners stopped asking about.
    func expireWaitingJoins(at time: CoordinatorTime) {
        for (sessionId, var book) in approvals {
            book.expire(nowMs: time.monotonicMs)
            approvals[sessionId] = book.isEmpty || sessions[sessionId]?.isActive != true ? nil : book
        }
    }

    // MARK: Slots at the relay

    /// Tells the session's relay every player's slot and the host, after the slots changed
    /// (swap, a participant moving): the relay moves attached players at once, and a ticket
    /// still naming an old slot attaches in the new one. Nothing for a session without a relay.
    func slotNotice(_ session: SessionRecord) -> [RelayNotice] {
        guard !session.relayEndpoint.isEmpty else { return [] }
        let assignments = session.participants.filter { $0.role == .player && $0.slot > 0 }
            .map { SlotAssignment(participantId: $0.participantId, slot: $0.slot) }
        return [RelayNotice(endpoint: session.relayEndpoint, body: .assignSlotsRequest(AssignSlotsRequest(
            sessionId: session.sessionId, assignments: Array(assignments.prefix(8)), hostParticipantId: session.hostParticipantId)))]
    }
}
