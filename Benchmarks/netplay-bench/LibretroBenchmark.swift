import ArgumentParser
import Foundation
import Libretro
import Rollback
import SystemTools

/// `netplay-bench libretro`: a real emulator core under the rollback engine. Prints the core's
/// own frame, save and load cost through our host, and the cost per frame of an 8-frame
/// rollback every frame through our host and a ``P2PSession``, each as a share of a 16.67 ms
/// frame, beside the same figures from a bare C program driving the same core and content
/// directly (Benchmarks/c/libretro_bench.c, built by `make bench`), run in the same invocation.
///
/// The rollback scenario: player 0 is local, player 1 a synthetic remote peer whose every
/// input arrives 8 frames late and differs from the prediction, so each frame loads the state
/// of 8 frames ago, re-simulates 8 frames (saving 7 states) and simulates the new frame
/// (saving 1), with a checksum every 30th frame. The C program makes the same core calls.
/// Target: ours within 1.10x of the bare C figure.
///
/// Every figure is the fastest chunk of 10 operations over all runs, on both sides: on a
/// machine shared with other work that is the cost without preemption. Runs alternate between
/// our host and the C program so both see the same conditions.
struct LibretroBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "libretro",
        abstract: "A libretro core under the rollback engine versus a bare C host of the same core."
    )

    @Option(help: "The core's shared library (default: the installed nestopia).")
    var core: String?

    @Option(help: "Content to load (default: the NES test program, assembled with ca65/ld65).")
    var content: String?

    @Option(help: "Path of the C baseline binary (built by `make bench`).")
    var cBench: String?

    @Option(help: "Frames per measured run (a multiple of 10).")
    var frames = 200

    @Option(help: "Runs per side; the fastest 10-frame chunk counts.")
    var repeats = 7

    mutating func validate() throws {
        guard frames >= 50, frames % Self.chunk == 0, repeats >= 1 else {
            throw ValidationError("--frames must be a multiple of 10 and >= 50, --repeats >= 1")
        }
    }

    private static let chunk = 10

    private static let frameNanoseconds = 1e9 / 60

    func run() throws {
        guard let corePath = core ?? LibretroCore.installedCore(named: "nestopia") else {
            throw ValidationError("no --core given and nestopia is not installed (apt-get install libretro-nestopia)")
        }
        let contentPath = try content ?? Self.buildTestProgram()
        defer { if content == nil { try? FileManager.default.removeItem(atPath: contentPath) } }
        let host = try LibretroCore(corePath: corePath, contentPath: contentPath)
        var sink: UInt64 = 0
        for frame in 0 ..< 60 { try step(host, frame: frame) }

        var ours = Figures()
        var bare: Figures?
        for _ in 0 ..< repeats {
            ours.keepBest(try measureHost(host, sink: &sink))
            if let cBench {
                let figures = try Self.runC(cBench, core: corePath, content: contentPath, frames: frames)
                bare = bare.map { var best = $0; best.keepBest(figures); return best } ?? figures
            }
        }

        print("libretro core \(host.systemInfo.libraryName) \(host.systemInfo.libraryVersion), "
              + "content \((contentPath as NSString).lastPathComponent), state \(host.stateSize) bytes, "
              + "\(repeats) runs of \(frames) frames, fastest 10-frame chunk")
        print("share of a 16.67 ms frame; ours = Swift host + rollback engine, C = \(cBench == nil ? "not run (--c-bench)" : "bare C host")")
        print("")
        print(column("figure", 36) + column("ours ms", 10) + column("ours %", 9) + column("C ms", 10)
              + column("C %", 9) + column("ours/C", 8) + "target")
        func line(_ label: String, _ mine: Double, _ theirs: Double?, target: Double? = nil) {
            var text = column(label, 36) + column(milliseconds(mine), 10) + column(percent(mine), 9)
            if let theirs {
                let ratio = mine / theirs
                text += column(milliseconds(theirs), 10) + column(percent(theirs), 9) + column(twoDecimals(ratio) + "x", 8)
                if let target { text += "<= \(twoDecimals(target))x  " + (ratio <= target ? "PASS" : "MISS") }
            } else {
                text += column("n/a", 10) + column("", 9) + column("", 8) + (target == nil ? "" : "-")
            }
            print(text)
        }
        line("run one frame (retro_run)", ours.run, bare?.run)
        line("save state (retro_serialize)", ours.save, bare?.save)
        line("load state (retro_unserialize)", ours.load, bare?.load)
        line("8-frame rollback, per frame", ours.rollback, bare?.rollback, target: 1.10)
        print("")
        print("(sink \(sink & 0xFF))")
    }

    /// Per-operation nanoseconds.
    struct Figures {
        var run = Double.infinity
        var save = Double.infinity
        var load = Double.infinity
        var rollback = Double.infinity

        mutating func keepBest(_ other: Figures) {
            run = min(run, other.run)
            save = min(save, other.save)
            load = min(load, other.load)
            rollback = min(rollback, other.rollback)
        }
    }

    /// The NES buttons both players hold at `frame` (the C program uses the same formula).
    private static func pads(frame: Int) -> (JoypadButtons, JoypadButtons) {
        (JoypadButtons(rawValue: UInt16(truncatingIfNeeded: frame &* 37) & 0x1FD),
         JoypadButtons(rawValue: UInt16(truncatingIfNeeded: frame &* 91 &+ 5) & 0x1FD))
    }

    private func step(_ host: LibretroCore, frame: Int) throws {
        let (pad0, pad1) = Self.pads(frame: frame)
        try host.setJoypad(pad0, port: 0)
        try host.setJoypad(pad1, port: 1)
        host.run()
    }

    /// One measurement of every figure through our host.
    private func measureHost(_ host: LibretroCore, sink: inout UInt64) throws -> Figures {
        var figures = Figures()
        var frame = 1000
        figures.run = try fastestChunk(of: frames) { _ in
            try step(host, frame: frame)
            frame += 1
        }
        var ring = [LibretroState]()
        ring.reserveCapacity(32)
        for _ in 0 ..< 32 {
            try step(host, frame: frame)
            frame += 1
            ring.append(try host.saveState())
        }
        // A save right after a load serializes afresh (nothing is cached across a load), so
        // (load + save) - load is the cost of one save.
        let loadAndSave = try fastestChunk(of: frames) { index in
            try host.loadState(ring[index & 31])
            ring[index & 31] = try host.saveState()
        }
        figures.load = try fastestChunk(of: frames) { index in try host.loadState(ring[index & 31]) }
        figures.save = loadAndSave - figures.load
        figures.rollback = try rollbackThroughEngine(host, sink: &sink)
        return figures
    }

    /// Drives a P2P session whose remote inputs all arrive 8 frames late and wrong; returns
    /// nanoseconds per frame.
    private func rollbackThroughEngine(_ host: LibretroCore, sink: inout UInt64) throws -> Double {
        let late = 8
        var configuration = SessionConfiguration(playerCount: 2, inputSize: LibretroGame.inputSize)
        configuration.predictionWindow = late
        let remote = PeerID(1)
        let session = try P2PSession(game: try LibretroGame(core: host, playerCount: 2),
                                     configuration: configuration, players: [.local, .remote(remote)])
        var now = synchronizeAlone(session)
        // Remote inputs change every frame, so the repeat-last prediction is always wrong.
        let total = late + 1 + frames
        let messages = (0 ..< total).map { frame in
            RollbackMessage.input(InputMessage(
                player: 1, startFrame: frame, inputs: [Self.pads(frame: frame).1.gameInput],
                ackFrame: frame + late, confirmedFrame: frame - 1, senderFrame: frame + late))
        }
        let local = (0 ..< total).map { Self.pads(frame: $0).0.gameInput }
        var rolledBack = 0
        func advance(_ frame: Int) throws {
            now &+= 16
            if frame >= late { session.handle(messages[frame - late], from: remote, now: now) }
            session.poll(now: now)
            try session.addLocalInput(local[frame], for: 0)
            guard case .advanced(let frames) = try session.advanceFrame() else {
                throw ValidationError("benchmark session stalled at frame \(frame)")
            }
            rolledBack &+= frames
            session.drainOutgoing { _ in }
        }
        // Until frame `late` no remote input is late yet; from then on every frame rolls back.
        for frame in 0 ... late { try advance(frame) }
        rolledBack = 0
        let perFrame = try fastestChunk(of: frames) { try advance(late + 1 + $0) }
        guard rolledBack == frames * late else {
            throw ValidationError("expected an \(late)-frame rollback every frame: \(rolledBack) != \(frames * late) frames")
        }
        sink &+= session.game.checksum() &+ UInt64(rolledBack)
        return perFrame
    }

    /// Runs the C baseline once and reads its figures.
    private static func runC(_ path: String, core: String, content: String, frames: Int) throws -> Figures {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = [core, content, "\(frames)", "1"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        var values: [String: Double] = [:]
        for pair in output.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, let value = Double(parts[1]) { values[String(parts[0])] = value }
        }
        guard process.terminationStatus == 0, let run = values["run_ns"], let save = values["save_ns"],
              let load = values["load_ns"], let rollback = values["rollback_ns"] else {
            throw ValidationError("C baseline \(path) failed: \(output)")
        }
        return Figures(run: run, save: save, load: load, rollback: rollback)
    }

    /// Assembles the NES test program into a temporary iNES file.
    private static func buildTestProgram() throws -> String {
        let output = FileManager.default.temporaryDirectory
            .appendingPathComponent("netplay_test-\(getpid()).nes").path
        do {
            try NESTestProgram.build(output: output)
        } catch {
            throw ValidationError("cannot build the NES test program (or pass --content): \(error)")
        }
        return output
    }

    private func milliseconds(_ nanoseconds: Double) -> String { String(format: "%.3f", nanoseconds / 1e6) }
    private func percent(_ nanoseconds: Double) -> String {
        String(format: "%.2f%%", 100 * nanoseconds / Self.frameNanoseconds)
    }
    private func twoDecimals(_ value: Double) -> String { String(format: "%.2f", value) }
    private func column(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }

    /// Runs `body(0 ..< count)` in chunks of 10 and returns the nanoseconds per operation of
    /// the fastest chunk.
    private func fastestChunk(of count: Int, _ body: (Int) throws -> Void) rethrows -> Double {
        let clock = ContinuousClock()
        var best = Double.infinity
        var index = 0
        while index < count {
            let start = clock.now
            for operation in index ..< index + Self.chunk { try body(operation) }
            let (seconds, attoseconds) = (clock.now - start).components
            best = min(best, (Double(seconds) * 1e9 + Double(attoseconds) / 1e9) / Double(Self.chunk))
            index += Self.chunk
        }
        return best
    }
}
