import Foundation
import NetplayAuth
import NetplayService
import NetplayWire

/// One match on the relay: its participants, input timeline, confirmation with late-input
/// substitution, forwarding, time-sync hints, HUD statistics, checksums, state transfers and the
/// replay file. Driven by ``RelayCore`` on the reactor thread; sends through a ``RelayTransport``.
final class RelaySession {
    /// How a slot's inputs come to be.
    enum SlotMode: Equatable {
        /// A player holds the slot and sends inputs (substituted when late).
        case active
        /// Nobody plays it: every frame is filled with a zero input of this status.
        case vacant(NetplayWire.InputStatus)
    }

    /// Frames are `uint32` on the wire; a match here ends before frame 2^31 - 1 (414 days at
    /// 60 fps), so no frame a peer can make the relay hold, plus the frames ahead it may send,
    /// comes near the wire's limit. Every way a peer moves the timeline (its inputs, a resumed
    /// match's claims, a rebuilt match's history) is checked against it.
    static let frameLimit = Int(Int32.max)

    let sessionId: String
    /// The session's parameters; `frameDelay` follows the round trips when `frameDelayAuto`.
    var params: SyncParams
    let configuration: RelayConfiguration
    let slotCount: Int
    let inputSize: Int
    let framesPerSecond: Double
    let lagTolerance: Int
    /// The lag tolerance in milliseconds.
    let lagToleranceMs: UInt64
    /// When each slot sent recent frames, for substitution deadlines and time sync.
    let arrivals: ArrivalBook
    let spectatorDelay: Int
    let checksumInterval: Int
    unowned(unsafe) let transport: RelayTransport

    let timeline: InputTimeline
    // Exclusivity: a session is used only on the relay's reactor thread, and no access to the
    // stored properties marked `@exclusivity(unchecked)` overlaps another (none is passed inout
    // across a call that could reach the session again), so their dynamic checks, run on every
    // input and timer tick, are skipped.

    /// The player holding each slot (0-based index), if any.
    @exclusivity(unchecked) var players: [RelayPeer?] { didSet { rebuildParticipants() } }
    @exclusivity(unchecked) var spectators: [RelayPeer] = [] { didSet { rebuildParticipants() } }
    /// Players then spectators (kept up to date: the hot paths iterate it without allocating).
    /// The hot loops go through ``forEachParticipant(_:)`` or index a local copy of the array
    /// instead of `for participant in participants`, which retained and released every element.
    @exclusivity(unchecked) private(set) var participants: [RelayPeer] = []
    /// Confirmations for a player whose own input completed a frame wait this long for the next
    /// message to that player (the forward of a partner's next input) instead of a message of
    /// their own: a frame and a half, so each input costs one message to each other player.
    let confirmationDeferMs: UInt64
    /// One frame at the session's nominal rate, at most 50 ms (a player acknowledges once per frame).
    let frameIntervalMs: UInt64
    @exclusivity(unchecked) var nextSilenceCheckMs: UInt64 = 0
    /// Packs the per-frame broadcasts (shared by the relay's sessions: one reactor thread).
    let packer: InputBroadcastPacker
    /// Participants the host removed, refused at attach (shared by the relay's sessions).
    let revocations: RevocationBook
    /// What the coordinator must hear about (shared by the relay's sessions).
    let lifecycle: LifecycleFacts
    /// Signs the progress proof sent with the statistics (nil: none sent).
    let progressProofs: ProgressProofs?
    @exclusivity(unchecked) var slotModes: [SlotMode]
    @exclusivity(unchecked) var substituting: [Bool]
    @exclusivity(unchecked) var substitutedFrames: [Int]
    /// While substituting: the first frame of the slot's current run of its own inputs.
    @exclusivity(unchecked) var caughtUpFrom: [Int?]
    /// Checksum reports of a slot for frames before this are ignored (it was resynced there).
    var resyncedAt: [Int]

