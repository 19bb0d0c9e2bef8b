import Foundation
import NetplayService
import NetplayWire
import Rollback

// NetplayMatch: what the relay sends, and relay broadcasts turned into engine input messages.
extension NetplayMatch {
    // MARK: Receiving

    func receive(_ envelope: Envelope, now: UInt64) {
        switch envelope.body {
        case .attachResponse(let response):
            if envelope.requestId == attachRequestId || envelope.requestId == 0 {
                // The answer to this attach once: a copy of it later (repeated, or replayed by
                // the relay) would take a running match back to waiting for its start.
                if envelope.requestId != 0 {
                    guard case .attaching = phase else { return }
                }
                if envelope.requestId == 0, !relayKnowsUs { return }
                if envelope.requestId == 0, phase == .playing || phase == .awaitingState { return }
                attached(response, now: now)
            }
        case .inputBroadcast(let broadcast):
            guard phase == .playing else { return }
            deliver(broadcast, now: now)
        case .pong(let pong):
            let sentMs = pong.echoSentAtUs / 1000
            if now >= sentMs, now - sentMs < 60_000 { keepAliveRttMs = Int(now - sentMs) }
            if case .player(let session) = engine {
                session.handle(.qualityReply(QualityReply(echoedSentAtMs: pong.echoSentAtUs / 1000)), from: relayPeer, now: now)
            } else if case .spectator(let session) = engine {
                session.handle(.qualityReply(QualityReply(echoedSentAtMs: pong.echoSentAtUs / 1000)), from: relayPeer, now: now)
            }
        case .ping(let ping):
            // The relay measures our round trip (before the start, and while waiting for it).
            link.send(.pong(Pong(nonce: ping.nonce, echoSentAtUs: ping.sentAtUs)), now: now)
        case .timeSyncHint(let hint):
            self.hint = hint
            hintFresh = true
        case .stateRequest(let request):
            serveState(request, now: now)
        case .stateChunk(let chunk):
            receiveChunk(chunk, now: now)
        case .desyncNotice(let notice):
            desyncs += 1
            note(.desync(frame: Int(notice.frame), diverged: notice.divergedSlots.map(Int.init), resyncStarted: notice.resyncStarted))
        case .peerEvent(let event):
            note(.peer(event.kind, slot: Int(event.peer.slot), name: event.peer.name, frame: Int(event.frame), detail: event.detail))
            if event.kind == .slotChanged, event.peer.participantId == admission.ticket.participantId, role == .player,
               case .none = engine, (1 ... Int(params.maxPlayers)).contains(Int(event.peer.slot)) {
                // The host moved us before the start: our inputs go to this slot. Never once the
                // engine runs: its local player is fixed, and every input would be refused.
                slot = Int(event.peer.slot)
            }
            if let index = peers.firstIndex(where: { $0.participantId == event.peer.participantId }) {
                peers[index] = event.peer
            } else if peers.count < Self.maxPeers {
                peers.append(event.peer)
            }
            if phase == .waitingForStart { updateLobbyState() }
        case .sessionStats(let stats):
            lastSessionStats = stats
            if let proof = stats.progress, proof.confirmedFrames >= progressProof?.confirmedFrames ?? 0 { progressProof = proof }
        case .chatMessage(let message):
            let line = ChatLine(from: message.fromName, slot: Int(message.fromSlot), text: message.text,
                                sentAtUnixMs: message.sentAtUnixMs)
            chatLines.append(line)
            chatReceived += 1
            if chatLines.count > 200 { chatLines.removeFirst() }
            chatContinuation.yield(line)
        case .detach(let detach):
            relayKnowsUs = false
            switch detach.reason {
            case .kicked: finish(.kicked(detach.message))
            case .sessionEnded: finish(.sessionEnded(detach.message))
            case .replaced: finish(.replaced)
            case .protocolError: finish(.failed(detach.message))
            case .sessionMoved:
                if !lookUpRelay(attempt: 0) { finish(.sessionEnded(detach.message)) }
            case .relayShutdown:
                // The relay drains: the coordinator has another for the session.
                if !lookUpRelay(attempt: 0) { reconnect(now: now, why: "relay shutting down: \(detach.message)") }
            default: reconnect(now: now, why: "detached: \(detach.reason.protoName) \(detach.message)")
            }
        case .error(let error):
            handleError(error, requestId: envelope.requestId, now: now)
        case .ack:
            break
        default:
            break
        }
    }

