import Foundation
import Games
import NetplayService
import NetplayWire
import Rollback

/// What one ``NetplayMatch/tick(input:)`` did.
public struct TickResult: Sendable, Hashable {
    /// Frames simulated for the first time (0 while waiting; more than 1 while catching up).
    public var framesAdvanced = 0
    /// Frames re-simulated by rollbacks during this tick.
    public var rolledBackFrames = 0
    /// Why no frame advanced, when none did and the match runs.
    public var waiting: WaitReason?
    /// Whether the match is running (inputs are being simulated).
    public var running = false
}

/// Something notable that happened in a match (for logs, HUD toasts and tests).
public enum MatchEvent: Sendable, Hashable {
    /// The relay reported a participant's change (joined, left, lagging, caught up...).
    case peer(PeerEventKind, slot: Int, name: String, frame: Int, detail: String)
    /// The relay found diverging checksums at `frame`; `diverged` are the slots resynced.
    case desync(frame: Int, diverged: [Int], resyncStarted: Bool)
    /// A state was loaded from a transfer (resync, late join, reconnect) at `frame`.
    case stateLoaded(frame: Int, reason: StateTransferReason)
    /// This peer served its state to the relay for a transfer.
    case stateServed(frame: Int, bytes: Int)
    /// The connection to the relay was lost; reconnecting.
    case reconnecting(attempt: Int)
    /// Attached again after a reconnect.
    case reconnected
    /// The match started (frame 0, or the frame this peer joined at).
    case started(frame: Int)
    /// A service error received for something this peer sent.
    case error(ErrorCode, String)
}

/// How a ``NetplayMatch`` behaves; the defaults suit a 60 Hz frontend.
public struct NetplayMatchOptions: Sendable {
    /// Simulated network conditions on this peer's link (tests, demos).
    public var conditions = NetworkConditions()
    /// Nothing heard from the relay this long while attached: reconnect.
    public var silenceTimeoutMs = 1_500
    /// An attach unanswered this long is retried.
    public var attachTimeoutMs = 1_500
    /// Reconnection pacing.
    public var backoff = Backoff()
    /// Extra frames simulated per tick while behind the others.
    public var catchUpFramesPerTick = 4
    /// Reported to the relay.
    public var clientVersion = "NetplayKit \(NetplayVersion.current)"
    /// The game, recorded in the session's replay header (hosts set it).
    public var content: ContentInfo?
    /// Game-defined options needed to replay the match.
    public var gameOptions: [UInt8] = []
    /// Spectators: never simulate past this match frame.
    public var stopAtFrame: Int?
    /// How inputs not received yet are guessed.
    public var prediction: any InputPredictor = RepeatLastPrediction()
    /// Frames of confirmed inputs kept to resend to a restarted relay.
    public var historyFrames = 1024
    /// The cluster's CurveZMQ public key, when it encrypts (relay link and ticket renewal).
    public var serverKey: [UInt8]?

    /// Defaults.
    public init() {}
}

/// Drives one participant's match over a relay: attaches with its ticket, runs the rollback
/// engine (``P2PSession`` for players, ``SpectatorSession`` for spectators) with the relay as
/// the authority, translates engine messages to the wire and back, paces the simulation with
/// the relay's time-sync hints, serves and loads state transfers, keeps chat and HUD figures,
/// and reconnects on its own with exponential backoff and jitter.
///
/// Call ``tick(input:)`` once per displayed frame, from one thread (the game loop). The state
/// stream (``states``) and chat stream (``chat``) can be consumed from any task.
public final class NetplayMatch<G: SerializableGame> {
    /// Tunables; see ``NetplayMatchOptions``.
    public typealias Options = NetplayMatchOptions

    private enum Phase: Equatable {
        case idle
        case attaching(attempt: Int, nextAttemptMs: UInt64, sentAtMs: UInt64?)
        case waitingForStart
        case awaitingState
        case playing
        case ended
    }

    private enum Engine {
        case none
        case player(P2PSession<G>)
        case spectator(SpectatorSession<G>)
    }

    private struct Assembly {
        var transferId: UInt32
        var frame: Int
        var reason: StateTransferReason
        var checksum: UInt64
        var bytes: [UInt8]
    }

    private struct PendingLoad {
        var transferId: UInt32
        var frame: Int
        var state: G.State
        var reason: StateTransferReason
        var deadlineMs: UInt64
    }

    // MARK: Configuration and collaborators

    /// The admission this match attaches with (its ticket may be renewed).
    public private(set) var admission: Admission
    /// The options.
    public let options: Options
    private let relayPeer = PeerID(1)
    private let link: RelayLink
    private let epoch = ContinuousClock.now
    private var backoff: Backoff
    private var initialGame: G
    private var engine: Engine = .none
    private var phase: Phase = .idle
    private var nextRequestId: UInt64 = 1
    private var attachRequestId: UInt64 = 0
    private var attachedOnce = false
    private var relayKnowsUs = false

