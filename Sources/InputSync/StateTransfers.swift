import NetplayService
import NetplayWire

extension RelaySession {
    /// Asks `reference` for its latest confirmed state for `targets`. Returns whether it began.
    @discardableResult
    func beginTransfer(reason: StateTransferReason, reference: RelayPeer, targets: [RelayPeer], now: UInt64,
                       atLeastFrame: Int = 0) -> Bool {
        guard transfer == nil, !targets.isEmpty, reference.isConnected, now >= transferRetryAtMs else { return false }
        let id = nextTransferId
        nextTransferId &+= 1
        if nextTransferId == 0 { nextTransferId = 1 }
        transfer = ActiveTransfer(id: id, reason: reason, reference: reference, targets: targets, now: now)
        if transferReasons.count > 32 { transferReasons.removeAll() }
        transferReasons[id] = reason
        for target in targets where target.awaitingTransfer != nil { target.awaitingTransfer = id }
        send(.stateRequest(StateRequest(transferId: id, frame: UInt32(atLeastFrame), reason: reason,
                                        maxChunkBytes: UInt32(configuration.transferChunkBytes))),
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

    /// Starts transfers for participants waiting for one; abandons transfers whose reference
    /// stalled and drops targets that stalled.
    func driveTransfers(now: UInt64) {
        if let transfer { checkProgress(of: transfer, now: now) }
        guard transfer == nil else { return }
        let targets = participants.filter {
            $0.isConnected && $0.awaitingTransfer != nil && $0.stalledTransfers <= Self.loadRetries
        }
        guard let first = targets.first, let reference = transferReference(excluding: targets) else { return }
        // A state from the newer half of the frames this relay holds inputs after: an older one
        // (a peer prefers its latest state at a checksum frame) may fall out of the history
        // before its targets can run from it, and they would need another transfer.
        let newerHalf = timeline.oldest + max(timeline.confirmed - timeline.oldest, 0) / 2
        beginTransfer(reason: first.awaitingReason, reference: reference, targets: targets, now: now,
                      atLeastFrame: newerHalf)
    }

    /// Abandons `transfer` when its reference sent no chunk for the transfer timeout, or its
    /// state is not whole by its deadline (``ActiveTransfer/stateDeadlineMs(timeoutMs:minRate:)``);
    /// drops the targets that left, those that acknowledged none of the chunks sent to them for
    /// as long, and, past the targets' deadline (``ActiveTransfer/deliveryDeadlineMs(timeoutMs:minRate:)``,
    /// as long again from when the state became whole), every target still short of the state
    /// (each gets another transfer, up to ``loadRetries`` times). A trickle of chunks or
    /// acknowledgements keeps no transfer, its state held and its session's next transfers
    /// waiting, open for long.
    func checkProgress(of transfer: ActiveTransfer, now: UInt64) {
        let (timeoutMs, minRate) = (configuration.transferTimeoutMs, configuration.transferMinRateBytes)
        let timeout = UInt64(timeoutMs)
        if !transfer.complete {
            let late = transfer.stateDeadlineMs(timeoutMs: timeoutMs, minRate: minRate).map { now >= $0 } ?? false
            if late || now &- transfer.lastProgressMs >= timeout {
                abortTransfer(reason: late ? "its \(transfer.totalSize)-byte state did not arrive at \(minRate) bytes/s"
                                           : "no chunk for \(timeoutMs) ms",
                              now: now)
                return
            }
        }
        let late = transfer.deliveryDeadlineMs(timeoutMs: timeoutMs, minRate: minRate).map { now >= $0 } ?? false
        for delivery in transfer.deliveries where !delivery.finished {
            if delivery.left(transfer) {
                delivery.finished = true  // not a stall: a later transfer serves it
                continue
            }
            guard late || (delivery.owesAcknowledgement && now &- delivery.lastProgressMs >= timeout) else { continue }
            delivery.finished = true
            stalled(delivery, of: transfer, late: late)
        }
        pump(transfer, now: now)  // ends a transfer nobody waits for
    }

    /// A target stopped acknowledging chunks (it does not read, or its link died): it leaves the
    /// transfer, and waits for another unless it stalled more than ``loadRetries`` times.
    private func stalled(_ delivery: TransferDelivery, of transfer: ActiveTransfer, late: Bool) {
        let target = delivery.peer
        target.stalledTransfers += 1
        target.stalledOn = delivery.address
        let retry = target.stalledTransfers <= Self.loadRetries
        if target.startState == .sent(transfer.id) { target.startState = .missing }
        // It plays on from the state before the restart: a state of now is its way back.
        if transfer.reason == .restart { requestCatchUpTransfer(target) }
        transport.publish(topic: "sync.transfer_failed", .eventRecord(EventRecord()), severity: .error,
                          message: "\(target.participantId) acknowledged \(delivery.acknowledgedBytes) of the \(delivery.sentBytes) bytes of transfer \(transfer.id) sent to it and "
                              + (late ? "not the whole \(transfer.totalSize) bytes at \(configuration.transferMinRateBytes) bytes/s"
                                      : "nothing more for \(configuration.transferTimeoutMs) ms")
                              + (retry ? "; another transfer follows" : "; giving up after \(Self.loadRetries) retries"),
                          sessionId: sessionId)
    }

    /// Gives up the current transfer; waiting participants get another one later.
    func abortTransfer(reason: String, now: UInt64) {
        guard let transfer else { return }
        self.transfer = nil
        for target in transfer.targets where target.awaitingTransfer != nil { target.awaitingTransfer = 0 }
        if transfer.reason == .matchStart { startTransferEnded(transfer, completed: false) }
        if transfer.reason == .restart { restartTransferEnded(transfer, frame: transfer.complete ? transfer.frame : nil) }
        transport.publish(topic: "sync.transfer_failed", .eventRecord(EventRecord()), severity: .error,
                          message: "state transfer \(transfer.id) of \(sessionId) abandoned: \(reason)",
                          sessionId: sessionId)
    }

    /// A chunk from the reference: checked, then relayed to every target.
    func receive(_ chunk: StateChunk, from participant: RelayPeer, now: UInt64) throws(ServiceError) {
        guard let transfer, transfer.id == chunk.transferId, transfer.reference === participant else {
            if let dropped = droppedTransfer, dropped.id == chunk.transferId, dropped.reference === participant { return }
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
            guard transferBudget.reserve(Int(chunk.totalSize)) else {
                transferRetryAtMs = now + Self.transferRetryMs
                abortTransfer(reason: "its \(chunk.totalSize)-byte state does not fit the \(transferBudget.capacity - transferBudget.held) bytes left of the relay's \(transferBudget.capacity) for states in transfer; another try in \(Self.transferRetryMs) ms",
                              now: now)
                throw ServiceError(.overloaded, "This relay holds as many states in transfer as it may; the transfer is tried again in a moment.",
                                   retryAfterMs: UInt32(Self.transferRetryMs))
            }
            transfer.reservedBytes = Int(chunk.totalSize)
            transfer.frame = frame
            transfer.totalSize = chunk.totalSize
        }
        // In order (checked before adding, so no offset can overflow), within the state, and no
        // chunk after the last. Every chunk but the last carries at least a quarter of the asked
        // size or a 64th of the state (and never nothing), so a state cannot be kept as
        // millions of tiny chunks.
        let smallest = max(1, min(configuration.transferChunkBytes / 4, Int(transfer.totalSize / 64)))
        let end = transfer.nextOffset + UInt64(chunk.data.count)
        guard !transfer.complete, chunk.offset == transfer.nextOffset, end <= transfer.totalSize,
              chunk.last == (end == transfer.totalSize),
              chunk.last || chunk.data.count >= smallest else {
            abortTransfer(reason: "chunk out of order", now: now)
            throw ServiceError(.badRequest, "Chunks must arrive in order, each but the last of at least \(smallest) bytes, and end exactly at total_size (expected offset \(transfer.nextOffset)).",
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
        transfer.chunks.append(chunk)
        if chunk.last { transfer.completedMs = now }
        // The session's next replay file starts from a restart's state as soon as it is whole.
        if chunk.last, transfer.reason == .restart { continueReplayAfterRestart(transfer, frame: frame) }
        pump(transfer, now: now)
    }

    /// Sends each target of `transfer` the chunks it may have now (a pacing target: while they
    /// stay within ``RelayConfiguration/transferWindowBytes`` of what it acknowledged). A target
    /// sent the last chunk runs from the state's frame; the transfer ends when every target
    /// got the state or left it.
    func pump(_ transfer: ActiveTransfer, now: UInt64) {
        let window = UInt64(max(configuration.transferWindowBytes, 1))
        var served = false
        for delivery in transfer.deliveries where !delivery.finished {
            let target = delivery.peer
            guard !delivery.left(transfer) else {
                delivery.finished = true  // a later transfer serves it
                continue
            }
            if !delivery.paced, transfer.frame != nil, transfer.totalSize > window {
                refuseUnpaced(delivery, of: transfer, now: now)
                continue
            }
            // Its acknowledgements say what it read, and can be forged (a target claiming every
            // byte sent, reading none, was sent window after window, all queued here): while its
            // kernel has not acknowledged two windows (1 MiB at least, room for its input
            // broadcasts), it waits; a pump sends it a window at most. An honest target has at
            // most a window of the state outstanding, so this never holds it up.
            if delivery.paced, delivery.sentBytes > 0, let address = target.address,
               let unacknowledged = transport.unacknowledgedBytes(to: address),
               UInt64(unacknowledged) >= max(2 * window, Self.unacknowledgedFloor) { continue }
            while delivery.nextChunk < transfer.chunks.count {
                let chunk = transfer.chunks[delivery.nextChunk]
                let size = UInt64(chunk.data.count)
                let outstanding = delivery.sentBytes - delivery.acknowledgedBytes
                if delivery.paced, outstanding > 0, outstanding + size > window { break }
                if outstanding == 0 { delivery.lastProgressMs = now }  // its acknowledgements are due from now
                send(.stateChunk(chunk), to: target, now: now)
                delivery.nextChunk += 1
                delivery.sentBytes += size
                guard chunk.last else { continue }
                delivery.finished = true
                delivery.delivered = true
                target.deliveredTransfer = transfer.id
                served = true
                if let frame = transfer.frame { received(transfer, frame: frame, by: target, now: now) }
            }
        }
        // Nobody left to take a state not yet whole (every target left or was refused): it ends
        // now, its reservation given back, and the reference's chunks still coming are let go.
        // Not a restart's: its state starts the session's next replay file.
        if self.transfer === transfer, !transfer.complete, transfer.reason != .restart,
           transfer.deliveries.allSatisfy({ $0.finished && !$0.delivered }) {
            droppedTransfer = (transfer.id, transfer.reference)
            self.transfer = nil
            if transfer.reason == .matchStart { startTransferEnded(transfer, completed: false) }
            return
        }
        // Ends once the state is whole and every target got it or left.
        guard self.transfer === transfer, transfer.complete, transfer.deliveries.allSatisfy(\.finished) else {
            if served { deliverConfirmed(now: now) }
            return
        }
        self.transfer = nil
        if transfer.reason == .restart { restartTransferEnded(transfer, frame: transfer.frame) }
        deliverConfirmed(now: now)
    }

    /// `target` was sent the whole state of `frame`: it runs from there.
    private func received(_ transfer: ActiveTransfer, frame: Int, by target: RelayPeer, now: UInt64) {
        if target.awaitingTransfer != nil {
            target.awaitingTransfer = nil
            target.firstFrame = frame
            target.sentFrames = frame
            target.awaitedFrame = frame
            target.rttProbe = nil
            target.lastAuthoritativeSendMs = now
        }
        // A player's checksums count again from the state's frame on once it says it loaded the
        // state (a state it never said it loaded is replaced by this one). Not the start's: the
        // state of frame 0 is every peer's, and their checksums count from it.
        if transfer.reason != .matchStart, target.slot > 0 {
            loadsAwaited[target.slot - 1] = (transfer.id, frame)
            resyncedAt[target.slot - 1] = .max
        }
        // A spectator of a restart (which replaces its engine with the state) gets the inputs
        // from the state's frame again: left above it (a resumed claim, a late join past the
        // frame), the first frame it is owed would be above the frames sent next.
        if transfer.reason == .restart, !target.isPlayer, target.sentFrames > frame || target.firstFrame > frame {
            target.sentFrames = min(target.sentFrames, frame)
            target.awaitedFrame = min(target.awaitedFrame, frame)
            target.firstFrame = min(target.firstFrame, frame)
        }
    }

    /// `participant` answered the load of `transferId`: when it is the state its slot waits
    /// for, its checksums count again from the state's frame on. Returns that frame (nil: the
    /// answer was about another transfer).
    private func settleLoad(of participant: RelayPeer, transferId: UInt32) -> Int? {
        let slot = participant.slot - 1
        guard slot >= 0, let awaited = loadsAwaited[slot], awaited.transferId == transferId else { return nil }
        loadsAwaited[slot] = nil
        resyncedAt[slot] = awaited.frame + 1
        return awaited.frame
    }

    /// A target of sync protocol 1 acknowledges no progress, so it would be sent the whole state
    /// at once, queued at the relay if it does not read: it gets states of at most one window
    /// (as much as a target of protocol 2 that stops reading can leave queued), and is told to
    /// update for a larger one, which it is not offered again on this connection.
    private func refuseUnpaced(_ delivery: TransferDelivery, of transfer: ActiveTransfer, now: UInt64) {
        delivery.finished = true
        let target = delivery.peer
        target.stalledTransfers = Self.loadRetries + 1
        target.refusedUnpaced = true
        if target.startState == .sent(transfer.id) { target.startState = .missing }
        // It waits for a state it is never sent (its checksums, from a state it does not
        // share, count no more) unless it attaches again pacing its transfers.
        if transfer.reason != .matchStart || running { requestCatchUpTransfer(target) }
        let reason = "States over \(configuration.transferWindowBytes) bytes go only to peers of sync protocol \(SyncProtocol.pacedStateTransfers) or later; this one is \(transfer.totalSize) bytes. Update the client."
        send(.error(ServiceError(.unsupportedVersion, reason).reply), to: target, now: now)
        transport.publish(topic: "sync.transfer_failed", .eventRecord(EventRecord()), severity: .error,
                          message: "\(target.participantId) speaks sync protocol 1 and is not sent the \(transfer.totalSize)-byte state of transfer \(transfer.id) (over the \(configuration.transferWindowBytes)-byte window)",
                          sessionId: sessionId)
    }

    /// The least a target's kernel may hold unacknowledged before its transfer waits (see
    /// ``pump(_:now:)``).
    static let unacknowledgedFloor: UInt64 = 1 << 20

    /// How long a session waits before another transfer once one did not fit the budget.
    static let transferRetryMs: UInt64 = 1_000

    /// How many times a participant that could not load a transferred state gets another one.
    static let loadRetries = 3

    /// A target reports the outcome of a transfer.
    func receive(_ ack: StateTransferAck, from participant: RelayPeer, now: UInt64) {
        if !ack.loaded, ack.error.isEmpty {
            receiveProgress(ack, from: participant, now: now)
            return
        }
        if receiveStartStateAck(ack, from: participant, now: now) { return }
        if ack.loaded {
            // Only a transfer it was sent whole settles anything.
            guard participant.deliveredTransfer == ack.transferId else { return }
            participant.deliveredTransfer = nil
            if let loaded = settleLoad(of: participant, transferId: ack.transferId) {
                // What it reported past the state's frame before loading it is of the run the
                // state replaced (and it does not report those frames again).
                let slot = participant.slot - 1
                for (frame, reports) in checksums.pending where frame > loaded && reports[slot] != nil {
                    checksums.pending[frame]?[slot] = nil
                }
            }
            participant.failedLoads = 0
            participant.stalledTransfers = 0
            if transferReasons.removeValue(forKey: ack.transferId) == .desync { resyncs += 1 }
        } else if !ack.error.isEmpty {
            // It plays on as it was: its checksums count again (a disagreement brings another
            // transfer while its retries last).
            _ = settleLoad(of: participant, transferId: ack.transferId)
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

    /// A target acknowledges the bytes it received so far: its window moves on.
    private func receiveProgress(_ ack: StateTransferAck, from participant: RelayPeer, now: UInt64) {
        guard let transfer, transfer.id == ack.transferId,
              let delivery = transfer.deliveries.first(where: { $0.peer === participant && !$0.finished }) else { return }
        let acknowledged = min(ack.receivedBytes, delivery.sentBytes)
        guard acknowledged > delivery.acknowledgedBytes else { return }
        delivery.acknowledgedBytes = acknowledged
        delivery.lastProgressMs = now
        pump(transfer, now: now)
    }
}
