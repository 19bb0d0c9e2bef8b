import Foundation

// P2PCore: the handshake with each endpoint and the inputs on the wire (sending, acknowledging,
// accepting remote inputs).
extension P2PCore {
    // MARK: - Handshake

    mutating func sendSyncRequest(_ index: Int) {
        endpoints[index].lastSyncSendMs = now
        send(.syncRequest(SyncRequest(nonce: endpoints[index].syncNonce)), to: index)
    }

    mutating func handleSyncReply(_ reply: SyncReply, from index: Int) {
        guard endpoints[index].phase == .synchronizing, reply.nonce == endpoints[index].syncNonce else { return }
        endpoints[index].syncCount += 1
        let total = configuration.syncRoundTrips
        let peer = endpoints[index].id
        events.append(.synchronizing(peer: peer, count: endpoints[index].syncCount, total: total))
        endpoints[index].syncNonce = UInt32(truncatingIfNeeded: rng.next())
        if endpoints[index].syncCount >= total {
            endpoints[index].phase = .running
            events.append(.synchronized(peer: peer))
            checkRunning()
        } else {
            sendSyncRequest(index)
        }
    }

    mutating func checkRunning() {
        guard state == .synchronizing else { return }
        for endpoint in endpoints where endpoint.kind != .spectator && endpoint.phase == .synchronizing {
            return
        }
        state = .running
        events.append(.running)
    }

    // MARK: - Inputs on the wire

    /// The newest frame of `index`'s inputs this session holds without gaps.
    func ackFrame(for index: Int) -> Frame {
        var ack = Frame.max
        if endpoints[index].kind == .authority {
            for queue in inputs.queues where queue.lastAuthoritativeFrame < ack { ack = queue.lastAuthoritativeFrame }
        } else {
            for player in endpoints[index].players where inputs.queues[player].lastKnownFrame < ack {
                ack = inputs.queues[player].lastKnownFrame
            }
        }
        return ack == .max ? nullFrame : ack
    }

    mutating func noteStatus(_ index: Int, ack: Frame, confirmed: Frame, senderFrame: Frame) {
        if ack > endpoints[index].ackFrame { endpoints[index].ackFrame = ack }
        if confirmed > endpoints[index].reportedConfirmedFrame { endpoints[index].reportedConfirmedFrame = confirmed }
        endpoints[index].noteRemoteFrame(senderFrame, now: now)
    }

    mutating func handleInput(_ message: InputMessage, from index: Int) {
        noteStatus(index, ack: message.ackFrame, confirmed: message.confirmedFrame, senderFrame: message.senderFrame)
        let player = message.player
        guard player >= 0, player < players.count, !message.inputs.isEmpty else { return }
        let kind = endpoints[index].kind
        let size = configuration.inputSize
        if kind == .authority && message.origin != .peer {
            let origin: InputQueue.Origin
            switch message.origin {
            case .substituted: origin = .substituted
            case .disconnected: origin = .disconnected
            default: origin = .authoritative
            }
            var frame = max(message.startFrame, inputs.queues[player].lastAuthoritativeFrame + 1)
            let end = min(message.endFrame, acceptLimit(player))
            while frame <= end {
                let input = message.inputs[frame - message.startFrame].masked(toSize: size)
                guard inputs.queues[player].addAuthoritative(frame: frame, input: input, origin: origin,
                                                              currentFrame: currentFrame) else { break }
                frame += 1
            }
            if origin == .disconnected { noteAuthorityDisconnect(player, from: message.startFrame) }
            return
        }
        let accepts = isLocal[player] ? false
            : (kind == .peer && endpoints[index].players.contains(player)) || kind == .authority
        guard accepts else { return }
        var frame = max(message.startFrame, inputs.queues[player].lastKnownFrame + 1)
        let end = min(message.endFrame, acceptLimit(player))
        while frame <= end {
            let input = message.inputs[frame - message.startFrame].masked(toSize: size)
            guard inputs.queues[player].addPeer(frame: frame, input: input, currentFrame: currentFrame) else { break }
            frame += 1
        }
    }

    /// The newest frame accepted from the network for `player`: inputs further ahead of the
    /// simulation than half the input history would overwrite frames still needed (no honest
    /// peer gets there: the barriers keep peers within a few frames of each other).
    func acceptLimit(_ player: PlayerHandle) -> Frame {
        currentFrame + inputs.queues[player].capacity / 2
    }