    // Session facts from the relay.
    /// The sync parameters the relay runs (authoritative over the ticket's).
    public private(set) var params: SyncParams
    /// 1-based slot (0 for spectators).
    public private(set) var slot: Int
    /// Player or spectator.
    public var role: Role { admission.role }
    private var offset = 0
    private var peers: [PeerInfo] = []
    private var lastHeardMs: UInt64 = 0
    private var lastPingMs: UInt64 = 0
    /// The round trip to the relay from the last keep-alive ping's answer (before and between
    /// plays, when no engine measures it).
    private var keepAliveRttMs: Int?
    private var lastStatsMs: UInt64 = 0
    private var lastCheckedConfirmed = 0

    // Time sync and pacing.
    private var hint: TimeSyncHint?
    private var hintFresh = false
    private var skipTicks = 0
    private var catchUpFrames = 0
    private var relayConfirmedFrames = 0

    /// After a relay restart: the history this peer repeats until the rebuilt relay confirms `target`.
    private struct RecoveryResend {
        var target: Int
        /// What the rebuilt relay confirmed, as far as its messages told.
        var relayConfirmed: Int
        var nextMs: UInt64
        var untilMs: UInt64
    }
    private var recoveryResend: RecoveryResend?

    // Resend buffers (restart recovery).
    private var history: [Int: (inputs: [UInt8], statuses: [NetplayWire.InputStatus])] = [:]
    private var historyNewest = -1
    private var ownInputs: [Int: [UInt8]] = [:]
    private var ownNewest = -1

    // State transfers.
    private var assembly: Assembly?
    private var pendingLoad: PendingLoad?
    private var alignedState: ConfirmedState<G.State>?

    // Figures.
    private var rollbacks = 0
    private var rollbackFrames = 0
    private var maxRollback = 0
    private var lastSessionStats: NetplayWire.SessionStats?
    private var desyncs = 0
    private var resyncs = 0
    /// Match frame -> checksum this peer reported (the engine's confirmed checksums).
    public private(set) var reportedChecksums: [Int: UInt64] = [:]
    /// Inputs of other players the relay marked substituted, as received.
    public private(set) var substitutedInputsSeen = 0
    private var substitutedSeenThrough: [Int: Int] = [:]
    /// Notable events, oldest first (the last 512).
    public private(set) var events: [MatchEvent] = []
    /// The longest time no frame could be simulated while the match ran, milliseconds.
    public private(set) var longestStallMs: UInt64 = 0
    private var stallSinceMs: UInt64?

    // Streams.
    /// The state stream: every change, starting with the current state.
    public let states: AsyncStream<NetplayState>
    private let stateContinuation: AsyncStream<NetplayState>.Continuation
    /// Chat lines as they arrive.
    public let chat: AsyncStream<ChatLine>
    private let chatContinuation: AsyncStream<ChatLine>.Continuation
    /// The current state.
    public private(set) var state: NetplayState = .idle {
        didSet { if state != oldValue { stateContinuation.yield(state) } }
    }
    /// Chat lines received (the last 200).
    public private(set) var chatLines: [ChatLine] = []

    /// A match for `admission`, starting from `game` at frame 0 (a late joiner's game is replaced
    /// by the transferred state). Connects nothing until ``start()``.
    public init(game: G, admission: Admission, options: Options = Options()) throws {
        let ticketParams = admission.ticket.params
        guard ticketParams.inputSize >= 1, ticketParams.inputSize <= UInt32(GameInput.maxSize) else {
            throw NetplayError(.settingsMismatch, "NetplayKit games use 1 to 16 input bytes; the session uses \(ticketParams.inputSize).")
        }
        self.admission = admission
        self.options = options
        self.initialGame = game
        self.params = ticketParams
        self.slot = admission.slot
        self.backoff = options.backoff
        link = try RelayLink(endpoint: admission.relayEndpoint, conditions: options.conditions, serverKey: options.serverKey)
        (states, stateContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(64))
        (chat, chatContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(256))
        stateContinuation.yield(.idle)
    }

    deinit {
        stateContinuation.finish()
        chatContinuation.finish()
    }

    /// Milliseconds since the match object was created (monotonic).
    public var nowMs: UInt64 {
        let elapsed = ContinuousClock.now - epoch
        return 1_000 + UInt64(elapsed.components.seconds) * 1000 + UInt64(elapsed.components.attoseconds / 1_000_000_000_000_000)
    }

    // MARK: Reading

