@testable import Rollback
import Testing
import NetplayTestSupport

@Suite("Input queue", .ownThread)
struct InputQueueTests {
    func queue(recordsGuesses: Bool = false) -> InputQueue {
        InputQueue(player: 0, history: 64, recordsGuesses: recordsGuesses)
    }

    @Test("unknown frames predict the last known input; a different arrival marks the frame incorrect")
    func repeatLast() {
        var q = queue()
        let result1 = q.addPeer(frame: 0, input: GameInput(low: 5), currentFrame: 0)
        #expect(result1)
        #expect(q.input(for: 3) == (GameInput(low: 5), .predicted))
        // Frames 1 ... 3 were simulated (current frame 4) on the prediction 5.
        let result2 = q.addPeer(frame: 1, input: GameInput(low: 5), currentFrame: 4)
        #expect(result2)
        #expect(q.firstIncorrectFrame == .max, "a correct prediction needs no rollback")
        let result3 = q.addPeer(frame: 2, input: GameInput(low: 6), currentFrame: 4)
        #expect(result3)
        #expect(q.firstIncorrectFrame == 2)
        #expect(q.predictionMisses == 1)
        // A later arrival cannot move the mark forward.
        let result4 = q.addPeer(frame: 3, input: GameInput(low: 7), currentFrame: 4)
        #expect(result4)
        #expect(q.firstIncorrectFrame == 2)
        q.clearIncorrect()
        #expect(q.firstIncorrectFrame == .max)
    }

    @Test("inputs must continue without gaps; duplicates are ignored")
    func gapsAndDuplicates() {
        var q = queue()
        let result5 = q.addPeer(frame: 1, input: .zero, currentFrame: 0)
        #expect(!result5)
        let result6 = q.addPeer(frame: 0, input: GameInput(low: 1), currentFrame: 0)
        #expect(result6)
        let result7 = q.addPeer(frame: 0, input: GameInput(low: 9), currentFrame: 0)
        #expect(!result7)
        #expect(q.knownInput(at: 0)?.0 == GameInput(low: 1))
        #expect(q.lastKnownFrame == 0)
    }

    @Test("an authoritative input replaces a received one and marks the frame if it differs")
    func authoritativeReplacement() {
        var q = queue()
        for frame in 0 ..< 5 { q.addPeer(frame: frame, input: GameInput(low: 1), currentFrame: 0) }
        let result8 = q.addAuthoritative(frame: 0, input: GameInput(low: 1), origin: .authoritative, currentFrame: 5)
        #expect(result8)
        #expect(q.firstIncorrectFrame == .max)
        let result9 = q.addAuthoritative(frame: 1, input: GameInput(low: 2), origin: .substituted, currentFrame: 5)
        #expect(result9)
        #expect(q.firstIncorrectFrame == 1)
        #expect(q.input(for: 1) == (GameInput(low: 2), .substituted))
        #expect(q.confirmedFrame(authoritative: true) == 1)
        #expect(q.confirmedFrame(authoritative: false) == 4)
        // A late peer input for an authoritative frame changes nothing.
        let result10 = q.addPeer(frame: 1, input: GameInput(low: 3), currentFrame: 5)
        #expect(!result10)
    }

    @Test("a disconnect makes inputs zero from its frame and marks simulated non-zero frames")
    func disconnect() {
        var q = queue()
        for frame in 0 ... 9 { q.addPeer(frame: frame, input: GameInput(low: 4), currentFrame: 0) }
        q.disconnect(from: 6, final: false, currentFrame: 12)
        #expect(q.firstIncorrectFrame == 6)
        #expect(q.input(for: 7) == (.zero, .disconnected))
        #expect(q.confirmedFrame(authoritative: false) == 5, "a tentative disconnect confirms nothing beyond it")
        #expect(q.knownFrame == .max, "but nothing needs predicting")
        q.disconnect(from: 8, final: true, currentFrame: 12)
        #expect(q.disconnectFrame == 6, "a disconnect frame only moves earlier")
        #expect(q.confirmedFrame(authoritative: false) == .max)
        let result11 = q.addPeer(frame: 10, input: GameInput(low: 4), currentFrame: 12)
        #expect(!result11)
    }

