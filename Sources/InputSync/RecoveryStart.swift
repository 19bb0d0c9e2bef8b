import Foundation
import NetplayWire

/// How a session rebuilt after a relay restart starts: from its first returning peer's resumed
/// attach, and the replay the dead relay left for it.
struct RecoveryStart {
    /// Where its timeline starts.
    let origin: Int
    /// The replay to continue (nil: none), or why it could not be read.
    let replay: Result<LeftBehindReplay?, any Error>
    /// The replay, when it vouches for what was confirmed before (``LeftBehindReplay/vouches(for:at:)``).
    let record: LeftBehindReplay?

    /// The start for session `sessionId` of `params` (as its verified ticket says), whose first
    /// returning peer sent `request` making `claim`, at `date`.
    init(sessionId: String, params: SyncParams, request: AttachRequest, claim: ResumeClaim, spectator: Bool,
         configuration: RelayConfiguration, date: Date) {
        if let directory = configuration.replayDirectory {
            let backlog = max(configuration.recoveryBacklogFrames, 1)
            replay = Result { try LeftBehindReplay.find(sessionId, in: directory, lastFrames: backlog) }
        } else {
            replay = .success(nil)
        }
        let found = (try? replay.get()) ?? nil
        record = found.flatMap { $0.vouches(for: params, at: date) ? $0 : nil }
        var counted = request
        counted.confirmedFrames = UInt32(claim.proven)
        counted.historyFromFrame = min(request.historyFromFrame, counted.confirmedFrames)
        // Alone in its match a player leaves nobody below the start.
        let latestStart = params.maxPlayers > 1
            ? claim.latestStart(framesPerSecond: params.framesPerSecond, spectatorDelay: spectator ? Int(params.spectatorDelayFrames) : 0)
            : nil
        origin = Self.origin(counted, backlog: configuration.recoveryBacklogFrames, record: record, latestStart: latestStart)
    }

    /// Where a session rebuilt after a restart starts its timeline: as early as the first
    /// returning peer can resend every player's confirmed inputs (at most `backlog` frames
    /// before its confirmed frame), so the others, who may have confirmed a little less when
    /// the relay died, find the frames they lack here and need no state transfer. With a
    /// `record` of the dead relay's, no claim counts: the timeline starts `backlog` frames
    /// before the record's end (or at its first frame), seeded from it, so a peer claiming more
    /// than it holds cannot move the start past the others, nor one claiming less have the whole
    /// match seeded. Without one, no later than `latestStart` (``ResumeClaim/latestStart(framesPerSecond:spectatorDelay:)``):
    /// a peer that says it holds nothing before its claim cannot leave the others below the start.
    static func origin(_ request: AttachRequest, backlog: Int, record: LeftBehindReplay? = nil, latestStart: Int? = nil) -> Int {
        if let record { return min(max(record.file.startFrame, record.end - backlog), record.end) }
        let confirmed = Int(request.confirmedFrames)
        let start = min(confirmed, max(Int(request.historyFromFrame), confirmed - backlog, 0))
        return min(start, latestStart ?? start)
    }
}