    /// The game as simulated now (render it).
    public var game: G {
        switch engine {
        case .none: initialGame
        case .player(let session): session.game
        case .spectator(let session): session.game
        }
    }

    /// The next frame to simulate, in match numbering.
    public var currentFrame: Int {
        switch engine {
        case .none: offset
        case .player(let session): session.currentFrame + offset
        case .spectator(let session): session.currentFrame + offset
        }
    }

    /// Frames `0 ..< confirmedFrames` are final at this peer.
    public var confirmedFrames: Int {
        switch engine {
        case .none: offset
        case .player(let session): offset + session.confirmedFrame + 1
        case .spectator(let session): offset + session.confirmedFrame + 1
        }
    }

    /// Whether the match runs (frames are simulated).
    public var isRunning: Bool { phase == .playing }

    /// The match frame this peer's simulation started at (0, or the state it joined from).
    public var startFrame: Int { offset }

    /// The HUD figures.
    public var hud: HUDStats {
        var hud = HUDStats()
        if case .player(let session) = engine, let stats = session.stats(for: relayPeer) {
            hud.pingMs = stats.pingMs
            hud.jitterMs = stats.jitterMs
        } else if case .spectator(let session) = engine {
            hud.pingMs = session.stats.pingMs
            hud.jitterMs = session.stats.jitterMs
        } else if let keepAliveRttMs {
            hud.pingMs = keepAliveRttMs
        }
        hud.frameDelay = Int(params.frameDelay)
        hud.rollbacks = rollbacks
        hud.rollbackFrames = rollbackFrames
        hud.maxRollbackFrames = maxRollback
        hud.framesAhead = Int(hint?.framesAhead ?? 0)
        hud.currentFrame = currentFrame
        hud.confirmedFrame = max(confirmedFrames - 1, 0)
        hud.desyncs = max(desyncs, Int(lastSessionStats?.desyncs ?? 0))
        hud.resyncs = max(resyncs, Int(lastSessionStats?.resyncs ?? 0))
        hud.players = (lastSessionStats?.peers ?? []).map { peer in
            PlayerHUD(slot: Int(peer.slot), name: peer.name, connected: peer.connected, pingMs: Int(peer.pingMs),
                      substitutedFrames: Int(peer.substitutedFrames),
                      isLocal: peer.slot == UInt32(slot) && peer.role == role)
        }
        return hud
    }

    private func note(_ event: MatchEvent) {
        events.append(event)
        if events.count > 512 { events.removeFirst(events.count - 512) }
    }

    // MARK: Control

    /// Starts attaching to the relay.
    public func start() {
        guard phase == .idle else { return }
        phase = .attaching(attempt: 0, nextAttemptMs: nowMs, sentAtMs: nil)
        state = .connecting(to: admission.relayEndpoint, attempt: 0)
    }

    /// Host only: starts the match now, without waiting for every slot to fill.
    public func startNow() {
        guard slot == 1, relayKnowsUs else { return }
        link.send(.startSessionRequest(StartSessionRequest(sessionId: admission.sessionId,
                                                           participantId: admission.ticket.participantId,
                                                           participantToken: admission.participantToken)),
                  requestId: takeRequestId(), now: nowMs)
    }

    /// Sends a chat line to everyone in the session.
    public func sendChat(_ text: String) {
        guard relayKnowsUs, !text.isEmpty else { return }
        link.send(.chatMessage(ChatMessage(text: String(text.prefix(512)))), now: nowMs)
    }

    /// Leaves the match for good.
    public func leave() {
        guard phase != .ended else { return }
        if relayKnowsUs { link.send(.detach(Detach(reason: .leaving, message: "left")), now: nowMs) }
        link.flush(now: nowMs + 10_000)
        finish(.left, lingerMilliseconds: 500)
    }

    /// Simulates a network outage of `milliseconds` on this peer's link (tests, demos): nothing
    /// goes through either way; the match notices the silence and reconnects.
    public func simulateOutage(milliseconds: Int) {
        link.simulateOutage(untilMs: nowMs + UInt64(milliseconds))
    }

    private func finish(_ reason: DisconnectReason, lingerMilliseconds: Int32 = 0) {
        phase = .ended
        relayKnowsUs = false
        link.close(lingerMilliseconds: lingerMilliseconds)
        state = .disconnected(reason)
    }

    private func takeRequestId() -> UInt64 {
        nextRequestId += 1
        return nextRequestId
    }

    // MARK: Ticking

