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
    var isPlayerLink: Bool { kind == .peer || kind == .authority || kind == .host }

    /// The longest round trip believed: a reply echoing a time this endpoint never sent (0, say)
    /// made a sample of the whole clock, and the smoothed figure took minutes to recover.
    static let maxRoundTripMs = 60_000.0

    /// Records a round-trip sample (smoothed like TCP's SRTT / RTTVAR); one over
    /// ``maxRoundTripMs`` is not believed.
    mutating func recordRoundTrip(_ sample: Double) {
        guard sample <= Self.maxRoundTripMs else { return }
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
