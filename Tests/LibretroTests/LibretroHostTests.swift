import Libretro
import Rollback
import Testing
import NetplayTestSupport

/// Every libretro test runs in this suite, one at a time: cores share the process-wide
/// callback slots, and one test deliberately takes all of them.
@Suite("libretro host", .serialized, .ownThread)
struct LibretroHostTests {}

/// The NES test program's RAM layout (see Tests/Fixtures/nes/netplay_test.s).
enum TestProgram {
    static let magic = 0x300
    static let frames = 0x302
    static let pad0 = 0x304
    static let hash = 0x306
    static let xPosition = 0x30A
    static let yPosition = 0x30C
    static let aPressLow = 0x30E
    static let aPressHigh = 0x310
    static let bPress = 0x312
    static let history0 = 0x400
    static let history1 = 0x500

    /// The byte the program shifts in from a controller: A B Select Start Up Down Left Right.
    static func nesPad(_ buttons: JoypadButtons) -> UInt8 {
        let order: [JoypadButtons] = [.a, .b, .select, .start, .up, .down, .left, .right]
        return order.reduce(UInt8(0)) { ($0 << 1) | (buttons.contains($1) ? 1 : 0) }
    }

    /// A model of the program's state block, advanced once per NMI.
    struct Model: Equatable {
        var frames: UInt16 = 0
        var hash: UInt32 = 0x0123_4567
        var x: [UInt8] = [128, 128]
        var y: [UInt8] = [120, 120]
        var aPresses: [UInt16] = [0, 0]
        var bPresses: [UInt8] = [0, 0]
        var history: [[UInt8]] = [Array(repeating: 0, count: 256), Array(repeating: 0, count: 256)]

        mutating func nmi(_ pads: [UInt8]) {
            let index = Int(frames & 0xFF)
            history[0][index] = pads[0]
            history[1][index] = pads[1]
            var h = (hash << 3) | (hash >> 29)
            var bytes = withUnsafeBytes(of: h.littleEndian) { Array($0) }
            bytes[0] ^= pads[0]
            bytes[1] ^= pads[1]
            bytes[2] = bytes[2] &+ UInt8(truncatingIfNeeded: frames)
            bytes[3] ^= bytes[0]
            h = bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
            hash = h
            for player in 0 ..< 2 {
                let pad = pads[player]
                if pad & 0x01 != 0 { x[player] &+= 1 }
                if pad & 0x02 != 0 { x[player] &-= 1 }
                if pad & 0x04 != 0 { y[player] &+= 1 }
                if pad & 0x08 != 0 { y[player] &-= 1 }
                if pad & 0x80 != 0 { aPresses[player] &+= 1 }
                if pad & 0x40 != 0 { bPresses[player] &+= 1 }
            }
            frames &+= 1
        }

        /// The program's state read from system RAM.
        init(ram: [UInt8]) {
            func u16(_ at: Int) -> UInt16 { UInt16(ram[at]) | UInt16(ram[at + 1]) << 8 }
            frames = u16(TestProgram.frames)
            hash = (0 ..< 4).reduce(UInt32(0)) { $0 | UInt32(ram[TestProgram.hash + $1]) << (8 * UInt32($1)) }
            x = [ram[TestProgram.xPosition], ram[TestProgram.xPosition + 1]]
            y = [ram[TestProgram.yPosition], ram[TestProgram.yPosition + 1]]
            aPresses = (0 ..< 2).map { UInt16(ram[TestProgram.aPressLow + $0]) | UInt16(ram[TestProgram.aPressHigh + $0]) << 8 }
            bPresses = [ram[TestProgram.bPress], ram[TestProgram.bPress + 1]]
            history = [Array(ram[TestProgram.history0 ..< TestProgram.history0 + 256]),
                       Array(ram[TestProgram.history1 ..< TestProgram.history1 + 256])]
        }

        init() {}
    }
}

/// Runs `frames` frames of `script` through a core (both ports) and returns the checksum.
func runScript(_ core: LibretroCore, _ script: (Int, Int) -> JoypadButtons, frames: Range<Int>) throws -> UInt64 {
    for frame in frames {
        try core.setJoypad(script(0, frame), port: 0)
        try core.setJoypad(script(1, frame), port: 1)
        core.run()
    }
    return try core.stateChecksum()
}
