import Foundation
import NetplayAuth
import NetplayService
import NetplayWire

// RelaySession: admitting an attach, placing a participant's cursor, and starting the match.
extension RelaySession {
    // MARK: - Attach and start

    /// The content and game options of the first attach that names them.
    func adoptContent(of request: AttachRequest) {
        guard content == nil, let content = request.content else { return }
        self.content = content
        gameOptions = request.gameOptions
    }

    /// Admits the participant `ticket` (verified, not revoked, naming this session) names,
    /// attaching from `peer`: the same participant returning (a player in its slot, a spectator
    /// in the list) takes its place again from the new connection, the old one told it was
    /// replaced; a new player takes its slot (from whoever held it), a new spectator a free
    /// spectator place. `routes` learns the connection (and forgets the replaced ones). Then
    /// the participant's cursor is placed, the match starts if it can, and the reply is built.
    func admit(_ ticket: JoinTicket, request: AttachRequest, claim: ResumeClaim, from peer: PeerAddress, routes: PeerRoutes,
               now: UInt64) throws(ServiceError) -> AttachResponse {
        guard ticket.role == .player || ticket.role == .spectator else {
            throw ServiceError(.ticketInvalid, "The ticket names no role.")
        }
        let participant: RelayPeer
        let event: PeerEventKind
        if let returning = place(of: ticket) {
            participant = returning
            if let old = returning.address, old != peer {
                routes.remove(old)
                transport.send(.detach(Detach(reason: .replaced, message: "Attached again from another connection.")), to: old)
            }
            event = .reconnected
        } else {
            participant = try seat(ticket, from: peer, routes: routes, now: now)
            event = .joined
        }
        if participant.isPlayer, running, slotModes[participant.slot - 1] != .active {
            slotModes[participant.slot - 1] = .active
        }
        // A fresh primary attach (reconnect, resume) ends the paths of the old connection.
        routes.dropExtraPaths(of: participant)
        participant.pacesTransfers = SyncProtocol.version(request.protocolVersion) >= SyncProtocol.pacedStateTransfers
        // Nothing is queued at the relay for a new connection (on the same one, what it left
        // unread still is): one more try there, as a peer leaving and joining again would get.
        // A peer refused a state for its protocol gets one only once it paces its transfers.
        if participant.refusedUnpaced, participant.pacesTransfers {
            participant.refusedUnpaced = false
            participant.stalledTransfers = 0
            participant.stalledOn = nil
        } else if !participant.refusedUnpaced, let stalledOn = participant.stalledOn, stalledOn != peer {
            participant.stalledTransfers = min(participant.stalledTransfers, Self.loadRetries)
            participant.stalledOn = nil
        }
        participant.address = peer
        participant.lastHeardMs = now
        participant.disconnectedSinceMs = nil
        participant.awaitingTransfer = nil
        participant.deferredSinceMs = nil
        participant.name = ticket.name
        participant.ticketExpiresAtUnixMs = max(participant.ticketExpiresAtUnixMs, ticket.expiresAtUnixMs)
        participant.clientVersion = String(request.clientVersion.prefix(64))
        participant.announcedPaths = min(max(Int(request.paths), 1), configuration.maxPathsPerParticipant)
        routes.set(peer, session: self, participant: participant)
        noteStartState(of: request, from: participant)
        if !running, participant.startState != .loaded { participant.startState = .missing }

        let holds = request.resume ? Int(request.confirmedFrames) : 0
        participant.resumedHolding = holds
        participant.resumedProven = claim.proven
        participant.resumedHistoryFrom = request.resume ? min(Int(request.historyFromFrame), holds) : nil
        if request.resume && participant.firstResumedAtMs == 0 { participant.firstResumedAtMs = now }
        endRecoveryIfDue(now: now)
        if recovering {
            raiseRecoveryFrameLimit(provenClaim: claim.proven, spectator: participant.role == .spectator)
            framesProvenFinal = max(framesProvenFinal, min(claim.certified ?? 0, recoveryFrameCeiling))
        }
        let needsTransfer = placeCursor(participant, holds: holds)
        peerEvent(event, participant, frame: timeline.confirmed,
                  detail: event == .reconnected ? "back" : "attached as \(participant.role == .player ? "player \(participant.slot)" : "spectator")",
                  now: now)
        startIfReady(now: now)
        let response = welcome(participant, transferFollows: needsTransfer ? 0 : nil)
        if !running || !needsTransfer { deliverConfirmed(now: now) }
        return response
    }

    /// The participant `ticket` names, if it already holds its place here (a player its slot, a
    /// spectator its place among the spectators).
    private func place(of ticket: JoinTicket) -> RelayPeer? {
        if ticket.role == .player {
            guard let holder = players[slot(of: ticket) - 1], holder.participantId == ticket.participantId else { return nil }
            return holder
        }
        return spectators.first { $0.participantId == ticket.participantId }
    }