    /// Runs one display frame: receives, attaches or reconnects as needed, simulates (0 frames
    /// while waiting, several while catching up) with `input` as the local player's input,
    /// and sends. Call it at the game's frame rate.
    @discardableResult
    public func tick(input: GameInput = .zero) -> TickResult {
        let now = nowMs
        var result = TickResult()
        for envelope in link.receive(now: now) {
            lastHeardMs = now
            receive(envelope, now: now)
        }
        switch phase {
        case .idle, .ended:
            return result
        case .attaching(let attempt, let next, let sentAt):
            if sentAt == nil, now >= next {
                sendAttach(now: now, attempt: attempt)
            } else if let sentAt, now &- sentAt >= UInt64(options.attachTimeoutMs) {
                scheduleReattach(attempt: attempt + 1, now: now, why: "no answer to attach")
            }
        case .waitingForStart, .awaitingState:
            keepAlive(now: now)
            if now &- lastHeardMs >= UInt64(options.silenceTimeoutMs) * 2 { reconnect(now: now, why: "relay silent") }
        case .playing:
            keepAlive(now: now)
            driveRecoveryResend(now: now)
            if now &- lastHeardMs >= UInt64(options.silenceTimeoutMs) {
                reconnect(now: now, why: "relay silent for \(options.silenceTimeoutMs) ms")
            } else {
                result = drive(input: input, now: now)
            }
        }
        result.running = phase == .playing
        if result.running {
            if result.framesAdvanced > 0 {
                if let since = stallSinceMs { longestStallMs = max(longestStallMs, now &- since) }
                stallSinceMs = nil
            } else if stallSinceMs == nil, skipTicks == 0 {
                stallSinceMs = now
            }
        }
        link.flush(now: now)
        return result
    }

    /// Outside play the engine sends nothing: a ping keeps the relay's answers coming (our
    /// liveness check, and our round trip while no engine measures it) and our statistics keep
    /// us alive in the relay's eyes (its check). They are the real figures: the relay takes the
    /// reported ping as our round trip for time sync.
    private func keepAlive(now: UInt64) {
        guard relayKnowsUs, phase != .playing, now &- lastPingMs >= 250 else { return }
        lastPingMs = now
        link.send(.ping(Ping(nonce: now, sentAtUs: now * 1000)), requestId: takeRequestId(), now: now)
        sendOwnStats(now: now)
    }

    // MARK: Attaching

    private func sendAttach(now: UInt64, attempt: Int) {
        let resume = attachedOnce
        attachRequestId = takeRequestId()
        let request = AttachRequest(ticket: admission.ticket, protocolVersion: 1, clientVersion: options.clientVersion,
                                    resume: resume, confirmedFrames: UInt32(resume ? confirmedFrames : 0),
                                    firstUnackedFrame: UInt32(max(ownNewest + 1, 0)), content: options.content,
                                    gameOptions: Array(options.gameOptions.prefix(4096)),
                                    historyFromFrame: UInt32(resume ? resendableHistoryStart : 0))
        link.send(.attachRequest(request), requestId: attachRequestId, now: now)
        phase = .attaching(attempt: attempt, nextAttemptMs: now, sentAtMs: now)
        lastHeardMs = now
    }

    private func scheduleReattach(attempt: Int, now: UInt64, why: String) {
        guard attempt < options.backoff.maxAttempts else {
            finish(.relayLost("\(why); gave up after \(attempt) attempts"))
            return
        }
        let delay = UInt64(backoff.delayMs(attempt: attempt))
        try? link.open()
        phase = .attaching(attempt: attempt, nextAttemptMs: now + delay, sentAtMs: nil)
        state = .connecting(to: admission.relayEndpoint, attempt: attempt)
        if attachedOnce { note(.reconnecting(attempt: attempt)) }
    }

    private func reconnect(now: UInt64, why: String) {
        relayKnowsUs = false
        scheduleReattach(attempt: 1, now: now, why: why)
    }

    private func attached(_ response: AttachResponse, now: UInt64) {
        let wasAttached = attachedOnce
        attachedOnce = true
        relayKnowsUs = true
        params = response.params
        slot = Int(response.slot)
        peers = response.peers
        if wasAttached, case .attaching = phase { note(.reconnected) }
        if response.recovering, attachedOnce { resendForRecovery(response, now: now) }
        if !response.running {
            phase = .waitingForStart
            updateLobbyState()
            return
        }
        if response.stateFollows {
            if case .none = engine {
                phase = .awaitingState
                state = .connecting(to: admission.relayEndpoint, attempt: 0)
                return
            }
            // A returning player too far behind: it keeps its session and loads the state.
        }
        if case .none = engine {
            do {
                try makeEngine(at: Int(response.startFrame), game: initialGame)
            } catch {
                finish(.failed("cannot start the rollback session: \(error)"))
                return
            }
        } else if !response.recovering {
            resendOwnInputs(from: Int(response.awaitedInputFrame), now: now)
        }
        enterPlaying()
    }

