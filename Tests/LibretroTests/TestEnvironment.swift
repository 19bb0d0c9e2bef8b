import Foundation
import Libretro
import NetplayTestSupport

/// What the libretro tests need beyond ``LibretroFixtures``: a file that only looks like a ROM,
/// and nestopia started with the test program.
enum TestEnvironment {
    /// A file that is not an NES program but has the extension of one.
    static func garbageROM() throws -> String {
        try LibretroFixtures.cached("garbage-rom") {
            let path = try LibretroFixtures.scratchDirectory() + "/garbage.nes"
            try Data((0 ..< 300).map { UInt8(truncatingIfNeeded: $0 &* 37) }).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    /// Starts nestopia with the test program.
    static func nestopia(ports: Int = 2) throws -> LibretroCore {
        try LibretroCore(corePath: LibretroFixtures.nestopiaCore(), contentPath: LibretroFixtures.testROM(), options: .init(portCount: ports))
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
