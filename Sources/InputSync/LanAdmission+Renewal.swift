import NetplayAuth
import NetplayService
import NetplayWire

// LanAdmission: renewing a seated participant's ticket, as the coordinator does for lobby rooms.
extension LanAdmission {
    /// A fresh ticket for a participant that shows its token and holds its place: its slot (the
    /// host may have moved it) or its spectator place, living ``ticketTtlMs``. Refused for a room
    /// the host ended (`SESSION_ENDED`), an unknown participant or a wrong token
    /// (`UNAUTHENTICATED`), a participant the host banned (`BANNED`) or removed, or whose place
    /// was freed (`PERMISSION_DENIED`), and a joiner that never attached (`INVALID_STATE`: its
    /// ticket was for attaching within the pending-join timeout, after which its place is freed).
    func renew(_ request: RenewTicketRequest) throws(ServiceError) -> Envelope.Body {
        guard request.sessionId == sessionId else {
            throw ServiceError(.notFound, "No such session on this LAN host.", field: "RenewTicketRequest.session_id")
        }
        let id = request.participantId
        let result = state.withLock { state -> Result<(role: Role, slot: UInt32, name: String), ServiceError> in
            if let ended = state.ended { return .failure(ServiceError(.sessionEnded, ended)) }
            guard let token = state.tokens[id], Sodium.secretsEqual(token, request.participantToken) else {
                return .failure(ServiceError(.unauthenticated, "Unknown participant or wrong participant token for this room.",
                                             field: "RenewTicketRequest.participant_token"))
            }
            if state.bans.participantIds.contains(id) {
                return .failure(ServiceError(.banned, "You were banned from this room by the host."))
            }
            if let (slot, holder) = state.players.first(where: { $0.value.participantId == id }) {
                guard state.attached.contains(id) else { return .failure(Self.attachFirst) }
                return .success((.player, UInt32(slot), holder.name))
            }
            if let name = state.spectators[id] {
                guard state.attached.contains(id) else { return .failure(Self.attachFirst) }
                return .success((.spectator, 0, name))
            }
            return .failure(ServiceError(.permissionDenied, "You no longer hold a place in this room (you left, or the host removed you)."))
        }
        let seat: (role: Role, slot: UInt32, name: String)
        switch result {
        case .success(let held): seat = held
        case .failure(let error): throw error
        }
        let ticket = try sign(participantId: id, role: seat.role, slot: seat.slot, name: seat.name, ttlMs: ticketTtlMs)
        return .sessionResponse(SessionResponse(session: info(), ticket: ticket))
    }

    private static var attachFirst: ServiceError {
        ServiceError(.invalidState, "Attach with the ticket the join gave you first; a place not taken up in time is freed.")
    }
}
