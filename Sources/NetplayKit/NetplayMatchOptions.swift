import NetplayService
import NetplayWire
import Rollback

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
    /// Every this many failed reattach attempts in a row, ask the coordinator where the session
    /// runs now (its relay's host may be gone and the session moved); 0 = never.
    public var relayLookupEveryAttempts = 2
    /// Extra frames simulated per tick while behind the others.
    public var catchUpFramesPerTick = 4
    /// Reported to the relay.
    public var clientVersion = "NetplayKit \(NetplayVersion.current)"
    /// The game, recorded in the session's replay header (hosts set it).
    public var content: ContentInfo?
    /// Game-defined options needed to replay the match.
    public var gameOptions: [UInt8] = []
    /// Host only: the match starts from the host's game as it is (mid-game: "Network Play" from
    /// the pause menu), not from every peer's fresh boot. Before frame 0 the relay sends the
    /// host's state to every other player and spectator, who load it, and the host's state wins
    /// the relay's checksum votes. Ignored for anyone else.
    public var startFromHostState = false
    /// Spectators: never simulate past this match frame.
    public var stopAtFrame: Int?
    /// How inputs not received yet are guessed.
    public var prediction: any InputPredictor = RepeatLastPrediction()
    /// Frames of confirmed inputs kept to resend to a restarted relay.
    public var historyFrames = 1024
    /// The cluster's CurveZMQ public key, when it encrypts (relay link and ticket renewal).
    public var serverKey: [UInt8]?
    /// How the match keeps in step with the other players (the relay's time-sync hints).
    public var pacing: NetplayPacing = .wholeFrames
    /// Connections to the relay carrying the same inputs, 1 ... ``maxPaths`` (default 3). Inputs
    /// and acknowledgements go on each and the relay sends every input broadcast on each, so a
    /// lost TCP segment, which holds back everything behind it on its connection for a round
    /// trip or more, delays an input only when every path is blocked at once. Everything else
    /// uses the first connection. 1: a single connection. Values outside the range are clamped.
    public var paths = 3
    /// Connections used once the link shows loss (1 ... ``maxPaths``; default 4; at most
    /// ``paths`` means never more): a copy of an input broadcast arriving on one path 40 ms or
    /// more after it came on another is a TCP segment held back by a loss; from the first such
    /// sign the match opens this many paths for the rest of the session. Measured on a real
    /// path at 50 ms one way and 2 % loss each way (docs/wan-harness.md): one connection holds
    /// ~5 % of messages back by over 100 ms, two ~0.3 %; with 4 players, 2 paths still let
    /// 8-10-frame rollbacks through, 3 or 4 mostly keep them within the floor + 4. A clean link
    /// never pays for the fourth (each path costs the relay one send of every input broadcast).
    /// A match of more than two players starts with this many (each peer waits for several
    /// partners' inputs; in the first second, before a loss shows, 3 paths let 9-10-frame
    /// rollbacks through with 4 players at 2 % loss, 4 paths from the start mostly 4-7).
    public var pathsOnLoss = 4

    /// The most connections a match opens to its relay (relays accept 4 per participant by default).
    public static let maxPaths = 4

    /// Defaults.
    public init() {}
}
