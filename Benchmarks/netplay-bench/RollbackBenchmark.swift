import ArgumentParser
import Games
import Rollback

/// `netplay-bench rollback`: the rollback engine's cost per frame for the arena game, next
/// to the game's own advance / save / load cost.
///
/// Two scenarios drive a real ``P2PSession`` (player 0 local, the others behind synthetic
/// remote peers whose messages are fed straight into the session):
/// - *no rollback*: every remote input arrives before it is needed;
/// - *8-frame rollback*: every remote input arrives 8 frames late and differs from the
///   prediction, so every frame loads a state and re-simulates 8 frames.
/// Each scenario runs once with a game whose callbacks do nothing (the engine's own cost)
/// and once with the arena (engine plus game). Every figure is the best of `--repeats` runs,
/// which filters out noise from other work on the machine.
struct RollbackBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rollback",
        abstract: "Rollback engine overhead per frame vs the arena game's own cost."
    )

    @Option(help: "Players in the arena (2 ... 8).")
    var players = 4

    @Option(help: "Frames per measured run.")
    var frames = 20_000

    @Option(help: "Runs per figure; the best run counts.")
    var repeats = 7

    @Option(help: "Run one scenario only, for profiling: quiet, rollback, null-quiet, null-rollback, game.")
    var only: String?

    @Flag(help: "Measure every player count (2 ... 8) and print one line per count.")
    var allPlayers = false

    mutating func validate() throws {
        guard (2 ... 8).contains(players) else { throw ValidationError("--players must be 2 ... 8") }
        guard frames >= 100, repeats >= 1 else { throw ValidationError("--frames >= 100, --repeats >= 1") }
    }

    func run() throws {
        // Plain copies of the options: reading an ArgumentParser property inside a timed loop
        // costs a generic metadata lookup each time, which would be charged to the engine.
        let players = players, frames = frames
        var sink: UInt64 = 0
        if only == "game" {
            let game = measureGame(players: players, frames: frames, sink: &sink)
            print("game: frame without rollback \(Int(game.quietFrame.rounded())) ns, with rollback "
                  + "\(Int(game.rollbackFrame.rounded())) ns (sink \(sink & 0xFF))")
            return
        }
        if let only {
            let late = only.hasSuffix("rollback") ? 8 : 0
            let perFrame = only.hasPrefix("null")
                ? try best { try driveSession(NullGame(), players: players, frames: frames, lateFrames: late, sink: &sink) }
                : try best {
                    try driveSession(Arena(playerCount: players), players: players, frames: frames, lateFrames: late,
                                     sink: &sink)
                }
            print("\(only): \(Int(perFrame.rounded())) ns/frame (sink \(sink & 0xFF))")
            return
        }
        if allPlayers {
            print("rollback engine, every player count: \(frames) frames per run, best of \(repeats) runs")
            print("players  no-op engine  arena engine   rollback / game work   (targets: < 1000 ns, <= 1.10x)")
            for count in 2 ... 8 {
                let figures = try measure(players: count, frames: frames, sink: &sink)
                let pass = figures.nullQuiet < 1000 && figures.quietEngine < 1000 && figures.rollbackRatio <= 1.10
                print("  \(count)    " + "\(Int(figures.nullQuiet.rounded())) ns".leftPadding(to: 12)
                      + "\(Int(figures.quietEngine.rounded())) ns".leftPadding(to: 14)
                      + "\(format2(figures.rollbackRatio))x".leftPadding(to: 15) + "   " + (pass ? "PASS" : "MISS"))
            }
            print("(sink \(sink & 0xFF))")
            return
        }
        let figures = try measure(players: players, frames: frames, sink: &sink)
        let game = figures.game, interval = figures.interval
        let nullQuiet = figures.nullQuiet, arenaQuiet = figures.arenaQuiet
        let nullRollback = figures.nullRollback, arenaRollback = figures.arenaRollback
        let quietWork = figures.quietWork, quietEngine = figures.quietEngine
        let rollbackCost = figures.rollbackCost, triggeredWork = figures.triggeredWork
        let rollbackRatio = figures.rollbackRatio, isolatedWork = figures.isolatedWork

        print("rollback engine: arena with \(players) players, \(frames) frames per run, best of \(repeats) runs")
        print("")
        print("game work (the arena alone)                          ns")
        print(row("advance one frame (scripted inputs)", game.advance))
        print(row("save state", game.save))
        print(row("load state", game.load))
        print(row("checksum (every \(interval) frames)", game.checksum))
        print(row("a session's frame without rollback, game calls only", game.quietFrame))
        print(row("a session's frame with rollback, game calls only", game.rollbackFrame))
        print("")
        print("no rollback                                          ns/frame")
        print(row("engine overhead (no-op game)", nullQuiet, target: "< 1000", pass: nullQuiet < 1000))
        print(row("arena session, total", arenaQuiet))
        print(row("arena game work (save + advance + checksums)", quietWork))
        print(row("arena engine overhead (total - game work)", quietEngine, target: "< 1000",
                  pass: quietEngine < 1000))
        print("")
        print("8-frame rollback every frame                         ns/frame")
        print(row("engine overhead (no-op game)", nullRollback))
        print(row("  of which the rollback (vs no rollback)", nullRollback - nullQuiet))
        print(row("arena session, total", arenaRollback))
        print(row("rollback cost (total - no-rollback total)", rollbackCost))
        print(row("game work it triggers (same calls, game alone)", triggeredWork))
        print(row("  from isolated ops (load + 8 adv + 7 save + ck)", isolatedWork))
        print(row("rollback cost / game work", rollbackRatio, unit: "x", target: "<= 1.10", pass: rollbackRatio <= 1.10))
        print("")
        print("(sink \(sink & 0xFF))")
    }

    private struct Figures {
        var game: GameCost
        var interval: Int
        var nullQuiet: Double
        var arenaQuiet: Double
        var nullRollback: Double
        var arenaRollback: Double

        var quietWork: Double { game.quietFrame }
        var quietEngine: Double { arenaQuiet - quietWork }
        var rollbackCost: Double { arenaRollback - arenaQuiet }
        /// The game work an 8-frame rollback triggers: the game alone making the calls of a
        /// frame with rollback (1 load, 9 advances, 8 saves, checksums) minus those of a frame
        /// without (1 save, 1 advance, checksums), on the same inputs as the session.
        var triggeredWork: Double { game.rollbackFrame - game.quietFrame }
        var rollbackRatio: Double { rollbackCost / triggeredWork }
        /// For reference: the same from the operations timed alone on the scripted inputs
        /// (load + 8 advances + 7 saves + 8 checksum shares).
        var isolatedWork: Double {
            game.load + 8 * (game.advance + game.checksum / Double(interval)) + 7 * game.save
        }
    }

    /// Every figure for `players` players.
    private func measure(players: Int, frames: Int, sink: inout UInt64) throws -> Figures {
        let game = measureGame(players: players, frames: frames, sink: &sink)
        let nullQuiet = try best {
            try driveSession(NullGame(), players: players, frames: frames, lateFrames: 0, sink: &sink)
        }
        let arenaQuiet = try best {
            try driveSession(Arena(playerCount: players), players: players, frames: frames, lateFrames: 0, sink: &sink)
        }
        let nullRollback = try best {
            try driveSession(NullGame(), players: players, frames: frames, lateFrames: 8, sink: &sink)
        }
        let arenaRollback = try best {
            try driveSession(Arena(playerCount: players), players: players, frames: frames, lateFrames: 8, sink: &sink)
        }
        return Figures(game: game, interval: SessionConfiguration(playerCount: players, inputSize: 1).checksumInterval,
                       nullQuiet: nullQuiet, arenaQuiet: arenaQuiet, nullRollback: nullRollback,
                       arenaRollback: arenaRollback)
    }

    private func row(_ label: String, _ value: Double, unit: String = "", target: String? = nil,
                     pass: Bool? = nil) -> String {
        let number = unit == "x" ? String(format2(value)) : String(Int(value.rounded()))
        var line = "  " + label.padding(to: 50) + (number + unit).leftPadding(to: 10)
        if let target, let pass { line += "   target \(target)  " + (pass ? "PASS" : "MISS") }
        return line
    }

    private func format2(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
    }

    private func best(_ body: () throws -> Double) rethrows -> Double {
        var result = Double.infinity
        for _ in 0 ..< repeats { result = min(result, try body()) }
        return result
    }

    private struct GameCost {
        var advance: Double
        var save: Double
        var load: Double
        var checksum: Double
        /// The game alone doing what a session's frame without rollback makes it do, per frame.
        var quietFrame: Double
        /// The game alone doing what a session's frame with an 8-frame rollback makes it do.
        var rollbackFrame: Double
    }

    /// The arena's own costs, without the engine: each operation alone, then the exact
    /// sequence of game calls a session makes per frame in each scenario, as a loop with no
    /// engine around it (what a zero-cost engine would take).
    ///
    /// The sequences matter because the work of a frame depends on its inputs: a session
    /// re-simulates frames on *predicted* inputs (a remote player's input held from the last
    /// known frame), which make the arena's ships dash and collide differently from the
    /// scripted inputs, so timing `advance` on the script alone misjudges the game work a
    /// rollback triggers (~10 % too low with 2 players).
    private func measureGame(players: Int, frames: Int, sink: inout UInt64) -> GameCost {
        let statuses = Array(repeating: InputStatus.confirmed, count: players)
        var script = (0 ..< 64).map { frame in
            FrameInputs(frame: frame, inputs: (0 ..< players).map { benchInput(player: $0, frame: frame) },
                        statuses: statuses)
        }
        // `predicted[known * 9 + k]`: the inputs a session simulates frame `known + k` with
        // while the remote inputs are known up to `known` (the local player's are known).
        var predicted = [FrameInputs]()
        for known in 0 ..< 64 {
            for ahead in 0 ... 8 {
                predicted.append(FrameInputs(frame: known + ahead, inputs: (0 ..< players).map {
                    benchInput(player: $0, frame: $0 == 0 ? known + ahead : known)
                }, statuses: statuses))
            }
        }
        let ringSize = 32
        let interval = SessionConfiguration(playerCount: players, inputSize: 1).checksumInterval
        var cost = GameCost(advance: .infinity, save: .infinity, load: .infinity, checksum: .infinity,
                            quietFrame: .infinity, rollbackFrame: .infinity)
        for _ in 0 ..< repeats {
            var game = Arena(playerCount: players)
            // Lent in place, as a session lends its inputs: a copy would add a retain and a
            // release per frame, charged to the game.
            cost.advance = min(cost.advance, script.withUnsafeMutableBufferPointer { script in
                nanoseconds(per: frames) {
                    for frame in 0 ..< frames { advanceLending(&game, &script[frame & 63]) }
                }
            })
            var ring = Array(repeating: game.saveState(), count: ringSize)
            cost.save = min(cost.save, nanoseconds(per: frames) {
                for frame in 0 ..< frames { ring[frame % ringSize] = game.saveState() }
            })
            cost.load = min(cost.load, nanoseconds(per: frames) {
                for frame in 0 ..< frames { game.loadState(ring[frame % ringSize]) }
            })
            let states = (0 ..< ringSize).map { index in
                var copy = game
                copy.advanceFrame(script[index])
                return copy
            }
            cost.checksum = min(cost.checksum, nanoseconds(per: frames) {
                for frame in 0 ..< frames { sink &+= states[frame % ringSize].checksum() }
            })
            sink &+= game.checksum() &+ UInt64(ring.count)

            ring.withUnsafeMutableBufferPointer { ring in
                // No rollback: save the frame's state, simulate it on known inputs, checksum
                // the state reached when it is a checksum frame.
                game = Arena(playerCount: players)
                cost.quietFrame = min(cost.quietFrame, script.withUnsafeMutableBufferPointer { script in
                    nanoseconds(per: frames) {
                        for frame in 0 ..< frames {
                            ring[frame & (ringSize - 1)] = game.saveState()
                            advanceLending(&game, &script[frame & 63])
                            if (frame + 1) % interval == 0 { sink &+= game.checksum() }
                        }
                    }
                })
                // An 8-frame rollback at frame F (remote inputs known up to F - 8): load the
                // state at F - 8, simulate F - 8 again, save and simulate F - 7 ... F - 1, then
                // save and simulate F, checksumming every checksum frame reached.
                game = Arena(playerCount: players)
                for frame in 0 ..< 8 { ring[frame] = game.saveState() }
                cost.rollbackFrame = min(cost.rollbackFrame, predicted.withUnsafeMutableBufferPointer { predicted in
                    nanoseconds(per: frames) {
                        for frame in 8 ..< frames + 8 {
                            let known = frame - 8
                            let row = (known & 63) * 9
                            game.loadState(ring[known & (ringSize - 1)])
                            advanceLending(&game, &predicted[row])
                            if (known + 1) % interval == 0 { sink &+= game.checksum() }
                            for ahead in 1 ... 8 {
                                ring[(known + ahead) & (ringSize - 1)] = game.saveState()
                                advanceLending(&game, &predicted[row + ahead])
                                if (known + ahead + 1) % interval == 0 { sink &+= game.checksum() }
                            }
                        }
                    }
                })
            }
            sink &+= game.checksum()
        }
        return cost
    }

    /// Runs a P2P session with synthetic remote peers for `frames` frames; returns ns per frame.
    private func driveSession<G: Game>(_ game: G, players: Int, frames: Int, lateFrames: Int,
                                       sink: inout UInt64) throws -> Double {
        var configuration = SessionConfiguration(playerCount: players, inputSize: Arena.inputSize)
        configuration.predictionWindow = 8
        let peers = (1 ..< players).map { PeerID(UInt64($0)) }
        let session = try P2PSession(game: game, configuration: configuration,
                                     players: [.local] + peers.map { .remote($0) })
        var now = synchronizeAlone(session)

        // Pre-built remote messages, so the measurement covers the engine only. Remote inputs
        // change every frame, so when they arrive late the repeat-last prediction is always
        // wrong and every frame rolls back `lateFrames` frames.
        func remoteMessage(player: Int, frame: Frame) -> RollbackMessage {
            // The remote acknowledges our inputs up to the frame before the one it is
            // simulating: it received everything we sent so far.
            .input(InputMessage(player: player, startFrame: frame, inputs: [benchInput(player: player, frame: frame)],
                                ackFrame: frame + lateFrames - 1, confirmedFrame: frame - 1,
                                       senderFrame: frame + lateFrames))
        }
        // One flat array, each message lent to the session in place: copying it out would add
        // a retain and a release per message that are the harness's, not the engine's.
        let total = frames + lateFrames + 1
        var messages = [RollbackMessage]()
        messages.reserveCapacity(total * peers.count)
        for frame in 0 ..< total {
            for player in 1 ..< players { messages.append(remoteMessage(player: player, frame: frame)) }
        }
        let localInputs = (0 ..< 64).map { benchInput(player: 0, frame: $0) }

        var rolledBack = 0
        let perFrame = try messages.withUnsafeMutableBufferPointer { messages in
          try nanoseconds(per: frames) {
            for frame in 0 ..< frames {
                now &+= 16
                let late = frame - lateFrames
                if late >= 0 {
                    for offset in peers.indices {
                        handleLending(session, &messages[late * peers.count + offset], from: peers[offset], now: now)
                    }
                }
                session.poll(now: now)
                try session.addLocalInput(localInputs[(frame + configuration.inputDelay) & 63], for: 0)
                guard case .advanced(let frames) = try session.advanceFrame() else {
                    throw ValidationError("benchmark session stalled at frame \(frame)")
                }
                rolledBack &+= frames
                session.drainOutgoing { _ in }
            }
          }
        }
        if lateFrames > 0 && rolledBack < (frames - lateFrames - 1) * lateFrames {
            throw ValidationError("expected an \(lateFrames)-frame rollback every frame, got \(rolledBack) frames")
        }
        sink &+= session.game.checksum() &+ UInt64(rolledBack)
        return perFrame
    }
}

