import Foundation

/// What a test needs to run real, headless RetroArch 1.14 processes (Debian's `retroarch` with
/// nestopia): a tiny generated NES ROM, the core's info file patched to say its savestates are
/// deterministic (Debian's says "serialized", which RetroArch refuses for netplay), and a config
/// with the null drivers and nothing that reaches the internet.
public struct RetroArchFixture: Sendable {
    /// The nestopia core.
    public static let core = "/usr/lib/x86_64-linux-gnu/libretro/nestopia_libretro.so"
    /// Why RetroArch cannot run here, or nil when it can.
    public static let unavailableReason: String? = {
        guard Shell.which("retroarch") != nil else { return "retroarch is not installed (apt-get install retroarch)" }
        guard FileManager.default.fileExists(atPath: core) else { return "libretro-nestopia is not installed" }
        return nil
    }()

    /// The working directory (ROM, info, configs, logs, per-process homes).
    public let directory: String
    /// The ROM's bytes and path.
    public let rom: [UInt8]
    public var romPath: String { directory + "/tiny.nes" }

    /// Writes the ROM and the patched info file into `directory`.
    public init(directory: String) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // A tiny NROM image: an endless loop at $C000 with every vector pointing there.
        var prg = [UInt8](repeating: 0xEA, count: 16_384)
        prg[0...2] = [0x4C, 0x00, 0xC0]
        for offset in [0x3FFA, 0x3FFC, 0x3FFE] { prg[offset] = 0x00; prg[offset + 1] = 0xC0 }
        rom = Array("NES".utf8) + [0x1A, 1, 1, 0, 0] + [UInt8](repeating: 0, count: 8) + prg + [UInt8](repeating: 0, count: 8_192)
        try Data(rom).write(to: URL(fileURLWithPath: directory + "/tiny.nes"))
        try FileManager.default.createDirectory(atPath: directory + "/info", withIntermediateDirectories: true)
        let info = try String(contentsOfFile: "/usr/share/libretro/info/nestopia_libretro.info", encoding: .utf8)
        try info.replacingOccurrences(of: "savestate_features = \"serialized\"", with: "savestate_features = \"deterministic\"")
            .write(toFile: directory + "/info/nestopia_libretro.info", atomically: true, encoding: .utf8)
    }

    /// Settings that make RetroArch run at the content's own 60 Hz (without them the null drivers
    /// run it as fast as the CPU allows) and check states twice a second instead of every 600
    /// frames: the pace of a real match.
    public static let realTime: [String: String] = ["vrr_runloop_enable": "true", "netplay_check_frames": "30"]

    /// Writes `<name>.cfg` (null drivers, uncapped, no lobby, no UPnP) with `extra` settings and
    /// a home directory `<name>-home`; returns the config's path.
    public func config(_ name: String, nick: String, port: Int = 55435, extra: [String: String] = [:]) throws -> String {
        let home = directory + "/" + name + "-home"
        for sub in ["saves", "states", "system"] {
            try FileManager.default.createDirectory(atPath: home + "/" + sub, withIntermediateDirectories: true)
        }
        var settings: [String: String] = [
            "video_driver": "null", "audio_driver": "null", "input_driver": "null", "joypad_driver": "null", "menu_driver": "null",
            "audio_enable": "false", "video_vsync": "false", "gamemode_enable": "false", "suspend_screensaver_enable": "false",
            "config_save_on_exit": "false", "pause_nonactive": "false", "netplay_nickname": nick, "netplay_ip_port": "\(port)",
            "netplay_public_announce": "false", "netplay_use_mitm_server": "false", "netplay_nat_traversal": "false",
            "libretro_directory": "/usr/lib/x86_64-linux-gnu/libretro", "libretro_info_path": directory + "/info",
            "core_info_cache_enable": "false", "core_info_savestate_bypass": "true",
            "network_buildbot_url": "http://127.0.0.1:9/", "network_buildbot_assets_url": "http://127.0.0.1:9/",
            "savefile_directory": home + "/saves", "savestate_directory": home + "/states", "system_directory": home + "/system",
        ]
        settings.merge(extra) { $1 }
        let path = directory + "/" + name + ".cfg"
        try settings.keys.sorted().map { "\($0) = \"\(settings[$0]!)\"" }.joined(separator: "\n")
            .write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The environment a RetroArch process runs with (its own home; no D-Bus abort).
    public func environment(_ name: String) -> [String: String] {
        let home = directory + "/" + name + "-home"
        return ["HOME": home, "XDG_CONFIG_HOME": home, "DBUS_FATAL_WARNINGS": "0"]
    }

    /// The arguments that run nestopia with the ROM and `config`, verbose, plus `extra`.
    public func arguments(config: String, _ extra: [String]) -> [String] {
        ["--config", config, "-L", Self.core, "--verbose"] + extra + [romPath]
    }

    /// CRC-32 (IEEE), as RetroArch computes a content's CRC (of the whole file).
    public static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
