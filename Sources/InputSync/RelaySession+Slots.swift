import NetplayAuth
import NetplayService
import NetplayWire

// RelaySession: slots assigned after the tickets were issued (the host swapped or moved
// players before the start), and who acts as the host.
extension RelaySession {
    /// The slot a player `ticket` attaches in: the one assigned since, or the ticket's.
    func slot(of ticket: JoinTicket) -> Int {
        let assigned = assignedSlots[ticket.participantId] ?? Int(ticket.slot)
        return (1 ... params.maxPlayers).contains(UInt32(assigned)) ? assigned : Int(ticket.slot)
    }

    /// Seats `ticket`'s participant in 0-based `slot` on the record, or refuses a superseded
    /// ticket (TICKET_EXPIRED, so an honest client renews it): one issued before the slot was
    /// given to another participant, by a newer ticket or by the coordinator's slot map. A
    /// player who moved to another slot, or to spectating, keeps its old ticket until it
    /// expires; without this it could take its old slot back from whoever has it now.
    func claimSlot(_ slot: Int, for ticket: JoinTicket) throws(ServiceError) {
        let claim = slotClaims[slot]
        if let claim, claim.participantId != ticket.participantId, claim.sinceUnixMs > ticket.issuedAtUnixMs {
            throw ServiceError(.ticketExpired, "Slot \(slot + 1) was given to another participant after this ticket was issued; ask the coordinator for a new ticket.",
                               field: "AttachRequest.ticket")
        }
        let since = claim?.participantId == ticket.participantId ? max(claim!.sinceUnixMs, ticket.issuedAtUnixMs) : ticket.issuedAtUnixMs
        slotClaims[slot] = (ticket.participantId, since)
    }

    /// Whether `participant` acts as the session's host (starts the match, asks to start or
    /// restart from its state, wins the vote in such a match): the host the coordinator named;
    /// before it named one, the participant whose ticket admits the host. Nobody else: the player
    /// in slot 1 once stood in while no host had attached, so a joiner seated in slot 1 (the host
    /// having taken another) could start the match, or have it start from its own state, before
    /// the host came. Every ticket issuer (the coordinator, a LAN host) marks its host.
    func actsAsHost(_ participant: RelayPeer) -> Bool {
        if let hostParticipantId { return participant.participantId == hostParticipantId }
        return participant.isHost
    }

    /// Takes the coordinator's (or LAN host's) slot map: every listed player moves to its slot
    /// now, told by a `SLOT_CHANGED` peer event; an unlisted player in a slot given to another is
    /// removed (replaced); later attaches follow the map, whatever their tickets say, and a
    /// ticket issued before the map for a slot it gives to another participant, or leaves free,
    /// is superseded (``claimSlot(_:for:)``). Refused (INVALID_STATE) once the match runs: the
    /// players' rollback engines hold their slots. `wallNowMs`: when the map counts from on the
    /// tickets' clock (the relay's wall clock less the tickets' clock-skew allowance, so a
    /// relay clock ahead of the coordinator's does not void tickets issued just after).
    func assign(_ request: AssignSlotsRequest, routes: PeerRoutes, now: UInt64,
                wallNowMs: UInt64 = UnixTime.nowMs()) throws(ServiceError) {
        guard !running else {
            throw ServiceError(.invalidState, "Slots can be assigned only before the match starts.")
        }
        var map: [String: Int] = [:]
        for assignment in request.assignments {
            guard (1 ... params.maxPlayers).contains(assignment.slot), !assignment.participantId.isEmpty else {
                throw ServiceError(.badRequest, "Slot \(assignment.slot) does not exist in a \(params.maxPlayers)-player session.",
                                   field: "AssignSlotsRequest.assignments")
            }
            guard !map.values.contains(Int(assignment.slot)) else {
                throw ServiceError(.badRequest, "Slot \(assignment.slot) is assigned twice.", field: "AssignSlotsRequest.assignments")
            }
            map[assignment.participantId] = Int(assignment.slot)
        }
        let current = players.compactMap { $0 }
        let taken = Set(map.values)
        for player in current where map[player.participantId] == nil && taken.contains(player.slot) {
            routes.forget(player)
            remove(player, reason: .replaced, detail: "slot \(player.slot) was given to another participant", now: now)
        }
        var next = [RelayPeer?](repeating: nil, count: players.count)
        var moved: [RelayPeer] = []
        for player in players.compactMap({ $0 }) {
            let slot = map[player.participantId] ?? player.slot
            if slot != player.slot { moved.append(player) }
            player.slot = slot
            next[slot - 1] = player
        }
        players = next
        assignedSlots = map
        for slot in 0 ..< params.maxPlayers {
            let owner = map.first { $0.value == Int(slot) + 1 }?.key ?? ""
            slotClaims[Int(slot)] = (owner, wallNowMs)
        }
        if !request.hostParticipantId.isEmpty { hostParticipantId = request.hostParticipantId }
        for player in moved {
            peerEvent(.slotChanged, player, frame: 0, detail: "moved to slot \(player.slot) by the host", now: now)
        }
    }
}