    @Test("custom predictors' guesses are remembered and compared")
    func customGuesses() {
        struct Counting: InputPredictor {
            func predict(_ context: PredictionContext) -> GameInput { GameInput(low: UInt64(context.frame)) }
        }
        var q = queue(recordsGuesses: true)
        q.addPeer(frame: 0, input: .zero, currentFrame: 0)
        for frame in 1 ... 3 {
            let guess = q.recordGuess(frame: frame, predictor: Counting())
            #expect(guess == GameInput(low: UInt64(frame)))
        }
        let result12 = q.addPeer(frame: 1, input: GameInput(low: 1), currentFrame: 4)
        #expect(result12)
        #expect(q.firstIncorrectFrame == .max)
        let result13 = q.addPeer(frame: 2, input: GameInput(low: 9), currentFrame: 4)
        #expect(result13)
        #expect(q.firstIncorrectFrame == 2)
    }
}

@Suite("State ring and checksum history", .ownThread)
struct StateRingTests {
    @Test("finds the newest saved frame at or before a frame, and discards newer ones")
    func ring() {
        var ring = StateRing<Int>(capacity: 6, filler: -1)
        for frame in [0, 2, 3, 7] { ring.save(frame * 10, frame: frame) }
        #expect(ring.newestSaved(atOrBefore: 6) == 3)
        #expect(ring.state(at: 7) == 70)
        ring.discard(after: 2)
        #expect(ring.state(at: 3) == nil && ring.state(at: 7) == nil)
        #expect(ring.newestFrame == 2)
        #expect(ring.newestSaved(atOrBefore: 9) == 2)
    }

    @Test("a re-simulation that passes a checksum frame records it again")
    func checksumRealignment() {
        var history = ChecksumHistory(interval: 10)
        var recorded: [Frame] = []
        func reach(_ frames: ClosedRange<Frame>) {
            for frame in frames where history.due(atReaching: frame) { recorded.append(frame) }
        }
        reach(1 ... 25)
        #expect(recorded == [10, 20])
        recorded = []
        reach(10 ... 25)  // a rollback loaded frame 9: reaching 10 again must count
        #expect(recorded == [10, 20])
        recorded = []
        reach(13 ... 31)  // loaded frame 12
        #expect(recorded == [20, 30])
        recorded = []
        reach(1 ... 12)  // far back (frame 0 installed): realigned by division, not stepping
        #expect(recorded == [10])
        recorded = []
        reach(301 ... 321)  // far ahead (a state installed at frame 300)
        #expect(recorded == [310, 320])
        recorded = []
        reach(290 ... 300)  // a few intervals back: stepped
        #expect(recorded == [290, 300])
    }

    @Test("a re-simulation's first checksum frame follows from the schedule, wherever it starts")
    func firstChecksumFrameOfResimulation() {
        var history = ChecksumHistory(interval: 10)
        for frame in 1 ... 25 { _ = history.due(atReaching: frame) }  // next checksum frame: 30
        // Every start gives the first multiple of 10 after it, stepping back or dividing.
        for start in [0, 5, 9, 10, 12, 19, 20, 24, 25, 29, 30, 31, 95] {
            #expect(history.nextChecksumFrame(after: start) == (start / 10 + 1) * 10, "start \(start)")
        }
        #expect(ChecksumHistory(interval: 0).nextChecksumFrame(after: 7) == .max)
    }

