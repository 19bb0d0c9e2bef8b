import NetplayService
import NetplayWire

/// One participant of a relay session (a player or a spectator) and everything the relay tracks
/// about its link: address, liveness, what confirmed inputs it holds, its clock, its HUD figures.
final class RelayPeer {
    let participantId: String
    var name: String
    let role: Role
    /// 1-based slot (0 for spectators); moved only before the match starts (``RelaySession/assign(_:routes:now:)``).
    var slot: Int
    /// Whether its ticket admits the session's host (``NetplayWire/JoinTicket/admitsHost``): in a
    /// checksum tie the host's group wins, and only the host starts the match early.
    let isHost: Bool
    /// Where it is attached now (nil while disconnected): its primary connection, which gets
    /// everything the relay sends it. A new primary (or none) ends its additional paths.
    var address: PeerAddress? {
        didSet {
            isConnected = address != nil
            if hasExtraPaths && address != oldValue { extraPaths.removeAll() }
        }
    }
    /// Its additional connections (``NetplayWire/AttachRequest/additionalPath``), primary
    /// excluded: every input broadcast to it goes on each of them too, and its inputs and
    /// acknowledgements are taken from any. The core keeps ``PeerRoutes`` in step; a route left
    /// behind when the list is cleared here is refused and pruned (see ``isPath(_:)``).
    @exclusivity(unchecked) var extraPaths: [PeerAddress] = [] { didSet { hasExtraPaths = !extraPaths.isEmpty } }
    /// `!extraPaths.isEmpty`, kept as a flag: the broadcast path tests it on every send.
    @exclusivity(unchecked) private(set) var hasExtraPaths = false
    /// Whether it is attached (`address != nil`), kept as a flag: the relay's loops test it for
    /// every participant on every input and timer tick, and reading the optional address copied it.
    private(set) var isConnected = true
    var lastHeardMs: UInt64
    /// When it was last heard or attached; a disconnected player's grace runs from here.
    var disconnectedSinceMs: UInt64?
    var ticketExpiresAtUnixMs: UInt64

    // Delivery of confirmed inputs.
    /// Confirmed frames `0 ..< sentFrames` were sent to it.
    var sentFrames = 0
    /// It holds every confirmed input of frames `0 ..< awaitedFrame` (its acknowledgement).
    var awaitedFrame = 0
    var lastAuthoritativeSendMs: UInt64 = 0
    var lastSendMs: UInt64 = 0
    /// How long its acknowledgements take to move (from the first unacknowledged send or the
    /// last progress): smoothed value and mean deviation in ms, as TCP estimates its round trip.
    /// A loaded relay or link delays them, and the retransmission timer waits accordingly.
    var ackDelayMs = 0.0
    var ackDelayDeviationMs = 0.0
    /// No sample from the acknowledgement after a resend (which send it answers is unknown).
    var resentSinceProgress = false
    /// Times confirmed frames were sent to it again for want of an acknowledgement.
    var resends = 0
    /// Doubles with each resend (1, 2, 4, 8), back to 1 with the next acknowledgement that gives a sample.
    var resendBackoff: UInt64 = 1
    /// The first frame of its inputs it may send (a late joiner: the transfer's frame).
    var firstFrame = 0
    /// The confirmed frames its last resumed attach said it holds (0: it did not resume): in a
    /// session rebuilt after a restart, the history it may resend lies below this.
    var resumedHolding = 0
    /// As many of those as its progress proof covers (``ResumeClaim/proven``): how far its
    /// history of other players' slots, and its claim's hold on substitutes, reach.
    var resumedProven = 0
    /// The first of those frames it can resend (`AttachRequest.history_from_frame`); nil when
    /// its last attach did not resume. Another player's history for its slot is taken only
    /// below it: from here on its own resends are the word on its own inputs.
    var resumedHistoryFrom: Int?
    /// When its first resumed attach to this relay came (0: none): its history has
    /// ``RelaySession/historyGraceMs`` from then before its slot's frames can be taken from the
    /// others' (``RelaySession/historyForfeited``); attaching again does not start it over.
    var firstResumedAtMs: UInt64 = 0
    /// The state transfer it waits for before receiving inputs (late join, reconnect).
    var awaitingTransfer: UInt32?
    /// Why it waits (late join or reconnect), for the transfer request.
    var awaitingReason: StateTransferReason = .lateJoin
    /// Transferred states it reported it could not load, or stalled (stopped acknowledging
    /// chunks), since its last successful load.
    var failedLoads = 0
    /// The last transfer whose every chunk went to it, until it acknowledges loading it: a
    /// "loaded" acknowledgement of any other transfer settles nothing (a forged one reset its
    /// give-up counts, so a target failing on purpose had the reference send its state for good).
    var deliveredTransfer: UInt32?
    /// In a match that starts from the host's state: whether it holds that state (see
    /// ``RelaySession/startStateReady(now:)``).
    var startState: StartStateProgress = .missing
    /// The awaited input frame last told to it (to send an acknowledgement when it moved).
    var toldAwaitedInput = -1

