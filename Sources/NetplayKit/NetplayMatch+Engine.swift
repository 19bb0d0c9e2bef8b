import Foundation
import NetplayService
import NetplayWire
import Rollback

// NetplayMatch: driving the rollback engine each tick and sending what it produces.
extension NetplayMatch {
    // MARK: Driving the engine

    func drive(input: GameInput, now: UInt64) -> TickResult {
        var result = TickResult()
        retryPendingLoad(now: now)
        switch engine {
        case .none:
            return result
        case .player(let session):
            session.poll(now: now)
            handleEvents(session.drainEvents())
            if let startAtMs {
                // Every player begins at the same moment: the relay said how long to wait.
                guard now >= startAtMs else { return result }
                self.startAtMs = nil
            }
            var frames = 1
            // Behind: the relay confirmed frames this peer has not simulated yet (it froze, or
            // came back from an outage): run extra frames until level again.
            let behind = relayConfirmedFrames - session.currentFrame - offset
            catchUpFrames = behind > 2 ? behind : 0
            if hintFresh, let hint {
                hintFresh = false
                follow(hint, session: session, now: now)
            }
            if catchUpFrames > 0 {
                frames += min(catchUpFrames, options.catchUpFramesPerTick)
                pacer.reset()
            } else {
                frames = pacer.framesThisTick(now: now)
            }
            for _ in 0 ..< frames {
                do {
                    try session.addLocalInput(input, for: slot - 1)
                    switch try session.advanceFrame() {
                    case .advanced(let rolledBack):
                        result.framesAdvanced += 1
                        if rolledBack > 0 {
                            rollbacks += 1
                            rollbackFrames += rolledBack
                            maxRollback = max(maxRollback, rolledBack)
                            result.rolledBackFrames += rolledBack
                        }
                    case .waiting(let reason):
                        result.waiting = reason
                    }
                } catch {
                    note(.error(.internal, "engine: \(error)"))
                }
                if result.waiting != nil { break }
            }
            handleEvents(session.drainEvents())
            captureAlignedState(session)
            pumpOutgoing(session, now: now)
        case .spectator(let session):
            session.poll(now: now)
            _ = session.drainEvents()
            var budget = 1 + options.catchUpFramesPerTick
            while budget > 0 {
                if let stop = options.stopAtFrame, currentFrame >= stop { break }
                let advanced = session.advanceFrame()
                if advanced == 0 { break }
                result.framesAdvanced += advanced
                budget -= 1
                if session.framesBehind <= 1 { break }
            }
            pumpSpectator(session, now: now)
        }
        if now &- lastStatsMs >= 1000 {
            lastStatsMs = now
            sendOwnStats(now: now)
        }
        return result
    }

    /// Takes a time-sync hint: the offset from the session's mean goes to the pacing (see
    /// ``PacingController``), and with an automatic delay, the delay to use.
    func follow(_ hint: TimeSyncHint, session: P2PSession<G>, now: UInt64) {
        pacer.frameMs = 1000 / params.framesPerSecond
        pacer.follow(aheadMs: Double(hint.aheadUs) / 1000, now: now)
        if params.frameDelayAuto, hint.frameDelay > 0, Int(hint.frameDelay) != session.inputDelay {
            let from = session.inputDelay
            if (try? session.setInputDelay(Int(min(hint.frameDelay, 15)))) != nil {
                params.frameDelay = hint.frameDelay
                note(.frameDelayChanged(from: from, to: session.inputDelay))
            }
        }
    }

    private func handleEvents(_ events: [Rollback.SessionEvent]) {
        // Under a relay the engine's own events are informational: the relay judges checksums
        // and connectivity; NetplayKit reconnects itself.
        _ = events
    }

