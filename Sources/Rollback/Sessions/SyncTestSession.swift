/// One frame whose re-simulation disagreed with its first simulation.
public struct SyncTestMismatch: Sendable, Hashable {
    /// The frame whose starting state differs.
    public var frame: Frame
    /// The checksum from the first simulation.
    public var expected: UInt64
    /// The checksum after loading and re-simulating.
    public var actual: UInt64
}

/// Tests a game's determinism without a network: every frame it rolls back `checkDistance`
/// frames, re-simulates them with the same inputs and compares each state's checksum with
/// the first simulation. A game that reads anything outside its state, or whose save/load
/// misses something, shows up as mismatched frames.
public final class SyncTestSession<G: Game> {
    /// Frames rolled back every frame; 0 just simulates.
    public let checkDistance: Int
    var runner: GameRunner<G>
    var inputs: InputSet
    private let inputSize: Int
    private let inputDelay: Int
    private var pending: [GameInput?]
    private var lastFrame: [Frame]
    private var lastInput: [GameInput]
    private var firstFrames: [Frame]
    private var firstChecksums: [UInt64]
    /// Every mismatch found so far, in order.
    public private(set) var mismatches: [SyncTestMismatch] = []

    /// Creates a sync test. Every player is local; `configuration.inputDelay` applies to all.
    public init(game: G, configuration: SessionConfiguration, checkDistance: Int) throws {
        var configuration = configuration
        configuration.checksumInterval = 0
        configuration.sparseSaving = false
        configuration.stateRingCapacity = max(configuration.stateRingCapacity, checkDistance + 2)
        if let problem = configuration.validationError() { throw RollbackError.invalidConfiguration(problem) }
        guard checkDistance >= 0 else { throw RollbackError.invalidConfiguration("checkDistance must be >= 0") }
        self.checkDistance = checkDistance
        self.inputs = InputSet(configuration: configuration)
        self.runner = GameRunner(game: game, configuration: configuration, inputs: &inputs)
        self.inputSize = configuration.inputSize
        self.inputDelay = configuration.inputDelay
        self.pending = Array(repeating: nil, count: configuration.playerCount)
        self.lastFrame = Array(repeating: nullFrame, count: configuration.playerCount)
        self.lastInput = Array(repeating: .zero, count: configuration.playerCount)
        self.firstFrames = Array(repeating: nullFrame, count: checkDistance + 2)
        self.firstChecksums = Array(repeating: 0, count: checkDistance + 2)
        recordFirst(frame: 0, checksum: runner.game.checksum())
    }

    /// The game.
    public var game: G { runner.game }
    /// The next frame to simulate.
    public var currentFrame: Frame { runner.currentFrame }
    /// Whole-session statistics (saves, loads, re-simulated frames).
    public var sessionStats: SessionStats { runner.stats }

    /// Sets player `player`'s input for the next frame.
    public func addLocalInput(_ input: GameInput, for player: PlayerHandle) throws {
        guard player >= 0, player < pending.count else { throw RollbackError.invalidPlayer(player) }
        pending[player] = input.masked(toSize: inputSize)
    }

    private func recordFirst(frame: Frame, checksum: UInt64) {
        let index = frame % firstFrames.count
        firstFrames[index] = frame
        firstChecksums[index] = checksum
    }

    private func check(frame: Frame, into found: inout [SyncTestMismatch]) {
        let index = frame % firstFrames.count
        guard firstFrames[index] == frame else { return }
        let actual = runner.game.checksum()
        if actual != firstChecksums[index] {
            found.append(SyncTestMismatch(frame: frame, expected: firstChecksums[index], actual: actual))
        }
    }

    /// Simulates one frame, then rolls back and re-simulates `checkDistance` frames.
    /// Returns the mismatches found during this call (also appended to ``mismatches``).
    @discardableResult
    public func advanceFrame() throws -> [SyncTestMismatch] {
        for player in pending.indices where pending[player] == nil { throw RollbackError.missingLocalInput(player) }
        let frame = runner.currentFrame
        for player in pending.indices {
            let input = pending[player]!
            pending[player] = nil
            let target = frame + inputDelay
            guard target > lastFrame[player] else { continue }
            while lastFrame[player] + 1 < target {
                lastFrame[player] += 1
                inputs.queues[player].addLocal(frame: lastFrame[player], input: lastInput[player],
                                               currentFrame: runner.currentFrame)
            }
            lastFrame[player] = target
            lastInput[player] = input
            inputs.queues[player].addLocal(frame: target, input: input, currentFrame: runner.currentFrame)
        }
        runner.advance(inputs: &inputs)
        recordFirst(frame: frame + 1, checksum: runner.game.checksum())
        var found: [SyncTestMismatch] = []
        let start = frame + 1 - checkDistance
        if checkDistance > 0 && start >= 0 {
            guard runner.load(frame: start) else { preconditionFailure("sync test lost the state of frame \(start)") }
            check(frame: start, into: &found)
            while runner.currentFrame <= frame {
                runner.resimulateOne(inputs: &inputs)
                check(frame: runner.currentFrame, into: &found)
            }
        }
        mismatches.append(contentsOf: found)
        return found
    }
}
