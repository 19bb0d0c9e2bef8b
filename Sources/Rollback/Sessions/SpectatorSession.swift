/// Watches a match: receives only confirmed inputs from a host (a player's
/// ``P2PSession`` with this endpoint among its spectators, or the relay) and simulates
/// them. It never predicts or rolls back. When it falls more than `catchUpThreshold`
/// frames behind the inputs it holds, each ``advanceFrame()`` simulates `catchUpSpeed`
/// frames so the spectator catches up instead of staying behind forever.
///
/// Driven like ``P2PSession``: `handle`, `poll`, `drainEvents`, `advanceFrame`, `drainOutgoing`.
public final class SpectatorSession<G: Game> {
    /// The configuration the session was created with.
    public let configuration: SessionConfiguration
    /// The endpoint sending confirmed inputs.
    public let host: PeerID
    /// Frames behind the newest received input at which catching up starts.
    public let catchUpThreshold: Int
    /// Frames simulated per ``advanceFrame()`` while catching up.
    public let catchUpSpeed: Int
    var runner: GameRunner<G>
    var inputs: InputSet
    private var endpoint: Endpoint
    private var rng: SeededRandom
    private var desync: DesyncDetector
    private var desyncScratch: [DesyncReport] = []
    private var outbox: [OutgoingMessage] = []
    private var events: [SessionEvent] = []
    private var now: UInt64 = 0
    private var disconnectReported: [Bool]
    /// Handshaking or running.
    public private(set) var state: SessionState = .synchronizing

    /// Creates a spectator of `host`.
    public init(game: G, configuration: SessionConfiguration, host: PeerID,
                catchUpThreshold: Int = 8, catchUpSpeed: Int = 2) throws {
        if let problem = configuration.validationError() { throw RollbackError.invalidConfiguration(problem) }
        guard catchUpThreshold >= 0, catchUpSpeed >= 1 else {
            throw RollbackError.invalidConfiguration("catchUpThreshold >= 0 and catchUpSpeed >= 1")
        }
        self.configuration = configuration
        self.host = host
        self.catchUpThreshold = catchUpThreshold
        self.catchUpSpeed = catchUpSpeed
        self.inputs = InputSet(configuration: configuration)
        self.runner = GameRunner(game: game, configuration: configuration, inputs: &inputs)
        runner.savingEnabled = false
        self.endpoint = Endpoint(id: host, kind: .host, players: Array(0 ..< configuration.playerCount))
        self.rng = SeededRandom(seed: configuration.seed)
        self.desync = DesyncDetector(interval: configuration.checksumInterval, matchFrameOffset: configuration.matchFrameOffset)
        self.disconnectReported = Array(repeating: false, count: configuration.playerCount)
        endpoint.syncNonce = UInt32(truncatingIfNeeded: rng.next())
    }

    /// The game.
    public var game: G { runner.game }
    /// The next frame to simulate.
    public var currentFrame: Frame { runner.currentFrame }
    /// The newest frame for which every input has arrived (never beyond what the host sent,
    /// even when every player has left).
    public var confirmedFrame: Frame {
        var confirmed = Frame.max
        var received = nullFrame
        for queue in inputs.queues {
            confirmed = min(confirmed, queue.confirmedFrame(authoritative: true))
            received = max(received, queue.lastAuthoritativeFrame)
        }
        return min(confirmed, received)
    }
    /// Frames received but not simulated yet.
    public var framesBehind: Int { max(0, confirmedFrame - runner.currentFrame + 1) }
    /// Statistics for the host link.
    public var stats: PeerStats {
        var stats = endpoint.stats
        stats.lastReceivedFrame = confirmedFrame
        return stats
    }

    /// Takes every event queued since the last call.
    public func drainEvents() -> [SessionEvent] {
        defer { events.removeAll(keepingCapacity: true) }
        return events
    }