    mutating func sendLocalInputs() {
        for index in endpoints.indices where endpoints[index].phase == .running && endpoints[index].kind != .spectator {
            sendInputsOrAck(to: index, forceAck: false, always: true)
        }
    }

    /// The unacknowledged inputs of local `player` from `from` through `through`, built in a
    /// spare buffer when there is one: every endpoint gets its own run (sharing one would cost
    /// an atomic retain per endpoint and as many releases), and once drained it comes back.
    mutating func inputRun(player: PlayerHandle, from: Frame, through: Frame) -> [GameInput] {
        var run = spareRuns.popLast() ?? []
        run.removeAll(keepingCapacity: true)
        run.reserveCapacity(through - from + 1)
        var frame = from
        while frame <= through {
            guard let (input, _) = inputs.queues[player].knownInput(at: frame) else { break }
            run.append(input)
            frame += 1
        }
        return run
    }

    /// Sends every unacknowledged local input to a peer or relay, or an acknowledgement when
    /// there is none and something changed (or `forceAck`).
    mutating func sendInputsOrAck(to index: Int, forceAck: Bool, always: Bool = false) {
        let ack = ackFrame(for: index)
        var sentInputs = false
        // By index: iterating `localPlayers` while `self` changes retains and releases it.
        for localIndex in 0 ..< localPlayers.count {
            let player = localPlayers[localIndex]
            let last = lastLocalFrame[player]
            let from = max(endpoints[index].ackFrame + 1, last - inputs.queues[player].capacity / 2)
            guard from <= last else { continue }
            let through = min(last, from + configuration.maxInputsPerMessage - 1)
            let run = inputRun(player: player, from: from, through: through)
            guard !run.isEmpty else {
                spareRuns.append(run)
                continue
            }
            let message = InputMessage(player: player, origin: .peer, startFrame: from, inputs: run, ackFrame: ack,
                                       confirmedFrame: localConfirmedFrame, senderFrame: currentFrame)
            send(.input(message), to: index)
            sentInputs = true
        }
        if sentInputs {
            endpoints[index].lastInputSendMs = now
        } else if forceAck || (!always && (ack != endpoints[index].lastToldAck
                                           || localConfirmedFrame != endpoints[index].lastToldConfirmed)) {
            send(.inputAck(InputAck(ackFrame: ack, confirmedFrame: localConfirmedFrame, senderFrame: currentFrame)),
                 to: index)
            endpoints[index].lastInputSendMs = now
        } else {
            return
        }
        endpoints[index].lastToldAck = ack
        endpoints[index].lastToldConfirmed = localConfirmedFrame
    }

    /// Sends confirmed inputs of every player to a spectator.
    mutating func sendSpectatorInputs(to index: Int, force: Bool) {
        let confirmed = confirmedFrame
        let from = endpoints[index].ackFrame + 1
        guard from <= confirmed, force || confirmed > endpoints[index].sentThroughFrame else { return }
        if confirmed - from > inputs.queues[0].capacity / 2 {
            disconnectEndpoint(index)
            return
        }
        let through = min(confirmed, from + configuration.maxInputsPerMessage - 1)
        for player in players.indices {
            var runStart = from
            var runOrigin = InputOrigin.authoritative
            var run = [GameInput]()
            var frame = from
            while frame <= through {
                guard let (input, origin) = inputs.queues[player].knownInput(at: frame) else { break }
                let wire: InputOrigin = origin == .disconnected ? .disconnected
                    : origin == .substituted ? .substituted : .authoritative
                if wire != runOrigin && !run.isEmpty {
                    send(.input(InputMessage(player: player, origin: runOrigin, startFrame: runStart, inputs: run,
                                             ackFrame: nullFrame, confirmedFrame: confirmed,
                                             senderFrame: currentFrame)), to: index)
                    run.removeAll(keepingCapacity: true)
                    runStart = frame
                }
                runOrigin = wire
                run.append(input)
                frame += 1
            }
            if !run.isEmpty {
                send(.input(InputMessage(player: player, origin: runOrigin, startFrame: runStart, inputs: run,
                                         ackFrame: nullFrame, confirmedFrame: confirmed,
                                         senderFrame: currentFrame)), to: index)
            }
        }
        endpoints[index].sentThroughFrame = through
        endpoints[index].lastInputSendMs = now
    }
}
