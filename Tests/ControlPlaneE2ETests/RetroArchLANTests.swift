import Foundation
import NetplayTestSupport
import Testing

/// Two network namespaces joined by a veth pair on 10.77.0.0/24: a real headless RetroArch 1.14
/// host (null drivers, nestopia, a generated NES ROM) in one, netplay-discovery scanning for
/// RetroArch hosts in the other. Traffic never leaves the pair (no routes beyond the /24, DNS
/// pointed at the namespaces' own loopback). Everything made here is removed in every case.
@Suite("RetroArch LAN discovery in network namespaces", .serialized)
struct RetroArchLANTests {
    static let core = "/usr/lib/x86_64-linux-gnu/libretro/nestopia_libretro.so"

    /// Why the test cannot run here, or nil when it can.
    static let skipReason: String? = {
        if let reason = NamespacePair.unavailableReason { return reason }
        guard Shell.which("retroarch") != nil else { return "retroarch is not installed (apt-get install retroarch)" }
        guard FileManager.default.fileExists(atPath: core) else { return "libretro-nestopia is not installed" }
        return nil
    }()

    @Test(.disabled(if: skipReason != nil, Comment(rawValue: "skipped: \(skipReason ?? "")")))
    func aRealHeadlessRetroArchHostIsListedAsARoom() throws {
        let lan = try NamespacePair()
        defer { lan.tearDown() }
        let work = lan.directory

        // A tiny NROM image: an endless loop at $C000 with every vector pointing there.
        var prg = [UInt8](repeating: 0xEA, count: 16_384)
        prg[0...2] = [0x4C, 0x00, 0xC0]
        for offset in [0x3FFA, 0x3FFC, 0x3FFE] { prg[offset] = 0x00; prg[offset + 1] = 0xC0 }
        let rom = Array("NES".utf8) + [0x1A, 1, 1, 0, 0] + [UInt8](repeating: 0, count: 8) + prg + [UInt8](repeating: 0, count: 8_192)
        try Data(rom).write(to: URL(fileURLWithPath: work + "/tiny.nes"))
        // Debian's nestopia info says "serialized"; netplay wants "deterministic" (which the core is).
        try FileManager.default.createDirectory(atPath: work + "/info", withIntermediateDirectories: true)
        let info = try String(contentsOfFile: "/usr/share/libretro/info/nestopia_libretro.info", encoding: .utf8)
        try info.replacingOccurrences(of: "savestate_features = \"serialized\"", with: "savestate_features = \"deterministic\"")
            .write(toFile: work + "/info/nestopia_libretro.info", atomically: true, encoding: .utf8)
        for directory in ["saves", "states", "system"] {
            try FileManager.default.createDirectory(atPath: work + "/" + directory, withIntermediateDirectories: true)
        }
        try """
        video_driver = "null"
        audio_driver = "null"
        input_driver = "null"
        joypad_driver = "null"
        menu_driver = "null"
        audio_enable = "false"
        video_vsync = "false"
        gamemode_enable = "false"
        suspend_screensaver_enable = "false"
        config_save_on_exit = "false"
        pause_nonactive = "false"
        netplay_nickname = "ra-host"
        netplay_ip_port = "55435"
        netplay_public_announce = "false"
        netplay_use_mitm_server = "false"
        netplay_nat_traversal = "false"
        libretro_directory = "/usr/lib/x86_64-linux-gnu/libretro"
        libretro_info_path = "\(work)/info"
        core_info_savestate_bypass = "true"
        network_buildbot_url = "http://127.0.0.1:9/"
        network_buildbot_assets_url = "http://127.0.0.1:9/"
        savefile_directory = "\(work)/saves"
        savestate_directory = "\(work)/states"
        system_directory = "\(work)/system"
        """.write(toFile: work + "/retroarch.cfg", atomically: true, encoding: .utf8)

        let retroarch = try lan.launch(in: lan.b, Shell.which("retroarch")!, [
            "--config", work + "/retroarch.cfg", "-L", Self.core, "--host", "--nick", "ra-host", "--verbose", work + "/tiny.nes",
        ], environment: ["HOME": work, "XDG_CONFIG_HOME": work, "DBUS_FATAL_WARNINGS": "0"], log: work + "/retroarch.log")
        let binaries = BuildProducts.directory.path
        let discovery = try lan.launch(in: lan.a, binaries + "/netplay-discovery", [
            "--endpoint", "tcp://127.0.0.1:7100", "--events", "tcp://127.0.0.1:7101", "--data-dir", work + "/discovery",
            "--beacon-port", "0", "--retroarch-scan-interval", "1",  // targets: auto = the veth's broadcast address
        ], environment: ["NETPLAY_TELEMETRY": "none"], log: work + "/discovery.log")

        var room: [String: Any]?
        let deadline = Date().addingTimeInterval(45)
        while room == nil, Date() < deadline, retroarch.isRunning, discovery.isRunning {
            Thread.sleep(forTimeInterval: 0.5)
            let list = Shell.run(lan.ip, ["netns", "exec", lan.a, binaries + "/netplayctl", "rooms", "list",
                                          "--discovery", "tcp://127.0.0.1:7100", "--source", "retroarch", "--json"])
            room = list.output.split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
            }.first
        }
        let log = { (try? String(contentsOfFile: work + "/retroarch.log", encoding: .utf8)) ?? "" }
        let found = try #require(room, "no RetroArch room; discovery log:\n\((try? String(contentsOfFile: work + "/discovery.log", encoding: .utf8)) ?? "")\nretroarch log:\n\(log())")
        #expect(found["roomId"] as? String == "retroarch:10.77.0.2:55435")
        #expect(found["hostName"] as? String == "ra-host")
        #expect(found["source"] as? String == "ROOM_SOURCE_RETROARCH_LAN" && found["transport"] as? String == "TRANSPORT_LAN")
        #expect((found["hostVersion"] as? String)?.hasPrefix("RetroArch 1.") == true)
        let content = found["content"] as? [String: Any]
        #expect(content?["coreId"] as? String == "Nestopia")
        #expect((content?["crc32"] as? NSNumber)?.uint32Value == CRC32.checksum(rom), "RetroArch reports the CRC32 of the whole file")
        #expect(content?["gameName"] as? String == "tiny")
        #expect(log().contains("Query received on LAN interface"))
    }
}

/// CRC-32 (IEEE), as RetroArch computes a content's CRC.
enum CRC32 {
    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
