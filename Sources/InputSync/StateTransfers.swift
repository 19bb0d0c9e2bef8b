import NetplayService
import NetplayWire

/// A state transfer in flight: a reference player's saved state, relayed chunk by chunk to
/// the targets (diverged players, late joiners, returning peers).
final class ActiveTransfer {
    let id: UInt32
    let reason: StateTransferReason
    let reference: RelayPeer
    var targets: [RelayPeer]
    var frame: Int?
    var totalSize: UInt64 = 0
    var nextOffset: UInt64 = 0
    var lastProgressMs: UInt64
    /// The host's start state, kept for the replay header (a start transfer before frame 0).
    var collected: [UInt8] = []

    init(id: UInt32, reason: StateTransferReason, reference: RelayPeer, targets: [RelayPeer], now: UInt64) {
        self.id = id
        self.reason = reason
        self.reference = reference
        self.targets = targets
        lastProgressMs = now
    }
}

extension RelaySession {
    /// Asks `reference` for its latest confirmed state for `targets`. Returns whether it began.
    @discardableResult
    func beginTransfer(reason: StateTransferReason, reference: RelayPeer, targets: [RelayPeer], now: UInt64,
                       atLeastFrame: Int = 0) -> Bool {
        guard transfer == nil, !targets.isEmpty, reference.isConnected else { return false }
        let id = nextTransferId
        nextTransferId &+= 1
        if nextTransferId == 0 { nextTransferId = 1 }
        transfer = ActiveTransfer(id: id, reason: reason, reference: reference, targets: targets, now: now)
        if transferReasons.count > 32 { transferReasons.removeAll() }
        transferReasons[id] = reason
        for target in targets where target.awaitingTransfer != nil { target.awaitingTransfer = id }
        send(.stateRequest(StateRequest(transferId: id, frame: UInt32(atLeastFrame), reason: reason,
                                        maxChunkBytes: UInt32(min(configuration.maxChunkBytes, 65536)))),
             to: reference, now: now)
        return true
    }

    /// The player whose state serves a late joiner: attached, playing its own inputs, not a
    /// target; the host first, then by slot.
    private func transferReference(excluding targets: [RelayPeer]) -> RelayPeer? {
        var order = Array(players.indices)
        if let host = hostSlot, let position = order.firstIndex(of: host) { order.insert(order.remove(at: position), at: 0) }
        for index in order {
            guard let player = players[index], player.isConnected, slotModes[index] == .active, !substituting[index],
                  player.awaitingTransfer == nil, !targets.contains(where: { $0 === player }) else { continue }
            return player
        }
        for index in order {
            guard let player = players[index], player.isConnected, slotModes[index] == .active, player.awaitingTransfer == nil,
                  !targets.contains(where: { $0 === player }) else { continue }
            return player
        }
        return nil
    }

    /// Starts transfers for participants waiting for one; abandons transfers that stalled.
    func driveTransfers(now: UInt64) {
        if let transfer, now &- transfer.lastProgressMs >= UInt64(configuration.transferTimeoutMs) {
            abortTransfer(reason: "no progress for \(configuration.transferTimeoutMs) ms", now: now)
        }
        guard transfer == nil else { return }
        let waiting = participants.filter { $0.isConnected && $0.awaitingTransfer != nil }
        guard let first = waiting.first, let reference = transferReference(excluding: waiting) else { return }
        // A state from the newer half of the frames this relay holds inputs after: an older one
        // (a peer prefers its latest state at a checksum frame) may fall out of the history
        // before its targets can run from it, and they would need another transfer.
        let newerHalf = timeline.oldest + max(timeline.confirmed - timeline.oldest, 0) / 2
        beginTransfer(reason: first.awaitingReason, reference: reference, targets: waiting, now: now,
                      atLeastFrame: newerHalf)
    }

    /// Gives up the current transfer; waiting participants get another one later.
    func abortTransfer(reason: String, now: UInt64) {
        guard let transfer else { return }
        self.transfer = nil
        for target in transfer.targets where target.awaitingTransfer != nil { target.awaitingTransfer = 0 }
        if transfer.reason == .matchStart { startTransferEnded(transfer, completed: false) }
        if transfer.reason == .restart { restartTransferEnded(transfer, frame: nil) }
        transport.publish(topic: "sync.transfer_failed", .eventRecord(EventRecord()), severity: .error,
                          message: "state transfer \(transfer.id) of \(sessionId) abandoned: \(reason)",
                          sessionId: sessionId)
    }

