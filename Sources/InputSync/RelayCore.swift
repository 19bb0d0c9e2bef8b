import Foundation
import NetplayAuth
import NetplayService
import NetplayWire

/// The relay's logic without sockets: admits peers with join tickets, routes every message of
/// an attached peer to its ``RelaySession``, drives the sessions' timers, and answers the
/// coordinator's control requests. One instance per relay, confined to the reactor thread.
///
/// Nothing a peer sends can crash it or corrupt a session: every rule broken (a slot that is not
/// the sender's, a spectator's inputs, absurd frames, oversized or out-of-order state chunks,
/// messages before attaching) gets an `Error` reply and changes nothing.
public final class RelayCore {
    /// The configuration.
    public let configuration: RelayConfiguration
    let verifier: JoinTicketVerifier
    /// Signs the progress proofs peers get with their statistics, and checks the ones they
    /// resume with (``ResumeClaim``).
    private let progressProofs: ProgressProofs
    private unowned(unsafe) let transport: RelayTransport
    private(set) var sessions: [String: RelaySession] = [:] { didSet { tickOrderStale = true } }
    let peers = PeerRoutes()
    private var endedSessions: [String] = []
    /// Sessions that ended here, by id, and when (wall clock). A ticket issued before a
    /// session's end does not open it again: a former participant used to play on in a session
    /// the coordinator had ended (or moved), on the relay's capacity. It is refused as expired, so
    /// an honest client renews it and learns the session ended, or gets a newer ticket (one that
    /// moved back here). Kept as long as a ticket lives and the resume grace; 10,000 at most.
    private var endedAtUnixMs: [String: UInt64] = [:]
    /// The sessions in the order timer slices take them (rebuilt after sessions come or go).
    private var tickOrder: [RelaySession] = []
    private var tickOrderStale = false
    private var lastPruneCheckMs: UInt64 = 0
    /// Inputs accepted since the last ``takeInputCount()``.
    private var inputsAccepted = 0
    /// Whether a read batch is open: forwarding waits for ``endBatch(now:)``.
    private var batchOpen = false
    /// Sessions with forwarding queued in the open batch.
    private var sessionsWithForwards: [RelaySession] = []
    /// The hot path's protobuf-c decoder (arena reused per frame) and broadcast packer.
    private let decoder = HotPathDecoder()
    private let packer = InputBroadcastPacker()
    /// Participants the host removed, refused at attach until their tickets are of no use.
    let revocations: RevocationBook
    /// Bytes of states in transfer, across sessions.
    let transferBudget: TransferBudget
    /// Starts, departures and ends the coordinator must hear about (``RelayService`` sends them
    /// with its refreshes; nothing else reads them).
    public let lifecycle = LifecycleFacts()

    /// Creates a relay core that admits tickets `verifier` accepts and sends through `transport`.
    public init(configuration: RelayConfiguration, verifier: JoinTicketVerifier, transport: RelayTransport) {
        self.configuration = configuration
        // A ticket living longer than the relay remembers a kick would admit the kicked again.
        var checked = verifier
        checked.maxLifetimeMs = min(verifier.maxLifetimeMs ?? .max, configuration.maxTicketLifetimeMs)
        self.verifier = checked
        progressProofs = ProgressProofs(keyRing: verifier.keyRing)
        self.transport = transport
        revocations = RevocationBook(capacity: configuration.maxRevocations, journal: configuration.revocationsFile,
                                     nowUnixMs: UnixTime.nowMs())
        transferBudget = TransferBudget(capacity: configuration.maxTransferBytes)
    }

    // MARK: - Reading

    /// Sessions served.
    public var sessionCount: Int { sessions.count }
    /// Peers attached now.
    public var peerCount: Int { peers.count }
    /// Whether `peer` is a connection of an attached participant.
    public func knows(_ peer: PeerAddress) -> Bool { peers.route(peer) != nil }
    /// Ids of the sessions served.
    public var sessionIds: [String] { sessions.keys.sorted() }

