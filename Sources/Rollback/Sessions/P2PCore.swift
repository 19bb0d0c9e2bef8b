/// The non-generic part of a ``P2PSession``: endpoints, handshakes, input exchange,
/// confirmation, disconnect agreement, checksums, time sync and statistics. A struct, so
/// its methods mutate it without per-access exclusivity checks; compiled once for every game.
@usableFromInline
struct P2PCore {
    let configuration: SessionConfiguration
    @usableFromInline var inputs: InputSet
    /// The next frame to simulate (mirrors the runner's).
    @usableFromInline var currentFrame: Frame = 0
    var barrierStalls = 0
    var endpoints: [Endpoint] = []
    let players: [PlayerLocation]
    let localPlayers: [PlayerHandle]
    var authorityMode: Bool
    var isLocal: [Bool]
    var pendingLocal: [GameInput?]
    var lastLocalFrame: [Frame]
    var lastLocalInput: [GameInput]
    /// The frame whose local inputs were queued and sent (a waiting frame queues them once).
    var localInputsFrame: Frame = nullFrame
    var inputDelay: Int
    var state: SessionState = .synchronizing
    /// The newest frame whose inputs are final on every peer (states before it never change).
    @usableFromInline var confirmedFrame: Frame = nullFrame
    /// The newest frame whose inputs are final as far as this peer knows.
    var localConfirmedFrame: Frame = nullFrame
    var outbox: [OutgoingMessage] = []
    var events: [SessionEvent] = []
    var now: UInt64 = 0
    var rng: SeededRandom
    var desync: DesyncDetector
    var desyncScratch: [DesyncReport] = []
    var nextRecommendationFrame: Frame = 0
    /// Input arrays of drained messages, reused for the next input runs (see `recycleOutbox`).
    var spareRuns: [[GameInput]] = []
    var disconnectProposal: [Frame]
    var disconnectFinal: [Bool]
    /// The endpoint each player's location names (-1 for local players): endpoints are only
    /// added in `init`, so this saves a scan per rollback charged to a culprit.
    var directEndpoint: [Int] = []

    init(configuration: SessionConfiguration, players: [PlayerLocation], spectators: [PeerID], relay: PeerID?) throws {
        if let problem = configuration.validationError() { throw RollbackError.invalidConfiguration(problem) }
        guard players.count == configuration.playerCount else {
            throw RollbackError.invalidConfiguration("players must list playerCount entries")
        }
        self.configuration = configuration
        self.players = players
        self.inputs = InputSet(configuration: configuration)
        self.localPlayers = players.indices.filter { players[$0] == .local }
        guard !localPlayers.isEmpty else { throw RollbackError.invalidConfiguration("a P2P session needs a local player") }
        self.isLocal = players.map { $0 == .local }
        self.authorityMode = relay != nil
        self.inputDelay = configuration.inputDelay
        self.pendingLocal = Array(repeating: nil, count: players.count)
        self.lastLocalFrame = Array(repeating: nullFrame, count: players.count)
        self.lastLocalInput = Array(repeating: .zero, count: players.count)
        self.rng = SeededRandom(seed: configuration.seed)
        self.desync = DesyncDetector(interval: configuration.checksumInterval, matchFrameOffset: configuration.matchFrameOffset)
        self.disconnectProposal = Array(repeating: .max, count: players.count)
        self.disconnectFinal = Array(repeating: false, count: players.count)

        if let relay {
            addEndpoint(Endpoint(id: relay, kind: .authority, players: Array(players.indices)))
        }
        for (player, location) in players.enumerated() {
            guard case .remote(let peer) = location, peer != relay else { continue }
            if let index = endpointIndex(peer) {
                endpoints[index].players.append(player)
            } else {
                addEndpoint(Endpoint(id: peer, kind: .peer, players: [player]))
            }
        }
        for spectator in spectators {
            guard endpointIndex(spectator) == nil else {
                throw RollbackError.invalidConfiguration("\(spectator) is both a player endpoint and a spectator")
            }
            addEndpoint(Endpoint(id: spectator, kind: .spectator, players: []))
        }
        directEndpoint = players.map { location in
            guard case .remote(let peer) = location else { return -1 }
            return endpointIndex(peer) ?? -1
        }
    }

