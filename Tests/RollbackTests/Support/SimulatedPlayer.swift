import Rollback

/// One player's P2P session on the simulated network, as both harnesses drive it: ticked at
/// 60 Hz from its own start time, fed from its inbox, recording what it simulated.
final class SimulatedPlayer<Base: Game> where Base.State: Equatable {
    let id: PeerID
    let player: PlayerHandle
    let session: P2PSession<LoggingGame<Base>>
    let log: FrameLog<Base.State>
    var startMs: UInt64
    var ticks: UInt64 = 0
    var inbox: [SimulatedDelivery<RollbackMessage>] = []
    var events: [SessionEvent] = []
    var rollbacks = 0
    /// Frames still to skip because the session asked this player to wait.
    var skipFrames = 0
    /// Whether the player still runs (a mesh test may drop it).
    var alive = true
    var advanced = 0
    var waits: [WaitReason: Int] = [:]
    var honourWaits = true
    /// The player ticks (handles messages, polls) but does not advance before this time: a hitch.
    var stallUntilMs: UInt64 = 0

    init(id: PeerID, player: PlayerHandle, session: P2PSession<LoggingGame<Base>>, log: FrameLog<Base.State>,
         startMs: UInt64) {
        self.id = id
        self.player = player
        self.session = session
        self.log = log
        self.startMs = startMs
    }

    /// When its next 60 Hz tick is due.
    func nextTickMs() -> UInt64 { startMs + ticks * 1000 / 60 }

    /// The newest frame this player both confirmed and simulated.
    var settledFrame: Frame { min(session.confirmedFrame, session.currentFrame - 1) }
}

extension Array {
    /// Empties the array and returns what it held: an inbox handled once per tick.
    mutating func takeAll() -> [Element] {
        defer { removeAll() }
        return self
    }
}