/// The arena input of a benchmark player at `frame`, the same in every measurement and
/// periodic in 64 frames: the local player 0 holds each input for 8 frames; remote players
/// change theirs every frame (consecutive values always differ: the step 5 is odd).
private func benchInput(player: Int, frame: Frame) -> GameInput {
    if player == 0 {
        var mix = UInt64((frame & 63) / 8)
        return ArenaInput(rawValue: UInt8(truncatingIfNeeded: SeededRandom.splitMix(&mix)) & 0x1F).gameInput
    }
    return ArenaInput(rawValue: UInt8(((frame & 63) * 5 + player * 3) & 0x1F)).gameInput
}

/// Advances `game` with `inputs` borrowed in place (exclusive access: nothing to retain).
@inline(__always)
private func advanceLending<G: Game>(_ game: inout G, _ inputs: inout FrameInputs) {
    game.advanceFrame(inputs)
}

/// Feeds `message` to `session` borrowed in place (exclusive access: nothing to retain).
@inline(__always)
private func handleLending<G: Game>(_ session: P2PSession<G>, _ message: inout RollbackMessage, from peer: PeerID,
                                    now: UInt64) {
    session.handle(message, from: peer, now: now)
}

/// A game whose callbacks do nothing: what remains is the engine's own cost.
private struct NullGame: Game {
    var frame = 0
    func saveState() -> Int { frame }
    mutating func loadState(_ state: Int) { frame = state }
    mutating func advanceFrame(_ inputs: FrameInputs) { frame &+= 1 }
    func checksum() -> UInt64 { UInt64(frame) }
}

/// Nanoseconds per operation of `body`, which performs `count` operations.
private func nanoseconds(per count: Int, _ body: () throws -> Void) rethrows -> Double {
    let clock = ContinuousClock()
    let start = clock.now
    try body()
    let elapsed = clock.now - start
    let (seconds, attoseconds) = elapsed.components
    return (Double(seconds) * 1e9 + Double(attoseconds) / 1e9) / Double(count)
}

extension String {
    fileprivate func padding(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }

    fileprivate func leftPadding(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

/// Answers `session`'s sync requests itself until it runs, then drops the events that start
/// left, so a measurement begins at a running session; the clock (milliseconds) it reached.
func synchronizeAlone<G: Game>(_ session: P2PSession<G>) -> UInt64 {
    var now: UInt64 = 0
    while session.state != .running {
        session.poll(now: now)
        for out in session.drainOutgoing() {
            if case .syncRequest(let request) = out.message {
                session.handle(.syncReply(SyncReply(nonce: request.nonce)), from: out.peer, now: now)
            }
        }
        now += 1
    }
    _ = session.drainEvents()
    return now
}