    /// A new participant for `ticket`, in its place: a player in its slot (whoever held it is
    /// removed, replaced), a spectator in a free spectator place (refused when there is none).
    private func seat(_ ticket: JoinTicket, from peer: PeerAddress, routes: PeerRoutes,
                      now: UInt64) throws(ServiceError) -> RelayPeer {
        if ticket.role == .player {
            let index = slot(of: ticket) - 1
            try claimSlot(index, for: ticket)
            // A state another participant was to load in this slot is not this one's to wait for.
            if loadsAwaited.removeValue(forKey: index) != nil, resyncedAt[index] == .max { resyncedAt[index] = 0 }
            if let holder = players[index] {
                routes.forget(holder)
                remove(holder, reason: .replaced, detail: "slot \(ticket.slot) was given to another participant", now: now)
            }
            let player = RelayPeer(participantId: ticket.participantId, name: ticket.name, role: .player,
                                   slot: index + 1, address: peer, now: now,
                                   ticketExpiresAtUnixMs: ticket.expiresAtUnixMs, isHost: ticket.admitsHost)
            players[index] = player
            return player
        }
        // The ticket's places (the coordinator's word for this participant).
        let maxSpectators = ticket.params.maxSpectators
        guard maxSpectators > 0 else {
            throw ServiceError(.spectatorsNotAllowed, "This session allows no spectators.")
        }
        guard spectators.count < Int(maxSpectators) else {
            throw ServiceError(.spectatorsFull, "All \(maxSpectators) spectator places are taken.")
        }
        let spectator = RelayPeer(participantId: ticket.participantId, name: ticket.name, role: .spectator,
                                  slot: 0, address: peer, now: now, ticketExpiresAtUnixMs: ticket.expiresAtUnixMs)
        spectators.append(spectator)
        return spectator
    }

    /// The reply to an attach, after the participant was placed.
    func welcome(_ participant: RelayPeer, transferFollows: UInt32?, startDelayUs: UInt32 = 0) -> AttachResponse {
        let slot = participant.slot
        return AttachResponse(
            sessionId: sessionId, role: participant.role, slot: UInt32(slot), params: params,
            startFrame: UInt32(participant.firstFrame), confirmedFrames: UInt32(timeline.confirmed),
            peers: Array(participants.map(\.info).prefix(72)), stateFollows: transferFollows != nil,
            relayId: configuration.relayId, running: running,
            awaitedInputFrame: slot > 0 ? UInt32(timeline.stored(slot - 1)) : 0,
            recovering: recovering, transferId: transferFollows ?? 0, startDelayUs: startDelayUs,
            protocolVersion: SyncProtocol.current)
    }

    /// Decides where a participant joining a running match starts: from `holds` (the frames it
    /// already has) when those inputs are still here and few enough, else from a state transfer.
    /// Returns true when a transfer is needed.
    func placeCursor(_ participant: RelayPeer, holds: Int) -> Bool {
        participant.rttProbe = nil
        guard running else {
            participant.sentFrames = 0
            participant.awaitedFrame = 0
            participant.firstFrame = 0
            return false
        }
        // Back before its acknowledgement of a state's load came (it went away, or the
        // acknowledgement was lost): its checksums would never count again. A fresh state brings
        // a fresh acknowledgement.
        if participant.isPlayer, loadsAwaited[participant.slot - 1] != nil, transfer?.awaits(participant) != true {
            participant.awaitingTransfer = 0
            participant.awaitingReason = .reconnect
            return true
        }
        // A match from the host's state cannot be replayed from a fresh boot: a state it is.
        let replayable = holds >= timeline.oldest && holds >= timeline.origin
            && (holds > 0 || (timeline.confirmed <= configuration.lateJoinReplayLimit && startStateSlot == nil))
        if replayable {
            participant.sentFrames = holds
            participant.awaitedFrame = holds
            participant.firstFrame = holds
            return false
        }
        participant.awaitingTransfer = 0
        participant.awaitingReason = holds > 0 ? .reconnect : .lateJoin
        return true
    }

    /// Starts the match once every slot has its player attached (after measuring their round
    /// trips, see ``requestStart(now:forced:)``).
    func startIfReady(now: UInt64) {
        guard !running else { return }
        for player in players where player?.isConnected != true { return }
        requestStart(now: now)
    }