    /// A chunk from the reference: checked, then relayed to every target.
    func receive(_ chunk: StateChunk, from participant: RelayPeer, now: UInt64) throws(ServiceError) {
        guard let transfer, transfer.id == chunk.transferId, transfer.reference === participant else {
            throw ServiceError(.invalidState, "No state transfer \(chunk.transferId) is expected from you.",
                               field: "StateChunk.transfer_id")
        }
        guard chunk.data.count <= configuration.maxChunkBytes else {
            abortTransfer(reason: "oversized chunk", now: now)
            throw ServiceError(.payloadTooLarge, "A state chunk holds at most \(configuration.maxChunkBytes) bytes; got \(chunk.data.count).",
                               field: "StateChunk.data")
        }
        guard chunk.totalSize <= UInt64(configuration.maxStateBytes) else {
            abortTransfer(reason: "state too large", now: now)
            throw ServiceError(.payloadTooLarge, "States are at most \(configuration.maxStateBytes) bytes; this one is \(chunk.totalSize).",
                               field: "StateChunk.total_size")
        }
        let frame = Int(chunk.frame)
        if let expected = transfer.frame {
            guard frame == expected, chunk.totalSize == transfer.totalSize else {
                abortTransfer(reason: "inconsistent chunks", now: now)
                throw ServiceError(.badRequest, "Every chunk of a transfer must carry the same frame and total size.")
            }
        } else {
            guard frame <= timeline.confirmed, frame >= timeline.oldest else {
                abortTransfer(reason: "state frame \(frame) outside \(timeline.oldest) ..< \(timeline.confirmed + 1)", now: now)
                throw ServiceError(.badRequest, "The state must be of a confirmed frame this relay still holds inputs after (\(timeline.oldest) ... \(timeline.confirmed)); got \(frame).",
                                   field: "StateChunk.frame")
            }
            transfer.frame = frame
            transfer.totalSize = chunk.totalSize
        }
        let end = chunk.offset + UInt64(chunk.data.count)
        guard chunk.offset == transfer.nextOffset, end <= transfer.totalSize,
              chunk.last == (end == transfer.totalSize) else {
            abortTransfer(reason: "chunk out of order", now: now)
            throw ServiceError(.badRequest, "Chunks must arrive in order and end exactly at total_size (expected offset \(transfer.nextOffset)).",
                               field: "StateChunk.offset")
        }
        transfer.nextOffset = end
        transfer.lastProgressMs = now
        // The states a replay starts from: the match's start, and a restart's (the next file).
        if (transfer.reason == .matchStart && !running) || transfer.reason == .restart,
           transfer.totalSize <= UInt64(Self.maxRecordedStartState) {
            transfer.collected += chunk.data
            if chunk.last, transfer.reason == .matchStart { startStateBytes = transfer.collected }
        }
        for target in transfer.targets where target.isConnected { send(.stateChunk(chunk), to: target, now: now) }
        guard chunk.last else { return }
        self.transfer = nil
        for target in transfer.targets {
            if target.awaitingTransfer != nil {
                target.awaitingTransfer = nil
                target.firstFrame = frame
                target.sentFrames = frame
                target.awaitedFrame = frame
                target.rttProbe = nil
                target.lastAuthoritativeSendMs = now
            }
            // The state of a match's start is frame 0's: its checksums count (from every peer).
            if target.slot > 0, transfer.reason != .matchStart {
                resyncedAt[target.slot - 1] = max(resyncedAt[target.slot - 1], frame + 1)
            }
        }
        if transfer.reason == .restart { restartTransferEnded(transfer, frame: frame) }
        deliverConfirmed(now: now)
    }

    /// How many times a participant that could not load a transferred state gets another one.
    static let loadRetries = 3

    /// A target reports the outcome of a transfer.
    func receive(_ ack: StateTransferAck, from participant: RelayPeer, now: UInt64) {
        if receiveStartStateAck(ack, from: participant, now: now) { return }
        if ack.loaded {
            participant.failedLoads = 0
            if transferReasons.removeValue(forKey: ack.transferId) == .desync { resyncs += 1 }
        } else if !ack.error.isEmpty {
            participant.failedLoads += 1
            let retry = participant.isConnected && participant.failedLoads <= Self.loadRetries
            transport.publish(topic: "sync.transfer_failed", .eventRecord(EventRecord()), severity: .error,
                              message: "\(participant.participantId) could not load transfer \(ack.transferId): \(ack.error)"
                                  + (retry ? "; another transfer follows" : "; giving up after \(Self.loadRetries) retries"),
                              sessionId: sessionId)
            // It may have diverged or fallen behind meanwhile: a fresh state is its way back.
            if retry, participant.awaitingTransfer == nil {
                participant.awaitingTransfer = 0
                participant.awaitingReason = transferReasons[ack.transferId] ?? .reconnect
            }
        }
    }
}
