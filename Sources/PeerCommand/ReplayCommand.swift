import ArgumentParser
import Foundation
import Games
import InputSync
import Libretro
import NetplayKit
import NetplayService
import NetplayWire
import Rollback

// The replay subcommand: replays a relay's replay file and checks its checksums.

struct Replay: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Replay a relay's replay file and check its checksums.")

    @Argument(help: "The replay file (under the relay's data dir, replays/).") var file: String
    @Option(help: ArgumentHelp("Stop at this frame (env NETPLAY_FRAMES; default: every recorded frame).", valueName: "frame"))
    var frames: String?
    @Option(help: ArgumentHelp("The libretro core of a core match, with --content (env NETPLAY_CORE).", valueName: "path"))
    var core: String?
    @Option(help: ArgumentHelp("The content of a core match (env NETPLAY_CONTENT).", valueName: "file"))
    var content: String?

    /// `--frames`, `--core` and `--content`, each else its variable.
    struct Resolved {
        var frames: Int?
        var core: String?
        var content: String?
    }

    func resolve(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Resolved {
        let setting = SettingResolver(environment: environment)
        let resolved = Resolved(frames: try PeerOptions.frame(frames, "NETPLAY_FRAMES", name: "--frames", setting),
                                core: setting.text(core, "NETPLAY_CORE"), content: setting.text(content, "NETPLAY_CONTENT"))
        guard (resolved.core == nil) == (resolved.content == nil) else { throw ValidationError("--core and --content go together") }
        return resolved
    }

    func run() throws {
        let options = try resolve()
        let replay: ReplayFile
        do { replay = try ReplayFile(contentsOf: URL(fileURLWithPath: file)) } catch {
            throw ValidationError("\(error)")
        }
        if replay.header.content.coreId.hasPrefix("libretro.") || options.core != nil {
            try replayCore(replay, options)
        }
        guard let (sample, players, seed) = SampleGame.parse(options: replay.header.gameOptions,
                                                              coreId: replay.header.content.coreId) else {
            throw ValidationError("the replay's game options do not name a sample game")
        }
        try Self.checkStart(of: replay)
        try sample.checkPlayers(players)
        guard replay.slotCount == players else {
            throw ValidationError("the replay records \(replay.slotCount) players' inputs, its game options say \(players)")
        }
        let end = Self.end(of: replay, frames: options.frames)
        switch sample {
        case .arena: try replayGame(Arena(playerCount: players, seed: seed), replay, end: end)
        case .pd: try replayGame(PrisonersDilemma(maxRounds: 1_000_000), replay, end: end)
        }
    }

    /// A core match: the same core and content, loaded like the players loaded them, start
    /// from the same state (checked against the initial checksum the host recorded).
    func replayCore(_ replay: ReplayFile, _ options: Resolved) throws -> Never {
        guard let core = options.core, let content = options.content else { throw ValidationError("this replay is of a libretro core: pass --core and --content") }
        guard let (players, buttons, initial) = LoadedCore.parse(options: replay.header.gameOptions) else {
            throw ValidationError("the replay's game options do not describe a libretro match")
        }
        try Self.checkStart(of: replay)
        guard (1 ... LibretroCore.maximumPorts).contains(players) else {
            throw ValidationError("the replay's game options name \(players) players; a core match has 1 ... \(LibretroCore.maximumPorts)")
        }
        // The session's input size says which devices the players held (a joypad, or one with
        // analog sticks): replayed as a joypad, an analog match's sticks were dropped.
        let inputSize = Int(replay.header.params.inputSize)
        guard let inputLayout = LibretroInputLayout(inputSize: inputSize) else {
            throw ValidationError("the replay's inputs are \(inputSize) bytes, which no libretro input layout has")
        }
        let loaded = try PeerSettings.load(core: core, content: content, players: players, buttons: String(buttons, radix: 16),
                                           inputLayout: inputLayout)
        let recorded = replay.header.content
        guard loaded.content.crc32 == recorded.crc32, loaded.content.coreId == recorded.coreId,
              loaded.content.coreVersion == recorded.coreVersion else {
            throw ValidationError("the replay was recorded with \(recorded.coreId) \(recorded.coreVersion) and content CRC32 "
                                  + String(format: "%08X", recorded.crc32) + ", not \(loaded.content.coreId) \(loaded.content.coreVersion) and "
                                  + String(format: "%08X", loaded.content.crc32))
        }
        guard loaded.initialChecksum == initial || !replay.header.startState.isEmpty else {
            throw ValidationError("the core starts in state 0x\(String(loaded.initialChecksum, radix: 16)), the match started in "
                                  + "0x\(String(initial, radix: 16)): another core build or options")
        }
        let end = Self.end(of: replay, frames: options.frames)
        try replayGame(SerializableCoreGame(game: try LibretroGame(core: loaded.core, playerCount: players,
                                                                   buttonMask: JoypadButtons(rawValue: buttons),
                                                                   inputLayout: inputLayout)), replay, end: end)
    }

    /// A replay starts at frame 0, or (the file after a restart) from the state it records.
    static func checkStart(of replay: ReplayFile) throws {
        guard replay.startFrame == 0 || !replay.header.startState.isEmpty else {
            throw ValidationError("the replay starts at frame \(replay.startFrame) without a state to start from")
        }
    }

    /// The frame a replay stops at: `--frames` (a frame number: the match's length), or the
    /// end of what it recorded.
    static func end(of replay: ReplayFile, frames: Int?) -> Int {
        let recordedEnd = replay.startFrame + replay.frameCount
        return max(replay.startFrame, min(frames ?? recordedEnd, recordedEnd))
    }

    /// Re-simulates `replay` from `start`, or from the state the header records (the host's,
    /// at the match's start or at its restart).
    func replayGame<G: SerializableGame>(_ start: G, _ replay: ReplayFile, end: Int) throws -> Never {
        var game = start
        if !replay.header.startState.isEmpty {
            guard let state = G.decode(replay.header.startState) else {
                throw ValidationError("the replay's start state (\(replay.header.startState.count) bytes) is not a state of this game")
            }
            do { try game.loadForeignState(state) } catch {
                throw ValidationError("the replay's start state (\(replay.header.startState.count) bytes) does not load: \(error)")
            }
        }
        var checked = 0, mismatches: [Int] = []
        let slots = replay.slotCount
        for frame in replay.startFrame ..< end {
            if let expected = replay.checksums[frame] {
                checked += 1
                if game.checksum() != expected { mismatches.append(frame) }
            }
            var inputs: [GameInput] = []
            var statuses: [Rollback.InputStatus] = []
            for slot in 0 ..< slots {
                let status = replay.status(frame: frame, slot: slot)
                switch status {
                case .disconnected, .empty:
                    inputs.append(.zero)
                    statuses.append(.disconnected)
                case .substituted:
                    inputs.append(GameInput(bytes: replay.input(frame: frame, slot: slot)))
                    statuses.append(.substituted)
                default:
                    inputs.append(GameInput(bytes: replay.input(frame: frame, slot: slot)))
                    statuses.append(.confirmed)
                }
            }
            game.advanceFrame(FrameInputs(frame: frame, inputs: inputs, statuses: statuses))
        }
        if let expected = replay.checksums[end] {
            checked += 1
            if game.checksum() != expected { mismatches.append(end) }
        }
        let checksum = game.checksum()
        if !mismatches.isEmpty {
            emit("FAILED replay checksums differ at frames \(mismatches.prefix(10))")
            Foundation.exit(1)
        }
        emit("RESULT frames=\(end) start_frame=\(replay.startFrame) checksum=0x\(String(checksum, radix: 16)) role=replay checked_checksums=\(checked) recorded_frames=\(replay.frameCount)")
        Foundation.exit(0)
    }
}
