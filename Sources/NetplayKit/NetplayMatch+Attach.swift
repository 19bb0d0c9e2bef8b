import Foundation
import NetplayService
import NetplayWire
import Rollback

// NetplayMatch: the attach and reconnect state machine (attach, backoff, re-attach, refusals,
// ticket renewal) and building the engine once attached.
extension NetplayMatch {
    // MARK: Attaching

    /// Connections to the relay attached now (the primary and the additional paths the relay
    /// accepted; see ``NetplayMatchOptions/paths``).
    public var attachedPaths: Int { relayKnowsUs ? link.attachedPaths : 0 }

    func sendAttach(now: UInt64, attempt: Int) {
        let resume = attachedOnce
        attachRequestId = takeRequestId()
        let request = AttachRequest(ticket: admission.ticket, protocolVersion: attachProtocol, clientVersion: options.clientVersion,
                                    resume: resume, confirmedFrames: UInt32(clamping: resume ? confirmedFrames : 0),
                                    firstUnackedFrame: UInt32(clamping: max(ownNewest + 1, 0)), content: options.content,
                                    gameOptions: Array(options.gameOptions.prefix(4096)),
                                    historyFromFrame: UInt32(clamping: resume ? resendableHistoryStart : 0),
                                    startFromHostState: options.startFromHostState && role == .player,
                                    paths: UInt32(pathTarget), progress: resume ? progressProof : nil)
        guard link.send(.attachRequest(request), requestId: attachRequestId, now: now) else {
            // The fresh connection is not up yet (its handshakes take round trips on a long path;
            // nothing is queued until then): try again on the next ticks, within the attach timeout.
            let since = attachConnectingSinceMs ?? now
            attachConnectingSinceMs = since
            if now &- since >= UInt64(options.attachTimeoutMs) {
                attachConnectingSinceMs = nil
                scheduleReattach(attempt: attempt + 1, now: now, why: "no connection to the relay")
            } else {
                phase = .attaching(attempt: attempt, nextAttemptMs: now + 5, sentAtMs: nil)
            }
            return
        }
        attachConnectingSinceMs = nil
        phase = .attaching(attempt: attempt, nextAttemptMs: now, sentAtMs: now)
        lastHeardMs = now
    }

    func scheduleReattach(attempt: Int, now: UInt64, why: String, lookUp: Bool = true) {
        // A renewal that finished while nobody waited for it (the match went back to attaching
        // meanwhile) is stale: the next lookup or expiry asks again. One still on its way is kept,
        // so a relay alternating its Detach reasons starts no second thread.
        if ticketRenewal?.outcome != nil { ticketRenewal = nil }
        guard attempt < options.backoff.maxAttempts else {
            finish(.relayLost("\(why); gave up after \(attempt) attempts"))
            return
        }
        // Every few failed attempts, ask the coordinator whether the session runs elsewhere now
        // (its relay's host may be gone: the coordinator moves its sessions once it stops refreshing).
        let every = options.relayLookupEveryAttempts
        if lookUp, every > 0, attempt >= every, attempt % every == 0, lookUpRelay(attempt: attempt) { return }
        let delay = UInt64(backoff.delayMs(attempt: attempt))
        try? link.open()
        // A fresh connection, perhaps to another relay or one upgraded since: the current version
        // first (an older relay's refusal steps it down again).
        attachProtocol = SyncProtocol.current
        attachConnectingSinceMs = nil
        phase = .attaching(attempt: attempt, nextAttemptMs: now + delay, sentAtMs: nil)
        state = .connecting(to: admission.relayEndpoint, attempt: attempt)
        if attachedOnce { note(.reconnecting(attempt: attempt)) }
    }

    func reconnect(now: UInt64, why: String) {
        relayKnowsUs = false
        scheduleReattach(attempt: 1, now: now, why: why)
    }