    /// Inputs accepted since the last call (for the load report).
    public func takeInputCount() -> Int {
        var total = inputsAccepted
        for session in sessions.values {
            total += session.inputsAccepted
            session.inputsAccepted = 0
        }
        inputsAccepted = 0
        return total
    }

    /// The HUD statistics of a session, if served.
    public func stats(of sessionId: String) -> SessionStats? { sessions[sessionId]?.sessionStats() }

    /// The confirmed frame count of a session (frames `0 ..< n` are final), if served.
    public func confirmedFrames(of sessionId: String) -> Int? { sessions[sessionId]?.timeline.confirmed }

    /// Where the replay of a session is written, if any.
    public func replayURL(of sessionId: String) -> URL? { sessions[sessionId]?.replay?.url }

    /// Whether session `sessionId`'s match runs and the participants holding a place in it
    /// (attached or away), if it is served.
    public func presence(of sessionId: String) -> (running: Bool, participants: Set<String>)? {
        guard let session = sessions[sessionId], !session.ended else { return nil }
        return (session.running, Set(session.participants.map(\.participantId)))
    }

    /// Who is attached in each session served (for the coordinator's refresh), at most `limit` sessions.
    public func presenceReport(limit: Int = 10_000) -> [SessionPresence] {
        var report: [SessionPresence] = []
        for (id, session) in sessions where !session.ended {
            guard report.count < limit else { break }
            let attached = session.participants.filter(\.isConnected).prefix(72).map(\.participantId)
            if !attached.isEmpty { report.append(SessionPresence(sessionId: id, connectedParticipantIds: attached)) }
        }
        return report
    }

    /// The participant attached from `peer` (tests, introspection).
    func participant(at peer: PeerAddress) -> RelayPeer? { peers[peer]?.participant }

    // MARK: - Messages

    /// What the hot path did with a frame.
    public enum FastOutcome {
        /// Handled (an InputBatch of an attached peer).
        case handled
        /// Not for the hot path: decode it and call ``handle(_:from:now:)``.
        case declined
        /// Refused: reply this error under the request id.
        case failed(ServiceError, requestId: UInt64)
    }

    /// Opens a read batch: until ``endBatch(now:)``, what inputs are forwarded to each
    /// participant is queued, and inputs of the same player read meanwhile go in one message.
    /// The service opens one around each run of messages it reads off its socket without
    /// waiting. Without a batch, every input is forwarded as it is handled.
    public func beginBatch() {
        batchOpen = true
    }

    /// Closes the read batch: sends everything queued in it.
    public func endBatch(now: UInt64) {
        batchOpen = false
        guard !sessionsWithForwards.isEmpty else { return }
        let list = sessionsWithForwards
        sessionsWithForwards.removeAll(keepingCapacity: true)
        for session in list {
            session.listedForFlush = false
            session.flushForwards(now: now)
        }
    }

    /// After `session` handled inputs: its forwarding goes now, or at the end of the open batch.
    @inline(__always)
    private func forwardingQueued(in session: RelaySession, now: UInt64) {
        guard batchOpen else {
            session.flushForwards(now: now)
            return
        }
        if !session.listedForFlush && session.hasQueuedForwards {
            session.listedForFlush = true
            sessionsWithForwards.append(session)
        }
    }

    /// The hot path: an attached player's InputBatch unpacked by protobuf-c into a reused arena
    /// and read through a validated view, without building Swift values. Anything else (another
    /// body, a field the schema refuses, a malformed frame) is declined for the generic path,
    /// which decodes, validates and answers errors.
    public func handleFast(_ frame: UnsafeRawBufferPointer, from peer: PeerAddress, now: UInt64) -> FastOutcome {
        guard let view = decoder.inputBatch(frame), let route = peers.route(peer) else { return .declined }
        // Read without retains: the route stays in the table (and its objects alive) while the
        // session handles the batch, which never touches the table.
        return route.participant._withUnsafeGuaranteedRef { participant in
            // The primary connection, or (one more test, only then) an additional path.
            guard participant.address == peer || participant.isPath(peer) else { return .declined }
            let batch = RelayWire.Batch(view)
            participant.lastHeardMs = now
            participant.disconnectedSinceMs = nil
            return route.session._withUnsafeGuaranteedRef { session in
                do throws(ServiceError) {
                    try session.receive(batch, from: participant, now: now)
                    forwardingQueued(in: session, now: now)
                    return .handled
                } catch {
                    return .failed(error, requestId: batch.requestId)
                }
            }
        }
    }

