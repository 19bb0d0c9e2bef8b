/// A rebuilt session's record of a player who forfeited its own history
/// (``RelaySession/forfeitHistoryNotSent(now:)``): how far the others' history may stand in for
/// its slot, and whether its player plays on since.
struct HistoryForfeit {
    /// The frame the forfeit reaches to at most: ``RelaySession/framesProvenFinal`` when it was
    /// forfeited below it (the frames past it may be that player's next moves), `Int.max` when
    /// it was forfeited at or past it, the match standing still there.
    let cap: Int
    /// The frame its player reported playing at the start of the last whole second
    /// (`InputBatch.current_frame`), and when that second began.
    private var mark: (frame: Int, atMs: UInt64)
    /// Whether its player played on in the last whole second (``notePlay(of:quarterSecond:now:)``).
    private(set) var playsOn = true

    init(cap: Int, owner: RelayPeer?, now: UInt64) {
        self.cap = cap
        mark = (owner?.reportedFrame ?? 0, now)
    }

    /// Notes, once a second, whether `owner` plays on through the frames a forfeit below the
    /// proven ones took ahead of where it played: it loads a state (it cannot send meanwhile),
    /// or its reported frame moved a quarter second of frames in the last second and is not yet
    /// half a second past the forfeit's cap. An honest player catching up so (the match stands
    /// still meanwhile, and looks held) is not forfeited further, nor in the half second it
    /// takes the match to stop looking held once it is through. That is the player's word: a
    /// liar reporting frames it does not play holds the match so until the history window is
    /// over (the forfeits end with it), when its slot is substituted at once
    /// (``RelaySession/waitsForAnother(_:at:now:)`` spares no slot that forfeited).
    /// `quarterSecond`: a quarter second of the match's frames. Only a capped forfeit is asked:
    /// one with no cap is never forfeited further.
    mutating func notePlay(of owner: RelayPeer, quarterSecond: Int, now: UInt64) {
        if owner.awaitingTransfer != nil {
            playsOn = true
        } else if now &- mark.atMs >= 1_000 {
            playsOn = owner.reportedFrame - mark.frame >= quarterSecond && owner.reportedFrame < cap + 2 * quarterSecond
        } else {
            return
        }
        mark = (owner.reportedFrame, now)
    }
}
