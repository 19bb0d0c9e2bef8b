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
    let sync: SyncLayer<G>
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
        self.sync = SyncLayer(game: game, configuration: configuration)
        self.inputSize = configuration.inputSize
        self.inputDelay = configuration.inputDelay
        self.pending = Array(repeating: nil, count: configuration.playerCount)
        self.lastFrame = Array(repeating: nullFrame, count: configuration.playerCount)
        self.lastInput = Array(repeating: .zero, count: configuration.playerCount)
        self.firstFrames = Array(repeating: nullFrame, count: checkDistance + 2)
        self.firstChecksums = Array(repeating: 0, count: checkDistance + 2)
        recordFirst(frame: 0, checksum: sync.game.checksum())
    }

    /// The game.
    public var game: G { sync.game }
    /// The next frame to simulate.
    public var currentFrame: Frame { sync.currentFrame }
    /// Whole-session statistics (saves, loads, re-simulated frames).
    public var sessionStats: SessionStats { sync.stats }

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
        let actual = sync.game.checksum()
        if actual != firstChecksums[index] {
            found.append(SyncTestMismatch(frame: frame, expected: firstChecksums[index], actual: actual))
        }
    }

    /// Simulates one frame, then rolls back and re-simulates `checkDistance` frames.
    /// Returns the mismatches found during this call (also appended to ``mismatches``).
    @discardableResult
    public func advanceFrame() throws -> [SyncTestMismatch] {
        for player in pending.indices where pending[player] == nil { throw RollbackError.missingLocalInput(player) }
        let frame = sync.currentFrame
        for player in pending.indices {
            let input = pending[player]!
            pending[player] = nil
            let target = frame + inputDelay
            guard target > lastFrame[player] else { continue }
            while lastFrame[player] + 1 < target {
                lastFrame[player] += 1
                sync.queues[player].addLocal(frame: lastFrame[player], input: lastInput[player])
            }
            lastFrame[player] = target
            lastInput[player] = input
            sync.queues[player].addLocal(frame: target, input: input)
        }
        sync.advance()
        recordFirst(frame: frame + 1, checksum: sync.game.checksum())
        var found: [SyncTestMismatch] = []
        let start = frame + 1 - checkDistance
        if checkDistance > 0 && start >= 0 {
            guard sync.load(frame: start) else { preconditionFailure("sync test lost the state of frame \(start)") }
            check(frame: start, into: &found)
            while sync.currentFrame <= frame {
                sync.resimulateOne()
                check(frame: sync.currentFrame, into: &found)
            }
        }
        mismatches.append(contentsOf: found)
        return found
    }
}