    /// Handles one message from `peer` at relay time `now` (monotonic milliseconds). Returns the
    /// reply body for requests that have one; throws for anything refused.
    public func handle(_ envelope: Envelope, from peer: PeerAddress, now: UInt64) throws(ServiceError) -> Envelope.Body? {
        switch envelope.body {
        case .attachRequest(let request):
            return .attachResponse(try attach(request, from: peer, now: now))
        case .closeRelaySessionRequest, .disconnectPeerRequest, .assignSlotsRequest:
            return try control(envelope.body, now: now)
        default:
            break
        }
        guard let (session, participant) = peers[peer], participant.isPath(peer) else {
            peers.remove(peer)
            if case .detach = envelope.body { return nil }
            throw ServiceError(.unauthenticated, "Attach with a join ticket first (AttachRequest).")
        }
        if participant.address != peer {
            // An additional path carries inputs and acknowledgements; its detach ends only it.
            switch envelope.body {
            case .inputBatch, .detach: break
            default:
                throw ServiceError(.badRequest, "An additional path carries only InputBatch and Detach; send \(envelope.body.name) on the participant's primary connection.")
            }
            if case .detach = envelope.body {
                peers.dropPath(peer, of: participant)
                return nil
            }
        }
        participant.lastHeardMs = now
        participant.disconnectedSinceMs = nil
        switch envelope.body {
        case .inputBatch(let batch):
            try session.receive(batch, from: participant, now: now)
            forwardingQueued(in: session, now: now)
            return nil
        case .checksumReport(let report):
            try session.receive(report, from: participant, now: now)
            return nil
        case .stateChunk(let chunk):
            try session.receive(chunk, from: participant, now: now)
            return nil
        case .stateTransferAck(let ack):
            session.receive(ack, from: participant, now: now)
            return nil
        case .peerStats(let stats):
            session.noteStats(stats, from: participant)
            return nil
        case .pong(let pong):
            session.receive(pong, from: participant, now: now)
            return nil
        case .chatMessage(let message):
            try session.chat(message, from: participant, now: now)
            return nil
        case .inputBroadcast(let history):
            try session.adoptHistory(history, from: participant, now: now)
            return nil
        case .startSessionRequest(let request):
            // The host, known from its ticket; in a session whose host holds no place (or whose
            // tickets mark none, as a LAN host's), the player in slot 1.
            guard session.actsAsHost(participant) else {
                throw ServiceError(.permissionDenied, "Only the host may start the match.")
            }
            if request.restart {
                try session.restart(by: participant, from: Int(request.restartFrame), now: now)
                return .ack(Ack(detail: "restarting from the host's state"))
            }
            session.requestStart(now: now, forced: true)
            return .ack(Ack(detail: session.running ? "running" : "starting"))
        case .detach(let detach):
            peers.forget(participant)
            session.remove(participant, reason: .leaving,
                           detail: detach.message.isEmpty ? "left" : detach.message, now: now)
            if session.isOverAfterDeparture(now: now) {
                endSession(session, reason: .sessionEnded, detail: "every player left", now: now)
            }
            return nil
        default:
            throw ServiceError(.unknownRequest, "The relay does not handle \(envelope.body.name).")
        }
    }

    // MARK: - Attach

