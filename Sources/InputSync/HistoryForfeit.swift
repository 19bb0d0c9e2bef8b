/// A rebuilt session's record of a player who forfeited its own history
/// (``RelaySession/forfeitHistoryNotSent(now:)``): how far the others' history may stand in for
/// its slot, and where the player itself played when it forfeited.
struct HistoryForfeit {
    /// The frame the forfeit reaches to at most: `Int.max` when the match stood still there,
    /// ``RelaySession/framesProvenFinal`` when it was forfeited only for standing below it
    /// (the frames past it are that player's next moves).
    let cap: Int
    /// The frame its player reported playing (`InputBatch.current_frame`) when it forfeited.
    let ownerFrame: Int
    /// When it forfeited.
    let atMs: UInt64

    /// Whether `owner` plays on since it forfeited below the proven frames: its reported frame
    /// moved in the last second, and by a quarter of the frames the time since called for. An
    /// honest player whose frames were taken ahead of where it played catches up through them
    /// (the match stands still meanwhile, and looks held) and is not forfeited further. A liar
    /// reporting frames it does not play gains little: the frame it reports goes no further
    /// than the match's newest frame allows, and the history window ends the forfeits anyway.
    func ownerPlaysOn(_ owner: RelayPeer, framesPerSecond: Double, now: UInt64) -> Bool {
        guard cap != .max, now &- owner.reportedAtMs < 1_000 else { return false }
        let quarterSpeed = Int(Double(now &- atMs) * framesPerSecond / 4_000)
        return owner.reportedFrame - ownerFrame >= quarterSpeed
    }
}