    /// Sends the engine's outgoing messages to the relay as wire messages.
    private func pumpOutgoing(_ session: P2PSession<G>, now: UInt64) {
        var syncRequests: [UInt32] = []
        var checksums: [FrameChecksum] = []
        let size = Int(params.inputSize)
        session.drainOutgoing { outgoing in
            switch outgoing.message {
            case .syncRequest(let request):
                syncRequests.append(request.nonce)
            case .input(let message):
                var bytes: [UInt8] = []
                bytes.reserveCapacity(message.inputs.count * size)
                for input in message.inputs {
                    for index in 0 ..< size { bytes.append(input[byte: index]) }
                }
                let start = message.startFrame + offset
                for index in message.inputs.indices {
                    ownInputs[start + index] = Array(bytes[index * size ..< index * size + size])
                }
                ownNewest = max(ownNewest, start + message.inputs.count - 1)
                link.send(.inputBatch(InputBatch(slot: UInt32(clamping: slot), startFrame: UInt32(clamping: max(start, 0)),
                                                 inputSize: UInt32(size), inputs: Array(bytes.prefix(128 * size)),
                                                 awaitedFrame: UInt32(clamping: max(message.ackFrame + 1 + offset, 0)),
                                                 currentFrame: UInt32(clamping: max(message.senderFrame + offset, 0)))), now: now)
            case .inputAck(let ack):
                link.send(.inputBatch(InputBatch(slot: UInt32(clamping: slot), startFrame: 0, inputSize: UInt32(size),
                                                 awaitedFrame: UInt32(clamping: max(ack.ackFrame + 1 + offset, 0)),
                                                 currentFrame: UInt32(clamping: max(ack.senderFrame + offset, 0)))), now: now)
            case .qualityReport(let report):
                lastPingMs = now
                link.send(.ping(Ping(nonce: report.sentAtMs, sentAtUs: report.sentAtMs * 1000)),
                          requestId: takeRequestId(), now: now)
            case .checksumReport(let report):
                let frame = report.frame + offset
                reportedChecksums[frame] = report.checksum
                checksums.append(FrameChecksum(frame: UInt32(clamping: frame), checksum: report.checksum))
            default:
                break
            }
        }
        if ownInputs.count > options.historyFrames + 256 {
            let floor = ownNewest - options.historyFrames
            ownInputs = ownInputs.filter { $0.key > floor }
        }
        if reportedChecksums.count > 512, let oldest = reportedChecksums.keys.min() { reportedChecksums.removeValue(forKey: oldest) }
        if !checksums.isEmpty {
            link.send(.checksumReport(NetplayWire.ChecksumReport(slot: UInt32(slot), checksums: Array(checksums.suffix(16)))), now: now)
        }
        for nonce in syncRequests {
            session.handle(.syncReply(SyncReply(nonce: nonce)), from: relayPeer, now: now)
        }
    }

    private func pumpSpectator(_ session: SpectatorSession<G>, now: UInt64) {
        var syncRequests: [UInt32] = []
        for outgoing in session.drainOutgoing() {
            switch outgoing.message {
            case .syncRequest(let request):
                syncRequests.append(request.nonce)
            case .inputAck(let ack):
                link.send(.inputBatch(InputBatch(slot: 0, startFrame: 0, inputSize: params.inputSize,
                                                 awaitedFrame: UInt32(clamping: max(ack.ackFrame + 1 + offset, 0)),
                                                 currentFrame: UInt32(clamping: max(ack.senderFrame + offset, 0)))), now: now)
            case .qualityReport(let report):
                link.send(.ping(Ping(nonce: report.sentAtMs, sentAtUs: report.sentAtMs * 1000)),
                          requestId: takeRequestId(), now: now)
            default:
                break
            }
        }
        for nonce in syncRequests {
            session.handle(.syncReply(SyncReply(nonce: nonce)), from: relayPeer, now: now)
        }
    }

    func sendOwnStats(now: UInt64) {
        let hud = self.hud
        link.send(.peerStats(NetplayWire.PeerStats(slot: UInt32(slot), role: role, pingMs: UInt32(clamping: hud.pingMs),
                                                   jitterMs: UInt32(clamping: hud.jitterMs), framesAhead: Int32(clamping: hud.framesAhead),
                                                   frameDelay: UInt32(clamping: hud.frameDelay), rollbacks: UInt64(rollbacks),
                                                   rollbackFrames: UInt64(rollbackFrames),
                                                   maxRollbackFrames: UInt32(clamping: maxRollback), connected: true,
                                                   currentFrame: UInt32(clamping: currentFrame))), now: now)
    }
}