    private func enterPlaying() {
        phase = .playing
        state = .connected(slot: slot, players: peers.filter { $0.role == .player }.count)
    }

    private func updateLobbyState() {
        let players = peers.filter { $0.role == .player && $0.connected }.count
        if slot == 1 && role == .player {
            state = .hosting(roomName: admission.sessionId, players: players, maxPlayers: Int(params.maxPlayers))
        } else {
            state = .connected(slot: slot, players: players)
        }
    }

    private func sessionConfiguration() -> SessionConfiguration {
        var configuration = SessionConfiguration(playerCount: Int(params.maxPlayers), inputSize: Int(params.inputSize))
        configuration.predictionWindow = Int(params.predictionWindow)
        configuration.inputDelay = Int(params.frameDelay)
        configuration.framesPerSecond = max(1, Int((Double(params.frameRateMhz) / 1000).rounded()))
        configuration.checksumInterval = Int(params.checksumIntervalFrames)
        configuration.stateRingCapacity = max(32, configuration.predictionWindow * 2 + 32)
        configuration.inputHistory = max(1024, configuration.stateRingCapacity * 4 + 64)
        configuration.disconnectTimeoutMs = 0
        configuration.interruptTimeoutMs = 1_000
        configuration.prediction = options.prediction
        configuration.seed = SeededRandom.hash(0x4E45_5450, UInt64(slot))
        return configuration
    }

    private func makeEngine(at frame: Int, game: G) throws {
        offset = frame
        var configuration = sessionConfiguration()
        // Checksums on the match's checksum frames even when the state is not at one.
        configuration.matchFrameOffset = frame
        if role == .player {
            let players: [PlayerLocation] = (0 ..< Int(params.maxPlayers)).map { $0 == slot - 1 ? .local : .remote(relayPeer) }
            engine = .player(try P2PSession(game: game, configuration: configuration, players: players, relay: relayPeer))
        } else {
            engine = .spectator(try SpectatorSession(game: game, configuration: configuration, host: relayPeer,
                                                     catchUpThreshold: 2, catchUpSpeed: 1))
        }
        lastCheckedConfirmed = frame
        note(.started(frame: frame))
    }

    // MARK: Receiving