    mutating func addEndpoint(_ endpoint: Endpoint) {
        var endpoint = endpoint
        endpoint.syncNonce = UInt32(truncatingIfNeeded: rng.next())
        endpoints.append(endpoint)
    }

    /// The index of `peer`'s endpoint. A linear scan: at most 8 player endpoints plus
    /// spectators, cheaper than hashing.
    func endpointIndex(_ peer: PeerID) -> Int? {
        for index in endpoints.indices where endpoints[index].id == peer { return index }
        return nil
    }

    // MARK: - Reading

    var framesAhead: Double {
        var ahead = 0.0
        for endpoint in endpoints where endpoint.isAlive && endpoint.kind != .spectator {
            ahead = max(ahead, endpoint.timeSync.framesAhead)
        }
        return ahead
    }

    func stats(for peer: PeerID) -> PeerStats? {
        guard let index = endpointIndex(peer) else { return nil }
        var stats = endpoints[index].stats
        stats.predictionMisses = endpoints[index].players.reduce(0) { $0 + inputs.queues[$1].predictionMisses }
        stats.lastReceivedFrame = ackFrame(for: index)
        return stats
    }

    func disconnectFrame(of player: PlayerHandle) -> Frame? {
        guard player >= 0, player < players.count else { return nil }
        let queue = inputs.queues[player]
        return queue.disconnectIsFinal ? queue.disconnectFrame : nil
    }

    // MARK: - Queues

    /// Takes every event queued since the last call.
    @usableFromInline
    mutating func drainEvents() -> [SessionEvent] {
        defer { events.removeAll(keepingCapacity: true) }
        return events
    }

    /// Takes every outgoing message queued since the last call.
    @usableFromInline
    mutating func drainOutgoing() -> [OutgoingMessage] {
        defer { outbox.removeAll(keepingCapacity: true) }
        return outbox
    }

    /// Hands every outgoing message to `body` without allocating a new array.
    @usableFromInline
    mutating func drainOutgoing(_ body: (OutgoingMessage) throws -> Void) rethrows {
        // Each message is lent to `body` in place through an exclusive access; reading
        // `outbox[index]` would copy (retain and later release) every message.
        defer { recycleOutbox() }
        try outbox.withUnsafeMutableBufferPointer { messages in
            for index in messages.indices { try lend(&messages[index], to: body) }
        }
    }

    /// Empties the outbox after `body` saw every message, keeping the input arrays of input
    /// messages as spare buffers for the next runs (``inputRun(player:from:through:)``). Each
    /// message is moved out, not copied; a buffer nobody else holds any more is then reused in
    /// place: sending a frame's inputs needs no allocation, no free and no atomic retain or
    /// release (each an atomic instruction that waits for all earlier work to retire).
    mutating func recycleOutbox() {
        while let outgoing = outbox.popLast() {
            guard case .input(let message) = outgoing.message, spareRuns.count < 32 else { continue }
            spareRuns.append(message.inputs)
        }
    }

    mutating func send(_ message: consuming RollbackMessage, to index: Int) {
        endpoints[index].lastSendMs = now
        endpoints[index].stats.messagesSent += 1
        endpoints[index].stats.bytesSent += message.estimatedSize(inputSize: configuration.inputSize)
        outbox.append(OutgoingMessage(peer: endpoints[index].id, message: message))
    }

    // MARK: - Input

    /// Sets the input of local player `player` for the next ``advanceFrame()``.
    @usableFromInline
    mutating func addLocalInput(_ input: GameInput, for player: PlayerHandle) throws {
        guard player >= 0, player < players.count, isLocal[player] else { throw RollbackError.invalidPlayer(player) }
        pendingLocal[player] = input.masked(toSize: configuration.inputSize)
    }

    /// Changes the input delay of every local player from the next frame on. Increasing it
    /// repeats the last input over the gap; decreasing it drops inputs until the delay is met.
    mutating func setInputDelay(_ frames: Int) throws {
        guard frames >= 0, frames <= 32 else { throw RollbackError.invalidConfiguration("inputDelay must be 0 ... 32") }
        inputDelay = frames
    }

    // MARK: - Driving

