import NetplayAuth
import NetplayService
import NetplayWire

// LanAdmission: the LAN host's controls over its room (NetplayKit's HostControls): the places
// change here at once, and what the relay must do (detach, move slots, close) is queued for the
// relay's reactor, which runs it on its next tick (``takeHostCommands()``).
extension LanAdmission {
    /// The joins waiting for the host's decision, oldest first.
    public func pendingJoins() -> [PendingJoin] {
        let now = clock()
        return state.withLock { $0.approvals.waiting(nowMs: now) }
    }

    /// The host admits or refuses the waiting join `pendingId`.
    public func decide(_ pendingId: String, approve: Bool, reason: String) throws(ServiceError) {
        let now = clock()
        let result = state.withLock { state -> Result<Void, ServiceError> in
            do throws(ServiceError) {
                try state.approvals.decide(pendingId, approve: approve, reason: reason, nowMs: now)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        if case .failure(let error) = result { throw error }
    }

    /// The host removes `participantId` (a player or spectator; never itself): its place is
    /// freed, the relay detaches it (KICKED) and refuses its ticket; with `ban`, its name and
    /// address are refused for the room's life.
    public func kick(participantId: String, ban: Bool, reason: String) throws(ServiceError) {
        guard !participantId.hasPrefix(JoinTicket.hostParticipantIdPrefix) else {
            throw ServiceError(.invalidState, "The host cannot kick itself; end the room instead.")
        }
        let found = state.withLock { state -> Bool in
            let name = state.players.first { $0.value.participantId == participantId }?.value.name
                ?? state.spectators[participantId]
            guard let name else { return false }
            for (slot, holder) in state.players where holder.participantId == participantId { state.players[slot] = nil }
            state.spectators[participantId] = nil
            if ban { state.bans.ban(name: name, source: state.sources[participantId] ?? "", participantId: participantId) }
            let message = reason.isEmpty ? (ban ? "banned by the host" : "kicked by the host") : String(reason.prefix(256))
            state.commands.append(.disconnectPeerRequest(DisconnectPeerRequest(sessionId: sessionId, participantId: participantId,
                                                                               reason: .kicked, message: message)))
            return true
        }
        guard found else { throw ServiceError(.notFound, "No participant '\(participantId)' in this room.") }
    }

    /// The host exchanges slots `a` and `b` (either may be free) before the match starts; the
    /// relay moves the players and tells them.
    public func swap(_ a: UInt32, _ b: UInt32) throws(ServiceError) {
        let max = settings.maxPlayers
        guard (1 ... max).contains(a), (1 ... max).contains(b) else {
            throw ServiceError(.badRequest, "Slots are 1 to \(max) in this room.")
        }
        let result = state.withLock { state -> ServiceError? in
            guard !state.started else { return ServiceError(.invalidState, "Slots can be swapped only before the match starts.") }
            guard a != b else { return nil }
            let holderA = state.players[Int(a)], holderB = state.players[Int(b)]
            state.players[Int(a)] = holderB
            state.players[Int(b)] = holderA
            let assignments = state.players.map { SlotAssignment(participantId: $0.value.participantId, slot: UInt32($0.key)) }
            let host = state.players.values.first { $0.participantId.hasPrefix(JoinTicket.hostParticipantIdPrefix) }?.participantId ?? ""
            state.commands.append(.assignSlotsRequest(AssignSlotsRequest(sessionId: sessionId, assignments: assignments,
                                                                         hostParticipantId: host)))
            return nil
        }
        if let result { throw result }
    }

    /// The host ends the room: the relay closes its session (every peer is told SESSION_ENDED)
    /// and joins are refused from now on.
    public func end(reason: String) {
        state.withLock { state in
            state.ended = "The host ended this room."
            state.commands.append(.closeRelaySessionRequest(CloseRelaySessionRequest(
                sessionId: sessionId, reason: .sessionEnded, message: reason.isEmpty ? "Ended by the host." : String(reason.prefix(256)))))
        }
    }

    /// The host's commands queued since the last call, oldest first (the relay runs them).
    public func takeHostCommands() -> [Envelope.Body] {
        state.withLock { state in
            defer { state.commands.removeAll() }
            return state.commands
        }
    }
}
