import NetplayService
import NetplayWire

/// Whether a participant holds the host's state a match starts from.
enum StartStateProgress: Equatable {
    /// Not yet (a transfer follows).
    case missing
    /// The transfer with this id relayed it; its acknowledgement is awaited.
    case sent(UInt32)
    /// It loaded the state (acknowledged).
    case loaded
}

// RelaySession: a match that starts from the host's state (`AttachRequest.start_from_host_state`)
// and the host's restart (`StartSessionRequest.restart`).
extension RelaySession {
    // MARK: - Starting from the host's state

    /// The largest start state the replay header records (the replay reader takes frames of at
    /// most 1 MiB); a larger one leaves the header without it.
    static let maxRecordedStartState = 1_000_000

    /// The host whose state the match starts from, while it holds its slot.
    var startStateHost: RelayPeer? { startStateSlot.flatMap { players.indices.contains($0) ? players[$0] : nil } }

    /// The host's attach asks that the match start from its state: remembered (every attach of
    /// that host says it again, so a relay rebuilding the session learns it too). Anyone
    /// else's request is ignored, and so is the host's as a spectator (a host that moved to
    /// spectating holds no slot whose state a match could start from: its slot, 0, made the
    /// start-state slot -1, and reading it trapped, ending every session of the relay).
    func noteStartState(of request: AttachRequest, from participant: RelayPeer) {
        guard actsAsHost(participant) else { return }
        guard participant.isPlayer, participant.slot > 0 else {
            // The host left its slot before the start: no start from a state it no longer holds
            // (the slot it left would hold the start up, or hand the start to whoever takes it).
            if !running { startStateSlot = nil }
            return
        }
        guard request.startFromHostState else { return }
        startStateSlot = participant.slot - 1
    }

    /// Before the start of a match from the host's state: true once every other attached
    /// participant loaded the host's state (acknowledged it); until then it sends the state
    /// to those lacking it, one transfer at a time (a participant attaching meanwhile gets the
    /// next). Always true for a match from every peer's boot.
    func startStateReady(now: UInt64) -> Bool {
        guard startStateSlot != nil else { return true }
        guard let host = startStateHost, host.isConnected else { return false }
        let lacking = participants.filter {
            $0 !== host && $0.isConnected && $0.startState == .missing && !Self.givenUp(on: $0)
        }
        // Those given up on (stalled or failed to load too often, or of protocol 1 for a state
        // too large) hold nobody up: they start as late joiners do. One failing every load on
        // purpose had the host upload its state again and again until the start's timeout.
        let waiting = participants.contains {
            $0 !== host && $0.isConnected && $0.startState != .loaded && !Self.givenUp(on: $0)
        }
        guard waiting else { return true }
        // A transfer in flight is watched by the timers (``tick(now:)``), whether or not the start waits.
        guard transfer == nil else { return false }
        if !lacking.isEmpty, beginTransfer(reason: .matchStart, reference: host, targets: lacking, now: now) {
            for target in lacking { target.startState = .sent(transfer!.id) }
        }
        return false
    }

    /// Whether the start no longer sends `participant` the host's state: it stalled, or failed
    /// to load it, more than ``loadRetries`` times.
    static func givenUp(on participant: RelayPeer) -> Bool {
        participant.stalledTransfers > loadRetries || participant.failedLoads > loadRetries
    }

    /// At the start of a match from the host's state: a participant that has not loaded it
    /// (the start timed out) starts as a late joiner does, from a state transfer (the host
    /// serves first), never from its own boot. Returns whether `participant` waits for one.
    func needsStartState(_ participant: RelayPeer) -> Bool {
        guard let host = startStateHost, participant !== host, participant.startState != .loaded else { return false }
        participant.awaitingTransfer = 0
        participant.awaitingReason = .matchStart
        return true
    }

    /// A transfer of the start state ended: chunks relayed, so the targets' acknowledgements
    /// are awaited; on an abort, they lack it again.
    func startTransferEnded(_ transfer: ActiveTransfer, completed: Bool) {
        for target in transfer.targets where target.startState == .sent(transfer.id) {
            if !completed { target.startState = .missing }
        }
    }

    /// A target's acknowledgement of a start-state transfer before the match runs. Returns
    /// false when `ack` is not about one.
    func receiveStartStateAck(_ ack: StateTransferAck, from participant: RelayPeer, now: UInt64) -> Bool {
        guard !running, participant.startState == .sent(ack.transferId) else { return false }
        if ack.loaded {
            participant.startState = .loaded
            participant.failedLoads = 0
            participant.stalledTransfers = 0
        } else {
            participant.failedLoads += 1
            participant.startState = .missing  // another transfer follows (the start waits, up to its timeout)
            transport.publish(topic: "sync.transfer_failed", .eventRecord(EventRecord()), severity: .error,
                              message: "\(participant.participantId) could not load the host's start state (transfer \(ack.transferId)): \(ack.error)",
                              sessionId: sessionId)
        }
        if startSyncSinceMs != nil { driveStartSync(now: now) }
        return true
    }

