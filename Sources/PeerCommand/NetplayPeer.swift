import ArgumentParser
import Foundation
import Games
import InputSync
import Libretro
import NetplayKit
import NetplayService
import NetplayWire
import Rollback

/// `netplay-peer`: a headless client. Hosts, joins or spectates through the cluster (or the
/// LAN) and plays a sample game, or a libretro core with its content (`--core`, `--content`),
/// under the rollback engine with scripted or random inputs and simulated network conditions;
/// or replays a relay's replay file. Ends with one line: `RESULT frames=N checksum=0x...`.
public struct NetplayPeer: NetplayCommand {
    public static let configuration = CommandConfiguration(
        commandName: "netplay-peer",
        abstract: "Headless netplay client: host, join, spectate or replay a sample game or a libretro core.",
        discussion: """
            A libretro core (e.g. nestopia) plays like the sample games: pass --core PATH --content FILE \
            to host, join, spectate and replay (every peer needs the same core build and content; the \
            coordinator checks CRC32, MD5, core id and version). Inputs are 2-byte joypad masks; for \
            nestopia only A, B, Select, Start and the D-pad reach the core (--buttons). The host's frame \
            rate defaults to the core's. Every peer loads the core with deterministic heap contents, so \
            all start from the same state (RESULT's initial=).
            """,
        subcommands: [Host.self, Join.self, Spectate.self, Replay.self, Demo.self])

    public init() {}
}