    @Test("a session started at match frame 21 keeps its checksums on the match's multiples of 10")
    func checksumPhaseFollowsTheMatchFrame() {
        var history = ChecksumHistory(interval: 10, matchFrameOffset: 21)
        #expect(!history.isChecksumFrame(0) && history.isChecksumFrame(9) && history.isChecksumFrame(19))
        var recorded: [Frame] = []
        func reach(_ frames: ClosedRange<Frame>) {
            for frame in frames where history.due(atReaching: frame) { recorded.append(frame) }
        }
        reach(1 ... 30)
        #expect(recorded == [9, 19, 29])  // match frames 30, 40, 50
        recorded = []
        reach(12 ... 30)  // a rollback loaded frame 11
        #expect(recorded == [19, 29])
        recorded = []
        reach(301 ... 321)  // far ahead: realigned by division
        #expect(recorded == [309, 319])
        for start in [0, 8, 9, 10, 18, 95] {
            #expect(history.nextChecksumFrame(after: start) == ((start + 21) / 10 + 1) * 10 - 21, "start \(start)")
        }
        history.record(frame: 19, checksum: 77)
        #expect(history.checksum(at: 19) == 77 && history.checksum(at: 20) == nil)
        // Reports start at the first checksum frame after the session's frame 0.
        #expect(DesyncDetector(interval: 10, matchFrameOffset: 21).nextReportFrame == 9)
        #expect(DesyncDetector(interval: 10, matchFrameOffset: 30).nextReportFrame == 10)
        #expect(DesyncDetector(interval: 10).nextReportFrame == 10)
    }

    @Test("input table rows hold what each queue gives: known, substituted, predicted, disconnected")
    func tableRows() {
        var configuration = SessionConfiguration(playerCount: 3, inputSize: 2)
        configuration.stateRingCapacity = 16
        var set = InputSet(configuration: configuration)
        for frame in 0 ... 5 { set.queues[0].addLocal(frame: frame, input: GameInput(low: UInt64(frame + 1)), currentFrame: 0) }
        for frame in 0 ... 2 { set.queues[1].addPeer(frame: frame, input: GameInput(low: UInt64(10 + frame)), currentFrame: 0) }
        set.queues[1].addAuthoritative(frame: 0, input: GameInput(low: 99), origin: .substituted, currentFrame: 0)
        set.queues[2].addPeer(frame: 0, input: GameInput(low: 7), currentFrame: 0)
        set.queues[2].disconnect(from: 3, final: true, currentFrame: 0)
        set.fillRows(from: 0, through: 8)
        for frame in 0 ... 8 {
            set.select(frame: frame)
            #expect(set.current.frame == frame && set.current.count == 3)
            for player in 0 ..< 3 {
                let (input, status) = set.queues[player].input(for: frame)
                #expect(set.current[player] == input && set.current.status(of: player) == status,
                        "frame \(frame) player \(player)")
            }
        }
        set.select(frame: 0)
        #expect(set.current.status(of: 1) == .substituted && set.current[1] == GameInput(low: 99))
        set.select(frame: 6)
        #expect(set.current.status(of: 0) == .predicted && set.current[0] == GameInput(low: 6))
        #expect(set.current.status(of: 1) == .predicted && set.current[1] == GameInput(low: 12))
        #expect(set.current.status(of: 2) == .disconnected && set.current[2] == .zero)
        set.gather(frame: 1)  // one row, as a frame simulated for the first time
        #expect(set.current.frame == 1 && set.current[2] == GameInput(low: 7) && set.current.status(of: 2) == .predicted)
    }
}

@Suite("Time sync", .ownThread)
struct TimeSyncTests {
    @Test("no advantage, no wait")
    func balanced() {
        var sync = TimeSync()
        for _ in 0 ..< 60 { sync.record(localAdvantage: 0, remoteAdvantage: 0) }
        #expect(sync.framesAhead == 0)
        #expect(sync.recommendedWait(minimum: 2, maximum: 10) == 0)
    }

    @Test("running ahead gives a wait that meets in the middle, capped")
    func ahead() {
        var sync = TimeSync()
        for _ in 0 ..< 60 { sync.record(localAdvantage: -4, remoteAdvantage: 4) }
        #expect(sync.framesAhead == 4)
        #expect(sync.recommendedWait(minimum: 2, maximum: 10) == 4)
        for _ in 0 ..< 60 { sync.record(localAdvantage: -40, remoteAdvantage: 40) }
        #expect(sync.recommendedWait(minimum: 2, maximum: 10) == 10)
    }