    // Time sync.
    /// The frame it reported simulating, and when that value last moved (relay clock).
    var reportedFrame = -1
    var reportedAtMs: UInt64 = 0
    var lastHintMs: UInt64 = 0
    var lastHintAhead = Int.min
    /// Until then every message repeats all frames it has not acknowledged (its link lost some).
    var redundantUntilMs: UInt64 = 0
    /// Its confirmation waits (since then) to travel with the next message to it.
    var deferredSinceMs: UInt64?
    /// Forwarding to it waits for the end of the relay's read batch (see
    /// ``RelayCore/beginBatch()``), with the other players' inputs it is to carry provisionally:
    /// one run per slot, extended while the batch reads more of that player's inputs (the array
    /// keeps its storage between batches).
    /// (Reactor thread only, and no access to these overlaps another: no dynamic exclusivity
    /// checks on the per-input path.)
    @exclusivity(unchecked) var forwardQueued = false
    @exclusivity(unchecked) var queuedRuns: [RelayWire.Run] = []
    /// Since when its queued forwarding waits for the rest of a frame's partners
    /// (``RelayConfiguration/partnerHoldMs``), nil when it does not wait.
    @exclusivity(unchecked) var heldSinceMs: UInt64?
    /// Its round trip to the relay as the relay measures it (smoothed, capped at the
    /// configuration's `maxCountedRttMs`): from an authoritative send carrying new frames to the
    /// acknowledgement that covers them, on the relay's clock. 0 until the first sample. Never
    /// what the peer reports: that would let a player stretch everyone's substitution deadline.
    var rttMs = 0
    /// The send being timed: the frame count it brought the participant to, and when it left
    /// (one send at a time, as TCP times one segment per round trip; dropped on a resend).
    var rttProbe: (frames: Int, sentAtMs: UInt64)?
    /// The smoothed round trip (ms), uncapped; ``rttMs`` is it capped and rounded.
    var smoothedRttMs = 0.0
    /// The mean deviation of its round-trip samples (ms), as TCP's RTTVAR.
    var rttDeviationMs = 0.0
    /// The relay's own ping in flight to it (before the start and in the lobby): only a Pong
    /// echoing this nonce counts, so a peer cannot answer a ping it has not received.
    var pingInFlight: (nonce: UInt64, sentAtMs: UInt64)?
    var lastPingMs: UInt64 = 0
    /// Round trips measured with the relay's pings, and the shortest (the path itself: a sample
    /// held back by a lost segment is only longer).
    var pingSamples = 0
    /// The connections it said it opens, primary included (``NetplayWire/AttachRequest/paths``,
    /// at most the relay's limit): the start waits for them (``RelaySession/driveStartSync(now:)``).
    var announcedPaths = 1
    var shortestPingMs = Int.max
    var framesAhead = 0

    // HUD.
    var stats = PeerStats()
    var chatWindowStartMs: UInt64 = 0
    var chatCount = 0
    /// The client software it reported when it attached ("NetplayKit 0.1.0", "netplay-peer 0.1.0").
    var clientVersion = ""

    // State transfers (cold: kept after the fields the input path reads).
    /// Whether it acknowledges the progress of the state transfers it receives (sync protocol 2):
    /// such a peer is sent at most ``RelayConfiguration/transferWindowBytes`` beyond what it
    /// acknowledged; an older one gets each state whole, and only states of at most that size.
    var pacesTransfers = true
    /// Transfers it stopped acknowledging (or, of sync protocol 1, could not be sent) since its
    /// last successful load, the last on connection ``stalledOn``; beyond
    /// ``RelaySession/loadRetries`` it is sent no more. A new connection gets one more try
    /// (nothing is queued for it at the relay), as leaving and joining again would.
    var stalledTransfers = 0
    var stalledOn: PeerAddress?
    /// Of sync protocol 1, it was refused a state larger than the window: only an attach that
    /// paces its transfers (protocol 2 or later) clears its record.
    var refusedUnpaced = false

    init(participantId: String, name: String, role: Role, slot: Int, address: PeerAddress, now: UInt64,
         ticketExpiresAtUnixMs: UInt64, isHost: Bool = false) {
        self.participantId = participantId
        self.name = name
        self.role = role
        self.slot = slot
        self.isHost = isHost
        self.address = address
        self.lastHeardMs = now
        self.ticketExpiresAtUnixMs = ticketExpiresAtUnixMs
    }

    var isPlayer: Bool { role == .player }

    /// Whether `peer` is one of its connections (the primary or an additional path).
    @inline(__always)
    func isPath(_ peer: PeerAddress) -> Bool {
        address == peer || (hasExtraPaths && extraPaths.contains(peer))
    }

    /// Connections it holds (0 while disconnected).
    var pathCount: Int { isConnected ? 1 + extraPaths.count : 0 }

    var info: PeerInfo {
        PeerInfo(participantId: participantId, name: name, role: role, slot: UInt32(slot), connected: isConnected)
    }
}