    private func attach(_ request: AttachRequest, from peer: PeerAddress, now: UInt64) throws(ServiceError) -> AttachResponse {
        guard request.protocolVersion <= SyncProtocol.current else {
            throw ServiceError(.unsupportedVersion, "This relay speaks sync protocol 1 to \(SyncProtocol.current), not \(request.protocolVersion).")
        }
        let ticket = request.ticket
        let wallNow = UnixTime.nowMs()
        do {
            try verifier.verify(ticket, relayId: configuration.relayId, nowUnixMs: wallNow)
        } catch let error {
            // An expired ticket still resumes a participant the session knows, within the grace.
            guard case .expired = error, request.resume,
                  wallNow < ticket.expiresAtUnixMs + configuration.resumeGraceMs,
                  let session = sessions[ticket.sessionId],
                  session.participants.contains(where: { $0.participantId == ticket.participantId }),
                  (try? verifier.verify(ticket, relayId: configuration.relayId,
                                        nowUnixMs: ticket.expiresAtUnixMs - 1)) != nil else {
                throw ServiceError(error.errorCode, error.description, field: "AttachRequest.ticket")
            }
        }
        // A genuine ticket of a participant the host removed, or that left: refused, whatever it says.
        if revocations.isRevoked(sessionId: ticket.sessionId, participantId: ticket.participantId, nowUnixMs: wallNow) {
            throw ServiceError(.permissionDenied, "You left this session or the host removed you; this ticket no longer admits you.",
                               field: "AttachRequest.ticket")
        }
        let params = ticket.params
        guard (1 ... 8).contains(params.maxPlayers), (1 ... 64).contains(params.inputSize) else {
            throw ServiceError(.settingsMismatch, "The ticket's sync parameters are unusable (players \(params.maxPlayers), input size \(params.inputSize)).")
        }
        if ticket.role == .player, ticket.slot > params.maxPlayers {
            throw ServiceError(.ticketInvalid, "Slot \(ticket.slot) does not exist in a \(params.maxPlayers)-player session.")
        }
        if request.additionalPath { return try attachPath(ticket, from: peer, now: now) }
        if request.resume, Int(request.confirmedFrames) > RelaySession.frameLimit || request.historyFromFrame > request.confirmedFrames {
            throw ServiceError(.badRequest, "A resumed match holds frames history_from_frame ... confirmed_frames, at most \(RelaySession.frameLimit).",
                               field: "AttachRequest.confirmed_frames")
        }
        let claim = ResumeClaim(request, sessionId: ticket.sessionId, framesPerSecond: params.framesPerSecond,
                                spectatorDelay: ticket.role == .spectator ? Int(params.spectatorDelayFrames) : 0,
                                proofs: progressProofs, allowanceMs: configuration.progressAllowanceMs)
        let session = try session(for: ticket, request: request, claim: claim, now: now)
        session.adoptContent(of: request)
        return try session.admit(ticket, request: request, claim: claim, from: peer, routes: peers, now: now)
    }

