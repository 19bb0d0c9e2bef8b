import CLibretro

/// What a core says about itself (`retro_get_system_info`).
public struct LibretroSystemInfo: Sendable, Hashable {
    /// The core's name, e.g. "Nestopia".
    public var libraryName: String
    /// The core's version string.
    public var libraryVersion: String
    /// File extensions the core loads, without dots (e.g. `["nes", "fds", "unf"]`).
    public var validExtensions: [String]
    /// Whether the core reads the content file itself (the host then passes only its path).
    public var needsFullPath: Bool
    /// Whether the content must not be extracted from archives.
    public var blocksExtraction: Bool
}

/// A core's video geometry and timing (`retro_get_system_av_info`).
public struct LibretroAVInfo: Sendable, Hashable {
    /// Nominal frame width in pixels.
    public var baseWidth: Int
    /// Nominal frame height in pixels.
    public var baseHeight: Int
    /// Largest frame width the core may produce.
    public var maxWidth: Int
    /// Largest frame height the core may produce.
    public var maxHeight: Int
    /// Display aspect ratio (0: width / height).
    public var aspectRatio: Float
    /// Frames per second of the emulated system.
    public var framesPerSecond: Double
    /// Audio sample rate in Hz.
    public var sampleRate: Double

    init(_ info: retro_system_av_info) {
        baseWidth = Int(info.geometry.base_width)
        baseHeight = Int(info.geometry.base_height)
        maxWidth = Int(info.geometry.max_width)
        maxHeight = Int(info.geometry.max_height)
        aspectRatio = info.geometry.aspect_ratio
        framesPerSecond = info.timing.fps
        sampleRate = info.timing.sample_rate
    }
}

/// The buttons of a libretro joypad (`RETRO_DEVICE_JOYPAD`). Bit `i` is button id `i`, which
/// is also the layout of the core's input bitmask and of a player's 2-byte rollback input
/// (see ``LibretroGame``): byte 0 holds B, Y, Select, Start, Up, Down, Left, Right (bits 0-7),
/// byte 1 holds A, X, L, R, L2, R2, L3, R3 (bits 8-15).
public struct JoypadButtons: OptionSet, Sendable, Hashable {
    public var rawValue: UInt16
    /// Creates a button set from its bit mask.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// B (NES B).
    public static let b = JoypadButtons(rawValue: 1 << 0)
    /// Y.
    public static let y = JoypadButtons(rawValue: 1 << 1)
    /// Select.
    public static let select = JoypadButtons(rawValue: 1 << 2)
    /// Start.
    public static let start = JoypadButtons(rawValue: 1 << 3)
    /// D-pad up.
    public static let up = JoypadButtons(rawValue: 1 << 4)
    /// D-pad down.
    public static let down = JoypadButtons(rawValue: 1 << 5)
    /// D-pad left.
    public static let left = JoypadButtons(rawValue: 1 << 6)
    /// D-pad right.
    public static let right = JoypadButtons(rawValue: 1 << 7)
    /// A (NES A).
    public static let a = JoypadButtons(rawValue: 1 << 8)
    /// X.
    public static let x = JoypadButtons(rawValue: 1 << 9)
    /// L.
    public static let l = JoypadButtons(rawValue: 1 << 10)
    /// R.
    public static let r = JoypadButtons(rawValue: 1 << 11)
    /// L2.
    public static let l2 = JoypadButtons(rawValue: 1 << 12)
    /// R2.
    public static let r2 = JoypadButtons(rawValue: 1 << 13)
    /// L3.
    public static let l3 = JoypadButtons(rawValue: 1 << 14)
    /// R3.
    public static let r3 = JoypadButtons(rawValue: 1 << 15)

    /// Every button.
    public static let all = JoypadButtons(rawValue: 0xFFFF)
    /// The eight buttons of an NES pad (A, B, Select, Start and the D-pad), without the X and Y
    /// turbo buttons of nestopia, whose phase its saved states miss.
    public static let nes: JoypadButtons = [.a, .b, .select, .start, .up, .down, .left, .right]
}

/// A core's memory regions (`retro_get_memory_data`).
public enum LibretroMemoryRegion: UInt32, Sendable, Hashable, CaseIterable {
    /// Battery-backed save RAM.
    case saveRAM = 0
    /// Real-time clock.
    case rtc = 1
    /// The emulated system's main RAM (the NES's 2 KB).
    case systemRAM = 2
    /// Video RAM.
    case videoRAM = 3
}