    private func receive(_ envelope: Envelope, now: UInt64) {
        switch envelope.body {
        case .attachResponse(let response):
            if envelope.requestId == attachRequestId || envelope.requestId == 0 {
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
            if let index = peers.firstIndex(where: { $0.participantId == event.peer.participantId }) {
                peers[index] = event.peer
            } else {
                peers.append(event.peer)
            }
            if phase == .waitingForStart { updateLobbyState() }
        case .sessionStats(let stats):
            lastSessionStats = stats
        case .chatMessage(let message):
            let line = ChatLine(from: message.fromName, slot: Int(message.fromSlot), text: message.text,
                                sentAtUnixMs: message.sentAtUnixMs)
            chatLines.append(line)
            if chatLines.count > 200 { chatLines.removeFirst() }
            chatContinuation.yield(line)
        case .detach(let detach):
            relayKnowsUs = false
            switch detach.reason {
            case .kicked: finish(.kicked(detach.message))
            case .sessionEnded: finish(.sessionEnded(detach.message))
            case .replaced: finish(.replaced)
            case .protocolError: finish(.failed(detach.message))
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

    private func handleError(_ error: ErrorReply, requestId: UInt64, now: UInt64) {
        note(.error(error.code, error.message))
        if requestId != 0 && requestId == attachRequestId {
            switch error.code {
            case .ticketExpired where renewTicket():
                scheduleReattach(attempt: 0, now: now, why: "ticket renewed")
            case .unavailable, .overloaded, .shuttingDown, .timeout, .internal:
                if case .attaching(let attempt, _, _) = phase {
                    scheduleReattach(attempt: attempt + 1, now: now, why: error.message)
                }
            default:
                finish(.refused(error.code, error.message))
            }
            return
        }
        if error.code == .unauthenticated && relayKnowsUs {
            // The relay no longer knows this connection (restart, silence): attach again.
            reconnect(now: now, why: "relay forgot the attachment")
        }
    }

    /// Asks the coordinator for a fresh ticket (expired ticket on reconnect). Blocking, short.
    private func renewTicket() -> Bool {
        guard let coordinator = admission.coordinatorEndpoint, !admission.participantToken.isEmpty,
              let client = try? BlockingClient(endpoint: coordinator, timeout: 1, serverKey: options.serverKey) else { return false }
        let request = RenewTicketRequest(sessionId: admission.sessionId, participantId: admission.ticket.participantId,
                                         participantToken: admission.participantToken)
        guard case .sessionResponse(let response)? = try? client.request(.renewTicketRequest(request)),
              let ticket = response.ticket else { return false }
        admission.ticket = ticket
        return true
    }

    /// Converts a relay broadcast into engine input messages (match frames to local frames).
    private func deliver(_ broadcast: InputBroadcast, now: UInt64) {
        let size = Int(params.inputSize)
        guard Int(broadcast.inputSize) == size || broadcast.players.isEmpty else { return }
        let ack = Int(broadcast.awaitedInputFrame) - 1 - offset
        let confirmed = Int(broadcast.confirmedFrames) - 1 - offset
        if broadcast.authoritative {
            record(broadcast)
            relayConfirmedFrames = max(relayConfirmedFrames, Int(broadcast.confirmedFrames))
            if recoveryResend != nil { recoveryResend!.relayConfirmed = max(recoveryResend!.relayConfirmed, Int(broadcast.confirmedFrames)) }
        }
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
                if origin == .substituted && player != slot - 1 {
                    // Count each frame once (resends repeat them).
                    let first = Int(run.startFrame) + index, last = Int(run.startFrame) + end
                    let seen = substitutedSeenThrough[player] ?? 0
                    if last > seen {
                        substitutedInputsSeen += last - max(first, seen)
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
        for run in broadcast.players {
            let player = Int(run.slot) - 1
            guard player >= 0, player < slots else { continue }
            for index in 0 ..< run.inputs.count / size {
                let frame = Int(run.startFrame) + index
                var row = history[frame] ?? (Array(repeating: 0, count: slots * size), Array(repeating: .received, count: slots))
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

    // MARK: Driving the engine

    private func drive(input: GameInput, now: UInt64) -> TickResult {
        var result = TickResult()
        retryPendingLoad(now: now)
        switch engine {
        case .none:
            return result
        case .player(let session):
            session.poll(now: now)
            handleEvents(session.drainEvents())
            var frames = 1
            // Behind: the relay confirmed frames this peer has not simulated yet (it froze, or
            // came back from an outage): run extra frames until level again.
            let behind = relayConfirmedFrames - session.currentFrame - offset
            catchUpFrames = behind > 2 ? behind : 0
            if hintFresh, let hint {
                hintFresh = false
                skipTicks = hint.framesAhead >= 2 && catchUpFrames == 0 ? min(Int(hint.framesAhead) / 2, 3) : 0
            }
            if catchUpFrames > 0 {
                frames += min(catchUpFrames, options.catchUpFramesPerTick)
                skipTicks = 0
            } else if skipTicks > 0 {
                skipTicks -= 1
                frames = 0
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
            if result.framesAdvanced == 0, options.stopAtFrame.map({ currentFrame >= $0 }) == true {
                skipTicks = 1  // finished: not a stall
            }
            pumpSpectator(session, now: now)
        }
        if now &- lastStatsMs >= 1000 {
            lastStatsMs = now
            sendOwnStats(now: now)
        }
        return result
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
                link.send(.inputBatch(InputBatch(slot: UInt32(slot), startFrame: UInt32(max(start, 0)),
                                                 inputSize: UInt32(size), inputs: Array(bytes.prefix(128 * size)),
                                                 awaitedFrame: UInt32(max(message.ackFrame + 1 + offset, 0)),
                                                 currentFrame: UInt32(max(message.senderFrame + offset, 0)))), now: now)
            case .inputAck(let ack):
                link.send(.inputBatch(InputBatch(slot: UInt32(slot), startFrame: 0, inputSize: UInt32(size),
                                                 awaitedFrame: UInt32(max(ack.ackFrame + 1 + offset, 0)),
                                                 currentFrame: UInt32(max(ack.senderFrame + offset, 0)))), now: now)
            case .qualityReport(let report):
                lastPingMs = now
                link.send(.ping(Ping(nonce: report.sentAtMs, sentAtUs: report.sentAtMs * 1000)),
                          requestId: takeRequestId(), now: now)
            case .checksumReport(let report):
                let frame = report.frame + offset
                reportedChecksums[frame] = report.checksum
                checksums.append(FrameChecksum(frame: UInt32(frame), checksum: report.checksum))
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
                                                 awaitedFrame: UInt32(max(ack.ackFrame + 1 + offset, 0)),
                                                 currentFrame: UInt32(max(ack.senderFrame + offset, 0)))), now: now)
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

    private func sendOwnStats(now: UInt64) {
        let hud = self.hud
        link.send(.peerStats(NetplayWire.PeerStats(slot: UInt32(slot), role: role, pingMs: UInt32(clamping: hud.pingMs),
                                                   jitterMs: UInt32(clamping: hud.jitterMs), framesAhead: Int32(clamping: hud.framesAhead),
                                                   frameDelay: UInt32(clamping: hud.frameDelay), rollbacks: UInt64(rollbacks),
                                                   rollbackFrames: UInt64(rollbackFrames),
                                                   maxRollbackFrames: UInt32(clamping: maxRollback), connected: true,
                                                   currentFrame: UInt32(clamping: currentFrame))), now: now)
    }

    // MARK: Resends (reconnect, relay restart)

    private func resendOwnInputs(from frame: Int, now: UInt64) {
        guard ownNewest >= frame else { return }
        let size = Int(params.inputSize)
        var start = frame
        while start <= ownNewest {
            var bytes: [UInt8] = []
            var current = start
            while current <= ownNewest, current < start + 128, let input = ownInputs[current] {
                bytes += input
                current += 1
            }
            guard !bytes.isEmpty else { break }
            link.send(.inputBatch(InputBatch(slot: UInt32(slot), startFrame: UInt32(start), inputSize: UInt32(size), inputs: bytes,
                                             awaitedFrame: UInt32(confirmedFrames), currentFrame: UInt32(currentFrame))), now: now)
            start = current
        }
    }

    /// The first frame from which this peer holds every player's confirmed inputs up to
    /// ``confirmedFrames`` without a gap: what it can resend to a relay rebuilding the session.
    private var resendableHistoryStart: Int {
        var frame = confirmedFrames
        while frame > 0, history[frame - 1] != nil { frame -= 1 }
        return frame
    }

    private func resendForRecovery(_ response: AttachResponse, now: UInt64) {
        resendHistory(from: Int(response.confirmedFrames), now: now)
        if role == .player { resendOwnInputs(from: Int(response.awaitedInputFrame), now: now) }
        // History travels as input traffic, which a lossy link may drop, and a rebuilt relay
        // cannot confirm past a gap: repeat it until the relay's broadcasts confirm it all.
        if Int(response.confirmedFrames) < confirmedFrames {
            recoveryResend = RecoveryResend(target: confirmedFrames, relayConfirmed: Int(response.confirmedFrames),
                                            nextMs: now + 250, untilMs: now + 20_000)
        } else {
            recoveryResend = nil
        }
    }

    /// Repeats the history for a rebuilt relay until it confirmed what this peer had.
    private func driveRecoveryResend(now: UInt64) {
        guard var resend = recoveryResend else { return }
        if resend.relayConfirmed >= resend.target || now >= resend.untilMs {
            recoveryResend = nil
            return
        }
        guard now >= resend.nextMs else { return }
        resend.nextMs = now + 250
        recoveryResend = resend
        resendHistory(from: resend.relayConfirmed, now: now)
    }

    /// Sends the relay every player's confirmed inputs from `start` to ``confirmedFrames``, 128
    /// frames per authoritative broadcast.
    private func resendHistory(from start: Int, now: UInt64) {
        let size = Int(params.inputSize)
        let slots = Int(params.maxPlayers)
        var frame = start
        let end = confirmedFrames
        while frame < end {
            var runs: [PlayerInputs] = (0 ..< slots).map { PlayerInputs(slot: UInt32($0 + 1), startFrame: UInt32(frame)) }
            var current = frame
            while current < end, current < frame + 128, let row = history[current] {
                for player in 0 ..< slots {
                    runs[player].inputs += row.inputs[player * size ..< player * size + size]
                    runs[player].status.append(row.statuses[player])
                }
                current += 1
            }
            guard current > frame else { break }
            link.send(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: UInt32(size), players: runs,
                                                     confirmedFrames: UInt32(current))), now: now)
            frame = current
        }
    }

    // MARK: State transfers

    private func captureAlignedState(_ session: P2PSession<G>) {
        let interval = Int(params.checksumIntervalFrames)
        guard interval > 0 else { return }
        let confirmed = session.confirmedFrame + 1
        guard confirmed / interval > lastCheckedConfirmed / interval || alignedState == nil else {
            lastCheckedConfirmed = confirmed
            return
        }
        lastCheckedConfirmed = confirmed
        if let state = session.latestConfirmedState(), (state.frame + offset) % interval == 0 {
            alignedState = state
        }
    }

    private func serveState(_ request: NetplayWire.StateRequest, now: UInt64) {
        guard case .player(let session) = engine else {
            link.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 0, totalSize: 0, last: true,
                                             reason: request.reason)), now: now)
            return
        }
        var chosen = session.latestConfirmedState()
        // A state at a checksum frame carries its checksum, which the receiver verifies after
        // loading; it must not be older than the frame asked for (a desync heals only from a
        // state after it). Any frame keeps the receiver's checksums on the match's schedule.
        if let aligned = alignedState, let latest = chosen, latest.frame - aligned.frame < 300,
           aligned.frame + offset >= Int(request.frame) {
            chosen = aligned
        }
        guard let state = chosen else { return }
        let bytes = G.encode(state.state)
        let chunkSize = Int(request.maxChunkBytes == 0 ? 65536 : min(request.maxChunkBytes, 262_144))
        let frame = UInt32(state.frame + offset)
        var start = 0
        repeat {
            let end = min(bytes.count, start + chunkSize)
            link.send(.stateChunk(StateChunk(transferId: request.transferId, frame: frame, offset: UInt64(start),
                                             totalSize: UInt64(bytes.count), data: Array(bytes[start ..< end]),
                                             checksum: state.checksum ?? 0, last: end == bytes.count,
                                             reason: request.reason)), now: now)
            start = end
        } while start < bytes.count
        note(.stateServed(frame: Int(frame), bytes: bytes.count))
    }

    private func receiveChunk(_ chunk: StateChunk, now: UInt64) {
        if assembly?.transferId != chunk.transferId {
            guard chunk.offset == 0 else { return }
            assembly = Assembly(transferId: chunk.transferId, frame: Int(chunk.frame), reason: chunk.reason,
                                checksum: chunk.checksum, bytes: [])
        }
        guard var current = assembly, UInt64(current.bytes.count) == chunk.offset else { return }
        current.bytes += chunk.data
        assembly = current
        guard chunk.last else { return }
        assembly = nil
        guard let state = G.decode(current.bytes) else {
            link.send(.stateTransferAck(StateTransferAck(transferId: current.transferId, receivedBytes: UInt64(current.bytes.count),
                                                         error: "the state did not decode")), now: now)
            return
        }
        if case .none = engine {
            var game = initialGame
            game.loadState(state)
            if current.checksum != 0, game.checksum() != current.checksum {
                link.send(.stateTransferAck(StateTransferAck(transferId: current.transferId,
                                                             receivedBytes: UInt64(current.bytes.count),
                                                             error: "checksum mismatch after loading")), now: now)
                return
            }
            do {
                try makeEngine(at: current.frame, game: game)
            } catch {
                finish(.failed("cannot start from the transferred state: \(error)"))
                return
            }
            link.send(.stateTransferAck(StateTransferAck(transferId: current.transferId, receivedBytes: UInt64(current.bytes.count),
                                                         loaded: true)), now: now)
            note(.stateLoaded(frame: current.frame, reason: current.reason))
            if phase == .awaitingState { enterPlaying() }
            return
        }
        pendingLoad = PendingLoad(transferId: current.transferId, frame: current.frame, state: state, reason: current.reason,
                                  deadlineMs: now + 1_000)
        retryPendingLoad(now: now)
    }

    private func retryPendingLoad(now: UInt64) {
        guard let pending = pendingLoad else { return }
        guard case .player(let session) = engine else {
            pendingLoad = nil
            return
        }
        let local = pending.frame - offset
        if local > session.currentFrame {
            if now < pending.deadlineMs { return }  // not there yet: keep running
            // Still short of the state's frame: the relay sends inputs only from that frame on, so
            // this peer cannot run there. It starts over from the state (its own slot's inputs
            // come back from the relay as authoritative, as for any peer).
            pendingLoad = nil
            jump(to: pending, now: now)
            return
        }
        pendingLoad = nil
        do {
            try session.loadState(pending.state, frame: local)
            if pending.reason == .desync { resyncs += 1 }
            note(.stateLoaded(frame: pending.frame, reason: pending.reason))
            link.send(.stateTransferAck(StateTransferAck(transferId: pending.transferId, loaded: true)), now: now)
        } catch {
            link.send(.stateTransferAck(StateTransferAck(transferId: pending.transferId,
                                                         error: String("cannot load at frame \(pending.frame): \(error)".prefix(256)))),
                      now: now)
        }
    }

    /// Restarts the rollback session from a transferred state ahead of the current frame.
    private func jump(to pending: PendingLoad, now: UInt64) {
        var game = initialGame
        game.loadState(pending.state)
        do {
            try makeEngine(at: pending.frame, game: game)
        } catch {
            link.send(.stateTransferAck(StateTransferAck(transferId: pending.transferId,
                                                         error: String("cannot start from frame \(pending.frame): \(error)".prefix(256)))),
                      now: now)
            finish(.failed("cannot start from the transferred state: \(error)"))
            return
        }
        if pending.reason == .desync { resyncs += 1 }
        note(.stateLoaded(frame: pending.frame, reason: pending.reason))
        link.send(.stateTransferAck(StateTransferAck(transferId: pending.transferId, loaded: true)), now: now)
    }
}