    /// The session `ticket` names, or a new one (rebuilt from what its peers resend, when the
    /// attach resumes a match this relay does not know: it restarted).
    private func session(for ticket: JoinTicket, request: AttachRequest, claim: ResumeClaim,
                         now: UInt64) throws(ServiceError) -> RelaySession {
        let params = ticket.params
        if let gone = sessions[ticket.sessionId], gone.ended {
            // Ended in this batch of messages, not yet dropped (the tick drops ended sessions):
            // an attach pipelined behind the last player's leave went into the dead session,
            // which no tick served again and whose routes pinned it, history and all, for good.
            sessions.removeValue(forKey: ticket.sessionId)
            endedSessions.removeAll { $0 == ticket.sessionId }
        }
        if sessions[ticket.sessionId] == nil, let ended = endedAtUnixMs[ticket.sessionId], ticket.issuedAtUnixMs <= ended {
            throw ServiceError(.ticketExpired, "This session ended on this relay after your ticket was issued; ask the coordinator for a new ticket.",
                               field: "AttachRequest.ticket")
        }
        if let existing = sessions[ticket.sessionId] {
            guard existing.params.inputSize == params.inputSize, existing.params.maxPlayers == params.maxPlayers else {
                throw ServiceError(.settingsMismatch, "The session runs \(existing.params.maxPlayers) players with \(existing.params.inputSize)-byte inputs; the ticket says \(params.maxPlayers) and \(params.inputSize).")
            }
            return existing
        }
        if configuration.maxSessions > 0 && sessions.count >= configuration.maxSessions {
            throw ServiceError(.overloaded, "This relay serves its maximum of \(configuration.maxSessions) sessions; try another.",
                               retryAfterMs: 1000)
        }
        let spectator = ticket.role == .spectator
        let rebuild = request.resume ? RecoveryStart(sessionId: ticket.sessionId, params: params, request: request, claim: claim,
                                                       spectator: spectator, configuration: configuration, date: Date()) : nil
        if let rebuild, rebuild.record == nil, spectator {
            // A spectator resends no history, and one watching far behind would start the
            // timeline before what the players hold: a returning player starts it.
            throw ServiceError(.unavailable, "This relay rebuilds the match after a restart once a player is back; watch again then.",
                               retryAfterMs: 1000)
        }
        if let rebuild, rebuild.record == nil, claim.certified == nil, !claim.isProven {
            // Nothing here says how far the match had come, and the claim cannot pick the start
            // (a liar's would leave the others below it, needing a state it serves; a start cut
            // to what counts would leave nobody holding its frames): the rebuild waits for a
            // returning peer with a progress proof (NetplayKit retries after this).
            let why = claim.proofProblem ?? (request.progress == nil ? "none was presented" : "it covers fewer frames")
            throw ServiceError(.unavailable, "This relay rebuilds the match after a restart from a claim its progress proof covers (\(why)); another player's return starts it.",
                               retryAfterMs: 1000)
        }
        let session = RelaySession(sessionId: ticket.sessionId, params: params, configuration: configuration,
                                   transport: transport, now: now, origin: rebuild?.origin ?? 0,
                                   packer: packer, revocations: revocations, lifecycle: lifecycle,
                                   transferBudget: transferBudget, progressProofs: progressProofs)
        if let rebuild { session.beginRecovery(rebuild, confirmed: claim.proven, spectator: spectator, now: now) }
        sessions[ticket.sessionId] = session
        return session
    }

    /// An attach with `additional_path`: `peer` becomes another path of the participant the
    /// (verified, not revoked) ticket names, which must be attached and connected in the
    /// session; nothing else changes (no event, no cursor, no new participant). Refused, with
    /// nothing changed, when it is not attached (`INVALID_STATE`, worth retrying once its
    /// primary attach succeeded) or already holds the maximum of paths (`BAD_REQUEST`). The reply
    /// is the participant's AttachResponse as of now, with `state_follows` false.
    private func attachPath(_ ticket: JoinTicket, from peer: PeerAddress, now: UInt64) throws(ServiceError) -> AttachResponse {
        guard let session = sessions[ticket.sessionId], !session.ended,
              let participant = session.participants.first(where: { $0.participantId == ticket.participantId && $0.role == ticket.role
                                                                 && (ticket.role != .player || $0.slot == Int(ticket.slot)) }),
              participant.isConnected else {
            throw ServiceError(.invalidState, "An additional path joins a participant already attached and connected in the session; attach without additional_path first.",
                               field: "AttachRequest.additional_path")
        }
        if participant.isPath(peer) {
            guard participant.address != peer else {
                throw ServiceError(.badRequest, "This connection is the participant's primary; an additional path needs a connection of its own.",
                                   field: "AttachRequest.additional_path")
            }
        } else {
            if let (_, other) = peers[peer], other.isPath(peer) {
                throw ServiceError(.badRequest, "This connection is already attached as participant '\(other.participantId)'.",
                                   field: "AttachRequest.additional_path")
            }
            guard participant.pathCount < configuration.maxPathsPerParticipant else {
                throw ServiceError(.badRequest, "A participant holds at most \(configuration.maxPathsPerParticipant) connections on this relay.",
                                   field: "AttachRequest.additional_path")
            }
            participant.extraPaths.append(peer)
            peers.set(peer, session: session, participant: participant)
        }
        participant.lastHeardMs = now
        participant.disconnectedSinceMs = nil
        return session.welcome(participant, transferFollows: nil)
    }

    // MARK: - Timers and lifecycle