    func attached(_ response: AttachResponse, now: UInt64) {
        let wasAttached = attachedOnce
        if let problem = implausible(response) {
            finish(.failed("the relay's attach answer \(problem)"))
            return
        }
        attachedOnce = true
        relayKnowsUs = true
        expiryRenewalsSinceAttach = 0
        if pathTarget > 1 || options.pathsOnLoss > 1 {
            link.onNews = { [weak self] news in
                switch news {
                case .attached(let path): self?.note(.pathAttached(path: path))
                case .lost(let path, let reason): self?.note(.pathLost(path: path, reason: reason))
                }
            }
            link.attachPaths(ticket: admission.ticket, clientVersion: options.clientVersion, protocolVersion: attachProtocol,
                             paths: pathTarget,
                             backoff: options.backoff, attachTimeoutMs: options.attachTimeoutMs, now: now)
        }
        params = response.params
        relayPacesTransfers = SyncProtocol.version(response.protocolVersion) >= SyncProtocol.pacedStateTransfers
        // A state half received on the connection before is not continued: the relay (perhaps
        // another one, or the same one rebuilt, whose transfer ids start over) sends states anew.
        assembly = nil
        slot = Int(response.slot)
        peers = response.peers
        if wasAttached, case .attaching = phase { note(.reconnected) }
        if response.recovering, wasAttached { resendForRecovery(response, now: now) }
        if !response.running {
            phase = .waitingForStart
            updateLobbyState()
            if startAwaitsAttach { startNow() }
            return
        }
        startAwaitsAttach = false
        if response.stateFollows {
            if case .none = engine {
                phase = .awaitingState
                state = .connecting(to: admission.relayEndpoint, attempt: 0)
                return
            }
            // A returning player too far behind: it keeps its session and loads the state.
        }
        if case .none = engine {
            if response.startFrame == 0, response.startDelayUs > 0, !response.stateFollows {
                // A fresh start: the relay staggers it so that every player begins together.
                startAtMs = now + UInt64(min(response.startDelayUs, 2_000_000) / 1000)
            }
            do {
                try makeEngine(at: Int(response.startFrame), game: initialGame)
            } catch {
                finish(.failed("cannot start the rollback session: \(error)"))
                return
            }
        } else if !response.recovering {
            resendOwnInputs(from: Int(response.awaitedInputFrame), now: now)
        }
        enterPlaying()
    }

    /// Why an attach answer cannot be from a relay running this session, or nil: a start
    /// frame past the wire's frame limit, a slot outside the session, a session of another shape
    /// (input size, players) than the ticket's or the last attach's, or another slot for a
    /// running engine.
    /// Taken as they come, they trapped the match (frame numbers overflowing what it sends back,
    /// its history rows indexed past their length) or left it unable to add an input.
    func implausible(_ response: AttachResponse) -> String? {
        if Int(response.startFrame) > Self.frameLimit { return "starts at frame \(response.startFrame), past the frame limit" }
        if Int(response.slot) > Int(response.params.maxPlayers) || (role == .player) != (response.slot > 0) {
            return "gives slot \(response.slot) in a session of \(response.params.maxPlayers) players"
        }
        // Before the first attach `params` are the signed ticket's: a relay answering the first
        // attach with another input size had every tick refused (the frontend's inputs no longer
        // fit) and the match spin for good.
        if response.params.inputSize != params.inputSize || response.params.maxPlayers != params.maxPlayers {
            return "changes the session from \(params.maxPlayers) players of \(params.inputSize)-byte inputs to "
                + "\(response.params.maxPlayers) of \(response.params.inputSize)"
        }
        guard attachedOnce else { return nil }
        if case .player = engine, Int(response.slot) != slot { return "moves this player from slot \(slot) to \(response.slot) mid-match" }
        return nil
    }

    func enterPlaying() {
        phase = .playing
        state = .connected(slot: slot, players: peers.filter { $0.role == .player }.count)
    }

    func updateLobbyState() {
        let players = peers.filter { $0.role == .player && $0.connected }.count
        if isHost {
            state = .hosting(roomName: admission.sessionId, players: players, maxPlayers: Int(params.maxPlayers))
        } else {
            state = .connected(slot: slot, players: players)
        }
    }