    /// Takes every outgoing message queued since the last call.
    public func drainOutgoing() -> [OutgoingMessage] {
        defer { outbox.removeAll(keepingCapacity: true) }
        return outbox
    }

    private func send(_ message: RollbackMessage) {
        outbox.append(OutgoingMessage(peer: host, message: message))
        endpoint.lastSendMs = now
        endpoint.stats.messagesSent += 1
        endpoint.stats.bytesSent += message.estimatedSize(inputSize: configuration.inputSize)
    }

    private func ackFrame() -> Frame {
        inputs.queues.reduce(Frame.max) { min($0, $1.lastAuthoritativeFrame) }
    }

    private func sendAck() {
        let ack = ackFrame()
        endpoint.lastToldAck = ack
        endpoint.lastInputSendMs = now
        send(.inputAck(InputAck(ackFrame: ack, confirmedFrame: ack, senderFrame: runner.currentFrame)))
    }

    /// Handles timers. Call every tick.
    ///
    /// The handshake and liveness rules here are P2PCore's too, written out in each on purpose:
    /// moved onto `Endpoint` to be shared, P2PCore's arena figures in `netplay-bench rollback`
    /// were higher in every pair of builds measured (docs/rollback.md, "Performance").
    public func poll(now: UInt64) {
        self.now = max(self.now, now)
        guard endpoint.isAlive else { return }
        if endpoint.phase == .synchronizing,
           endpoint.lastSyncSendMs.map({ self.now &- $0 >= UInt64(configuration.syncRetryMs) }) ?? true {
            endpoint.lastSyncSendMs = self.now
            send(.syncRequest(SyncRequest(nonce: endpoint.syncNonce)))
        }
        if let heard = endpoint.lastReceiveMs {
            let silence = Int(self.now &- heard)
            if !endpoint.interrupted && silence >= configuration.interruptTimeoutMs {
                endpoint.interrupted = true
                let remaining = configuration.disconnectTimeoutMs > 0
                    ? max(0, configuration.disconnectTimeoutMs - silence) : Int.max
                events.append(.interrupted(peer: host, disconnectInMs: remaining))
            }
            if configuration.disconnectTimeoutMs > 0 && silence >= configuration.disconnectTimeoutMs {
                endpoint.phase = .disconnected
                events.append(.peerDisconnected(peer: host))
                return
            }
        }
        guard endpoint.phase == .running else { return }
        if endpoint.lastQualityMs.map({ self.now &- $0 >= UInt64(configuration.qualityReportIntervalMs) }) ?? true {
            endpoint.lastQualityMs = self.now
            send(.qualityReport(QualityReport(sentAtMs: self.now, frame: runner.currentFrame, frameAdvantage: 0)))
        }
        let ackChanged = ackFrame() != endpoint.lastToldAck
        if ackChanged && self.now &- endpoint.lastInputSendMs >= UInt64(configuration.resendIntervalMs) {
            sendAck()
        } else if self.now &- endpoint.lastSendMs >= UInt64(configuration.keepAliveIntervalMs) {
            sendAck()
        }
    }