    /// Drives every session's timers; ends sessions nobody attended for the idle timeout.
    public func tick(now: UInt64) {
        tick(now: now, slice: 0, of: 1)
    }

    /// Runs the timers of one slice of the sessions: every `slices`-th session from `slice`.
    /// The service calls it `slices` times per timer period with each slice in turn, so every
    /// session still runs once per period while one call's work (and the wait it imposes on the
    /// messages queued behind it) stays a `slices`-th of all sessions'.
    public func tick(now: UInt64, slice: Int, of slices: Int) {
        precondition(slices >= 1 && (0 ..< slices).contains(slice))
        if tickOrderStale {
            tickOrder = Array(sessions.values)
            tickOrderStale = false
        }
        let order = tickOrder
        var index = slice
        while index < order.count {
            let session = order[index]
            index += slices
            guard !session.ended else { continue }
            session.tick(now: now)
            if let gone = session.playersGoneAtMs {
                let watching = session.spectators.filter(\.isConnected)
                if watching.allSatisfy({ $0.awaitedFrame >= session.timeline.confirmed }) || now &- gone >= 10_000 {
                    endSession(session, reason: .sessionEnded, detail: "every player left", now: now)
                    continue
                }
            }
            if session.connectedCount == 0, now &- session.lastConnectedMs >= UInt64(configuration.sessionIdleTimeoutMs) {
                endSession(session, reason: .sessionEnded, detail: "nobody attached for \(configuration.sessionIdleTimeoutMs / 1000) s", now: now)
            }
        }
        if !endedSessions.isEmpty {
            for id in endedSessions { sessions.removeValue(forKey: id) }
            endedSessions.removeAll()
        }
        // Routes left by peers that went away: counted against all participants once a second.
        if now &- lastPruneCheckMs >= 1000 {
            lastPruneCheckMs = now
            if revocations.count > 0 { revocations.purge(nowUnixMs: UnixTime.nowMs()) }
            if !endedAtUnixMs.isEmpty {
                let forgotten = UnixTime.nowMs() &- (configuration.maxTicketLifetimeMs &+ configuration.resumeGraceMs)
                endedAtUnixMs = endedAtUnixMs.filter { $0.value > forgotten }
            }
            if peers.count > 0 && peers.count > 2 * max(1, sessions.values.reduce(0) { $0 + $1.pathCount }) {
                peers.pruneStale()
            }
        }
    }

    /// Ends `session`: its participants are told and forgotten. `report`: the relay ended it by
    /// itself (every player left, idle), so the coordinator hears about it; a close the
    /// coordinator asked for is not reported back.
    func endSession(_ session: RelaySession, reason: DetachReason, detail: String, now: UInt64, report: Bool = true) {
        if report && !session.ended { lifecycle.ended(session.sessionId, reason: detail) }
        for participant in session.participants { peers.forget(participant) }
        session.end(reason: reason, detail: detail, now: now)
        if endedAtUnixMs.count >= 10_000, let oldest = endedAtUnixMs.min(by: { $0.value < $1.value })?.key {
            endedAtUnixMs.removeValue(forKey: oldest)
        }
        // On the tickets' clock: less the skew allowance, so a relay clock ahead of the
        // coordinator's does not void tickets issued just after (a session moved back here).
        endedAtUnixMs[session.sessionId] = UnixTime.nowMs() &- verifier.clockSkewMs
        endedSessions.append(session.sessionId)
        if endedSessions.count > 64 {
            for id in endedSessions { sessions.removeValue(forKey: id) }
            endedSessions.removeAll()
        }
    }

    /// The relay stops: every peer is told to reattach through a renewed ticket, and every
    /// replay is finished and synced to disk.
    public func shutdown(now: UInt64) {
        for session in sessions.values {
            for participant in session.participants { peers.forget(participant) }
            session.end(reason: .relayShutdown, detail: "relay shutting down", now: now)
        }
        sessions.removeAll()
        peers.removeAll()
    }

    /// Why the revoked participants could not all be kept on disk or read back (nil: no trouble).
    public var revocationsProblem: String? { revocations.journal?.problem }
}
