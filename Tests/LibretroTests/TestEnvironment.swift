import Foundation
import Libretro
import NetplayTestSupport
import Synchronization
import SystemTools

/// What the libretro tests need from the machine: the nestopia core (Debian package
/// `libretro-nestopia`), cc65 (`cc65`) to build the NES test program, and `cc` for the fake
/// core. Anything missing fails the test with an explanation instead of skipping it silently.
enum TestEnvironment {
    struct Missing: Error, CustomStringConvertible {
        let description: String
    }

    private static let cache = Mutex<[String: String]>([:])

    /// Computes a value once per process (tests in this target run one at a time).
    static func cached(_ key: String, _ make: () throws -> String) throws -> String {
        if let value = cache.withLock({ $0[key] }) { return value }
        let value = try make()
        cache.withLock { $0[key] = value }
        return value
    }

    /// A directory for this test process's build products (ROM, fake cores), removed at exit.
    static func scratchDirectory() throws -> String {
        try cached("scratch") {
            let path = scratchPath()
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            atexit { try? FileManager.default.removeItem(atPath: TestEnvironment.scratchPath()) }
            return path
        }
    }

    private static func scratchPath() -> String {
        FileManager.default.temporaryDirectory
            .appendingPathComponent("netplay-libretro-tests-\(getpid())", isDirectory: true).path
    }

    /// The nestopia core: `$NETPLAY_LIBRETRO_CORE`, or the installed one.
    static func nestopiaCore() throws -> String {
        if let custom = ProcessInfo.processInfo.environment["NETPLAY_LIBRETRO_CORE"] { return custom }
        guard let path = LibretroCore.installedCore(named: "nestopia") else {
            throw Missing(description: "the nestopia libretro core is not installed: apt-get install libretro-nestopia "
                + "(or set NETPLAY_LIBRETRO_CORE to a core's path)")
        }
        return path
    }

    /// Tests/Fixtures/nes in this repository.
    static var fixturesDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/nes").path
    }

    /// The NES test program (Tests/Fixtures/nes/netplay_test.s) assembled into an iNES file.
    static func testROM() throws -> String {
        try cached("rom") {
            guard CC65.isAvailable else {
                throw Missing(description: "ca65/ld65 not found on PATH: install cc65 (apt-get install cc65) "
                    + "to build the NES test program")
            }
            let output = try scratchDirectory() + "/netplay_test.nes"
            try CC65.build(source: fixturesDirectory + "/netplay_test.s",
                           linkerConfig: fixturesDirectory + "/netplay_test.cfg", output: output)
            return output
        }
    }

    /// A file that is not an NES program but has the extension of one.
    static func garbageROM() throws -> String {
        try cached("garbage-rom") {
            let path = try scratchDirectory() + "/garbage.nes"
            try Data((0 ..< 300).map { UInt8(truncatingIfNeeded: $0 &* 37) }).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    /// Starts nestopia with the test program.
    static func nestopia(ports: Int = 2) throws -> LibretroCore {
        try LibretroCore(corePath: nestopiaCore(), contentPath: testROM(), options: .init(portCount: ports))
    }

    /// Runs a tool from PATH and fails with its output when it fails.
    static func runTool(_ tool: String, _ arguments: [String]) throws {
        guard let executable = CC65.find(tool) else { throw Missing(description: "\(tool) not found on PATH") }
        let (status, output) = Shell.run(executable, arguments)
        guard status == 0 else { throw Missing(description: "\(tool) failed: \(output)") }
    }
}

/// A deterministic stream of joypad inputs (SplitMix64), so every run of a test sees the same.
struct InputScript {
    let seed: UInt64
    /// The buttons the script presses.
    var mask: JoypadButtons = .all

    /// Player `player`'s buttons at `frame`: held for a few frames, then changed, like a person.
    func buttons(player: Int, frame: Int, allowOpposites: Bool = true) -> JoypadButtons {
        var state = seed &+ UInt64(player) &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(frame / 3) &* 0xBF58_476D_1CE4_E5B9
        state = (state ^ (state >> 30)) &* 0xBF58_476D_1CE4_E5B9
        state = (state ^ (state >> 27)) &* 0x94D0_49BB_1331_11EB
        state ^= state >> 31
        var buttons = JoypadButtons(rawValue: UInt16(truncatingIfNeeded: state)).intersection(mask)
        if !allowOpposites {
            if buttons.isSuperset(of: [.left, .right]) { buttons.remove(.left) }
            if buttons.isSuperset(of: [.up, .down]) { buttons.remove(.up) }
        }
        return buttons
    }
}