    private func sessionConfiguration() -> SessionConfiguration {
        var configuration = SessionConfiguration(playerCount: Int(params.maxPlayers), inputSize: Int(params.inputSize))
        configuration.predictionWindow = Int(params.predictionWindow)
        configuration.inputDelay = Int(params.frameDelay)
        configuration.framesPerSecond = Int(params.framesPerSecond.rounded())
        configuration.checksumInterval = Int(params.checksumIntervalFrames)
        configuration.stateRingCapacity = max(32, configuration.predictionWindow * 2 + 32)
        configuration.inputHistory = max(1024, configuration.stateRingCapacity * 4 + 64)
        configuration.disconnectTimeoutMs = 0
        configuration.interruptTimeoutMs = 1_000
        configuration.prediction = options.prediction
        configuration.seed = SeededRandom.hash(0x4E45_5450, UInt64(slot))
        return configuration
    }

    func makeEngine(at frame: Int, game: G) throws {
        offset = frame
        var configuration = sessionConfiguration()
        // Checksums on the match's checksum frames even when the state is not at one.
        configuration.matchFrameOffset = frame
        if role == .player {
            let players: [PlayerLocation] = (0 ..< Int(params.maxPlayers)).map { $0 == slot - 1 ? .local : .remote(relayPeer) }
            engine = .player(try P2PSession(game: game, configuration: configuration, players: players, relay: relayPeer))
        } else {
            engine = .spectator(try SpectatorSession(game: game, configuration: configuration, host: relayPeer,
                                                     catchUpThreshold: 2, catchUpSpeed: 1))
        }
        // The engine counts its own frames from 0; an aligned state kept from an engine before
        // (a jump, a heal) is of another run, and was served labelled with this one's frames.
        lastCheckedConfirmed = 0
        alignedState = nil
        startChecksum = game.checksum()
        note(.started(frame: frame))
    }

    func handleError(_ error: ErrorReply, requestId: UInt64, now: UInt64) {
        note(.error(error.code, error.message))
        if requestId != 0 && requestId == attachRequestId {
            switch error.code {
            case .ticketExpired:
                // Renewed off the game loop; until then the match keeps ticking and attaches nothing.
                // Only while attaching: a late refusal of an attach given up on (a relay lookup
                // runs, or another attach) is answered by what runs now. One renewal at a time (a
                // lookup's, still on its way, serves), and each counts against the allowance.
                guard case .attaching = phase else { return }
                guard expiryRenewalsSinceAttach < Self.expiryRenewalsAllowed else {
                    finish(.refused(error.code, "\(error.message) (the relay refused \(Self.expiryRenewalsAllowed) renewed "
                                    + "tickets as expired: is this relay's clock or the coordinator's off?)"))
                    return
                }
                guard let renewal = ticketRenewal ?? TicketRenewal.start(for: admission, serverKey: options.serverKey) else {
                    finish(.refused(error.code, error.message))
                    return
                }
                ticketRenewal = renewal
                expiryRenewalsSinceAttach += 1
                phase = .renewingTicket(refusal: error.message, attempt: 0)
            case .unavailable, .overloaded, .shuttingDown, .timeout, .internal:
                if case .attaching(let attempt, _, _) = phase {
                    scheduleReattach(attempt: attempt + 1, now: now, why: error.message)
                }
            case .unsupportedVersion where attachProtocol > 1:
                // An older relay: attach again at once with the version before (it sends
                // states whole, and expects no progress acknowledgements).
                attachProtocol -= 1
                if case .attaching(let attempt, _, _) = phase { sendAttach(now: now, attempt: attempt) }
            default:
                finish(.refused(error.code, error.message))
            }
            return
        }
        if error.code == .unauthenticated && relayKnowsUs {
            // The relay no longer knows this connection (restart, silence): attach again.
            reconnect(now: now, why: "relay forgot the attachment")
        }
    }

    /// Asks the coordinator, off the game loop, where the session runs now (a fresh ticket names
    /// its relay). False when there is no coordinator to ask (a LAN room: its host's relay is the
    /// only one, so it renews there only a ticket the relay refused as expired). A renewal already on
    /// its way answers this too: a relay that repeats its Detach (each started a thread, a socket
    /// and a request, until the process ran out of sockets) starts no second one.
    func lookUpRelay(attempt: Int) -> Bool {
        guard admission.coordinatorEndpoint != nil, let renewal = ticketRenewal ?? TicketRenewal.start(for: admission, serverKey: options.serverKey) else { return false }
        ticketRenewal = renewal
        relayKnowsUs = false
        phase = .renewingTicket(refusal: nil, attempt: attempt)
        return true
    }

