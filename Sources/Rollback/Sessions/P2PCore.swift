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
    private(set) var authorityMode: Bool
    private var isLocal: [Bool]
    private var pendingLocal: [GameInput?]
    private var lastLocalFrame: [Frame]
    private var lastLocalInput: [GameInput]
    /// The frame whose local inputs were queued and sent (a waiting frame queues them once).
    private var localInputsFrame: Frame = nullFrame
    var inputDelay: Int
    var state: SessionState = .synchronizing
    /// The newest frame whose inputs are final on every peer (states before it never change).
    @usableFromInline var confirmedFrame: Frame = nullFrame
    /// The newest frame whose inputs are final as far as this peer knows.
    var localConfirmedFrame: Frame = nullFrame
    private var outbox: [OutgoingMessage] = []
    private var events: [SessionEvent] = []
    private var now: UInt64 = 0
    private var rng: SeededRandom
    private var desync: DesyncDetector
    private var desyncScratch: [DesyncReport] = []
    private var nextRecommendationFrame: Frame = 0
    /// Input arrays of drained messages, reused for the next input runs (see `recycleOutbox`).
    private var spareRuns: [[GameInput]] = []
    private var disconnectProposal: [Frame]
    private var disconnectFinal: [Bool]
    /// The endpoint each player's location names (-1 for local players): endpoints are only
    /// added in `init`, so this saves a scan per rollback charged to a culprit.
    private var directEndpoint: [Int] = []

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

    private mutating func addEndpoint(_ endpoint: Endpoint) {
        var endpoint = endpoint
        endpoint.syncNonce = UInt32(truncatingIfNeeded: rng.next())
        endpoints.append(endpoint)
    }

    /// The index of `peer`'s endpoint. A linear scan: at most 8 player endpoints plus
    /// spectators, cheaper than hashing.
    private func endpointIndex(_ peer: PeerID) -> Int? {
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
    private mutating func recycleOutbox() {
        while let outgoing = outbox.popLast() {
            guard case .input(let message) = outgoing.message, spareRuns.count < 32 else { continue }
            spareRuns.append(message.inputs)
        }
    }

    private mutating func send(_ message: consuming RollbackMessage, to index: Int) {
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

    private func endpointIndexForPlayer(_ player: PlayerHandle) -> Int? {
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
        guard let index = endpointIndex(peer), endpoints[index].isAlive else { return }
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

    // MARK: - Handshake

    private mutating func sendSyncRequest(_ index: Int) {
        endpoints[index].lastSyncSendMs = now
        send(.syncRequest(SyncRequest(nonce: endpoints[index].syncNonce)), to: index)
    }

    private mutating func handleSyncReply(_ reply: SyncReply, from index: Int) {
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

    private mutating func checkRunning() {
        guard state == .synchronizing else { return }
        for endpoint in endpoints where endpoint.kind != .spectator && endpoint.phase == .synchronizing {
            return
        }
        state = .running
        events.append(.running)
    }

    // MARK: - Inputs on the wire

    /// The newest frame of `index`'s inputs this session holds without gaps.
    private func ackFrame(for index: Int) -> Frame {
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

    private mutating func noteStatus(_ index: Int, ack: Frame, confirmed: Frame, senderFrame: Frame) {
        if ack > endpoints[index].ackFrame { endpoints[index].ackFrame = ack }
        if confirmed > endpoints[index].reportedConfirmedFrame { endpoints[index].reportedConfirmedFrame = confirmed }
        endpoints[index].noteRemoteFrame(senderFrame, now: now)
    }

    private mutating func handleInput(_ message: InputMessage, from index: Int) {
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
    private func acceptLimit(_ player: PlayerHandle) -> Frame {
        currentFrame + inputs.queues[player].capacity / 2
    }

    private mutating func sendLocalInputs() {
        for index in endpoints.indices where endpoints[index].phase == .running && endpoints[index].kind != .spectator {
            sendInputsOrAck(to: index, forceAck: false, always: true)
        }
    }

    /// The unacknowledged inputs of local `player` from `from` through `through`, built in a
    /// spare buffer when there is one: every endpoint gets its own run (sharing one would cost
    /// an atomic retain per endpoint and as many releases), and once drained it comes back.
    private mutating func inputRun(player: PlayerHandle, from: Frame, through: Frame) -> [GameInput] {
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
    private mutating func sendInputsOrAck(to index: Int, forceAck: Bool, always: Bool = false) {
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
    private mutating func sendSpectatorInputs(to index: Int, force: Bool) {
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

    // MARK: - Confirmation, checksums, time sync

    private mutating func updateConfirmation() {
        var local = Frame.max
        for queue in inputs.queues {
            let frame = queue.confirmedFrame(authoritative: authorityMode)
            if frame < local { local = frame }
        }
        localConfirmedFrame = local
        var global = local
        if !authorityMode {
            for endpoint in endpoints where endpoint.kind == .peer && endpoint.isAlive
                && endpoint.reportedConfirmedFrame < global {
                global = endpoint.reportedConfirmedFrame
            }
        }
        if global > confirmedFrame {
            confirmedFrame = global
            for index in endpoints.indices
            where endpoints[index].kind == .spectator && endpoints[index].phase == .running {
                sendSpectatorInputs(to: index, force: false)
            }
        }
        reportChecksums()
    }

    /// Sends the checksums of checksum frames that became final and compares them with
    /// what remote endpoints reported.
    private mutating func reportChecksums() {
        guard desync.nextReportFrame <= currentFrame,
              desync.nextReportFrame - 1 <= confirmedFrame else { return }
        let validThrough = min(currentFrame, inputs.firstIncorrectFrame ?? .max)
        let reports = desync.confirm(upTo: confirmedFrame, validThrough: validThrough, history: inputs.checksums,
                                     desyncs: &desyncScratch)
        for report in reports {
            for index in endpoints.indices where endpoints[index].phase == .running {
                send(.checksumReport(report), to: index)
            }
        }
        flushDesyncs()
    }

    private mutating func flushDesyncs() {
        guard !desyncScratch.isEmpty else { return }
        for report in desyncScratch { events.append(.desync(report)) }
        desyncScratch.removeAll(keepingCapacity: true)
    }

    private mutating func updateTimeSync() {
        let frame = currentFrame
        let recommending = frame >= nextRecommendationFrame
        var ahead = 0.0
        for index in endpoints.indices where endpoints[index].phase == .running && endpoints[index].kind != .spectator {
            let advantage = endpoints[index].estimateAdvantage(localFrame: frame, now: now,
                                                               framesPerSecond: configuration.framesPerSecond)
            endpoints[index].localAdvantage = advantage
            endpoints[index].stats.localFramesBehind = advantage
            endpoints[index].timeSync.record(localAdvantage: advantage, remoteAdvantage: endpoints[index].remoteAdvantage)
            // Only a positive average can raise `ahead` above 0: the two divisions behind
            // `framesAhead` (a few dozen cycles of latency) are skipped when this peer is not ahead.
            if recommending && endpoints[index].timeSync.isAhead {
                ahead = max(ahead, endpoints[index].timeSync.framesAhead)
            }
        }
        guard recommending else { return }
        let wait = roundedToInt(ahead)
        if wait >= configuration.minimumWaitFrames {
            events.append(.waitRecommendation(frames: min(wait, configuration.maximumWaitFrames)))
            nextRecommendationFrame = frame + configuration.recommendationIntervalFrames
        }
    }

    // MARK: - Disconnects

    /// Disconnects an endpoint now (kick, or the caller's own transport noticed it left).
    mutating func disconnect(peer: PeerID) {
        guard let index = endpointIndex(peer) else { return }
        disconnectEndpoint(index)
        updateConfirmation()
    }

    private mutating func disconnectEndpoint(_ index: Int) {
        guard endpoints[index].isAlive else { return }
        endpoints[index].phase = .disconnected
        events.append(.peerDisconnected(peer: endpoints[index].id))
        switch endpoints[index].kind {
        case .peer:
            if !authorityMode {
                for player in endpoints[index].players {
                    proposeDisconnect(player, frame: inputs.queues[player].lastKnownFrame + 1)
                }
            }
        case .authority:
            authorityMode = false
            for player in players.indices where !isLocal[player] {
                if case .remote(let peer) = players[player], peer == endpoints[index].id {
                    let frame = inputs.queues[player].lastAuthoritativeFrame + 1
                    inputs.queues[player].disconnect(from: frame, final: true, currentFrame: currentFrame)
                    if !disconnectFinal[player] {
                        disconnectFinal[player] = true
                        events.append(.playerDisconnected(player: player, frame: inputs.queues[player].disconnectFrame))
                    }
                }
            }
        case .spectator, .host:
            break
        }
        checkRunning()
        for player in players.indices { checkDisconnectFinality(player) }
    }

    private mutating func noteAuthorityDisconnect(_ player: PlayerHandle, from frame: Frame) {
        guard !disconnectFinal[player] else { return }
        disconnectFinal[player] = true
        events.append(.playerDisconnected(player: player, frame: frame))
    }

    /// This peer's proposal for `player`: the frame after the last input it holds (or earlier,
    /// when another peer proposed earlier). Freezes the player's inputs.
    private mutating func proposeDisconnect(_ player: PlayerHandle, frame: Frame) {
        guard !isLocal[player], !disconnectFinal[player] else { return }
        let own = min(frame, inputs.queues[player].lastKnownFrame + 1)
        guard own < disconnectProposal[player] else { return }
        disconnectProposal[player] = own
        var tentative = own
        for endpoint in endpoints {
            if let report = endpoint.disconnectReports[player], report < tentative { tentative = report }
        }
        inputs.queues[player].disconnect(from: tentative, final: false, currentFrame: currentFrame)
        for index in endpoints.indices where endpoints[index].kind == .peer && endpoints[index].phase == .running {
            sendDisconnectNotices(to: index)
        }
        if case .remote(let peer) = players[player], let host = endpointIndex(peer), endpoints[host].isAlive,
           endpoints[host].players.allSatisfy({ disconnectProposal[$0] != .max }) {
            disconnectEndpoint(host)
        }
        checkDisconnectFinality(player)
    }

    private mutating func handleDisconnectNotice(_ notice: DisconnectNotice, from index: Int) {
        let player = notice.player
        guard player >= 0, player < players.count, !isLocal[player] else { return }
        switch endpoints[index].kind {
        case .authority:
            inputs.queues[player].disconnect(from: notice.frame, final: true, currentFrame: currentFrame)
            noteAuthorityDisconnect(player, from: inputs.queues[player].disconnectFrame)
        case .peer where !authorityMode:
            let previous = endpoints[index].disconnectReports[player] ?? .max
            endpoints[index].disconnectReports[player] = min(previous, notice.frame)
            if notice.frame < disconnectProposal[player] {
                proposeDisconnect(player, frame: notice.frame)
            }
            checkDisconnectFinality(player)
        default:
            break
        }
    }

    /// A disconnect becomes final once every live peer proposed a frame: all take the smallest.
    private mutating func checkDisconnectFinality(_ player: PlayerHandle) {
        guard disconnectProposal[player] != .max, !disconnectFinal[player], !authorityMode else { return }
        var final = disconnectProposal[player]
        for endpoint in endpoints where endpoint.kind == .peer {
            if let report = endpoint.disconnectReports[player] {
                final = min(final, report)
            } else if endpoint.isAlive && !endpoint.players.contains(player) {
                return
            }
        }
        disconnectFinal[player] = true
        inputs.queues[player].disconnect(from: final, final: true, currentFrame: currentFrame)
        events.append(.playerDisconnected(player: player, frame: inputs.queues[player].disconnectFrame))
    }

    private mutating func sendDisconnectNotices(to index: Int) {
        endpoints[index].lastNoticeMs = now
        for player in players.indices where disconnectProposal[player] != .max {
            var frame = disconnectProposal[player]
            for endpoint in endpoints {
                if let report = endpoint.disconnectReports[player], report < frame { frame = report }
            }
            send(.disconnectNotice(DisconnectNotice(player: player, frame: frame)), to: index)
        }
    }

    // MARK: - State transfer

    /// Asks `peer` for a confirmed state (it sees ``SessionEvent/stateRequested(peer:confirmedFrame:)``).
    mutating func requestState(from peer: PeerID) {
        guard let index = endpointIndex(peer), endpoints[index].isAlive else { return }
        send(.stateRequest(StateRequest(confirmedFrame: confirmedFrame)), to: index)
    }

    /// Queues a serialised state for `peer`.
    mutating func sendState(_ transfer: StateTransfer, to peer: PeerID) {
        guard let index = endpointIndex(peer), endpoints[index].isAlive else { return }
        send(.stateTransfer(transfer), to: index)
    }

    /// After a transferred state was installed and re-simulated.
    @usableFromInline
    mutating func stateInstalled() {
        updateConfirmation()
    }

    /// The oldest frame a transferred state may be installed at (its inputs must still be held).
    var oldestLoadableFrame: Frame {
        max(0, currentFrame - (configuration.inputHistory / 2 - configuration.stateRingCapacity))
    }
}

/// Calls `body` with `value`, borrowed: the exclusive access tells the compiler nothing
/// else can change it meanwhile, so no copy (retain and release) is made.
@inline(__always)
func lend<T>(_ value: inout T, to body: (T) throws -> Void) rethrows {
    try body(value)
}
