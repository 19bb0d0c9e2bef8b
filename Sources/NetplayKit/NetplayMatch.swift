import Foundation
import NetplayService
import NetplayWire
import Rollback

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

    enum Phase: Equatable {
        case idle
        case attaching(attempt: Int, nextAttemptMs: UInt64, sentAtMs: UInt64?)
        /// A renewal at the coordinator runs off the game loop (``ticketRenewal``): the relay
        /// refused the ticket as expired (`refusal`, its message; `attempt` counts the renewals
        /// the coordinator left unanswered or refused for a passing reason, each tried again after
        /// the backoff, and a refusal for good ends the match), or (`refusal` nil) the match asks
        /// where its session runs now, between reattach attempts (`attempt`, the backoff goes on
        /// from there when the answer changes nothing).
        case renewingTicket(refusal: String?, attempt: Int)
        case waitingForStart
        case awaitingState
        case playing
        case ended
    }

    enum Engine {
        case none
        case player(P2PSession<G>)
        case spectator(SpectatorSession<G>)
    }

    struct Assembly {
        var transferId: UInt32
        var frame: Int
        var reason: StateTransferReason
        var checksum: UInt64
        /// What the first chunk announced (the wire caps it): the state may grow no larger.
        var totalSize: UInt64
        var bytes: [UInt8]
    }

    /// The highest frame the wire's matches reach (the relay's limit): a frame past it in a
    /// message is a broken or hostile relay's, and would overflow the frame numbers sent back.
    static var frameLimit: Int { Int(Int32.max) }

    /// The most participants the relay can report (8 players and 64 spectators, with room to
    /// spare): a relay announcing ever new ones grows the list no further.
    static var maxPeers: Int { 128 }

    /// Renewed tickets a relay may refuse as expired, one after another, before the match ends
    /// (``expiryRenewalsSinceAttach``).
    static var expiryRenewalsAllowed: Int { 3 }

    struct PendingLoad {
        var transferId: UInt32
        var frame: Int
        var state: G.State
        var reason: StateTransferReason
        var deadlineMs: UInt64
    }

    // MARK: Configuration and collaborators

    /// The admission this match attaches with (its ticket may be renewed).
    public internal(set) var admission: Admission
    /// The options.
    public let options: Options
    let relayPeer = PeerID(1)
    let link: RelayLink
    private let epoch = ContinuousClock.now
    var backoff: Backoff
    var initialGame: G
    var engine: Engine = .none
    var phase: Phase = .idle
    var nextRequestId: UInt64 = 1
    var attachRequestId: UInt64 = 0
    /// The sync protocol version it attaches with: ``SyncProtocol/current``, one lower after a
    /// relay refused it `UNSUPPORTED_VERSION` (an older relay), down to 1.
    var attachProtocol = SyncProtocol.current
    /// Since when an attach waits for its fresh connection to come up (nothing could be sent yet).
    var attachConnectingSinceMs: UInt64?
    var attachedOnce = false
    /// The ticket renewal in flight (phase ``Phase/renewingTicket(refusal:attempt:)``).
    var ticketRenewal: TicketRenewal?
    /// Tickets renewed after an expiry refusal since the last attach: a relay that refuses each
    /// fresh ticket as expired again (its clock or the coordinator's far off) ends the match
    /// instead of trading tickets with the coordinator for ever.
    var expiryRenewalsSinceAttach = 0
    /// The leave at the coordinator, once ``leave()`` started it.
    var coordinatorLeave: CoordinatorLeave?
    var relayKnowsUs = false

    // Session facts from the relay.
    /// The sync parameters the relay runs (authoritative over the ticket's).
    public internal(set) var params: SyncParams
    /// 1-based slot (0 for spectators); before the start the host may move it (``HostControls``).
    public internal(set) var slot: Int
    /// A LAN host's controls over its room (set by ``NetplayClient`` for the match it hosts).
    var lanHostControls: HostControls?
    /// Player or spectator.
    public var role: Role { admission.role }
    var offset = 0
    var peers: [PeerInfo] = []
    var lastHeardMs: UInt64 = 0
    var lastPingMs: UInt64 = 0
    /// The round trip to the relay from the last keep-alive ping's answer (before and between
    /// plays, when no engine measures it).
    var keepAliveRttMs: Int?
    var lastStatsMs: UInt64 = 0
    var lastCheckedConfirmed = 0

    // Time sync and pacing.
    var hint: TimeSyncHint?
    var hintFresh = false
    var catchUpFrames = 0
    var relayConfirmedFrames = 0
    /// The relay's time-sync hints turned into frames per tick or a frame interval.
    var pacer: PacingController
    /// Until then the match has started but waits, so every player begins at the same moment.
    var startAtMs: UInt64?
    /// This peer ran a frame (``firstFrameIsNear``).
    var ranFirstFrame = false
    /// The host asked the relay to start (``startNow()``).
    var startRequested = false
    /// ``startNow()`` came before the relay knew this peer: the request goes out once it does.
    var startAwaitsAttach = false
    /// With ``NetplayPacing/frameRate``: wait this many nominal frame intervals before the
    /// next ``tick(input:)`` (1 = the nominal rate; 0.92 ... 1.08).
    public var frameIntervalScale: Double { pacer.frameIntervalScale }

    /// Connections to the relay wanted now: ``NetplayMatchOptions/paths``, then
    /// ``NetplayMatchOptions/pathsOnLoss`` once the link showed loss. A match of more than two
    /// players starts with `pathsOnLoss`: each peer then waits for several partners' inputs,
    /// and the first second (before a loss shows) let 9-10-frame rollbacks through at 2 % loss.
    lazy var pathTarget = min(max(params.maxPlayers > 2 ? max(options.paths, options.pathsOnLoss) : options.paths, 1),
                              NetplayMatchOptions.maxPaths)

    /// After a relay restart: the history this peer repeats until the rebuilt relay confirms
    /// `historyTarget`, and a player's own inputs it repeats until the relay awaits past `ownTarget`.
    struct RecoveryResend {
        var historyTarget: Int
        /// What the rebuilt relay confirmed, as far as its messages told.
        var relayConfirmed: Int
        /// This player's newest input when the relay came back (-1 for a spectator): the dead
        /// relay may have acknowledged inputs up to it that the rebuilt one never got, and the
        /// engine sends only what no relay acknowledged.
        var ownTarget: Int
        /// The first of this player's inputs the rebuilt relay awaits, as far as its messages told.
        var relayAwaited: Int
        var nextMs: UInt64
        var untilMs: UInt64

        /// Whether the rebuilt relay has everything this peer repeats.
        var isComplete: Bool { relayConfirmed >= historyTarget && relayAwaited > ownTarget }

        /// Learns from a broadcast of the rebuilt relay what it confirmed and awaits.
        mutating func note(_ broadcast: InputBroadcast) {
            if broadcast.authoritative { relayConfirmed = max(relayConfirmed, Int(broadcast.confirmedFrames)) }
            relayAwaited = max(relayAwaited, Int(broadcast.awaitedInputFrame))
        }
    }
    var recoveryResend: RecoveryResend?

    // Resend buffers (restart recovery).
    var history: [Int: (inputs: [UInt8], statuses: [NetplayWire.InputStatus])] = [:]
    var historyNewest = -1
    var ownInputs: [Int: [UInt8]] = [:]
    var ownNewest = -1

    // State transfers.
    /// Whether the relay paces the chunks it sends by this peer's progress acknowledgements
    /// (its attach reply named sync protocol 2 or later): then each chunk but the last is
    /// acknowledged.
    var relayPacesTransfers = false
    var assembly: Assembly?
    var pendingLoad: PendingLoad?
    /// When this peer last loaded a state into its engine or started over from one (monotonic
    /// ms): at most one every ``minStateLoadIntervalMs``, the newest waiting.
    var lastStateLoadMs: UInt64?
    /// A load re-simulates every frame from the state's on (hundreds), a jump builds a new
    /// engine: a relay sending hundreds of small states in one read froze the game loop for
    /// seconds. The relay's own transfers (a heal, a restart, a late join) come far apart.
    static var minStateLoadIntervalMs: UInt64 { 500 }
    var alignedState: ConfirmedState<G.State>?
    /// When this peer last served states (monotonic ms), newest last: each one encodes and sends
    /// the whole state, so at most ``maxStatesServedPerSecond`` a second are.
    var statesServedAtMs: [UInt64] = []
    /// The most states served in any second; a relay's joins, heals and restarts ask for far
    /// fewer, and a relay repeating its request without end cannot stall the game loop or fill
    /// the send queue with copies.
    static var maxStatesServedPerSecond: Int { 4 }

    // Figures.
    var rollbacks = 0
    var rollbackFrames = 0
    var maxRollback = 0
    var lastSessionStats: NetplayWire.SessionStats?
    /// The relay's signed statement of the furthest confirmed frame seen (with the statistics),
    /// presented when the match resumes: a relay rebuilding it counts a claim of confirmed
    /// frames only up to what this certifies.
    var progressProof: ProgressProof?
    var desyncs = 0
    var resyncs = 0
    /// Match frame -> checksum this peer reported (the engine's confirmed checksums).
    public internal(set) var reportedChecksums: [Int: UInt64] = [:]
    /// Inputs of other players the relay marked substituted, as received.
    public internal(set) var substitutedInputsSeen = 0
    /// This player's own inputs the relay replaced (they arrived after its deadline), as received.
    public internal(set) var ownInputsSubstituted = 0
    var substitutedSeenThrough: [Int: Int] = [:]
    /// Notable events, oldest first (the last 512).
    public private(set) var events: [MatchEvent] = []
    /// Events noted since the match began, those ``events`` no longer holds included.
    public private(set) var eventCount = 0

    /// The events noted after the first `seen` of the match (a reader's last ``eventCount``)
    /// that ``events`` still holds: a reader that keeps up sees each event once, also after
    /// the 512th.
    public func events(since seen: Int) -> ArraySlice<MatchEvent> {
        events.suffix(max(0, min(eventCount - seen, events.count)))
    }
    /// The longest time no frame was simulated while the match ran (after its first frame),
    /// milliseconds; deliberate waits of the time sync count too.
    public private(set) var longestStallMs: UInt64 = 0
    /// Stalls longer than two frames (three or more ticks in a row simulated nothing) since
    /// the first frame.
    public private(set) var stallsOverTwoFrames = 0
    private var stallSinceMs: UInt64?
    private var stalledTicks = 0

    // Streams.
    /// The state stream: every change, starting with the current state.
    public let states: AsyncStream<NetplayState>
    private let stateContinuation: AsyncStream<NetplayState>.Continuation
    /// Chat lines as they arrive.
    public let chat: AsyncStream<ChatLine>
    let chatContinuation: AsyncStream<ChatLine>.Continuation
    /// The current state.
    public internal(set) var state: NetplayState = .idle {
        didSet { if state != oldValue { stateContinuation.yield(state) } }
    }
    /// Chat lines received (the last 200).
    public internal(set) var chatLines: [ChatLine] = []
    /// Chat lines received since the match began, the ones ``chatLines`` no longer keeps
    /// included: line `n` (0-based) is `chatLines[n - (chatReceived - chatLines.count)]` while kept.
    public internal(set) var chatReceived = 0

    /// A match for `admission`, starting from `game` at frame 0 (a late joiner's game is replaced
    /// by the transferred state). Connects nothing until ``start()``.
    public init(game: G, admission: Admission, options: Options = Options()) throws {
        let ticketParams = admission.ticket.params
        guard ticketParams.inputSize >= 1, ticketParams.inputSize <= UInt32(GameInput.maxSize) else {
            throw NetplayError(.settingsMismatch, "NetplayKit games use 1 to 64 input bytes; the session uses \(ticketParams.inputSize).")
        }
        self.admission = admission
        self.options = options
        self.initialGame = game
        self.params = ticketParams
        self.slot = admission.slot
        self.backoff = options.backoff
        pacer = PacingController(pacing: options.pacing, frameMs: 1000 / ticketParams.framesPerSecond)
        link = try RelayLink(endpoint: admission.relayEndpoint, conditions: options.conditions, serverKey: options.serverKey)
        (states, stateContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(64))
        (chat, chatContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(256))
        stateContinuation.yield(.idle)
        link.onUnsendable = { [weak self] error in
            self?.note(.error(error.errorCode, "not sent to the relay: \(error.description)"))
        }
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

    /// True while this peer's first frame is near: the lobby is full (the relay starts once it
    /// has measured every player's round trip), the host asked to start, or the start came and
    /// names a moment not reached yet. The relay's start names the moment every player's first
    /// frame runs; a frontend that ticks once a frame notices the start, and then that moment, up
    /// to a frame late each, and its players begin up to two frames apart (deeper rollbacks until
    /// time sync evens them out). While this holds, tick about every millisecond; then pace
    /// frames from the tick that ran the first one. A lobby that is not full ticks at the frame
    /// rate (a start the host forces there is noticed up to a frame late).
    public var firstFrameIsNear: Bool {
        guard !ranFirstFrame else { return false }
        switch phase {
        case .playing: return engineIsPlayer
        case .waitingForStart:
            return startRequested || peers.filter { $0.role == .player && $0.connected }.count >= Int(params.maxPlayers)
        default: return false
        }
    }

    private var engineIsPlayer: Bool { if case .player = engine { true } else { false } }

    /// The match frame this peer's simulation started at (0, or the state it joined from).
    public var startFrame: Int { offset }
    /// The checksum of the game this peer's simulation started from, at ``startFrame`` (in a
    /// match from the host's state: the host's state, the same at every peer); nil before.
    public internal(set) var startChecksum: UInt64?

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
        if case .player(let session) = engine { hud.frameDelay = session.inputDelay } else { hud.frameDelay = Int(params.frameDelay) }
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
                      substitutedFrames: Int(clamping: peer.substitutedFrames),
                      isLocal: peer.slot == UInt32(slot) && peer.role == role)
        }
        return hud
    }

    func note(_ event: MatchEvent) {
        events.append(event)
        eventCount += 1
        if events.count > 512 { events.removeFirst(events.count - 512) }
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
        case .renewingTicket(let refusal, let attempt):
            pickUpRenewedTicket(now: now, refusal: refusal, attempt: attempt)
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
        if result.framesAdvanced > 0 { ranFirstFrame = true }
        let finishedWatching = options.stopAtFrame.map { currentFrame >= $0 } == true
        if result.running, startAtMs == nil, !finishedWatching, currentFrame > startFrame || result.framesAdvanced > 0 {
            if result.framesAdvanced > 0 {
                if let since = stallSinceMs { longestStallMs = max(longestStallMs, now &- since) }
                if stalledTicks >= 3 { stallsOverTwoFrames += 1 }
                stallSinceMs = nil
                stalledTicks = 0
            } else {
                if stallSinceMs == nil { stallSinceMs = now }
                stalledTicks += 1
            }
        }
        if link.heldBackCopies > 0, options.pathsOnLoss > pathTarget, relayKnowsUs {
            pathTarget = min(options.pathsOnLoss, NetplayMatchOptions.maxPaths)
            note(.pathsWidened(to: pathTarget))
            link.growPaths(to: pathTarget, now: now)
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
}
