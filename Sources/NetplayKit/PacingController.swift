/// Turns the relay's time-sync hints into how many frames each tick simulates (0, 1 or 2) or how
/// much to stretch the frontend's frame interval: the pacing half of ``NetplayMatch``'s time
/// sync, pure logic (the clock comes in, nothing goes out).
///
/// A hint carries this player's offset from the session's mean (positive: ahead). With
/// ``NetplayPacing/frameRate`` half of it is spread over the next ticks (every other player
/// corrects its own half). With ``NetplayPacing/wholeFrames`` a player half a frame ahead of the
/// mean skips a frame and one a whole frame behind doubles one, at most once every three ticks
/// and once per hint: in a pair a frame apart only the one ahead moves (both moving would
/// overshoot), and a hint less than 500 ms after a correction is ignored (the relay's offsets,
/// an average over the last ~20 frames, do not show the correction yet).
struct PacingController {
    let pacing: NetplayPacing
    /// One frame at the match's rate, milliseconds.
    var frameMs: Double
    /// Time still to lose (positive) or gain, milliseconds.
    private(set) var debtMs = 0.0
    /// With ``NetplayPacing/frameRate``: the frame interval to wait before the next tick, in
    /// nominal intervals (0.92 ... 1.08).
    private(set) var frameIntervalScale = 1.0
    private var ticksSinceCorrection = 0
    private var lastCorrectionMs: UInt64 = 0

    init(pacing: NetplayPacing, frameMs: Double) {
        self.pacing = pacing
        self.frameMs = frameMs
    }

    /// A hint: this player runs `aheadMs` ahead of the session's mean.
    mutating func follow(aheadMs: Double, now: UInt64) {
        if pacing == .frameRate {
            debtMs = abs(aheadMs) < 2 ? 0 : aheadMs / 2
        } else if now &- lastCorrectionMs >= 500 {
            debtMs = aheadMs
        }
    }

    /// Frames to simulate this tick (0, 1 or 2).
    mutating func framesThisTick(now: UInt64) -> Int {
        ticksSinceCorrection += 1
        if pacing == .frameRate && abs(debtMs) <= 2 * frameMs {
            // Spread over about 300 ms, within 8 % of the nominal rate.
            frameIntervalScale = min(1.08, max(0.92, 1 + debtMs / 300))
            debtMs -= (frameIntervalScale - 1) * frameMs
            return 1
        }
        // Whole frames (also for offsets beyond two frames with frame-rate pacing).
        frameIntervalScale = 1
        guard ticksSinceCorrection >= 3 else { return 1 }
        let frames: Int
        if debtMs >= frameMs / 2 {
            frames = 0
        } else if debtMs <= -frameMs {
            frames = 2
        } else {
            return 1
        }
        debtMs = 0
        ticksSinceCorrection = 0
        lastCorrectionMs = now
        return frames
    }

    /// The match catches up with the relay by other means (several frames a tick): forget the debt.
    mutating func reset() {
        debtMs = 0
        frameIntervalScale = 1
    }
}