    @exclusivity(unchecked) var running = false
    var startedAtMs: UInt64 = 0
    /// Since then the match waits to start while the relay measures every player's round trip.
    var startSyncSinceMs: UInt64?
    /// The host asked for the start (the match starts without waiting for empty slots).
    var startForced = false
    /// The 0-based slot of the host whose state the match starts (or restarted) from, when its
    /// attach asked (`AttachRequest.start_from_host_state`) or it restarted the match: every
    /// other participant loads its state before frame 0, and its state wins checksum votes.
    var startStateSlot: Int?
    /// The host's start state as its transfer carried it, for the replay header (empty: none).
    var startStateBytes: [UInt8] = []
    /// With `frameDelayAuto`: an input delay the round trips call for, and since when.
    var proposedFrameDelay: (frames: Int, sinceMs: UInt64)?
    /// Rebuilt after a restart: peers resend the confirmed history it lacks, until
    /// ``recoveryEndsAtMs``.
    var recovering = false
    /// When a rebuilt session stops taking history.
    var recoveryEndsAtMs: UInt64 = 0
    /// No history is adopted from this frame on: the first returning peer's confirmed frame (a
    /// spectator's plus its delay) plus two seconds of frames (what the dead relay may have
    /// confirmed that it had not seen).
    var recoveryFrameLimit = 0
    /// The highest ``recoveryFrameLimit`` may rise to: what the dead relay's replay says it can
    /// have confirmed, or the wire's last frame.
    var recoveryFrameCeiling = 0
    /// Rebuilt after a restart with the frames before this one taken from the dead relay's
    /// replay (nil: not rebuilt, or from the peers alone).
    var rebuiltFromReplayTo: Int?
    /// When it was rebuilt after a restart (nil: it was not): a slot nobody attached to since
    /// becomes vacant after the disconnect grace, as a player who never came back would.
    var rebuiltAtMs: UInt64?
    /// While a rebuilt session recovers: the confirmed frame last seen, and when it last moved
    /// (``skipFramesNobodyCanSend(now:)``).
    var recoveryConfirmedSeen = 0
    var recoveryConfirmedMovedMs: UInt64 = 0
    /// While a rebuilt session recovers: slots whose player, back and saying it holds its inputs
    /// from the frame the match is held at, had not sent it when the wait for returning players
    /// and its grace were over: the others' history counts for the slot as if that player were
    /// not back, below what the others hold and their proofs reach, and the forfeit's cap
    /// (``forfeitHistoryNotSent(now:)``).
    var historyForfeited: [Int: HistoryForfeit] = [:]
    /// In a rebuilt session whose confirmed frame is below ``recoveryFrameLimit``: the confirmed
    /// frame at the start of the last whole second, and whether it moved less than a quarter
    /// second of frames in it (the match is held, not played) (``noteRebuildProgress(now:)``).
    var rebuildProgressMark: (frame: Int, atMs: UInt64) = (0, 0)
    var rebuildHeld = false
    /// In a rebuilt session: the highest frame a verified progress proof presented while it took
    /// history says the dead relay had confirmed. Every slot's inputs below it were final
    /// there (its player's, or substitutes), so a returning player holding them confirmed has
    /// them in its history, and their own player sends its own on attaching: below it a match
    /// is not played live (``matchHeld(at:)``).
    var framesProvenFinal = 0
    @exclusivity(unchecked) var substitutionHoldUntilMs: UInt64 = 0
    @exclusivity(unchecked) var lastStatsMs: UInt64 = 0
    @exclusivity(unchecked) var lastHintsMs: UInt64 = 0
    @exclusivity(unchecked) var lastConnectedMs: UInt64
    var ended = false
    /// When the last player left while spectators still watched (they get every frame, then the session ends).
    @exclusivity(unchecked) var playersGoneAtMs: UInt64?