    /// Starts the match as soon as the relay knows every attached player's round trip
    /// (``RelayConfiguration/startSyncSamples`` pings each, at most
    /// ``RelayConfiguration/startSyncTimeoutMs``): deadlines, time sync, the input delay and the
    /// start itself then fit the real path from the first frame. `forced`: the host's start
    /// (empty slots stay empty).
    func requestStart(now: UInt64, forced: Bool = false) {
        guard !running else { return }
        startForced = startForced || forced
        if startSyncSinceMs == nil { startSyncSinceMs = now }
        driveStartSync(now: now)
    }

    /// Pings players whose round trip is not measured yet; starts when all are, and every player's
    /// announced paths are attached (so the start rides each), or on timeout.
    func driveStartSync(now: UInt64) {
        guard !running, let since = startSyncSinceMs else { return }
        if !startForced, players.contains(where: { $0?.isConnected != true }) {
            startSyncSinceMs = nil  // someone left meanwhile: wait for every slot again
            return
        }
        var ready = true
        for player in players {
            guard let player, player.isConnected else { continue }
            if player.pathCount < player.announcedPaths { ready = false }
            guard player.pingSamples < configuration.startSyncSamples else { continue }
            ready = false
            // One ping in flight at a time; one lost (or a peer that does not answer) is replaced.
            if player.pingInFlight == nil || now &- player.lastPingMs >= 500 { ping(player, now: now) }
        }
        // A match from the host's state also waits for every other participant to load it.
        let statesIn = startStateReady(now: now)
        let timeoutMs = statesIn ? configuration.startSyncTimeoutMs : max(configuration.startSyncTimeoutMs, configuration.startStateTimeoutMs)
        if (ready && statesIn) || now &- since >= UInt64(timeoutMs) { start(now: now) }
    }

    /// Sends the relay's own ping (answered with a Pong echoing its nonce).
    func ping(_ player: RelayPeer, now: UInt64) {
        let nonce = UInt64.random(in: 1 ... .max)
        player.pingInFlight = (nonce, now)
        player.lastPingMs = now
        send(.ping(Ping(nonce: nonce, sentAtUs: now &* 1000)), to: player, now: now)
    }

    /// A peer's answer to the relay's ping: a round-trip sample when it echoes the ping in flight.
    func receive(_ pong: Pong, from participant: RelayPeer, now: UInt64) {
        guard let inFlight = participant.pingInFlight, pong.nonce == inFlight.nonce, now >= inFlight.sentAtMs else { return }
        participant.pingInFlight = nil
        participant.pingSamples += 1
        participant.shortestPingMs = min(participant.shortestPingMs, Int(now - inFlight.sentAtMs))
        noteRoundTrip(participant, sample: Double(now - inFlight.sentAtMs))
    }

    /// Starts the match now; slots nobody holds stay empty. Each player is told to wait so that
    /// all begin at the same moment: the farthest player's half round trip after this send.
    func start(now: UInt64) {
        guard !running else { return }
        if let transfer, transfer.reason == .matchStart { abortTransfer(reason: "the match starts", now: now) }
        running = true
        startedAtMs = now
        startSyncSinceMs = nil
        lifecycle.started(sessionId)
        // The stagger uses each player's shortest ping: on a lossy path one retransmitted sample
        // inflates the average, and a player told to wait too long starts behind the others.
        func halfTrip(_ player: RelayPeer) -> Int { (player.shortestPingMs == .max ? player.rttMs : player.shortestPingMs) / 2 }
        var farthestHalfTripMs = 0
        for player in players { if let player, player.isConnected { farthestHalfTripMs = max(farthestHalfTripMs, halfTrip(player)) } }
        if params.frameDelayAuto { params.frameDelay = UInt32(recommendedFrameDelay(keepingCurrent: false) ?? Int(params.frameDelay)) }
        substitutionHoldUntilMs = now + UInt64(2 * farthestHalfTripMs) + 500
        for (index, player) in players.enumerated() {
            if let player {
                player.reportedAtMs = now
                player.sentFrames = 0
                player.awaitedFrame = 0
                player.rttProbe = nil
            } else {
                slotModes[index] = .vacant(.empty)
            }
        }
        openReplay(from: timeline.origin, state: startStateBytes)
        for participant in participants where participant.isConnected {
            let delayMs = participant.isPlayer ? farthestHalfTripMs - halfTrip(participant) : 0
            let start = Envelope.Body.attachResponse(welcome(participant, transferFollows: needsStartState(participant) ? 0 : nil,
                                                             startDelayUs: UInt32(max(delayMs, 0) * 1000)))
            send(start, to: participant, now: now)
            // On every path too: a start held back by a lost segment would start that player late.
            for path in participant.extraPaths { transport.send(start, to: path) }
        }
        transport.publish(topic: "sync.session_started", .eventRecord(EventRecord()), severity: .info,
                          message: "session \(sessionId) started with \(players.compactMap { $0 }.count) players",
                          sessionId: sessionId)
    }
}
