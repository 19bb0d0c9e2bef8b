import NetplayAuth
import NetplayService
import NetplayWire

/// What a resumed attach's claim of confirmed frames counts for.
///
/// A peer returning to a match says how many frames it holds confirmed, and a relay rebuilding
/// the session after a restart takes resent history and picks the timeline's start by that
/// claim. A peer could claim frames the match never reached, so beyond its own slot the claim
/// counts only as far as the peer's ``ProgressProof`` certifies (signed by a relay with the
/// cluster secret) plus ``RelayConfiguration/progressAllowanceMs`` of play; without a proof, the
/// allowance from frame 0. Its own slot's frames are its own inputs, and count to its claim.
struct ResumeClaim {
    /// The frames the peer says it holds confirmed (0 when it does not resume).
    let claimed: Int
    /// As many of them as count for other players' frames and the rebuild's bounds.
    let proven: Int
    /// The frames its proof certifies the relay had confirmed (nil: none, or one that does not
    /// verify): the players' frames, for a spectator's proof too (every participant gets the
    /// same proof; a spectator holds its delay fewer).
    let certified: Int?
    /// Why its proof certifies nothing (nil: it verified, or there was none).
    let proofProblem: String?

    /// The claim `request` makes in session `sessionId` running at `framesPerSecond` for a
    /// player (a spectator: one `spectatorDelay` frames behind the players, whom the proof's
    /// frames are about). A proof that does not verify (forged, another session's, a key this
    /// relay does not hold) counts as none.
    init(_ request: AttachRequest, sessionId: String, framesPerSecond: Double, spectatorDelay: Int,
         proofs: ProgressProofs, allowanceMs: Int) {
        claimed = request.resume ? Int(request.confirmedFrames) : 0
        var certified: Int?
        var problem: String?
        if request.resume, let proof = request.progress {
            switch proofs.check(proof, sessionId: sessionId) {
            case .success(let frames): certified = frames
            case .failure(let error): problem = error.description
            }
        }
        self.certified = certified
        proofProblem = problem
        let allowance = Int((Double(allowanceMs) * framesPerSecond / 1000).rounded(.up))
        proven = min(claimed, max((certified ?? 0) - spectatorDelay, 0) + allowance)
    }

    /// Whether the claim counts in full.
    var isProven: Bool { proven == claimed }

    /// The latest frame a rebuilt timeline may start at on this claim: some way before what its
    /// proof certifies (a second of frames: a peer may not have seen the last broadcasts the
    /// proof speaks of), so that no peer holding that proof is left below the start, needing a
    /// state (which a liar returning first would serve). Nil: no bound beyond the claim.
    func latestStart(framesPerSecond: Double, spectatorDelay: Int) -> Int? {
        certified.map { max($0 - spectatorDelay - Int(framesPerSecond.rounded(.up)), 0) }
    }
}