    @exclusivity(unchecked) var checksums = ChecksumBook()
    /// The transfer in flight; ending it (nil, or another) gives back what it reserved.
    @exclusivity(unchecked) var transfer: ActiveTransfer? {
        didSet { if let old = oldValue, old !== transfer { transferBudget.release(old.reservedBytes) } }
    }
    /// The relay's budget for states in transfer (shared by its sessions).
    let transferBudget: TransferBudget
    /// No transfer begins before this (the budget was full).
    var transferRetryAtMs: UInt64 = 0
    var nextTransferId: UInt32 = 1
    /// A transfer dropped before its state was whole because nobody was left to take it (see
    /// ``pump(_:now:)``): the rest of its reference's chunks are let go without an error each.
    var droppedTransfer: (id: UInt32, reference: RelayPeer)?
    var desyncs = 0
    var resyncs = 0
    /// The replay files this session opened: each restart ends one and opens another.
    var replayFilesOpened = 0
    /// Why each recent transfer happened (its acknowledgement arrives after it completed).
    var transferReasons: [UInt32: StateTransferReason] = [:]
    /// Players sent the whole state of a restart, a desync heal or a catch-up, by 0-based slot:
    /// the transfer and the state's frame. Their checksums count again once they say they
    /// loaded it: a report sent before that is of the run the state replaces, even when it
    /// arrives after the last chunk went out (a peer may run on for up to a second before it
    /// loads), and the frames it already reported are not reported again.
    var loadsAwaited: [Int: (transferId: UInt32, frame: Int)] = [:]
    /// The latest word on each player slot, by 0-based slot: whom it belongs to ("" for nobody)
    /// and since when, the issue time of the newest ticket seated in it or the time the
    /// coordinator's slot map came (``RelaySession/assign(_:routes:now:)``). A ticket of
    /// another participant for that slot issued before then is superseded (see
    /// ``RelaySession/claimSlot(_:for:)``).
    var slotClaims: [Int: (participantId: String, sinceUnixMs: UInt64)] = [:]

    var content: ContentInfo?
    var gameOptions: [UInt8] = []
    /// Slots the coordinator (or a LAN host) assigned after its tickets were issued, by
    /// participant id: a ticket naming another slot attaches in this one.
    var assignedSlots: [String: Int] = [:]
    /// The host, when the coordinator (or a LAN host) named it: the only participant that may start the match.
    var hostParticipantId: String?
    @exclusivity(unchecked) var replay: ReplayWriter?
    /// Inputs accepted since the last load report.
    @exclusivity(unchecked) var inputsAccepted = 0
    /// Participants with forwarding queued since the last ``flushForwards(now:)``, in order.
    @exclusivity(unchecked) var queuedForwards: [RelayPeer] = []
    /// Participants whose queued forwarding waits for the rest of a frame's partners (see
    /// ``RelayConfiguration/partnerHoldMs``); the timers send it when the wait is over.
    @exclusivity(unchecked) var heldForwards: [RelayPeer] = []
    /// Whether the core holds this session for the end of its read batch.
    var listedForFlush = false

    init(sessionId: String, params: SyncParams, configuration: RelayConfiguration, transport: RelayTransport,
         now: UInt64, origin: Int = 0, packer: InputBroadcastPacker = InputBroadcastPacker(),
         revocations: RevocationBook? = nil, lifecycle: LifecycleFacts? = nil, transferBudget: TransferBudget? = nil,
         progressProofs: ProgressProofs? = nil) {
        self.sessionId = sessionId
        self.progressProofs = progressProofs
        self.transferBudget = transferBudget ?? TransferBudget(capacity: configuration.maxTransferBytes)
        self.packer = packer
        self.revocations = revocations ?? RevocationBook(capacity: configuration.maxRevocations)
        self.lifecycle = lifecycle ?? LifecycleFacts(enabled: false)
        self.params = params
        self.configuration = configuration
        self.transport = transport
        slotCount = Int(params.maxPlayers)
        inputSize = Int(params.inputSize)
        framesPerSecond = params.framesPerSecond
        lagTolerance = max(1, Int(params.lagToleranceFrames))
        lagToleranceMs = UInt64((Double(lagTolerance) * 1000 / framesPerSecond).rounded())
        arrivals = ArrivalBook(slots: Int(params.maxPlayers))
        spectatorDelay = Int(params.spectatorDelayFrames)
        checksumInterval = Int(params.checksumIntervalFrames)
        timeline = InputTimeline(slotCount: slotCount, inputSize: inputSize, capacity: configuration.historyFrames,
                                 origin: origin)
        players = Array(repeating: nil, count: slotCount)
        slotModes = Array(repeating: .active, count: slotCount)
        substituting = Array(repeating: false, count: slotCount)
        substitutedFrames = Array(repeating: 0, count: slotCount)
        caughtUpFrom = Array(repeating: nil, count: slotCount)
        resyncedAt = Array(repeating: 0, count: slotCount)
        confirmationDeferMs = UInt64(max(6, (1500 / framesPerSecond).rounded()))  // a frame and a half
        frameIntervalMs = UInt64(min(50, (1000 / framesPerSecond).rounded(.up)))
        lastConnectedMs = now
        // Periodic work starts at a phase of its own per session (from its id), so a relay whose
        // sessions all started in the same moment does not send every session's statistics and
        // hints in the same timer tick: at 1,000 sessions that was a ~10 ms stall of the reactor
        // once a second, the relay's p99 latency.
        let phase = Self.phase(of: sessionId)
        lastStatsMs = now &- phase % UInt64(max(configuration.statsIntervalMs, 1))
        lastHintsMs = now &- phase % UInt64(max(configuration.hintIntervalMs, 1))
        rebuildParticipants()
    }