    private func deliver(_ broadcast: InputBroadcast, now: UInt64) {
        let size = Int(params.inputSize)
        guard Int(broadcast.inputSize) == size || broadcast.players.isEmpty else { return }
        // Frames past the wire's limit are no match's: such a broadcast is dropped whole.
        let limit = Self.frameLimit
        let withinLimit = { (run: PlayerInputs) in Int(run.startFrame) + run.inputs.count / max(size, 1) <= limit }
        guard Int(broadcast.confirmedFrames) <= limit, Int(broadcast.awaitedInputFrame) <= limit,
              broadcast.players.allSatisfy(withinLimit), broadcast.forwarded.allSatisfy(withinLimit) else { return }
        // The relay cannot await our inputs past the newest we sent: a larger claim would
        // stop our inputs for good (the engine sends only past what was acknowledged).
        let awaited = role == .player ? min(Int(broadcast.awaitedInputFrame), max(ownNewest + 1, 0)) : Int(broadcast.awaitedInputFrame)
        let ack = awaited - 1 - offset
        let confirmed = Int(broadcast.confirmedFrames) - 1 - offset
        if broadcast.authoritative {
            record(broadcast)
            // Confirmed only as far as the relay sent the inputs (a claim alone put the match in
            // catch-up mode for good, throwing away every time-sync hint).
            relayConfirmedFrames = max(relayConfirmedFrames, min(Int(broadcast.confirmedFrames), historyNewest + 1))
        }
        recoveryResend?.note(broadcast)
        var messages: [RollbackMessage] = []
        let runs = broadcast.players.map { ($0, broadcast.authoritative) } + broadcast.forwarded.map { ($0, false) }
        for (run, authoritative) in runs {
            let player = Int(run.slot) - 1
            guard player >= 0, player < Int(params.maxPlayers), run.inputs.count % size == 0 else { continue }
            let count = run.inputs.count / size
            var index = max(0, offset - Int(run.startFrame))
            while index < count {
                let origin = authoritative ? Self.origin(run.status.isEmpty ? .received : run.status[min(index, run.status.count - 1)]) : .peer
                var end = index + 1
                while end < count,
                      (authoritative ? Self.origin(run.status.isEmpty ? .received : run.status[min(end, run.status.count - 1)]) : .peer) == origin {
                    end += 1
                }
                var inputs: [GameInput] = []
                inputs.reserveCapacity(end - index)
                for frame in index ..< end {
                    inputs.append(GameInput(bytes: run.inputs[frame * size ..< frame * size + size]))
                }
                if origin == .substituted {
                    // Count each frame once (resends repeat them).
                    let first = Int(run.startFrame) + index, last = Int(run.startFrame) + end
                    let seen = substitutedSeenThrough[player] ?? 0
                    if last > seen {
                        if player == slot - 1 {
                            ownInputsSubstituted += last - max(first, seen)
                        } else {
                            substitutedInputsSeen += last - max(first, seen)
                        }
                        substitutedSeenThrough[player] = last
                    }
                }
                messages.append(.input(InputMessage(player: player, origin: origin,
                                                    startFrame: Int(run.startFrame) + index - offset, inputs: inputs,
                                                    ackFrame: ack, confirmedFrame: confirmed, senderFrame: nullFrame)))
                index = end
            }
        }
        if messages.isEmpty {
            messages.append(.inputAck(InputAck(ackFrame: ack, confirmedFrame: confirmed, senderFrame: nullFrame)))
        }
        for message in messages { handleEngine(message, now: now) }
    }

    private static func origin(_ status: NetplayWire.InputStatus) -> InputOrigin {
        switch status {
        case .substituted: .substituted
        case .disconnected, .empty: .disconnected
        default: .authoritative
        }
    }

    private func handleEngine(_ message: RollbackMessage, now: UInt64) {
        switch engine {
        case .none: break
        case .player(let session): session.handle(message, from: relayPeer, now: now)
        case .spectator(let session): session.handle(message, from: relayPeer, now: now)
        }
    }

    /// Keeps confirmed inputs to resend to a relay that restarted.
    private func record(_ broadcast: InputBroadcast) {
        let size = Int(params.inputSize)
        let slots = Int(params.maxPlayers)
        // No further ahead of this peer's frame than the history holds: one run claiming a
        // frame far ahead made every real row older than the history's floor, and each pruning
        // threw them away (nothing left to resend after a relay restart). A run that continues
        // the history extends it (the relay sends confirmed frames in order, from what this
        // peer acknowledged, also to a peer far behind); one that leaves a gap is taken only
        // within the horizon of this peer's own frame: measured from the newest row, runs each
        // just within it moved it on, ten of them as far as one run far ahead.
        let anchored = currentFrame + options.historyFrames
        // Frames at or below the floor would be pruned with the rest: not written at all (a run
        // of 8,192 old frames cost as many row updates, most of them thrown away after).
        let floor = historyNewest - options.historyFrames
        for run in broadcast.players {
            let player = Int(run.slot) - 1
            guard player >= 0, player < slots else { continue }
            let horizon = Int(run.startFrame) <= historyNewest + 1 ? max(anchored, historyNewest + options.historyFrames) : anchored
            let count = run.inputs.count / size
            for index in min(max(0, floor + 1 - Int(run.startFrame)), count) ..< count {
                let frame = Int(run.startFrame) + index
                guard frame <= horizon else { break }
                // Taken out while it changes, so its arrays are changed in place, not copied.
                var row = history.removeValue(forKey: frame)
                    ?? (Array(repeating: 0, count: slots * size), Array(repeating: .received, count: slots))
                for byte in 0 ..< size { row.inputs[player * size + byte] = run.inputs[index * size + byte] }
                row.statuses[player] = run.status.isEmpty ? .received : run.status[min(index, run.status.count - 1)]
                history[frame] = row
                historyNewest = max(historyNewest, frame)
            }
        }
        if history.count > options.historyFrames + 256 {
            let floor = historyNewest - options.historyFrames
            history = history.filter { $0.key > floor }
        }
    }
}
