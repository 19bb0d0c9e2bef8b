import Foundation
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

    let sessionId: String
    let params: SyncParams
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
    @exclusivity(unchecked) private var nextSilenceCheckMs: UInt64 = 0
    /// Packs the per-frame broadcasts (shared by the relay's sessions: one reactor thread).
    let packer: InputBroadcastPacker
    /// Participants the host removed, refused at attach (shared by the relay's sessions).
    let revocations: RevocationBook
    @exclusivity(unchecked) var slotModes: [SlotMode]
    @exclusivity(unchecked) var substituting: [Bool]
    @exclusivity(unchecked) var substitutedFrames: [Int]
    /// While substituting: the first frame of the slot's current run of its own inputs.
    @exclusivity(unchecked) var caughtUpFrom: [Int?]
    /// Checksum reports of a slot for frames before this are ignored (it was resynced there).
    var resyncedAt: [Int]

    @exclusivity(unchecked) var running = false
    var startedAtMs: UInt64 = 0
    var recovering = false
    @exclusivity(unchecked) var substitutionHoldUntilMs: UInt64 = 0
    @exclusivity(unchecked) var lastStatsMs: UInt64 = 0
    @exclusivity(unchecked) var lastHintsMs: UInt64 = 0
    @exclusivity(unchecked) var lastConnectedMs: UInt64
    var ended = false
    /// When the last player left while spectators still watched (they get every frame, then the session ends).
    @exclusivity(unchecked) var playersGoneAtMs: UInt64?

    @exclusivity(unchecked) var checksums = ChecksumBook()
    @exclusivity(unchecked) var transfer: ActiveTransfer?
    var nextTransferId: UInt32 = 1
    var desyncs = 0
    var resyncs = 0
    /// Why each recent transfer happened (its acknowledgement arrives after it completed).
    var transferReasons: [UInt32: StateTransferReason] = [:]

    var content: ContentInfo?
    var gameOptions: [UInt8] = []
    @exclusivity(unchecked) var replay: ReplayWriter?
    /// Inputs accepted since the last load report.
    @exclusivity(unchecked) var inputsAccepted = 0

    init(sessionId: String, params: SyncParams, configuration: RelayConfiguration, transport: RelayTransport,
         now: UInt64, origin: Int = 0, packer: InputBroadcastPacker = InputBroadcastPacker(),
         revocations: RevocationBook? = nil) {
        self.sessionId = sessionId
        self.packer = packer
        self.revocations = revocations ?? RevocationBook(capacity: configuration.maxRevocations)
        self.params = params
        self.configuration = configuration
        self.transport = transport
        slotCount = Int(params.maxPlayers)
        inputSize = Int(params.inputSize)
        framesPerSecond = Double(max(params.frameRateMhz, 1000)) / 1000
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
    private func forEachParticipant(_ body: (RelayPeer) -> Void) {
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

    // MARK: - Attach and start

    /// The reply to an attach, after the participant was placed.
    func welcome(_ participant: RelayPeer, transferFollows: UInt32?) -> AttachResponse {
        let slot = participant.slot
        return AttachResponse(
            sessionId: sessionId, role: participant.role, slot: UInt32(slot), params: params,
            startFrame: UInt32(participant.firstFrame), confirmedFrames: UInt32(timeline.confirmed),
            peers: Array(participants.map(\.info).prefix(72)), stateFollows: transferFollows != nil,
            relayId: configuration.relayId, running: running,
            awaitedInputFrame: slot > 0 ? UInt32(timeline.stored(slot - 1)) : 0,
            recovering: recovering, transferId: transferFollows ?? 0)
    }

    /// Decides where a participant joining a running match starts: from `holds` (the frames it
    /// already has) when those inputs are still here and few enough, else from a state transfer.
    /// Returns true when a transfer is needed.
    func placeCursor(_ participant: RelayPeer, holds: Int) -> Bool {
        participant.rttProbe = nil
        guard running else {
            participant.sentFrames = 0
            participant.awaitedFrame = 0
            participant.firstFrame = 0
            return false
        }
        let replayable = holds >= timeline.oldest && holds >= timeline.origin
            && (holds > 0 || timeline.confirmed <= configuration.lateJoinReplayLimit)
        if replayable {
            participant.sentFrames = holds
            participant.awaitedFrame = holds
            participant.firstFrame = holds
            return false
        }
        participant.awaitingTransfer = 0
        participant.awaitingReason = holds > 0 ? .reconnect : .lateJoin
        return true
    }

    /// Starts the match once every slot has its player attached.
    func startIfReady(now: UInt64) {
        guard !running else { return }
        for player in players where player?.isConnected != true { return }
        start(now: now)
    }

    /// Starts the match now; slots nobody holds stay empty.
    func start(now: UInt64) {
        guard !running else { return }
        running = true
        startedAtMs = now
        substitutionHoldUntilMs = now + 500
        for (index, player) in players.enumerated() {
            if let player {
                player.reportedAtMs = now
                player.sentFrames = 0
                player.awaitedFrame = 0
                player.rttProbe = nil
            } else {
                slotModes[index] = .vacant(.empty)
            }
        }
        openReplay(now: now)
        for participant in participants where participant.isConnected {
            send(.attachResponse(welcome(participant, transferFollows: nil)), to: participant, now: now)
        }
        transport.publish(topic: "sync.session_started", .eventRecord(EventRecord()), severity: .info,
                          message: "session \(sessionId) started with \(players.compactMap { $0 }.count) players",
                          sessionId: sessionId)
    }

    // MARK: - Inputs

    /// A player's (or spectator's) batch: acknowledgement, time sync, and new inputs.
    func receive(_ batch: InputBatch, from participant: RelayPeer, now: UInt64) throws(ServiceError) {
        let result = batch.inputs.withUnsafeBytes { raw in
            Result { () throws(ServiceError) in
                try receive(RelayWire.Batch(slot: batch.slot, startFrame: batch.startFrame, inputSize: batch.inputSize,
                                           inputs: raw, awaitedFrame: batch.awaitedFrame, currentFrame: batch.currentFrame),
                            from: participant, now: now)
            }
        }
        try result.get()
    }

    /// A batch read in place (the hot path): validation, acknowledgement, time sync, new inputs,
    /// confirmation, forwarding.
    func receive(_ batch: RelayWire.Batch, from participant: RelayPeer, now: UInt64) throws(ServiceError) {
        if participant.role == .spectator {
            guard batch.slot == 0, batch.inputs.isEmpty else {
                throw ServiceError(.permissionDenied, "Spectators send no inputs.", field: "InputBatch.inputs")
            }
            noteAcknowledgement(participant, batch.awaitedFrame)
            return
        }
        guard Int(batch.slot) == participant.slot else {
            throw ServiceError(.permissionDenied, "Slot \(batch.slot) is not yours; you play slot \(participant.slot).",
                               field: "InputBatch.slot")
        }
        guard Int(batch.inputSize) == inputSize else {
            throw ServiceError(.badRequest, "Inputs are \(inputSize) bytes in this session, not \(batch.inputSize).",
                               field: "InputBatch.input_size")
        }
        let count = batch.inputs.count / inputSize
        guard batch.inputs.count % inputSize == 0, count <= 128 else {
            throw ServiceError(.badRequest, "A batch holds up to 128 whole inputs of \(inputSize) bytes; got \(batch.inputs.count) bytes.",
                               field: "InputBatch.inputs")
        }
        guard running else {
            throw ServiceError(.invalidState, "The match has not started; wait for AttachResponse with running = true.")
        }
        let slot = participant.slot - 1
        let start = Int(batch.startFrame)
        let stored = timeline.stored(slot)
        guard start <= stored + configuration.maxFramesAhead else {
            throw ServiceError(.badRequest, "Frame \(start) is too far ahead: slot \(participant.slot) holds frames up to \(stored).",
                               field: "InputBatch.start_frame")
        }
        let current = Int(batch.currentFrame)
        if current > participant.reportedFrame && current <= timeline.newest + configuration.maxFramesAhead {
            participant.reportedFrame = current
            participant.reportedAtMs = now
            participant.stats.currentFrame = batch.currentFrame
        }
        noteAcknowledgement(participant, batch.awaitedFrame)

        guard slotModes[slot] == .active, count > 0, start + count > stored, start <= stored else { return }
        let first = stored
        let last = min(start + count, first + configuration.maxFramesAhead)
        var frame = first
        while frame < last {
            let offset = (frame - start) * inputSize
            timeline.append(slot: slot, from: UnsafeRawBufferPointer(rebasing: batch.inputs[offset ..< offset + inputSize]),
                            status: .received)
            frame += 1
        }
        inputsAccepted += last - first
        if substituting[slot] {
            // Caught up only after a lag tolerance's worth of its own inputs in a row.
            caughtUpFrom[slot] = caughtUpFrom[slot] ?? first
        }
        let sentAt = now &- UInt64(participant.rttMs / 2)
        for frame in first ..< last { arrivals.note(frame: frame, slot: slot, sentAt: sentAt) }
        if substituting[slot], let from = caughtUpFrom[slot], last - from >= lagTolerance {
            substituting[slot] = false
            caughtUpFrom[slot] = nil
            peerEvent(.caughtUp, participant, frame: from, detail: "its own inputs count again", now: now)
        }
        fillVacantSlots()
        let confirmedBefore = timeline.confirmed
        let moved = timeline.updateConfirmed()
        if moved { recordConfirmed(from: confirmedBefore) }
        // Forward what is not confirmed yet to the other players at once, with whatever was
        // confirmed for them meanwhile; the sender's own confirmation waits for its next message.
        let forwardFrom = max(first, timeline.confirmed)
        let forwarded = forwardFrom < last ? RelayWire.Run(slot: slot, from: forwardFrom, to: last) : nil
        forEachParticipant { other in
            guard other.isConnected && other.awaitingTransfer == nil else { return }
            if other === participant {
                if moved, other.deferredSinceMs == nil { other.deferredSinceMs = now }
                return
            }
            if other.isPlayer || moved { queueForward(to: other, run: other.isPlayer ? forwarded : nil, now: now) }
        }
    }

    // MARK: - Forwarding, coalesced per read batch

    /// Participants with forwarding queued since the last ``flushForwards(now:)``, in order.
    @exclusivity(unchecked) private var queuedForwards: [RelayPeer] = []
    /// Whether the core holds this session for the end of its read batch.
    var listedForFlush = false
    var hasQueuedForwards: Bool { !queuedForwards.isEmpty }

    /// Queues forwarding to `other` (players: `run`, another player's new inputs not confirmed
    /// yet; everyone: the confirmed frames it lacks) until ``flushForwards(now:)``: inputs read in
    /// one batch then reach `other` in one message, one run per player, instead of one message
    /// each. A relay that keeps up reads one input at a time and sends as before; one that fell
    /// behind reads several per player and sends fewer, larger messages, so its sending catches up
    /// instead of holding it behind.
    private func queueForward(to other: RelayPeer, run: RelayWire.Run?, now: UInt64) {
        if let run {
            if let index = other.queuedRuns.firstIndex(where: { $0.slot == run.slot }) {
                let queued = other.queuedRuns[index]
                let merged = RelayWire.Run(slot: run.slot, from: min(queued.from, run.from), to: max(queued.to, run.to))
                if run.from <= queued.to && queued.from <= run.to && merged.to - merged.from <= 128 {
                    other.queuedRuns[index] = merged
                } else {
                    // Not one run of at most 128 frames without a gap (a gap: the slot changed
                    // hands meanwhile): what is queued goes now.
                    sendQueued(to: other, now: now)
                    other.queuedRuns.append(run)
                }
            } else {
                other.queuedRuns.append(run)
            }
        }
        if !other.forwardQueued {
            other.forwardQueued = true
            queuedForwards.append(other)
        }
    }

    /// Sends everything queued by ``queueForward(to:run:now:)``: one message per participant
    /// (more only past what one message carries). Participants that left, or wait for a state,
    /// meanwhile get nothing (as they would have got nothing then).
    func flushForwards(now: UInt64) {
        guard !queuedForwards.isEmpty else { return }
        let list = queuedForwards
        queuedForwards.removeAll(keepingCapacity: true)
        for index in 0 ..< list.count {
            Unmanaged.passUnretained(list[index])._withUnsafeGuaranteedRef { other in
                other.forwardQueued = false
                guard !ended, other.isConnected, other.awaitingTransfer == nil else {
                    other.queuedRuns.removeAll(keepingCapacity: true)
                    return
                }
                sendQueued(to: other, now: now)
            }
        }
    }

    /// Sends `other` the confirmed frames it lacks and its queued runs (what of them is still
    /// unconfirmed and held): together in one message when they fit. Empties the queue.
    private func sendQueued(to other: RelayPeer, now: UInt64) {
        // Frames confirmed since a run was queued go with the confirmed ones.
        var kept = 0
        for index in 0 ..< other.queuedRuns.count {
            let run = other.queuedRuns[index]
            let from = max(run.from, timeline.confirmed, timeline.oldest)
            let to = min(run.to, timeline.stored(run.slot))
            if from < to {
                other.queuedRuns[kept] = RelayWire.Run(slot: run.slot, from: from, to: to)
                kept += 1
            }
        }
        other.queuedRuns.removeLast(other.queuedRuns.count - kept)
        defer { other.queuedRuns.removeAll(keepingCapacity: true) }
        guard other.isPlayer else {
            deliver(to: other, now: now)
            return
        }
        // Confirmed and forwarded inputs together in one message when they fit. (The queue is
        // read in place, not copied, so emptying it keeps its storage.)
        if compose(other, forwarded: other.queuedRuns, now: now) { return }
        if other.sentFrames < limit(for: other) { deliver(to: other, now: now) }
        if !other.queuedRuns.isEmpty {
            let awaited = timeline.stored(other.slot - 1)
            other.toldAwaitedInput = awaited
            let frame = RelayWire.inputBroadcast(packer, authoritative: false, timeline: timeline, players: nil,
                                                 provisional: other.queuedRuns, forwarded: [],
                                                 confirmedFrames: timeline.confirmed, awaitedInputFrame: awaited)
            sendPacked(frame, to: other, now: now)
        }
    }

    private func noteAcknowledgement(_ participant: RelayPeer, _ awaited: UInt32) {
        let value = min(Int(awaited), participant.sentFrames)
        if value > participant.awaitedFrame {
            participant.awaitedFrame = value
            let now = participant.lastHeardMs
            if let probe = participant.rttProbe, value >= probe.frames {
                participant.rttProbe = nil
                // After a resend, which send this answers is unknown: no sample (Karn's rule).
                if !participant.resentSinceProgress, now >= probe.sentAtMs {
                    noteRoundTrip(participant, sample: Double(now - probe.sentAtMs))
                }
            }
            if participant.resentSinceProgress {
                // Which send this answers is unknown: no sample, and the backed-off wait stays
                // until a clean one (Karn's rule; else a wait shorter than the usual delay
                // would never learn it).
                participant.resentSinceProgress = false
            } else if now >= participant.lastAuthoritativeSendMs {
                participant.resendBackoff = 1
                let sample = Double(now - participant.lastAuthoritativeSendMs)
                if participant.ackDelayMs == 0 && participant.ackDelayDeviationMs == 0 {
                    participant.ackDelayMs = sample
                    participant.ackDelayDeviationMs = sample / 2
                } else {
                    participant.ackDelayDeviationMs += (abs(sample - participant.ackDelayMs) - participant.ackDelayDeviationMs) / 4
                    participant.ackDelayMs += (sample - participant.ackDelayMs) / 8
                }
            }
            // Progress: the retransmission timer restarts.
            participant.lastAuthoritativeSendMs = max(participant.lastAuthoritativeSendMs, now)
        }
    }

    /// A round trip measured on the relay's clock: smoothed (1/8 of each sample, as TCP's SRTT)
    /// and capped at `maxCountedRttMs`, so no peer stretches the substitution deadlines (which
    /// wait half a player's round trip) beyond that, however slowly it answers.
    private func noteRoundTrip(_ participant: RelayPeer, sample: Double) {
        if participant.smoothedRttMs == 0 {
            participant.smoothedRttMs = sample
        } else {
            participant.smoothedRttMs += (sample - participant.smoothedRttMs) / 8
        }
        participant.rttMs = min(Int(participant.smoothedRttMs.rounded()), configuration.maxCountedRttMs)
    }

    /// Fills vacant slots up to the newest frame an active slot holds.
    func fillVacantSlots() {
        var newest = Int.min
        for slot in 0 ..< slotCount where slotModes[slot] == .active {
            newest = max(newest, timeline.stored(slot))
        }
        guard newest != .min else { return }
        for slot in 0 ..< slotCount {
            guard case .vacant(let status) = slotModes[slot] else { continue }
            while timeline.stored(slot) < newest { timeline.appendZero(slot: slot, status: status) }
        }
    }

    /// Confirmed frames moved: record them (replay) and learn the players' clock offsets.
    func recordConfirmed(from previous: Int) {
        for frame in max(previous, timeline.confirmed - 64) ..< timeline.confirmed {
            arrivals.sample(frame: frame, slots: slotCount) { slotModes[$0] == .active && !substituting[$0] }
        }
        replay?.framesConfirmed(through: timeline.confirmed, timeline: timeline)
    }

    /// Confirmed frames moved: record them and deliver them to everyone.
    func confirmedMoved(from previous: Int, now: UInt64) {
        recordConfirmed(from: previous)
        deliverConfirmed(now: now)
    }

    /// The newest frame `participant` may be sent (spectators trail by the delay until the
    /// players are gone).
    private func limit(for participant: RelayPeer) -> Int {
        participant.isPlayer || playersGoneAtMs != nil ? timeline.confirmed : timeline.confirmed - spectatorDelay
    }

    /// Sends a message the packer just packed to `participant`.
    private func sendPacked(_ frame: UnsafeRawBufferPointer?, to participant: RelayPeer, now: UInt64) {
        guard let frame, let address = participant.address else { return }
        participant.lastSendMs = now
        transport.sendEncoded(frame, to: address)
    }

    /// Sends `participant` its pending confirmed frames together with `forwarded` inputs, in one
    /// message, when everything it lacks fits one (on a link that lost or reordered messages it
    /// repeats every frame not acknowledged yet, so a lost or overtaken message costs nothing but
    /// the next one). Returns whether it sent.
    @discardableResult
    private func compose(_ participant: RelayPeer, forwarded: [RelayWire.Run], now: UInt64) -> Bool {
        let limit = limit(for: participant)
        guard participant.sentFrames < limit else { return false }
        // ZeroMQ's TCP never loses or reorders; a link that did (a resend was needed) gets every
        // unacknowledged frame again in each message for a while.
        let redundant = now < participant.redundantUntilMs
        let from = max(redundant ? participant.awaitedFrame : participant.sentFrames, participant.firstFrame)
        guard limit - from <= 128, from >= timeline.oldest else { return false }
        let awaited = participant.isPlayer ? timeline.stored(participant.slot - 1) : 0
        participant.toldAwaitedInput = awaited
        if participant.awaitedFrame >= participant.sentFrames { participant.lastAuthoritativeSendMs = now }
        participant.sentFrames = limit
        participant.deferredSinceMs = nil
        let frame = RelayWire.inputBroadcast(packer, authoritative: true, timeline: timeline, players: from ..< limit,
                                             provisional: [], forwarded: forwarded, confirmedFrames: timeline.confirmed,
                                             awaitedInputFrame: awaited)
        sendPacked(frame, to: participant, now: now)
        if participant.rttProbe == nil { participant.rttProbe = (limit, now) }
        return true
    }

    /// Sends `participant` the confirmed frames it was not sent yet: all unacknowledged ones in
    /// one message when they fit, else in order, 128 at a time (a participant catching up).
    private func deliver(to participant: RelayPeer, now: UInt64) {
        let limit = limit(for: participant)
        guard participant.sentFrames < limit else { return }
        if compose(participant, forwarded: [], now: now) { return }
        var from = participant.sentFrames
        var messages = 0
        while from < limit && messages < 4 {
            guard from >= timeline.oldest else {
                requestCatchUpTransfer(participant)
                return
            }
            let to = min(limit, from + 128)
            let awaited = participant.isPlayer ? timeline.stored(participant.slot - 1) : 0
            participant.toldAwaitedInput = awaited
            let frame = RelayWire.inputBroadcast(packer, authoritative: true, timeline: timeline, players: from ..< to,
                                                 provisional: [], forwarded: [], confirmedFrames: timeline.confirmed,
                                                 awaitedInputFrame: awaited)
            sendPacked(frame, to: participant, now: now)
            if participant.awaitedFrame >= participant.sentFrames { participant.lastAuthoritativeSendMs = now }
            if participant.rttProbe == nil, to > participant.sentFrames { participant.rttProbe = (to, now) }
            participant.sentFrames = max(participant.sentFrames, to)
            participant.deferredSinceMs = nil
            from = to
            messages += 1
        }
    }

    /// Sends every participant the confirmed frames it was not sent yet (a participant whose
    /// confirmation is deferred gets it once the deferral is over).
    func deliverConfirmed(now: UInt64, includingDeferred: Bool = true) {
        forEachParticipant { participant in
            guard participant.isConnected && participant.awaitingTransfer == nil else { return }
            if let since = participant.deferredSinceMs, !includingDeferred || now &- since < confirmationDeferMs { return }
            deliver(to: participant, now: now)
        }
    }

    /// A participant lacks inputs the relay no longer holds: it needs a state first.
    func requestCatchUpTransfer(_ participant: RelayPeer) {
        guard participant.awaitingTransfer == nil else { return }
        participant.awaitingTransfer = 0
        participant.awaitingReason = .reconnect
    }

    // MARK: - Timers

    /// Everything time-driven: silence, substitution, resends, acknowledgements, hints,
    /// statistics, checksum judgement, transfers.
    func tick(now: UInt64) {
        if now >= nextSilenceCheckMs {
            nextSilenceCheckMs = now + 100
            checkSilence(now: now)
        }
        guard running else { return }
        if timeline.newest > timeline.confirmed { substituteLateInputs(now: now) }
        if vacantSlots > 0 { fillVacantSlots() }
        let before = timeline.confirmed
        if timeline.updateConfirmed() {
            recordConfirmed(from: before)
            deliverConfirmed(now: now, includingDeferred: false)
        }
        resendAndAcknowledge(now: now)
        if Self.due(&lastHintsMs, every: configuration.hintIntervalMs, now: now) { sendHints(now: now) }
        if Self.due(&lastStatsMs, every: configuration.statsIntervalMs, now: now) { sendStats(now: now) }
        if !checksums.pending.isEmpty { judgeChecksums(now: now) }
        if transfer != nil || awaitingTransfers { driveTransfers(now: now) }
    }

    /// Whether a participant waits for a state transfer.
    private var awaitingTransfers: Bool {
        let list = participants
        for index in 0 ..< list.count where list[index].awaitingTransfer != nil { return true }
        return false
    }

    private var vacantSlots: Int {
        var count = 0
        for mode in slotModes where mode != .active { count += 1 }
        return count
    }

    private func checkSilence(now: UInt64) {
        let list = participants
        let silenceTimeoutMs = UInt64(configuration.silenceTimeoutMs)
        for index in 0 ..< list.count {
            let participant = list[index]
            guard participant.isConnected, now &- participant.lastHeardMs >= silenceTimeoutMs else { continue }
            if let address = participant.address {
                transport.send(.detach(Detach(reason: .timeout, message: "Nothing heard for \(configuration.silenceTimeoutMs) ms.")),
                               to: address)
            }
            participant.address = nil
            participant.disconnectedSinceMs = now
            peerEvent(.disconnected, participant, frame: timeline.confirmed, detail: "silent; may come back", now: now)
        }
        if spectators.contains(where: { !$0.isConnected }) { spectators.removeAll { !$0.isConnected } }
        if connectedCount > 0 { lastConnectedMs = now }
        guard running else { return }
        for (index, player) in players.enumerated() {
            guard let player, !player.isConnected, let since = player.disconnectedSinceMs,
                  slotModes[index] == .active,
                  now &- since >= UInt64(configuration.disconnectGraceMs) else { continue }
            slotModes[index] = .vacant(.disconnected)
            substituting[index] = false
            peerEvent(.left, player, frame: timeline.stored(index), detail: "did not come back; slot disconnected", now: now)
        }
    }

    /// Substitutes (repeats the last input of) every active slot whose input for a frame is
    /// later than the lag tolerance: a frame's deadline for a slot is when the earliest player
    /// sent that frame (its arrival minus half its round trip) plus the slot's half round trip
    /// plus the tolerance. So one weak client never stalls everyone, and nothing depends on the
    /// nominal frame rate (a session slowed down by latency does not look like lag). Round trips
    /// are the relay's own measurements, capped (``RelayConfiguration/maxCountedRttMs``): no
    /// player's word, and no player however slow, pushes a deadline past tolerance + half the cap.
    func substituteLateInputs(now: UInt64) {
        guard now >= substitutionHoldUntilMs else { return }
        var frame = timeline.confirmed
        while frame < timeline.newest {
            guard let sent = arrivals.sendEstimate(frame: frame) else { return }
            var blocked = false
            for slot in 0 ..< slotCount where slotModes[slot] == .active && timeline.stored(slot) == frame {
                let halfTrip = UInt64((players[slot]?.rttMs ?? 0) / 2)
                guard now >= sent + halfTrip + lagToleranceMs else {
                    blocked = true
                    continue
                }
                if !substituting[slot] {
                    substituting[slot] = true
                    if let player = players[slot] {
                        peerEvent(.substituting, player, frame: frame,
                                  detail: "input \(now - sent) ms after the first sender (half trip \(halfTrip) ms)", now: now)
                    }
                }
                timeline.appendSubstitute(slot: slot)
                caughtUpFrom[slot] = nil
                substitutedFrames[slot] += 1
                players[slot]?.stats.substitutedFrames = UInt64(substitutedFrames[slot])
            }
            if blocked { return }
            frame += 1
        }
    }

    private func resendAndAcknowledge(now: UInt64) {
        var resent = false
        forEachParticipant { participant in
            guard participant.isConnected && participant.awaitingTransfer == nil else { return }
            if let since = participant.deferredSinceMs, now &- since >= confirmationDeferMs { resent = true }
            // Its acknowledgement comes with its next batch, up to a frame after ours arrived:
            // without that frame, a loaded link (queues of tens of ms) looks lossy, and each
            // needless resend costs a message and 10 s of redundant broadcasts. Nor earlier than
            // its acknowledgements usually take (smoothed delay + 4 deviations, as TCP's RTO):
            // a relay behind on its own queue reads acknowledgements late, and resending then
            // only adds work (at 1,000 sessions that tipped a busy relay into a backlog it
            // never left). Each resend without an answer doubles the wait, up to 8 times.
            let usual = UInt64((participant.ackDelayMs + 4 * participant.ackDelayDeviationMs).rounded(.up))
            let timeout = (max(UInt64(max(configuration.resendIntervalMs, participant.rttMs + 20)), usual) + frameIntervalMs)
                * participant.resendBackoff
            if participant.awaitedFrame < participant.sentFrames,
               now &- participant.lastAuthoritativeSendMs >= timeout {
                participant.sentFrames = participant.awaitedFrame
                participant.rttProbe = nil
                participant.lastAuthoritativeSendMs = now
                participant.redundantUntilMs = now + 10_000
                participant.resentSinceProgress = true
                participant.resends += 1
                participant.resendBackoff = min(participant.resendBackoff * 2, 8)
                resent = true
            } else if participant.isPlayer,
                      participant.toldAwaitedInput != timeline.stored(participant.slot - 1),
                      now &- participant.lastSendMs >= UInt64(configuration.resendIntervalMs) {
                // The player's inputs arrived but nothing carried the acknowledgement back.
                let awaited = timeline.stored(participant.slot - 1)
                participant.toldAwaitedInput = awaited
                let frame = RelayWire.inputBroadcast(packer, authoritative: true, timeline: timeline, players: nil,
                                                     provisional: [], forwarded: [], confirmedFrames: timeline.confirmed,
                                                     awaitedInputFrame: awaited)
                sendPacked(frame, to: participant, now: now)
            }
        }
        // Spectators' delayed frames and resends go out here.
        if resent || spectatorDelay > 0 || !spectators.isEmpty { deliverConfirmed(now: now) }
    }

    /// Time sync: how far each player runs ahead of the slowest one, from when their inputs
    /// for the same frames were sent (arrival minus half the round trip, averaged). A player
    /// being substituted is told how far it trails the confirmed frame.
    private func sendHints(now: UInt64) {
        var slowest = -Double.infinity
        var leading = 0
        for (index, player) in players.enumerated() {
            guard let player, player.isConnected, slotModes[index] == .active else { continue }
            leading = max(leading, player.reportedFrame)
            guard !substituting[index], player.awaitingTransfer == nil, arrivals.hasOffset(slot: index) else { continue }
            slowest = max(slowest, arrivals.offset(slot: index))
        }
        let frameMs = 1000 / framesPerSecond
        for (index, player) in players.enumerated() {
            guard let player, player.isConnected, player.reportedFrame >= 0 else { continue }
            var ahead: Int32 = 0
            if substituting[index] || slotModes[index] != .active {
                ahead = Int32(clamping: min(0, player.reportedFrame - timeline.confirmed))
            } else if slowest.isFinite, arrivals.hasOffset(slot: index) {
                ahead = Int32(clamping: Int(((slowest - arrivals.offset(slot: index)) / frameMs).rounded()))
            }
            player.framesAhead = Int(ahead)
            player.stats.framesAhead = ahead
            // Level players hear it only now and then; a change is told at once.
            if ahead == 0 && player.lastHintAhead == 0 && now &- player.lastHintMs < 2_000 { continue }
            player.lastHintAhead = Int(ahead)
            player.lastHintMs = now
            let wait = ahead >= 2 ? UInt32(min(Int(ahead) / 2, 600)) : 0
            send(.timeSyncHint(TimeSyncHint(framesAhead: ahead, recommendedWaitFrames: wait,
                                            rttUs: UInt32(clamping: player.rttMs * 1000),
                                            leadingFrame: UInt32(clamping: max(leading, 0)))), to: player, now: now)
        }
    }

    /// The session's HUD figures.
    func sessionStats() -> SessionStats {
        var peers: [PeerStats] = []
        for participant in participants.prefix(72) {
            var stats = participant.stats
            stats.slot = UInt32(participant.slot)
            stats.name = String(participant.name.prefix(64))
            stats.role = participant.role
            stats.connected = participant.isConnected
            stats.framesAhead = Int32(clamping: participant.framesAhead)
            if participant.slot > 0 { stats.substitutedFrames = UInt64(substitutedFrames[participant.slot - 1]) }
            peers.append(stats)
        }
        return SessionStats(sessionId: sessionId, relayId: configuration.relayId,
                            confirmedFrame: UInt32(clamping: max(timeline.confirmed - 1, 0)), peers: peers,
                            timestampUnixMs: wallClockMs(), desyncs: UInt32(clamping: desyncs),
                            resyncs: UInt32(clamping: resyncs))
    }

    private func sendStats(now: UInt64) {
        let stats = sessionStats()
        sendToAll(.sessionStats(stats), now: now)
        transport.pushStats(stats)
    }

    // MARK: - Chat, stats, leaving

    /// A chat line: the relay fills in the sender and sends it to everyone in the session.
    func chat(_ message: ChatMessage, from participant: RelayPeer, now: UInt64) throws(ServiceError) {
        if now &- participant.chatWindowStartMs >= 1000 {
            participant.chatWindowStartMs = now
            participant.chatCount = 0
        }
        participant.chatCount += 1
        guard participant.chatCount <= 5 else {
            throw ServiceError(.rateLimited, "At most 5 chat lines per second.", retryAfterMs: 1000)
        }
        let line = ChatMessage(text: message.text, fromName: String(participant.name.prefix(64)),
                               fromSlot: UInt32(participant.slot), fromRole: participant.role,
                               sentAtUnixMs: wallClockMs())
        sendToAll(.chatMessage(line), now: now)
    }

    /// A peer's own HUD figures (rollbacks, ping) merged into the session's. Shown, never used:
    /// its reported ping is not its round trip for deadlines or time sync (the relay measures
    /// that itself, ``RelayPeer/rttMs``), or a player could stretch everyone's deadline.
    func noteStats(_ stats: PeerStats, from participant: RelayPeer) {
        participant.stats.pingMs = stats.pingMs
        participant.stats.jitterMs = stats.jitterMs
        participant.stats.frameDelay = stats.frameDelay
        participant.stats.rollbacks = stats.rollbacks
        participant.stats.rollbackFrames = stats.rollbackFrames
        participant.stats.maxRollbackFrames = stats.maxRollbackFrames
        if stats.currentFrame > participant.stats.currentFrame { participant.stats.currentFrame = stats.currentFrame }
    }

    /// A participant leaves for good (detach, kick): its slot turns disconnected from the
    /// first frame it did not send. A kicked one (`reason` `.kicked`: the host kicked or banned
    /// it) is also refused at attach until its tickets are of no use (see ``RevocationBook``).
    func remove(_ participant: RelayPeer, reason: DetachReason, detail: String, now: UInt64) {
        if reason == .kicked {
            let wallNow = wallClockMs()
            revocations.revoke(sessionId: sessionId, participantId: participant.participantId,
                               untilUnixMs: RelayCore.revocationEnd(ticketExpiresAtUnixMs: participant.ticketExpiresAtUnixMs,
                                                                    nowUnixMs: wallNow, configuration: configuration),
                               nowUnixMs: wallNow)
        }
        if participant.isPlayer {
            let index = participant.slot - 1
            guard players[index] === participant else { return }
            players[index] = nil
            if running {
                slotModes[index] = .vacant(.disconnected)
                substituting[index] = false
            }
        } else {
            spectators.removeAll { $0 === participant }
        }
        if let address = participant.address, reason != .leaving {
            transport.send(.detach(Detach(reason: reason, message: String(detail.prefix(256)))), to: address)
        }
        participant.address = nil
        let slot = participant.slot
        peerEvent(.left, participant, frame: slot > 0 ? timeline.stored(slot - 1) : timeline.confirmed,
                  detail: detail, now: now)
        transfer?.targets.removeAll { $0 === participant }
        if transfer?.reference === participant { abortTransfer(reason: "the reference left", now: now) }
        if running {
            fillVacantSlots()
            let before = timeline.confirmed
            if timeline.updateConfirmed() { confirmedMoved(from: before, now: now) }
        }
    }

    // MARK: - Replay

    /// A session rebuilt after a restart continues the replay the dead relay left, when the
    /// rebuilt timeline still holds the first frame that file lacks; otherwise says why not.
    func continueReplay() {
        guard let directory = configuration.replayDirectory, replay == nil else { return }
        do {
            guard let writer = try ReplayWriter(continuing: sessionId, in: directory) else { return }
            guard writer.nextFrame >= timeline.origin else {
                transport.publish(topic: "sync.replay_failed", .eventRecord(EventRecord()), severity: .error,
                                  message: "cannot continue the replay of \(sessionId): frames \(writer.nextFrame) ..< \(timeline.origin) were lost with the relay",
                                  sessionId: sessionId)
                writer.finish(footerReason: "relay restarted; frames from \(writer.nextFrame) were lost", finalChecksum: 0)
                return
            }
            replay = writer
        } catch {
            transport.publish(topic: "sync.replay_failed", .eventRecord(EventRecord()), severity: .error,
                              message: "cannot continue the replay of \(sessionId): \(error)", sessionId: sessionId)
        }
    }

    private func openReplay(now: UInt64) {
        guard let directory = configuration.replayDirectory, replay == nil else { return }
        let header = ReplayHeader(formatVersion: 1, sessionId: sessionId,
                                  content: content ?? ContentInfo(gameName: "unknown"), params: params,
                                  players: players.compactMap { $0?.info },
                                  startedAtUnixMs: wallClockMs(), startFrame: UInt32(timeline.origin),
                                  gameOptions: Array(gameOptions.prefix(4096)))
        do {
            replay = try ReplayWriter(directory: directory, sessionId: sessionId, header: header,
                                      startFrame: timeline.origin)
        } catch {
            transport.publish(topic: "sync.replay_failed", .eventRecord(EventRecord()), severity: .error,
                              message: "cannot write the replay of \(sessionId): \(error)", sessionId: sessionId)
        }
    }

    /// Ends the session: everyone is told, the replay is finished and synced to disk.
    func end(reason: DetachReason, detail: String, now: UInt64) {
        guard !ended else { return }
        ended = true
        for participant in participants {
            if let address = participant.address {
                transport.send(.detach(Detach(reason: reason, message: String(detail.prefix(256)))), to: address)
            }
            participant.address = nil
        }
        replay?.finish(footerReason: detail, finalChecksum: checksums.agreed[timeline.confirmed] ?? 0,
                       timeline: timeline)
        replay = nil
        transport.publish(topic: "sync.session_ended", .eventRecord(EventRecord()), severity: .info,
                          message: "session \(sessionId) ended after \(timeline.confirmed) frames: \(detail)",
                          sessionId: sessionId)
    }
}