/// Severity of a core's log line.
public enum LibretroLogLevel: Int, Sendable, Hashable, Comparable {
    /// Debugging detail.
    case debug = 0
    /// Information.
    case info = 1
    /// Something odd.
    case warning = 2
    /// A failure.
    case error = 3

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One line a core logged through the log interface.
public struct LibretroLogLine: Sendable, Hashable, CustomStringConvertible {
    /// Severity.
    public var level: LibretroLogLevel
    /// The text, without a trailing newline.
    public var message: String

    public var description: String { "[\(level)] \(message)" }
}

/// A core option the core declared with `SET_VARIABLES`, and the value the host answers.
public struct LibretroVariable: Sendable, Hashable {
    /// The option's key, e.g. `nestopia_ram_power_state`.
    public var key: String
    /// The core's description.
    public var description: String
    /// The allowed values; the first is the default.
    public var choices: [String]
    /// The value the core gets.
    public var value: String
}

/// Flags a core reports about its states (`SET_SERIALIZATION_QUIRKS`).
public struct LibretroSerializationQuirks: OptionSet, Sendable, Hashable {
    public var rawValue: UInt64
    /// Creates quirks from the core's bit mask.
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// States miss some of the emulated system: rollback may desync.
    public static let incomplete = Self(rawValue: 1 << 0)
    /// The core must run a frame before states work.
    public static let mustInitialize = Self(rawValue: 1 << 1)
    /// The state size may change while running.
    public static let coreVariableSize = Self(rawValue: 1 << 2)
    /// The core accepts states of other sizes.
    public static let frontendVariableSize = Self(rawValue: 1 << 3)
    /// States only load in the session that made them.
    public static let singleSession = Self(rawValue: 1 << 4)
    /// States differ between byte orders.
    public static let endianDependent = Self(rawValue: 1 << 5)
    /// States differ between platforms.
    public static let platformDependent = Self(rawValue: 1 << 6)

    /// The flags a core may report (``frontendVariableSize`` is the frontend's answer).
    public static let reportedByCores: Self = [.incomplete, .mustInitialize, .coreVariableSize, .singleSession,
                                               .endianDependent, .platformDependent]
    /// The quirks this host deals with, left set in its answer: a must-initialize core gets a
    /// frame first, states of a variable size are taken, and a core with incomplete or
    /// single-session states is refused for netplay. Byte-order and platform dependence are
    /// not dealt with (cleared): peers are not compared on them.
    public static let handledByHost: Self = [.incomplete, .mustInitialize, .coreVariableSize, .singleSession]

    /// The answer to a core reporting `reported`: libretro.h makes the flags in/out, the
    /// frontend leaving set the quirks it handles and setting ``frontendVariableSize`` when it
    /// takes states of any size (for a core whose states vary).
    public static func answer(to reported: Self) -> Self {
        var answer = reported.intersection(handledByHost)
        if reported.contains(.coreVariableSize) { answer.insert(.frontendVariableSize) }
        return answer
    }

    /// Why states of a core with these quirks cannot serve netplay, or nil when they can.
    public var netplayProblem: String? {
        if contains(.incomplete) { return "the core says its states are incomplete (RETRO_SERIALIZATION_QUIRK_INCOMPLETE): rollback would desync" }
        if contains(.singleSession) {
            return "the core says its states load only in the session that made them (RETRO_SERIALIZATION_QUIRK_SINGLE_SESSION): other peers could not load them"
        }
        return nil
    }
}

/// A saved state of a core: the bytes `retro_serialize` wrote.
///
/// The rollback engine keeps these in its state ring. Build one from bytes received over the
/// network with ``LibretroCore/state(from:expectedChecksum:)``, which checks the size (and
/// optionally the checksum) against the running core.
public struct LibretroState: Sendable, Hashable {
    /// The serialized state.
    public let bytes: [UInt8]

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// The state's checksum: the same value ``LibretroCore/stateChecksum()`` returns while the
    /// core is in this state.
    public var checksum: UInt64 {
        bytes.withUnsafeBytes { nlr_hash64($0.baseAddress, $0.count) }
    }
}