/// The flags every playing subcommand takes, each with a `NETPLAY_*` environment fallback (shown
/// in `--help`); ``resolve(environment:)`` checks them into the ``PeerSettings`` the match runs with.
/// Each command resolves first thing in `run()`, before anything is hosted or joined, rather than
/// in `validate()`: parsing alone (as the tests do) then never reads the process's environment.
struct PeerOptions: ParsableArguments {
    @OptionGroup var cluster: ClusterEndpointOptions
    @Option(help: ArgumentHelp("Connections to the relay carrying the same inputs, 1 ... 4 (env NETPLAY_PATHS, default 3).", valueName: "n"))
    var paths: String?
    @Option(help: ArgumentHelp("Connections once the link shows loss (a broadcast held back on one while another brought it), 1 ... 4 (env NETPLAY_PATHS_ON_LOSS, default 4).", valueName: "n"))
    var pathsOnLoss: String?
    @Option(help: ArgumentHelp("Measure the round trip to every relay before hosting or joining and report it, so the coordinator picks the relay nearest the players: on or off (env NETPLAY_MEASURE_RELAYS, default on).", valueName: "on|off"))
    var measureRelays: String?
    @Option(help: ArgumentHelp("Display name (env NETPLAY_NAME; default: host, join or spectate).", valueName: "name"))
    var name: String?
    @Option(help: ArgumentHelp("Room name to host or to look for (env NETPLAY_ROOM, default 'netplay-peer room').", valueName: "name"))
    var room: String?
    @Option(help: ArgumentHelp("Sample game: arena or pd; joiners take the host's (env NETPLAY_GAME, default arena).", valueName: "arena|pd"))
    var game: String?
    @Option(help: ArgumentHelp("A libretro core to play instead of a sample game, with --content (env NETPLAY_CORE).", valueName: "path"))
    var core: String?
    @Option(help: ArgumentHelp("The content (ROM) the core plays; every peer needs the same file (env NETPLAY_CONTENT).", valueName: "file"))
    var content: String?
    @Option(help: ArgumentHelp("Core buttons passed on: nes (A, B, Select, Start, D-pad), all, or a hex mask (env NETPLAY_BUTTONS; default nes for nestopia, else all).", valueName: "buttons"))
    var buttons: String?
    @Option(help: ArgumentHelp("What a core's inputs carry: joypad (2 bytes, buttons) or analog (10 bytes: buttons and two analog sticks, ports set to RETRO_DEVICE_ANALOG); every peer of the room must use the same (env NETPLAY_CORE_INPUT, default joypad).", valueName: "joypad|analog"))
    var coreInput: String?
    @Option(help: ArgumentHelp("Stop after this many frames; players: a multiple of the checksum interval (env NETPLAY_FRAMES, default 3000).", valueName: "n"))
    var frames: String?
    @Option(help: ArgumentHelp("Inputs: random, idle, cooperate or defect (env NETPLAY_INPUTS, default random).", valueName: "kind"))
    var inputs: String?
    @Option(help: ArgumentHelp("Seed of the random inputs (env NETPLAY_INPUT_SEED, default 7).", valueName: "n"))
    var inputSeed: String?
    @Option(help: ArgumentHelp("Simulated round trip to the relay, ms (env NETPLAY_RTT, default 0).", valueName: "ms"))
    var rtt: String?
    @Option(help: ArgumentHelp("Simulated jitter, ms (env NETPLAY_JITTER, default 0).", valueName: "ms"))
    var jitter: String?
    @Option(help: ArgumentHelp("Simulated loss of input messages, 0 ... 1 (env NETPLAY_LOSS, default 0).", valueName: "p"))
    var loss: String?
    @Option(help: ArgumentHelp("Freeze this peer at this frame ... (env NETPLAY_LAG_AT; default never).", valueName: "frame"))
    var lagAt: String?
    @Option(help: ArgumentHelp("... for this many ms: a weak client (env NETPLAY_LAG_MS, default 1500).", valueName: "ms"))
    var lagMs: String?
    @Option(help: ArgumentHelp("Cut this peer's link at this frame ... (env NETPLAY_OUTAGE_AT; default never).", valueName: "frame"))
    var outageAt: String?
    @Option(help: ArgumentHelp("... for this many ms; it reconnects (env NETPLAY_OUTAGE_MS, default 2500).", valueName: "ms"))
    var outageMs: String?
    @Option(help: ArgumentHelp("Corrupt this peer's game state at this frame, an injected desync; sample games only (env NETPLAY_DESYNC_AT; default never).", valueName: "frame"))
    var desyncAt: String?
    @Option(help: ArgumentHelp("Print the HUD every this many seconds; 0 = never (env NETPLAY_HUD_EVERY, default 0).", valueName: "seconds"))
    var hudEvery: String?
    @Option(help: ArgumentHelp("Render the game every this many frames; 0 = never (env NETPLAY_RENDER_EVERY, default 0).", valueName: "frames"))
    var renderEvery: String?
    @Option(help: ArgumentHelp("Give up after this many seconds (env NETPLAY_PEER_TIMEOUT, default 300).", valueName: "seconds"))
    var timeout: String?
    @Option(help: ArgumentHelp("Time sync: frame-rate (stretch this peer's own frame interval by up to 8 %: this headless peer sets its own timing) or whole-frames (skip or double a frame now and then, as a vsync frontend does) (env NETPLAY_PACING, default frame-rate).", valueName: "mode"))
    var pacing: String?
    @Option(help: ArgumentHelp("Look on the LAN for rooms (join/spectate) listening this many ms; 0 = lobby (env NETPLAY_LAN_LISTEN_MS, default 0).", valueName: "ms"))
    var lanListenMs: String?
    @Option(help: ArgumentHelp("UDP port of LAN beacons (env NETPLAY_LAN_PORT, default \(LanBeacon.defaultPort)).", valueName: "port"))
    var lanPort: String?