    /// While a ticket renewal runs: once it finished, attach with the new ticket (to the relay it
    /// names, which may be another one). For an expired ticket (`refusal` the relay's message), a
    /// coordinator that did not answer or refused for a passing reason is asked again after the
    /// backoff from `attempt`, and the match ends when it says the session ended, refuses the seat
    /// for good, or the backoff's attempts run out. A relay lookup (`refusal` nil) that brings no
    /// ticket goes on with the reattach backoff from `attempt`, unless the coordinator says the
    /// seat is gone.
    func pickUpRenewedTicket(now: UInt64, refusal: String?, attempt: Int) {
        guard let outcome = ticketRenewal?.outcome else { return }
        ticketRenewal = nil
        switch outcome {
        case .renewed(let ticket):
            adopt(renewed: ticket, now: now, refusal: refusal, attempt: attempt)
        case .refused(.sessionEnded, let message):
            finish(.sessionEnded(message))
        case .refused(let code, let message) where Self.passes(code):
            retryAfterRenewal(now: now, refusal: refusal, attempt: attempt, why: message)
        case .refused(let code, let message):
            finish(.refused(code, message))
        case .failed:
            retryAfterRenewal(now: now, refusal: refusal, attempt: attempt,
                              why: admission.coordinatorEndpoint == nil ? "the LAN host did not answer" : "the coordinator did not answer")
        }
    }

    /// Coordinator refusals that may pass: worth asking again after a while.
    private static func passes(_ code: ErrorCode) -> Bool {
        switch code {
        case .noRelay, .unavailable, .overloaded, .rateLimited, .timeout, .internal, .shuttingDown: true
        default: false
        }
    }

    /// A renewal that brought no ticket, for a reason that may pass: a relay lookup goes back to
    /// reattaching; an expired ticket's renewal is asked again after the backoff, until its
    /// attempts run out.
    private func retryAfterRenewal(now: UInt64, refusal: String?, attempt: Int, why: String) {
        guard let refusal else {
            scheduleReattach(attempt: attempt, now: now, why: why, lookUp: false)
            return
        }
        let next = attempt + 1
        guard next < options.backoff.maxAttempts,
              let renewal = TicketRenewal.start(for: admission, serverKey: options.serverKey,
                                                delaySeconds: Double(backoff.delayMs(attempt: next)) / 1000) else {
            finish(.refused(.ticketExpired, "\(refusal) (no new ticket: \(why); gave up after \(next) renewals)"))
            return
        }
        ticketRenewal = renewal
        phase = .renewingTicket(refusal: refusal, attempt: next)
    }

    /// Takes a renewed ticket for this seat and attaches with it, to the relay it names.
    private func adopt(renewed ticket: JoinTicket, now: UInt64, refusal: String?, attempt: Int) {
        // The same seat, or none: a ticket for another session, participant or role would
        // change who this match is under a running engine.
        let held = admission.ticket
        guard ticket.sessionId == held.sessionId, ticket.participantId == held.participantId, ticket.role == held.role else {
            finish(.failed("the coordinator renewed the ticket for another seat (session \(ticket.sessionId), "
                           + "participant \(ticket.participantId), \(ticket.role.protoName))"))
            return
        }
        admission.ticket = ticket
        // A LAN room's relay is where the joiner reached it: its tickets name the host's advertised
        // address, which the joiner's network may not reach, so a LAN renewal never moves the link.
        let moved = admission.coordinatorEndpoint != nil && !ticket.relayEndpoint.isEmpty
            && ticket.relayEndpoint != admission.relayEndpoint
        if moved {
            let from = admission.relayEndpoint
            admission.relayEndpoint = ticket.relayEndpoint
            do {
                try link.retarget(to: ticket.relayEndpoint)
            } catch {
                finish(.failed("cannot connect to relay \(ticket.relayEndpoint): \(error)"))
                return
            }
            note(.relayMoved(from: from, to: ticket.relayEndpoint))
        }
        scheduleReattach(attempt: refusal == nil && !moved ? attempt : 0, now: now,
                         why: moved ? "session moved" : "ticket renewed", lookUp: false)
    }
}
