import NetplayAuth
import NetplayService
import NetplayWire

/// What a resumed attach's claim of confirmed frames counts for.
///
/// A peer returning to a match says how many frames it holds confirmed, and a relay rebuilding
/// the session after a restart starts its timeline and takes resent history by that claim. A
/// peer could claim frames the match never reached, so the claim counts only up to what the
/// peer's ``ProgressProof`` certifies (signed by a relay with the cluster secret) plus
/// ``RelayConfiguration/progressAllowanceMs`` of play; without a proof, from frame 0.
enum ResumeClaim {
    /// `request` with its claim cut to what `proofs` lets it count for in session `sessionId`
    /// running at `framesPerSecond` (and `history_from_frame` no higher than the claim). A
    /// proof signed with a key this relay does not hold counts as none (a rotated-out key); one
    /// whose signature fails is refused (`BAD_REQUEST`): it was forged or altered.
    static func bounded(_ request: AttachRequest, sessionId: String, framesPerSecond: Double,
                        proofs: ProgressProofs, allowanceMs: Int) throws(ServiceError) -> AttachRequest {
        guard request.resume else { return request }
        var certified = 0
        if let proof = request.progress {
            switch proofs.check(proof, sessionId: sessionId) {
            case .success(let frames): certified = frames
            case .failure(.unknownKey): certified = 0
            case .failure(let error):
                throw ServiceError(.badRequest, "\(error); resume without it.", field: "AttachRequest.progress")
            }
        }
        let allowance = Int((Double(allowanceMs) * framesPerSecond / 1000).rounded(.up))
        var bounded = request
        let limit = min(Int(request.confirmedFrames), certified + allowance)
        bounded.confirmedFrames = UInt32(limit)
        bounded.historyFromFrame = min(request.historyFromFrame, bounded.confirmedFrames)
        return bounded
    }
}