    /// A stable spread value for a session id (FNV-1a).
    static func phase(of sessionId: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in sessionId.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return hash
    }

    /// Whether a periodic job last run at `last` is due at `now`; keeps the job on its phase
    /// (`last` advances by whole intervals) unless it fell more than an interval behind.
    @inline(__always)
    static func due(_ last: inout UInt64, every interval: Int, now: UInt64) -> Bool {
        let interval = UInt64(max(interval, 1))
        let elapsed = now &- last
        guard elapsed >= interval else { return false }
        last = elapsed < 2 * interval ? last &+ interval : now
        return true
    }

    private func rebuildParticipants() {
        participants = players.compactMap { $0 } + spectators
    }

    /// Calls `body` with every participant (players, then spectators) without retaining each:
    /// the local copy of the array keeps them all alive, and `body` must not change `players` or
    /// `spectators` (none of the relay's loops does). A retain and release per participant was
    /// most of the cost of these loops on the per-input and timer paths.
    @inline(__always)
    func forEachParticipant(_ body: (RelayPeer) -> Void) {
        let list = participants
        for index in 0 ..< list.count {
            Unmanaged.passUnretained(list[index])._withUnsafeGuaranteedRef(body)
        }
    }

    var connectedCount: Int {
        var count = 0
        let list = participants
        for index in 0 ..< list.count where list[index].isConnected { count += 1 }
        return count
    }

    /// Connections its participants hold (primaries and additional paths).
    var pathCount: Int {
        var count = 0
        let list = participants
        for index in 0 ..< list.count { count += list[index].pathCount }
        return count
    }

    // MARK: - Sending

    func send(_ body: Envelope.Body, to participant: RelayPeer, now: UInt64) {
        guard let address = participant.address else { return }
        participant.lastSendMs = now
        transport.send(body, to: address)
    }

    /// Sends `body` to every connected participant, encoded once.
    func sendToAll(_ body: Envelope.Body, now: UInt64) {
        guard let encoded = try? Envelope(body: body).encoded() else {
            // Unencodable: each send reports the error the usual way.
            for participant in participants where participant.isConnected { send(body, to: participant, now: now) }
            return
        }
        encoded.withUnsafeBytes { bytes in
            forEachParticipant { participant in
                guard let address = participant.address else { return }
                participant.lastSendMs = now
                transport.sendEncoded(bytes, to: address)
            }
        }
    }

    func peerEvent(_ kind: PeerEventKind, _ participant: RelayPeer, frame: Int, detail: String, now: UInt64) {
        let event = PeerEvent(kind: kind, peer: participant.info, frame: UInt32(clamping: max(frame, 0)),
                              detail: String(detail.prefix(256)))
        sendToAll(.peerEvent(event), now: now)
        let topic: String
        let severity: Severity
        switch kind {
        case .joined, .reconnected: (topic, severity) = ("sync.peer_joined", .info)
        case .left: (topic, severity) = ("sync.peer_left", .info)
        case .disconnected: (topic, severity) = ("sync.peer_left", .notice)
        case .substituting: (topic, severity) = ("sync.substituted", .notice)
        case .caughtUp: (topic, severity) = ("sync.substituted", .info)
        default: (topic, severity) = ("sync.peer_event", .info)
        }
        transport.publish(topic: topic, .peerEvent(event), severity: severity,
                          message: "\(participant.name.isEmpty ? participant.participantId : participant.name) \(kind.protoName): \(detail)",
                          sessionId: sessionId)
    }
}