    @Test("isAhead says whether framesAhead is positive")
    func isAhead() {
        var sync = TimeSync()
        #expect(!sync.isAhead && sync.framesAhead == 0)
        sync.record(localAdvantage: 0, remoteAdvantage: 0)
        #expect(!sync.isAhead)
        sync.record(localAdvantage: -1, remoteAdvantage: 0)
        #expect(sync.isAhead && sync.framesAhead > 0)
        for _ in 0 ..< 60 { sync.record(localAdvantage: 3, remoteAdvantage: -3) }
        #expect(!sync.isAhead && sync.framesAhead < 0)
    }

    @Test("running behind or slightly ahead never waits")
    func behind() {
        var sync = TimeSync()
        for _ in 0 ..< 60 { sync.record(localAdvantage: 5, remoteAdvantage: -5) }
        #expect(sync.framesAhead < 0)
        #expect(sync.recommendedWait(minimum: 2, maximum: 10) == 0)
        for _ in 0 ..< 60 { sync.record(localAdvantage: -1, remoteAdvantage: 1) }
        #expect(sync.recommendedWait(minimum: 2, maximum: 10) == 0)
    }
}

@Suite("Checksums of a session started mid-match", .ownThread)
struct MatchFrameOffsetTests {
    /// One player's session from frame 0, and another started from its state at match frame 21
    /// (not a checksum frame): the second records its checksums at the same match frames, with
    /// the same values, and none in between.
    @Test func aSessionStartedFromAStateOffTheScheduleChecksumsTheMatchsFrames() throws {
        var configuration = SessionConfiguration(playerCount: 1, inputSize: 2)
        configuration.checksumInterval = 10
        func input(_ frame: Int) -> GameInput { GameInput(low: UInt64(frame * 7 % 13)) }
        /// Plays match frames `start ..< end` (the inputs follow the match frame, not the session's).
        func run(_ session: P2PSession<Accumulator>, from start: Int, to end: Int) throws {
            for frame in start ..< end {
                try session.addLocalInput(input(frame), for: PlayerHandle(0))
                guard case .advanced = try session.advanceFrame() else { throw RollbackError.frameOutOfRange(frame) }
            }
        }
        let whole = try P2PSession(game: Accumulator(), configuration: configuration, players: [.local])
        whole.poll(now: 0)  // no remote endpoint to synchronize with: running at once
        try run(whole, from: 0, to: 22)  // the state at 21 is saved when frame 21 is simulated
        let state = try #require(whole.latestConfirmedState())
        try #require(state.frame == 21)
        try run(whole, from: 22, to: 60)

        var shifted = configuration
        shifted.matchFrameOffset = 21
        let late = try P2PSession(game: Accumulator(hash: state.state), configuration: shifted, players: [.local])
        late.poll(now: 0)
        try run(late, from: 21, to: 60)
        let lateChecksums = late.core.inputs.checksums, wholeChecksums = whole.core.inputs.checksums
        for matchFrame in [30, 40, 50] {
            let value = try #require(lateChecksums.checksum(at: matchFrame - 21), "no checksum at match frame \(matchFrame)")
            #expect(value == wholeChecksums.checksum(at: matchFrame))
        }
        #expect(lateChecksums.checksum(at: 10) == nil)  // match frame 31
    }
}

/// A game that knows nothing of frame numbers (a session may start from its state at any frame):
/// a hash of every input so far.
private struct Accumulator: Game {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    func saveState() -> UInt64 { hash }
    mutating func loadState(_ state: UInt64) { hash = state }
    mutating func advanceFrame(_ inputs: FrameInputs) {
        for player in 0 ..< inputs.count { hash = (hash ^ inputs[player].low) &* 0x100_0000_01B3 }
    }
    func checksum() -> UInt64 { hash }
}