    /// The settings these flags, the environment and the defaults describe; a malformed or
    /// contradictory value is a one-line `ValidationError` naming its flag.
    func resolve(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> PeerSettings {
        let setting = SettingResolver(environment: environment)
        var peer = PeerSettings()
        let endpoints = try cluster.resolve(environment: environment)
        (peer.discovery, peer.coordinator, peer.serverKey) = (endpoints.discovery, endpoints.coordinator, endpoints.serverKey)
        peer.paths = try setting.integer(paths, "NETPLAY_PATHS", name: "--paths", default: 3, range: 1 ... NetplayMatchOptions.maxPaths)
        peer.pathsOnLoss = try setting.integer(pathsOnLoss, "NETPLAY_PATHS_ON_LOSS", name: "--paths-on-loss", default: 4,
                                               range: 1 ... NetplayMatchOptions.maxPaths)
        peer.measuresRelays = try setting.choice(measureRelays, "NETPLAY_MEASURE_RELAYS", name: "--measure-relays", default: "on",
                                                 choices: ["on", "off"]) == "on"
        peer.name = setting.text(name, "NETPLAY_NAME")
        peer.room = setting.text(room, "NETPLAY_ROOM", default: "netplay-peer room")
        peer.game = SampleGame(rawValue: try setting.choice(game, "NETPLAY_GAME", name: "--game", default: "arena",
                                                            choices: SampleGame.allCases.map(\.rawValue)))!
        peer.core = setting.text(core, "NETPLAY_CORE")
        peer.content = setting.text(content, "NETPLAY_CONTENT")
        peer.buttons = setting.text(buttons, "NETPLAY_BUTTONS")
        peer.coreInput = LibretroInputLayout(rawValue: try setting.choice(coreInput, "NETPLAY_CORE_INPUT", name: "--core-input", default: "joypad",
                                                                          choices: LibretroInputLayout.allCases.map(\.rawValue)))!
        peer.frames = try setting.integer(frames, "NETPLAY_FRAMES", name: "--frames", default: 3000, range: 1 ... Self.maxFrame)
        peer.inputs = InputScript.Kind(rawValue: try setting.choice(inputs, "NETPLAY_INPUTS", name: "--inputs", default: "random",
                                                                    choices: InputScript.Kind.allCases.map(\.rawValue)))!
        peer.inputSeed = UInt64(try setting.integer(inputSeed, "NETPLAY_INPUT_SEED", name: "--input-seed", default: 7, range: 0 ... Int.max))
        peer.rtt = try setting.integer(rtt, "NETPLAY_RTT", name: "--rtt", default: 0, range: 0 ... 60_000)
        peer.jitter = try setting.integer(jitter, "NETPLAY_JITTER", name: "--jitter", default: 0, range: 0 ... 60_000)
        peer.loss = try setting.number(loss, "NETPLAY_LOSS", name: "--loss", default: 0, range: 0 ... 1)
        peer.lagAt = try Self.frame(lagAt, "NETPLAY_LAG_AT", name: "--lag-at", setting)
        peer.lagMs = try setting.integer(lagMs, "NETPLAY_LAG_MS", name: "--lag-ms", default: 1500, range: 0 ... 600_000)
        peer.outageAt = try Self.frame(outageAt, "NETPLAY_OUTAGE_AT", name: "--outage-at", setting)
        peer.outageMs = try setting.integer(outageMs, "NETPLAY_OUTAGE_MS", name: "--outage-ms", default: 2500, range: 0 ... 600_000)
        peer.desyncAt = try Self.frame(desyncAt, "NETPLAY_DESYNC_AT", name: "--desync-at", setting)
        peer.hudEvery = try setting.number(hudEvery, "NETPLAY_HUD_EVERY", name: "--hud-every", default: 0, range: 0 ... 86_400)
        peer.renderEvery = try setting.integer(renderEvery, "NETPLAY_RENDER_EVERY", name: "--render-every", default: 0, range: 0 ... Self.maxFrame)
        peer.timeout = try setting.number(timeout, "NETPLAY_PEER_TIMEOUT", name: "--timeout", default: 300, range: 0.1 ... 604_800)
        peer.pacing = try setting.choice(pacing, "NETPLAY_PACING", name: "--pacing", default: "frame-rate",
                                         choices: ["frame-rate", "whole-frames"]) == "frame-rate" ? .frameRate : .wholeFrames
        peer.lanListenMs = try setting.integer(lanListenMs, "NETPLAY_LAN_LISTEN_MS", name: "--lan-listen-ms", default: 0, range: 0 ... 600_000)
        peer.lanPort = UInt16(try setting.integer(lanPort, "NETPLAY_LAN_PORT", name: "--lan-port", default: Int(LanBeacon.defaultPort),
                                                  range: 1 ... 65_535))
        guard (peer.core == nil) == (peer.content == nil) else { throw ValidationError("--core and --content go together") }
        if peer.core != nil {
            guard peer.inputs == .random || peer.inputs == .idle else { throw ValidationError("with --core, --inputs must be random or idle") }
            guard peer.desyncAt == nil else { throw ValidationError("--desync-at is for the sample games (it corrupts their state)") }
        }
        return peer
    }

    /// The highest frame a flag may name (the wire's frame numbers are 32-bit).
    static let maxFrame = Int(Int32.max)

    /// A frame at which something happens once, or nil (the default: never).
    static func frame(_ flag: String?, _ variable: String, name: String, _ setting: SettingResolver) throws -> Int? {
        let frame = try setting.integer(flag, variable, name: name, default: -1, range: -1 ... maxFrame)
        return frame >= 0 ? frame : nil
    }
}

/// Writes one line to standard output at once (unbuffered, so test harnesses see it).
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