    /// Everything before a frame is simulated: checks the session runs; the first time for
    /// this frame, queues every local input (input delay applied) and sends it; then applies
    /// the prediction and confirmation barriers. Returns why the frame must wait, or nil.
    ///
    /// Local inputs are queued and sent *before* the barriers so that peers waiting on each
    /// other (lockstep, or a long stall) always exchange the inputs they wait for. Inputs
    /// given again while the same frame waits are ignored: the first one counts.
    @usableFromInline
    mutating func prepareAdvance(oldestNeededState: Frame) throws -> WaitReason? {
        guard state == .running else { return .synchronizing }
        let frame = currentFrame
        if localInputsFrame != frame {
            for player in localPlayers where pendingLocal[player] == nil {
                throw RollbackError.missingLocalInput(player)
            }
            localInputsFrame = frame
            for player in localPlayers {
                let input = pendingLocal[player]!
                let target = frame + inputDelay
                if target <= lastLocalFrame[player] { continue }
                while lastLocalFrame[player] + 1 < target {
                    lastLocalFrame[player] += 1
                    inputs.queues[player].addLocal(frame: lastLocalFrame[player], input: lastLocalInput[player],
                                                   currentFrame: currentFrame)
                }
                lastLocalFrame[player] = target
                lastLocalInput[player] = input
                inputs.queues[player].addLocal(frame: target, input: input, currentFrame: currentFrame)
            }
            sendLocalInputs()
        }
        for player in localPlayers { pendingLocal[player] = nil }

        var knownRemote = Frame.max
        for player in 0 ..< players.count where !isLocal[player] {
            let known = inputs.queues[player].knownFrame
            if known < knownRemote { knownRemote = known }
        }
        if knownRemote != .max && frame - knownRemote > configuration.predictionWindow {
            barrierStalls += 1
            return .predictionBarrier
        }
        if frame - oldestNeededState >= configuration.stateRingCapacity {
            return .confirmationBarrier
        }
        return nil
    }

    /// The first frame a rollback must re-simulate and the player whose input caused it, or
    /// nil. (Mutating only so that the caller borrows the core in place instead of copying it.)
    @usableFromInline
    mutating func pendingRollback() -> (target: Frame, culprit: PlayerHandle)? {
        guard let culprit = inputs.firstIncorrectPlayer else { return nil }
        return (inputs.queues[culprit].firstIncorrectFrame, culprit)
    }

    /// Charges a rollback to the endpoint whose input caused it.
    @usableFromInline
    mutating func noteRollback(length: Int, culprit: PlayerHandle?) {
        guard length > 0, let culprit, let index = endpointIndexForPlayer(culprit) else { return }
        endpoints[index].stats.rollbacks += 1
        endpoints[index].stats.rollbackHistogram.record(length: length)
    }

    /// Everything after a frame was simulated: confirmation, checksums, spectators, time sync.
    @usableFromInline
    mutating func finishAdvance(currentFrame: Frame) {
        self.currentFrame = currentFrame
        updateConfirmation()
        updateTimeSync()
    }

    func endpointIndexForPlayer(_ player: PlayerHandle) -> Int? {
        if authorityMode, let index = endpoints.firstIndex(where: { $0.kind == .authority }) {
            if isLocal[player] { return index }
            if case .remote(let peer) = players[player], let direct = endpointIndex(peer),
               endpoints[direct].kind == .peer, inputs.queues[player].lastAuthoritativeFrame < inputs.queues[player].lastKnownFrame {
                return direct
            }
            return index
        }
        let index = directEndpoint[player]
        return index >= 0 ? index : nil
    }

