import Testing
@testable import NetplayKit
import NetplayTestSupport

/// The pacing half of the time sync: whole-frame corrections (vsync frontends) and stretched
/// frame intervals.
@Suite("Pacing: whole frames and frame rate", .ownThread)
struct PacingControllerTests {
    /// Ticks `count` times from `start`, one frame apart; the frames each tick simulated.
    func run(_ pacer: inout PacingController, ticks count: Int, from start: UInt64 = 1_000) -> [Int] {
        (0 ..< count).map { pacer.framesThisTick(now: start + UInt64(Double($0) * pacer.frameMs)) }
    }

    @Test func aPlayerHalfAFrameAheadOfTheMeanSkipsOneFrameOnce() {
        var pacer = PacingController(pacing: .wholeFrames, frameMs: 1000.0 / 60)
        pacer.follow(aheadMs: 9, now: 1_000)
        let frames = run(&pacer, ticks: 30)
        #expect(frames.filter { $0 == 0 }.count == 1, "one skipped frame: \(frames)")
        #expect(!frames.contains(2))
        // Less than 500 ms after that correction the next hint (still showing it) is ignored.
        pacer.follow(aheadMs: 9, now: 1_300)
        #expect(!run(&pacer, ticks: 30, from: 1_300).contains(0))
        // Later it counts again.
        pacer.follow(aheadMs: 9, now: 1_700)
        #expect(run(&pacer, ticks: 30, from: 1_700).contains(0))
    }

    @Test func aPlayerHalfAFrameBehindWaitsForTheOtherToMoveButAWholeFrameBehindCatchesUp() {
        var behind = PacingController(pacing: .wholeFrames, frameMs: 1000.0 / 60)
        behind.follow(aheadMs: -9, now: 1_000)
        #expect(run(&behind, ticks: 30) == Array(repeating: 1, count: 30), "in a pair a frame apart only the one ahead moves")
        behind.follow(aheadMs: -20, now: 2_000)
        let frames = run(&behind, ticks: 30, from: 2_000)
        #expect(frames.filter { $0 == 2 }.count == 1 && !frames.contains(0))
    }

    @Test func correctionsAreNeverTwoTicksInARow() {
        var pacer = PacingController(pacing: .wholeFrames, frameMs: 1000.0 / 60)
        var frames: [Int] = []
        for hint in 0 ..< 20 {
            let now = 1_000 + UInt64(hint) * 600
            pacer.follow(aheadMs: 50, now: now)
            frames += run(&pacer, ticks: 36, from: now)
        }
        #expect(frames.contains(0))
        for index in frames.indices.dropFirst() where frames[index] == 0 {
            #expect(frames[index - 1] != 0 && (index < 2 || frames[index - 2] != 0))
        }
    }

    @Test func frameRatePacingStretchesTheIntervalAndNeverSkips() {
        var pacer = PacingController(pacing: .frameRate, frameMs: 1000.0 / 60)
        pacer.follow(aheadMs: 12, now: 1_000)  // half of it, 6 ms, to lose
        let frames = run(&pacer, ticks: 60)
        #expect(frames == Array(repeating: 1, count: 60))
        #expect(abs(pacer.debtMs) < 1, "the 6 ms were shed: \(pacer.debtMs) ms left")
        pacer.follow(aheadMs: -12, now: 2_000)
        _ = pacer.framesThisTick(now: 2_000)
        #expect(pacer.frameIntervalScale < 1 && pacer.frameIntervalScale >= 0.92)
        pacer.follow(aheadMs: 1, now: 3_000)
        _ = pacer.framesThisTick(now: 3_000)
        #expect(pacer.frameIntervalScale == 1, "within 2 ms of the mean: level")
    }
}
