/// What a session knows about one remote endpoint: handshake progress, liveness, what it
/// acknowledged, its reported frames, round-trip time and time sync. Sessions own one per
/// peer, relay, spectator or host.
struct Endpoint {
    enum Kind: Equatable {
        /// Another player's peer: sends its own players' inputs.
        case peer
        /// The relay: sends every player's authoritative inputs and confirms frames.
        case authority
        /// Receives confirmed inputs only.
        case spectator
        /// The host a spectator session watches (authoritative for every player).
        case host
    }

    enum Phase: Equatable { case synchronizing, running, disconnected }

    let id: PeerID
    let kind: Kind
    /// Players whose inputs this endpoint sends us.
    var players: [PlayerHandle]
    var phase: Phase = .synchronizing

    // Handshake.
    var syncCount = 0
    var syncNonce: UInt32 = 0
    var lastSyncSendMs: UInt64?

    // Liveness.
    var lastReceiveMs: UInt64?
    var interrupted = false
    var lastSendMs: UInt64 = 0
    var lastInputSendMs: UInt64 = 0
    var lastQualityMs: UInt64?
    var lastNoticeMs: UInt64 = 0

    // Inputs.
    /// The newest frame of our inputs the endpoint holds.
    var ackFrame: Frame = nullFrame
    /// The endpoint's own confirmed frame.
    var reportedConfirmedFrame: Frame = nullFrame
    /// (ack, confirmed) last told to the endpoint, to skip redundant acknowledgements.
    var lastToldAck: Frame = nullFrame - 1
    var lastToldConfirmed: Frame = nullFrame - 1
    /// For spectators: the newest confirmed frame already sent.
    var sentThroughFrame: Frame = nullFrame
    /// Disconnect proposals received from this peer, by player.
    var disconnectReports: [PlayerHandle: Frame] = [:]

    // Time sync.
    var remoteFrame: Frame = nullFrame
    var remoteFrameAtMs: UInt64 = 0
    var remoteAdvantage = 0
    var localAdvantage = 0
    var rttMs: Double?
    var lastRttSample: Double?
    var jitterMs: Double = 0
    var timeSync = TimeSync()

    var stats: PeerStats

    init(id: PeerID, kind: Kind, players: [PlayerHandle]) {
        self.id = id
        self.kind = kind
        self.players = players
        self.stats = PeerStats(peer: id)
    }

    var isAlive: Bool { phase != .disconnected }

    // MARK: Rules every session applies to its endpoints (what each does about them differs)

    /// Whether a handshake `SyncRequest` is due: the first, or a retry after `retryMs` without a
    /// reply. The session notes the send in ``lastSyncSendMs``. (The checks a session makes of
    /// every endpoint on every poll only read, and it writes what changes itself, as before
    /// these rules were shared: a mutating call through the P2P session's endpoint array would
    /// pay a uniqueness check on every poll.)
    func syncRequestDue(now: UInt64, retryMs: Int) -> Bool {
        phase == .synchronizing && (lastSyncSendMs.map { now &- $0 >= UInt64(retryMs) } ?? true)
    }

    /// What a handshake reply did.
    enum SyncProgress: Equatable {
        /// Not the reply awaited (stale nonce, or not synchronizing): nothing changed.
        case ignored
        /// One more round trip of `count`; the next `SyncRequest` is due now.
        case progressed(count: Int)
        /// The last round trip of `count`: the endpoint runs.
        case completed(count: Int)
    }

    /// Counts `reply` when it answers the request in flight: the endpoint runs after `total`
    /// round trips. The session then draws the next request's nonce (from its own generator,
    /// for a reply that counted only).
    mutating func acceptSyncReply(_ reply: SyncReply, total: Int) -> SyncProgress {
        guard phase == .synchronizing, reply.nonce == syncNonce else { return .ignored }
        syncCount += 1
        guard syncCount >= total else { return .progressed(count: syncCount) }
        phase = .running
        return .completed(count: syncCount)
    }

    /// What a silence of the endpoint amounts to at a poll.
    struct Silence: Equatable {
        /// Set when the endpoint is found interrupted now (the session then sets
        /// ``interrupted``, so it is reported once): milliseconds until it will be disconnected
        /// (`Int.max`: never).
        var interruptedNow: Int?
        /// Whether it has been silent for the disconnect timeout.
        var timedOut = false
    }

    /// What the endpoint's silence at `now` amounts to: interrupted after `interruptMs` (until
    /// ``heard(at:)``), timed out after `disconnectMs` (0: never); nil while neither is new.
    func silence(at now: UInt64, interruptMs: Int, disconnectMs: Int) -> Silence? {
        guard let heard = lastReceiveMs else { return nil }
        let silent = Int(now &- heard)
        let timedOut = disconnectMs > 0 && silent >= disconnectMs
        let interruptedNow = !interrupted && silent >= interruptMs
        guard timedOut || interruptedNow else { return nil }
        return Silence(interruptedNow: interruptedNow ? (disconnectMs > 0 ? max(0, disconnectMs - silent) : Int.max) : nil,
                       timedOut: timedOut)
    }

    /// Notes a message received at `now`; true when it ends an interruption (the endpoint
    /// resumed).
    mutating func heard(at now: UInt64) -> Bool {
        stats.messagesReceived += 1
        lastReceiveMs = now
        guard interrupted else { return false }
        interrupted = false
        return true
    }

    /// Whether a `QualityReport` (ping) is due after `intervalMs`; the session notes the send
    /// in ``lastQualityMs``.
    func qualityReportDue(now: UInt64, intervalMs: Int) -> Bool {
        lastQualityMs.map { now &- $0 >= UInt64(intervalMs) } ?? true
    }

    /// Records a round-trip sample (smoothed like TCP's SRTT / RTTVAR).
    mutating func recordRoundTrip(_ sample: Double) {
        if let rtt = rttMs {
            rttMs = rtt * 0.875 + sample * 0.125
        } else {
            rttMs = sample
        }
        if let last = lastRttSample {
            jitterMs = jitterMs * 0.875 + abs(sample - last) * 0.125
        }
        lastRttSample = sample
        stats.pingMs = Int((rttMs ?? 0).rounded())
        stats.jitterMs = Int(jitterMs.rounded())
    }

    /// Notes the endpoint's current frame as reported in a message received at `now`.
    mutating func noteRemoteFrame(_ frame: Frame, now: UInt64) {
        if frame > remoteFrame || (remoteFrame - frame) > 600 {
            remoteFrame = frame
            remoteFrameAtMs = now
        }
    }

    /// How many frames the endpoint is estimated to be ahead of `localFrame`.
    func estimateAdvantage(localFrame: Frame, now: UInt64, framesPerSecond: Int) -> Int {
        guard remoteFrame >= 0 else { return 0 }
        let elapsed = Double(now &- remoteFrameAtMs) + (rttMs ?? 0) / 2
        let estimate = Double(remoteFrame) + elapsed * Double(framesPerSecond) / 1000
        return roundedToInt(estimate - Double(localFrame))
    }
}

/// `Int(value.rounded())` (halves away from zero) without a call to libm's `round`, which
/// this runs once per endpoint and frame. Only for values well inside `Int`'s range.
@inline(__always)
func roundedToInt(_ value: Double) -> Int {
    Int(value < 0 ? value - 0.5 : value + 0.5)
}