    /// Feeds a message from the host.
    public func handle(_ message: RollbackMessage, from peer: PeerID, now: UInt64) {
        self.now = max(self.now, now)
        guard peer == host, endpoint.isAlive, message.isWithinFrameRange else { return }
        endpoint.stats.messagesReceived += 1
        endpoint.lastReceiveMs = self.now
        if endpoint.interrupted {
            endpoint.interrupted = false
            events.append(.resumed(peer: host))
        }
        switch message {
        case .syncRequest(let request):
            send(.syncReply(SyncReply(nonce: request.nonce)))
        case .syncReply(let reply):
            guard endpoint.phase == .synchronizing, reply.nonce == endpoint.syncNonce else { break }
            endpoint.syncCount += 1
            events.append(.synchronizing(peer: host, count: endpoint.syncCount, total: configuration.syncRoundTrips))
            endpoint.syncNonce = UInt32(truncatingIfNeeded: rng.next())
            if endpoint.syncCount >= configuration.syncRoundTrips {
                endpoint.phase = .running
                state = .running
                events.append(.synchronized(peer: host))
                events.append(.running)
            } else {
                endpoint.lastSyncSendMs = self.now
                send(.syncRequest(SyncRequest(nonce: endpoint.syncNonce)))
            }
        case .input(let input):
            receive(input)
        case .qualityReport(let report):
            send(.qualityReply(QualityReply(echoedSentAtMs: report.sentAtMs)))
            endpoint.noteRemoteFrame(report.frame, now: self.now)
        case .qualityReply(let reply):
            if self.now >= reply.echoedSentAtMs { endpoint.recordRoundTrip(Double(self.now - reply.echoedSentAtMs)) }
        case .checksumReport(let report):
            desync.receive(report, from: host, history: inputs.checksums, desyncs: &desyncScratch)
            flushDesyncs()
        case .disconnectNotice(let notice):
            guard notice.player >= 0, notice.player < configuration.playerCount else { break }
            // Not into inputs the host already made final (see P2PCore.handleDisconnectNotice).
            let frame = max(notice.frame, inputs.queues[notice.player].lastAuthoritativeFrame + 1)
            inputs.queues[notice.player].disconnect(from: frame, final: true, currentFrame: runner.currentFrame)
            reportDisconnect(notice.player, frame: inputs.queues[notice.player].disconnectFrame)
        case .inputAck, .keepAlive:
            break
        case .stateRequest(let request):
            events.append(.stateRequested(peer: host, confirmedFrame: request.confirmedFrame))
        case .stateTransfer(let transfer):
            events.append(.stateReceived(peer: host, transfer: transfer))
        }
    }

    private func receive(_ message: InputMessage) {
        endpoint.noteRemoteFrame(message.senderFrame, now: now)
        let player = message.player
        guard player >= 0, player < configuration.playerCount else { return }
        let origin: InputQueue.Origin
        switch message.origin {
        case .substituted: origin = .substituted
        case .disconnected: origin = .disconnected
        case .authoritative: origin = .authoritative
        case .peer: return  // provisional: taken as final, it would shut out the relay's final input for those frames
        }
        var frame = max(message.startFrame, inputs.queues[player].lastAuthoritativeFrame + 1)
        let end = min(message.endFrame, runner.currentFrame + inputs.queues[player].capacity / 2)
        while frame <= end {
            let input = message.inputs[frame - message.startFrame].masked(toSize: configuration.inputSize)
            guard inputs.queues[player].addAuthoritative(frame: frame, input: input, origin: origin,
                                                          currentFrame: runner.currentFrame) else { break }
            frame += 1
        }
        if origin == .disconnected { reportDisconnect(player, frame: message.startFrame) }
    }

    private func reportDisconnect(_ player: PlayerHandle, frame: Frame) {
        guard !disconnectReported[player] else { return }
        disconnectReported[player] = true
        events.append(.playerDisconnected(player: player, frame: frame))
    }

    private func flushDesyncs() {
        for report in desyncScratch { events.append(.desync(report)) }
        desyncScratch.removeAll(keepingCapacity: true)
    }

    /// Simulates as many frames as the catch-up policy allows (0 when no confirmed input is
    /// waiting). Returns the number of frames simulated.
    @discardableResult
    public func advanceFrame() -> Int {
        guard state == .running else { return 0 }
        let available = framesBehind
        guard available > 0 else { return 0 }
        let steps = min(available, available > catchUpThreshold ? catchUpSpeed : 1)
        for _ in 0 ..< steps { runner.advance(inputs: &inputs) }
        _ = desync.confirm(upTo: runner.currentFrame - 1, validThrough: runner.currentFrame, history: inputs.checksums,
                           desyncs: &desyncScratch)
        flushDesyncs()
        return steps
    }
}
