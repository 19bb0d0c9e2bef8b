import CLibretro
import MemberwiseInit
import Rollback

/// A port's two analog sticks, each axis -32768 ... 32767 as libretro's `RETRO_DEVICE_ANALOG`
/// reports them (x to the right, y down).
@PublicMemberwiseInit
public struct AnalogSticks: Sendable, Hashable {
    /// The left stick's x axis.
    public var leftX: Int16 = 0
    /// The left stick's y axis.
    public var leftY: Int16 = 0
    /// The right stick's x axis.
    public var rightX: Int16 = 0
    /// The right stick's y axis.
    public var rightY: Int16 = 0
}

/// What one player's rollback input carries for a core, and so its size on the wire.
///
/// - ``joypad``: 2 bytes, the 16 bits of a ``JoypadButtons`` mask (little-endian).
/// - ``joypadAnalog``: 10 bytes, the joypad's 2 followed by the left stick's x and y and the
///   right stick's x and y, each a little-endian `Int16`; the ports are `RETRO_DEVICE_ANALOG`.
///
/// Every peer of a match must use the same layout (the session's input size says which).
public enum LibretroInputLayout: String, Sendable, CaseIterable {
    /// Buttons only.
    case joypad
    /// Buttons and two analog sticks.
    case joypadAnalog = "analog"

    /// Bytes per player and frame.
    public var inputSize: Int { self == .joypad ? 2 : 10 }

    /// The libretro device plugged into each port.
    public var device: UInt32 { self == .joypad ? RETRO_DEVICE_JOYPAD : RETRO_DEVICE_ANALOG }

    /// The layout whose input size is `size`, nil for none.
    public init?(inputSize size: Int) {
        guard let layout = Self.allCases.first(where: { $0.inputSize == size }) else { return nil }
        self = layout
    }
}

/// One player's input for a core: buttons and, with ``LibretroInputLayout/joypadAnalog``, sticks.
@PublicMemberwiseInit
public struct LibretroPadInput: Sendable, Hashable {
    /// The buttons held.
    public var buttons: JoypadButtons = []
    /// The sticks (ignored by the ``LibretroInputLayout/joypad`` layout).
    public var sticks: AnalogSticks = AnalogSticks()

    /// Reads what ``gameInput`` wrote.
    public init(_ input: GameInput) {
        buttons = JoypadButtons(rawValue: UInt16(truncatingIfNeeded: input.low))
        func axis(_ index: Int) -> Int16 {
            Int16(bitPattern: UInt16(truncatingIfNeeded: input.low >> UInt64(16 + 16 * index)))
        }
        sticks = AnalogSticks(leftX: axis(0), leftY: axis(1), rightX: axis(2),
                              rightY: Int16(bitPattern: UInt16(truncatingIfNeeded: input.high)))
    }

    /// The input as a rollback input in the ``LibretroInputLayout/joypadAnalog`` layout: bytes
    /// 0-1 buttons, 2-3 left x, 4-5 left y, 6-7 right x, 8-9 right y. Masked to the joypad
    /// layout's 2 bytes it is the buttons alone.
    public var gameInput: GameInput {
        func bits(_ value: Int16, _ shift: UInt64) -> UInt64 { UInt64(UInt16(bitPattern: value)) << shift }
        return GameInput(low: UInt64(buttons.rawValue) | bits(sticks.leftX, 16) | bits(sticks.leftY, 32)
                            | bits(sticks.rightX, 48),
                         high: UInt64(UInt16(bitPattern: sticks.rightY)))
    }
}