    /// Handles timers: handshake retries, re-sends, pings, keep-alives, timeouts. Call every tick.
    @usableFromInline
    mutating func poll(now: UInt64) {
        self.now = max(self.now, now)
        let now = self.now
        for index in endpoints.indices where endpoints[index].isAlive {
            if endpoints[index].phase == .synchronizing {
                if let last = endpoints[index].lastSyncSendMs, now &- last < UInt64(configuration.syncRetryMs) {
                    // wait for the reply
                } else {
                    sendSyncRequest(index)
                }
            }
            if let heard = endpoints[index].lastReceiveMs {
                let silence = Int(now &- heard)
                if !endpoints[index].interrupted && silence >= configuration.interruptTimeoutMs {
                    endpoints[index].interrupted = true
                    let remaining = configuration.disconnectTimeoutMs > 0
                        ? max(0, configuration.disconnectTimeoutMs - silence) : Int.max
                    events.append(.interrupted(peer: endpoints[index].id, disconnectInMs: remaining))
                }
                if configuration.disconnectTimeoutMs > 0 && silence >= configuration.disconnectTimeoutMs {
                    disconnectEndpoint(index)
                    continue
                }
            }
            guard endpoints[index].phase == .running else { continue }
            if endpoints[index].lastQualityMs.map({ now &- $0 >= UInt64(configuration.qualityReportIntervalMs) }) ?? true {
                endpoints[index].lastQualityMs = now
                let report = QualityReport(sentAtMs: now, frame: currentFrame,
                                           frameAdvantage: endpoints[index].localAdvantage)
                send(.qualityReport(report), to: index)
            }
            let resendDue = now &- endpoints[index].lastInputSendMs >= UInt64(configuration.resendIntervalMs)
            switch endpoints[index].kind {
            case .peer, .authority:
                if resendDue { sendInputsOrAck(to: index, forceAck: false) }
                if endpoints[index].kind == .peer && now &- endpoints[index].lastNoticeMs >= UInt64(configuration.keepAliveIntervalMs) {
                    sendDisconnectNotices(to: index)
                }
                if now &- endpoints[index].lastSendMs >= UInt64(configuration.keepAliveIntervalMs) {
                    sendInputsOrAck(to: index, forceAck: true)
                }
            case .spectator:
                sendSpectatorInputs(to: index, force: resendDue)
                if now &- endpoints[index].lastSendMs >= UInt64(configuration.keepAliveIntervalMs) {
                    send(.keepAlive(KeepAlive()), to: index)
                }
            case .host:
                break
            }
        }
        checkRunning()
        updateConfirmation()
    }

    /// Feeds a message received from `peer` at time `now`. Messages from unknown or
    /// disconnected endpoints are ignored.
    @usableFromInline
    mutating func handle(_ message: RollbackMessage, from peer: PeerID, now: UInt64) {
        self.now = max(self.now, now)
        guard let index = endpointIndex(peer), endpoints[index].isAlive, message.isWithinFrameRange else { return }
        endpoints[index].stats.messagesReceived += 1
        endpoints[index].lastReceiveMs = self.now
        if endpoints[index].interrupted {
            endpoints[index].interrupted = false
            events.append(.resumed(peer: peer))
        }
        switch message {
        case .syncRequest(let request):
            send(.syncReply(SyncReply(nonce: request.nonce)), to: index)
        case .syncReply(let reply):
            handleSyncReply(reply, from: index)
        case .input(let input):
            handleInput(input, from: index)
        case .inputAck(let ack):
            noteStatus(index, ack: ack.ackFrame, confirmed: ack.confirmedFrame, senderFrame: ack.senderFrame)
        case .qualityReport(let report):
            send(.qualityReply(QualityReply(echoedSentAtMs: report.sentAtMs)), to: index)
            endpoints[index].remoteAdvantage = report.frameAdvantage
            endpoints[index].stats.remoteFramesBehind = report.frameAdvantage
            endpoints[index].noteRemoteFrame(report.frame, now: self.now)
        case .qualityReply(let reply):
            if self.now >= reply.echoedSentAtMs {
                endpoints[index].recordRoundTrip(Double(self.now - reply.echoedSentAtMs))
            }
        case .checksumReport(let report):
            guard endpoints[index].kind != .spectator else { break }
            desync.receive(report, from: peer, history: inputs.checksums, desyncs: &desyncScratch)
            flushDesyncs()
        case .keepAlive:
            break
        case .disconnectNotice(let notice):
            handleDisconnectNotice(notice, from: index)
        case .stateRequest(let request):
            events.append(.stateRequested(peer: peer, confirmedFrame: request.confirmedFrame))
        case .stateTransfer(let transfer):
            events.append(.stateReceived(peer: peer, transfer: transfer))
        }
    }

}

/// Calls `body` with `value`, borrowed: the exclusive access tells the compiler nothing
/// else can change it meanwhile, so no copy (retain and release) is made.
@inline(__always)
func lend<T>(_ value: inout T, to body: (T) throws -> Void) rethrows {
    try body(value)
}