    // MARK: - The host's restart

    /// The host restarts the match from its state: every other participant loads the host's
    /// confirmed state at or after `frame` (reason `RESTART`), and from now on the host's state
    /// wins checksum votes. Before the match runs, it is the start from the host's state, now.
    /// Refused, changing nothing, while another transfer runs or for a frame this relay does
    /// not hold confirmed inputs after.
    func restart(by host: RelayPeer, from frame: Int, now: UInt64) throws(ServiceError) {
        guard host.isPlayer, host.slot > 0 else {
            throw ServiceError(.invalidState, "The host restarts the match from its state from a player slot; it is spectating.")
        }
        guard running else {
            startStateSlot = host.slot - 1
            requestStart(now: now, forced: true)
            return
        }
        guard transfer == nil else {
            throw ServiceError(.invalidState, "A state transfer is under way; restart again in a moment.", retryAfterMs: 500)
        }
        guard now >= transferRetryAtMs else {
            throw ServiceError(.overloaded, "This relay holds as many states in transfer as it may; restart again in a moment.",
                               retryAfterMs: UInt32(transferRetryAtMs - now))
        }
        guard frame >= timeline.oldest, frame <= timeline.confirmed else {
            throw ServiceError(.badRequest, "A restart is at a confirmed frame this relay still holds inputs after (\(timeline.oldest) ... \(timeline.confirmed)); got \(frame).",
                               field: "StartSessionRequest.restart_frame")
        }
        startStateSlot = host.slot - 1
        let targets = participants.filter { $0 !== host && $0.isConnected && $0.awaitingTransfer == nil }
        guard beginTransfer(reason: .restart, reference: host, targets: targets, now: now, atLeastFrame: frame) else { return }
        // Their checksums from the old state are no evidence until they load the new one (an
        // earlier state they have not said they loaded is superseded).
        for target in targets where target.slot > 0 {
            resyncedAt[target.slot - 1] = .max
            loadsAwaited[target.slot - 1] = nil
        }
        // Reports waiting for the restart's frame and later are of the old timeline, the host's
        // too (it reported its frame before restarting, and does not report it again): judged
        // after the transfer, they went into the next replay file as the checksums of a state
        // they do not belong to.
        for pending in checksums.pending.keys where pending >= frame {
            checksums.pending.removeValue(forKey: pending)
            checksums.firstReportMs.removeValue(forKey: pending)
        }
        // A replay file starts from one state: this one ends here, and once the transfer is
        // done the session's next file starts from the restart's state.
        if let replay {
            replay.finish(footerReason: "the host restarted the match from its state at frame \(frame) or later; the session's next replay file starts from that state",
                          finalChecksum: 0, timeline: timeline)
            self.replay = nil
        }
        transport.publish(topic: "sync.restart", .eventRecord(EventRecord()), severity: .notice,
                          message: "session \(sessionId): the host restarted the match from its state at frame \(frame) or later",
                          sessionId: sessionId)
    }

    /// A restart transfer ended (`frame` the state's, nil when it was abandoned before the state
    /// was whole): the targets it did not reach count their checksums from there (those still
    /// short of it wait for a catch-up transfer, see ``stalled(_:of:late:)``); those it reached
    /// do once they acknowledge loading it. Abandoned early, the replay stops here.
    func restartTransferEnded(_ transfer: ActiveTransfer, frame: Int?) {
        if frame == nil { continueReplayAfterRestart(transfer, frame: nil) }
        for delivery in transfer.deliveries where !delivery.delivered && delivery.peer.slot > 0
            && transfer.targets.contains(where: { $0 === delivery.peer }) {
            resyncedAt[delivery.peer.slot - 1] = (frame ?? timeline.confirmed) + 1
        }
    }

    /// The session's replay goes on in a new file that starts from the restart's state (once
    /// whole, `frame` its frame), or stops for good with the reason.
    func continueReplayAfterRestart(_ transfer: ActiveTransfer, frame: Int?) {
        guard configuration.replayDirectory != nil, replay == nil else { return }
        let reason: String
        if let frame {
            if transfer.collected.count != Int(transfer.totalSize) {
                reason = "its state (\(transfer.totalSize) bytes) is larger than a replay records (\(Self.maxRecordedStartState))"
            } else if frame < timeline.oldest {
                reason = "this relay no longer holds the inputs from frame \(frame)"
            } else {
                openReplay(from: frame, state: transfer.collected)
                return
            }
        } else {
            reason = "the restart's state never arrived whole"
        }
        transport.publish(topic: "sync.replay_failed", .eventRecord(EventRecord()), severity: .error,
                          message: "session \(sessionId): the replay stops at the restart: \(reason)", sessionId: sessionId)
    }
}
